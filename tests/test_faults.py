"""Fault injection through the real DVC pipeline (tiny params): kill -9 each stage at a random
point and rerun, a bad param in each stage, killing ``dvc`` itself, two stages on a new MLflow
store. Nothing a user made may be lost, and a rerun must end where an unbroken run ends."""
from __future__ import annotations

import copy
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import NamedTuple

import pytest
import torch
import yaml

from conftest import make_project, project_env, run_in
from test_pipeline_e2e import TINY

pytestmark = pytest.mark.fault

CELL = "search-20"
TARGET = f"train@{CELL}"
# One cell, enough steps that a kill lands between checkpoints; threads 1 for bit-exact runs.
FAULT_PARAMS = copy.deepcopy(TINY)
FAULT_PARAMS["pretrain_lm"].update(max_steps=150, val_every=10, checkpoint_every=10, threads=1)
FAULT_PARAMS["train"]["grid"] = {"models": ["search"], "max_lens": [20]}
FAULT_PARAMS["train"]["budget"].update(max_steps=80, val_every_steps=10)
FAULT_PARAMS["train"]["trainer"] = {"threads": 1}
FAULT_PARAMS["train"]["init"] = {"embeddings": True, "lm": True}
FAULT_PARAMS["pretrain_lm"]["embedding_size"] = 24
FAULT_PARAMS["pretrain_lm"]["hidden_size"] = 24
FAULT_PARAMS["train"]["base_model"]["cell"] = "lstm"   # so that the LM initialises the decoder

# What each killed stage must reproduce exactly: files compared byte for byte, or tensors.
EXACT_FILES = ["data/prepared/train.src", "data/prepared/test.tgt", "data/prepared/meta.json",
               "data/tokenized/train.src", "data/tokenized/vocab.tgt.txt"]
TENSOR_FILES = ["data/lm/decoder_init.pt", f"data/models/{CELL}/model.pt"]
# The stages killed in turn, in pipeline order, each with the checkpoint it resumes from.
# (a glob: the resume folder is named by the run's fingerprint)
KILLED_STAGES = [("prepare.py", None), ("tokenize_text.py", None),
                 ("pretrain_lm.py", ".cache/resume/pretrain_lm/lm/*/last.ckpt"),
                 ("train.py", f".cache/resume/train/{CELL}/*/last.ckpt")]
# Metrics that must agree to the last digit (time, speed and "resumed" naturally differ).
EXACT_METRICS = {"metrics/lm.json": ("steps", "dev", "test"),
                 f"metrics/train/{CELL}.json": ("val_loss", "val_ppl", "val_bleu", "best_step",
                                                "steps", "train_pairs")}


class UnbrokenRun(NamedTuple):
    root: Path
    lifetimes: dict[str, float]     # pipeline script -> seconds its process ran


@pytest.fixture(scope="module")
def unbroken_run(tmp_path_factory) -> UnbrokenRun:
    """The reference: one uninterrupted ``dvc repro train@search-20``, and how long each
    killed stage's process ran in it (where a kill may land on this machine)."""
    root = make_project(tmp_path_factory.mktemp("unbroken"), FAULT_PARAMS)
    proc = start_repro(root, TARGET)
    lifetimes, stderr = watch_stages(root, proc, [script for script, _ in KILLED_STAGES])
    assert proc.returncode == 0, f"dvc repro {TARGET} failed:\n{stderr[-3000:]}"
    return UnbrokenRun(root, lifetimes)


@pytest.fixture(scope="module")
def unbroken(unbroken_run) -> Path:
    return unbroken_run.root


HUNG_AFTER = 600.0     # seconds: the tiny run takes one or two minutes, also on a busy machine


