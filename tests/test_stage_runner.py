"""The stage runner: leftovers of a killed run, a full disk, one-line errors and tracebacks,
output locks, its life tied to dvc's."""
from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO
from test_stages_data import write_params

from rnnsearch.stages import prepare
from rnnsearch.stages.runner import lock_path, output_lock, recover_leftovers, run
from rnnsearch.errors import StageError


def test_an_interrupted_swap_is_completed_or_undone(tmp_path):
    out = tmp_path / "prepared"
    backup = tmp_path / ".prepared.old"
    backup.mkdir()
    (backup / "train.src").write_text("previous\n")
    (tmp_path / ".prepared.tmp-abc").mkdir()            # the new output, half written
    (tmp_path / ".prepared.json.tmp-x").write_text("")  # another output's: not ours to touch
    recover_leftovers(out)                              # killed between the two renames
    assert (out / "train.src").read_text() == "previous\n"
    assert not backup.exists() and not (tmp_path / ".prepared.tmp-abc").exists()
    assert (tmp_path / ".prepared.json.tmp-x").exists()
    backup.mkdir()
    recover_leftovers(out)                              # killed after both renames
    assert not backup.exists() and (out / "train.src").exists()


def test_a_second_writer_is_refused_naming_the_output_and_the_pid(tmp_path):
    out = tmp_path / "models" / "search-30"
    with output_lock(out, "train"):
        assert lock_path(out).read_text().strip() == str(os.getpid())
        with pytest.raises(StageError, match=f"{out}: another process \\(pid {os.getpid()}\\)"):
            with output_lock(out, "train"):
                pass
    assert not lock_path(out).exists() and not (tmp_path / "models").exists()


def test_full_disk_is_one_line_and_keeps_the_previous_output(tmp_path, mirror, monkeypatch,
                                                             capsys):
    write_params(tmp_path / "params.yaml", mirror)
    monkeypatch.chdir(tmp_path)
    assert run(prepare.STAGE, []) == 0
    before = (tmp_path / "data/prepared/train.src").read_text()

    def no_space(path, lines):
        raise OSError(errno.ENOSPC, "No space left on device", str(path))

    monkeypatch.setattr(prepare, "write_lines", no_space)
    assert run(prepare.STAGE, []) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("prepare: error: disk full writing ") and "rerun" in err[-1]
    assert (tmp_path / "data/prepared/train.src").read_text() == before
    assert not list((tmp_path / "data").glob(".prepared.tmp-*"))


def test_a_stage_stops_when_dvc_dies_even_with_a_shell_between_them(tmp_path):
    """``dvc`` -> ``bash -c '...; true'`` -> stage: kill -9 ``dvc`` and the stage stops (the
    shell survives, so the kernel's parent-death signal alone would not reach the stage)."""
    fake_dvc = tmp_path / "dvc"
    fake_dvc.write_text(f"#!{sys.executable}\nimport subprocess, sys\n"
                        "subprocess.run(['bash', '-c', sys.argv[1] + '; true'])\n")
    fake_dvc.chmod(0o755)
    marker = tmp_path / "stage.pid"
    stage = (f"{sys.executable} -c 'import os, time; from rnnsearch.stages.runner import "
             f"die_with_parent; die_with_parent(); open(\"{marker}\", \"w\").write(str(os.getpid()));"
             f" time.sleep(120)'")
    env = dict(os.environ, DVC_STAGE="train@search-30", PYTHONPATH=str(REPO / "src"))
    dvc = subprocess.Popen([str(fake_dvc), stage], env=env, start_new_session=True)
    deadline = time.monotonic() + 60
    while not marker.exists() or not marker.read_text():
        assert time.monotonic() < deadline and dvc.poll() is None, "the stage did not start"
        time.sleep(0.1)
    stage_pid = int(marker.read_text())
    os.kill(dvc.pid, signal.SIGKILL)
    dvc.wait()
    deadline = time.monotonic() + 15
    while Path(f"/proc/{stage_pid}").exists() and _state(stage_pid) != "Z":
        assert time.monotonic() < deadline, "the stage outlived dvc"
        time.sleep(0.2)
    os.killpg(dvc.pid, signal.SIGKILL)          # the shell left behind


def test_a_stage_whose_launcher_is_not_dvc_keeps_running():
    """Under ``DVC_STAGE`` but with no ``dvc`` among its ancestors (a launcher not recognised as
    dvc), the stage watches nothing and runs on."""
    done = subprocess.run([sys.executable, "-c", "from rnnsearch.stages.runner import "
                           "die_with_parent; die_with_parent(); print('still running')"],
                          env=dict(os.environ, DVC_STAGE="train@search-30",
                                   PYTHONPATH=str(REPO / "src")),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stdout == "still running\n", done


TOY_STAGE = """
import sys
import numpy as np
from rnnsearch.errors import DataError
from rnnsearch.stages.runner import Stage, run

def body(args, ctx):
    {body}

sys.exit(run(Stage("toy", "a stage", lambda parser: None, lambda args: [], body), []))
"""


def run_toy_stage(body: str) -> subprocess.CompletedProcess:
    """A stage whose body is the one line ``body``, run as its own process."""
    return subprocess.run([sys.executable, "-c", TOY_STAGE.format(body=body)],
                          env=dict(os.environ, PYTHONPATH=str(REPO / "src")),
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("body, error", [
    ("first, second = (1, 2, 3)", "ValueError: too many values to unpack"),
    ("np.zeros(3) + np.zeros(4)", "ValueError: operands could not be broadcast"),
    ("{}['missing']", "KeyError: 'missing'"),
], ids=["unpacking", "numpy-shapes", "key"])
def test_a_bug_in_a_stage_body_shows_its_traceback_and_exits_1(body, error):
    done = run_toy_stage(body)
    assert done.returncode == 1, done.stderr
    assert "Traceback (most recent call last)" in done.stderr and error in done.stderr
    assert "toy: error:" not in done.stderr


def test_a_data_problem_is_one_line_and_exits_2():
    done = run_toy_stage("raise DataError('data/x.txt:3: expected source<TAB>target')")
    assert done.returncode == 2
    assert done.stderr == "toy: error: data/x.txt:3: expected source<TAB>target\n"


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "gone"


def test_relative_params_paths_are_the_repositorys_also_in_a_temporary_experiment(tmp_path,
                                                                                  monkeypatch):
    from rnnsearch.stages.runner import StageContext

    root = tmp_path / "repo"
    (root / ".dvc/tmp/exps/tmpab12").mkdir(parents=True)
    (root / "dvc.yaml").write_text("stages: {}\n")
    monkeypatch.delenv("RNNSEARCH_ROOT", raising=False)
    monkeypatch.chdir(root)                      # plain dvc repro: paths stay as written
    assert StageContext.project_path("../shared/corpora") == "../shared/corpora"
    monkeypatch.chdir(root / ".dvc/tmp/exps/tmpab12")   # dvc exp run --temp
    assert StageContext.project_path("../shared/corpora") == str(root / "../shared/corpora")
    assert StageContext.project_path(".cache/corpora") == str(root / ".cache/corpora")
    assert StageContext.project_path("/data/mirror") == "/data/mirror"
    assert StageContext.project_path(None) is None


def test_lightnings_checkpoint_notice_is_filtered_other_lines_kept(caplog):
    import logging

    from rnnsearch.stages.runner import quiet_known_noise

    quiet_known_noise()
    logger = logging.getLogger("pytorch_lightning.trainer.connectors.checkpoint_connector")
    with caplog.at_level(logging.INFO, logger=logger.name):
        logger.info("`weights_only` was not set, defaulting to `False`.")
        logger.info("Restored all states from the checkpoint")
    assert [r.getMessage() for r in caplog.records] == ["Restored all states from the checkpoint"]


@pytest.mark.parametrize("script", ["prepare.py", "tokenize_text.py", "train.py", "report.py"])
def test_a_stage_started_by_another_python_says_how_to_get_the_projects(tmp_path, script):
    """``dvc repro`` outside the project's .venv runs a python that cannot import rnnsearch
    (``-S``: no site-packages, as a system python): one line on how to fix it, exit 2."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, "-S", str(REPO / "pipeline" / script)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=60)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert "cannot import 'rnnsearch'" in lines[0] and "source .venv/bin/activate" in lines[0]
    assert lines[0].startswith(script.split(".")[0].replace("_text", "") + ": error: ")