def watch_stages(root: Path, proc: subprocess.Popen, scripts: list[str]
                 ) -> tuple[dict[str, float], str]:
    """Until ``proc`` ends: the seconds each of ``scripts`` ran (seen every 50 ms), and
    ``proc``'s stderr. A run still going after :data:`HUNG_AFTER` seconds is stopped and
    fails the test naming the stage processes it left (the align stage once hung there)."""
    seen: dict[str, tuple[float, float]] = {}
    deadline = time.monotonic() + HUNG_AFTER
    while True:
        try:
            _, stderr = proc.communicate(timeout=0.05)
            break
        except subprocess.TimeoutExpired:   # still running; nothing of its output is lost
            now = time.monotonic()
            for script in scripts:
                if stage_pids(root, script):
                    seen[script] = (seen.get(script, (now, now))[0], now)
            if now > deadline:
                running = [f"{pid}: " + b" ".join(cmdline).decode(errors="replace").strip()
                           for pid, cmdline in project_processes(root).items()]
                os.killpg(proc.pid, signal.SIGKILL)
                pytest.fail(f"dvc repro still running after {HUNG_AFTER:.0f} s; the "
                            f"project's processes: {running}")
    return {script: last - first for script, (first, last) in seen.items()}, stderr


def project_processes(root: Path) -> dict[int, list[bytes]]:
    """The command lines of the processes working in the project copy ``root``, by pid."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().split(b"\0")
            cwd = os.readlink(entry / "cwd")
        except OSError:
            continue
        if cwd == str(root):
            found[int(entry.name)] = cmdline
    return found


def stage_pids(root: Path, script: str) -> list[int]:
    """Processes running ``pipeline/<script>`` in the project copy ``root``."""
    return [pid for pid, cmdline in project_processes(root).items()
            if any(part.endswith(f"pipeline/{script}".encode()) for part in cmdline)]


def start_repro(root: Path, *targets: str) -> subprocess.Popen:
    return subprocess.Popen(["dvc", "repro", *targets], cwd=root, env=project_env(root),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def wait_for(condition, timeout: float = 300.0, what: str = "") -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def modified_ns(root: Path, pattern: str) -> int | None:
    """The modification time of the file under ``root`` matching ``pattern``, None while there
    is none."""
    try:
        return next(root.glob(pattern)).stat().st_mtime_ns
    except (StopIteration, FileNotFoundError):
        return None


def checkpoint_interval(root: Path, ready: str, proc: subprocess.Popen) -> float:
    """Seconds between the first two writes of the checkpoint ``ready`` (a glob under ``root``:
    the stage's pace on this machine), or until the run ends if that comes first."""
    wait_for(lambda: modified_ns(root, ready) or proc.poll() is not None, what=ready)
    start, first = time.monotonic(), modified_ns(root, ready)
    wait_for(lambda: modified_ns(root, ready) not in (None, first) or proc.poll() is not None,
             what=f"{ready} rewritten")
    return time.monotonic() - start


def kill_stage_at_random(root: Path, script: str, ready: str | None, lifetime: float,
                         rng: random.Random) -> str:
    """Run ``dvc repro``; once ``script`` runs, kill -9 it after a random delay: within the
    first third of its ``lifetime`` in the unbroken run (a margin for a machine busier then
    than now) or, for a stage that writes the checkpoint ``ready``, once it has written it
    twice, within three of its checkpoint intervals (so the kill lands while the stage runs on
    a machine of any speed). Returns what happened; fails unless the kill landed while the
    stage ran."""
    proc = start_repro(root, TARGET)
    wait_for(lambda: stage_pids(root, script) or proc.poll() is not None, what=script)
    window = lifetime / 3 if ready is None else 3 * checkpoint_interval(root, ready, proc)
    delay = rng.uniform(0.0, window)
    time.sleep(delay)
    killed = [pid for pid in stage_pids(root, script) if not os.kill(pid, signal.SIGKILL)]
    _, stderr = proc.communicate(timeout=600)
    story = f"{script}: killed {killed} after {delay:.2f}s, dvc exit {proc.returncode}"
    assert killed and proc.returncode != 0, f"{story}\n{stderr[-3000:]}"
    return story


def file_digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def assert_same_tensors(a: Path, b: Path) -> None:
    left = torch.load(a, map_location="cpu", weights_only=True)["state_dict"]
    right = torch.load(b, map_location="cpu", weights_only=True)["state_dict"]
    assert left.keys() == right.keys()
    for name in left:
        assert torch.equal(left[name], right[name]), f"{a}: {name} differs from the unbroken run"


def test_killed_stages_rerun_to_the_unbroken_runs_results(unbroken_run, tmp_path):
    unbroken = unbroken_run.root
    root = make_project(tmp_path / "killed", FAULT_PARAMS)
    seed = os.environ.get("FAULT_SEED", str(time.time_ns()))
    print(f"replay the kill delays with FAULT_SEED={seed}")    # shown when the test fails
    rng = random.Random(seed)
    story = [kill_stage_at_random(root, script, ready, unbroken_run.lifetimes[script], rng)
             for script, ready in KILLED_STAGES]
    run_in(["dvc", "repro", TARGET], root)
    for name in EXACT_FILES:
        assert file_digest(root / name) == file_digest(unbroken / name), (name, story)
    for name in TENSOR_FILES:
        assert_same_tensors(root / name, unbroken / name)
    for name, keys in EXACT_METRICS.items():
        got, want = (json.loads((r / name).read_text()) for r in (root, unbroken))
        assert {k: got.get(k) for k in keys} == {k: want.get(k) for k in keys}, (name, story)
    leftovers = [p for p in (root / "data").rglob(".*.tmp-*")] + list((root / "data").rglob("*.partial"))
    assert not leftovers, leftovers


def tree_digests(root: Path, outputs: list[str]) -> dict[str, str]:
    """sha256 of every file under the given outputs (files or folders)."""
    digests = {}
    for out in outputs:
        path = root / out
        files = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        digests.update({str(f.relative_to(root)): file_digest(f) for f in files})
    return digests


BAD_PARAMS = [
    ("prepare", {"prepare": {"corpus": "nope"}}, "prepare.corpus",
     ["data/prepared", "metrics/prepare.json"]),
    ("tokenize", {"tokenize": {"vocab_size_src": 0}}, "tokenize.vocab_size_src",
     ["data/tokenized", "metrics/tokenize.json"]),
    ("pretrain_lm", {"pretrain_lm": {"hidden_size": -4}}, "pretrain_lm.hidden_size",
     ["data/lm", "metrics/lm.json"]),
    (TARGET, {"train": {"trainer": {"precision": "bogus"}}}, "train.trainer.precision",
     [f"data/models/{CELL}", f"metrics/train/{CELL}.json", "data/code/stages"]),
]


@pytest.mark.parametrize("stage, override, key, outputs", BAD_PARAMS,
                         ids=[b[0] for b in BAD_PARAMS])
def test_bad_param_leaves_every_previous_output_in_place(unbroken, stage, override, key, outputs):
    from rnnsearch.config.trees import merge

    params_file = unbroken / "params.yaml"
    good = params_file.read_text()
    before = tree_digests(unbroken, outputs)
    assert before
    params_file.write_text(yaml.safe_dump(merge(yaml.safe_load(good), override), sort_keys=False))
    try:
        # with its upstream stages, as a user runs it: a training setting reaches the train
        # cells through the code stage's records, which refuses a bad one first
        result = run_in(["dvc", "repro", stage], unbroken, check=False)
    finally:
        params_file.write_text(good)
    assert result.returncode != 0
    assert key in result.stdout + result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert tree_digests(unbroken, outputs) == before


def test_killing_dvc_stops_training_and_a_second_writer_is_refused(unbroken):
    """On the unbroken project (its upstream stages done); runs after the tests that read it."""
    from rnnsearch.config.trees import merge

    root = unbroken
    longer = {"train": {"budget": {"max_steps": 100000}}}     # would run for many minutes
    good = (root / "params.yaml").read_text()
    (root / "params.yaml").write_text(yaml.safe_dump(merge(yaml.safe_load(good), longer),
                                                     sort_keys=False))
    proc = start_repro(root, TARGET)
    wait_for(lambda: modified_ns(root, f".cache/resume/train/{CELL}/*/run.json"),
             what="training")
    trainer_pids = stage_pids(root, "train.py")
    assert trainer_pids
    second = subprocess.run([sys.executable, str(root / "pipeline/train.py"), "--model", "search",
                             "--max-len", "20", "--out", f"data/models/{CELL}", "--metrics",
                             "m.json"], cwd=root, env=project_env(root), capture_output=True,
                            text=True, timeout=300)
    assert second.returncode == 2 and "another process" in second.stderr
    assert f"data/models/{CELL}" in second.stderr and "Traceback" not in second.stderr
    os.kill(proc.pid, signal.SIGKILL)                       # the dvc parent only
    proc.wait(timeout=60)
    wait_for(lambda: not stage_pids(root, "train.py"), timeout=60, what="train.py to stop")
    (root / "params.yaml").write_text(good)
    stderr = proc.stderr.read()
    assert (root / f"data/models/{CELL}/model.pt").is_file(), stderr[-3000:]   # put back


def test_going_back_to_finished_params_after_a_killed_run_restores_the_finished_cell(unbroken):
    """A finished cell, then a train param changed and its run killed after its first
    checkpoint, then the param put back: the finished cell is back without training (never from
    step 0), the same model.pt; the killed run's resume folder stays for when its params come
    back."""
    from rnnsearch.config.trees import merge

    root, params = unbroken, unbroken / "params.yaml"
    good, model = params.read_text(), (root / f"data/models/{CELL}/model.pt").read_bytes()
    other = {"train": {"budget": {"max_steps": 90}}}
    params.write_text(yaml.safe_dump(merge(yaml.safe_load(good), other), sort_keys=False))
    try:
        proc = start_repro(root, TARGET)
        checkpoint = f".cache/resume/train/{CELL}/*/last.ckpt"
        wait_for(lambda: modified_ns(root, checkpoint) or proc.poll() is not None, what=checkpoint)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        wait_for(lambda: not stage_pids(root, "train.py"), timeout=60, what="train.py to stop")
    finally:
        params.write_text(good)
    again = run_in(["dvc", "repro", TARGET], root)
    # the killed stage put the finished cell back itself, or DVC's run cache gives it back
    assert f"Stage '{TARGET}' didn't change" in again.stdout or \
        f"Stage '{TARGET}' is cached - skipping run" in again.stdout, again.stdout
    assert f"Running stage '{TARGET}'" not in again.stdout, again.stdout   # the code records
    assert (root / f"data/models/{CELL}/model.pt").read_bytes() == model     # may run again
    assert len(list(root.glob(checkpoint))) == 1     # the killed run's, kept


def test_two_stages_started_together_on_a_new_mlflow_store_both_succeed(unbroken, tmp_path):
    """Three prepare processes of the unbroken project, started at once, each writing outputs of
    its own under ``tmp_path``, on a store none of them has created yet."""
    store = tmp_path / "new" / "mlflow.db"
    env = dict(project_env(unbroken), MLFLOW_TRACKING_URI=f"sqlite:///{store}")
    procs = [subprocess.Popen([sys.executable, str(unbroken / "pipeline/prepare.py"),
                               "--out", str(tmp_path / f"out{i}"),
                               "--metrics", str(tmp_path / f"m{i}.json")],
                              cwd=unbroken, env=env, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True)
             for i in range(3)]
    errors = [p.communicate(timeout=300)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors
    import mlflow

    client = mlflow.tracking.MlflowClient(f"sqlite:///{store}")
    experiment = client.get_experiment_by_name("rnnsearch")
    assert len(client.search_runs([experiment.experiment_id])) == 3
