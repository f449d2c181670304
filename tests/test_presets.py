"""Presets resolve to valid configurations (every section, the grid) without training."""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO, make_project, run_in

from rnnsearch.config.base import read_params
from rnnsearch.config.repository import load_preset
from rnnsearch.config.sections import grid_cells
from rnnsearch.presets import cli, definition
from rnnsearch.runs import export, overrides
from rnnsearch.errors import ConfigError
from rnnsearch.config.sections import validate_params


def test_default_params_are_valid():
    merged = read_params(REPO / "params.yaml")
    configs = validate_params(merged)
    assert configs["prepare"].corpus in ("multi30k", "hansard36")


def test_paper_preset_is_the_papers_setting():
    merged, cells = definition.resolve("paper", REPO / "params.yaml")
    assert cells == ["encdec-30", "encdec-50", "search-30", "search-50"]
    configs = validate_params(merged)
    search = configs["train"].model_config("search")
    assert (search.embedding_size, search.hidden_size, search.output_size, search.maxout) == \
        (620, 1000, 500, True)
    assert configs["train"].optim.optimizer == "adadelta" and configs["train"].data.batch_size == 80
    assert (configs["tokenize"].vocab_size_src, configs["tokenize"].vocab_size_tgt) == (30000, 30000)
    assert configs["prepare"].sizes.train == 0 and configs["prepare"].corpus == "hansard36"
    assert configs["translate"].search.beam_size > 1


def test_quick_preset_is_one_search_model_on_multi30k_de_en():
    merged, cells = definition.resolve("quick", REPO / "params.yaml")
    configs = validate_params(merged)
    assert cells == ["search-50"]
    assert (configs["prepare"].corpus, configs["prepare"].src_lang, configs["prepare"].tgt_lang) == \
        ("multi30k", "de", "en")
    assert configs["train"].budget.max_minutes == 20.0


def test_quick_preset_spends_little_on_the_language_model_it_never_loads():
    merged, _ = definition.resolve("quick", REPO / "params.yaml")
    configs = validate_params(merged)
    assert configs["train"].init.lm is False
    assert 0 < configs["pretrain_lm"].max_steps <= 100


def test_gpu_curve_preset_is_the_paper_width_curve_in_minutes_on_one_gpu():
    merged, cells = definition.resolve("gpu_curve", REPO / "params.yaml")
    configs = validate_params(merged)
    train = configs["train"]
    assert cells == ["encdec-50", "search-50"]
    for name in ("encdec", "search"):
        model = train.model_config(name)
        assert (model.embedding_size, model.hidden_size, model.attention_size, model.output_size,
                model.maxout) == (620, 1000, 1000, 500, True)
    assert train.model_config("encdec").model == "encdec"
    assert train.model_config("search").model == "search"
    assert (configs["tokenize"].vocab_size_src, configs["tokenize"].vocab_size_tgt) == (30000, 30000)
    # the time decides: 4.5 minutes a cell, no step or epoch limit it could reach first
    assert train.budget.max_minutes == 4.5 and train.budget.max_steps == -1
    assert train.budget.max_epochs >= 100
    assert (train.trainer.accelerator, train.trainer.devices) == ("gpu", 1)
    assert (train.init.embeddings, train.init.lm) == (False, False)
    assert 0 < configs["pretrain_lm"].max_steps <= 100          # never loaded: a token budget
    assert configs["translate"].search.beam_size == 12


def test_gpu_curve_preset_keeps_the_default_runs_data_so_its_cells_go_beside_the_default_ones():
    """export's comparison with the default run is refused unless both runs' prepare params
    agree; the preset's two cells are cells of the default grid, so both are compared."""
    default = read_params(REPO / "params.yaml")
    merged, cells = definition.resolve("gpu_curve", REPO / "params.yaml")
    assert merged["prepare"] == default["prepare"]
    assert not [arg for arg in definition.command("gpu_curve") if arg.startswith("prepare.")]
    default_cells = grid_cells(validate_params(default)["train"])
    assert set(cells) <= set(default_cells)


def test_luong_preset_adds_two_cells_to_the_default_grid():
    _, cells = definition.resolve("luong", REPO / "params.yaml")
    assert cells[:4] == ["encdec-30", "encdec-50", "search-30", "search-50"] and len(cells) == 8


def test_luong_variants_preset_covers_scores_local_m_and_input_feeding_at_30():
    merged, cells = definition.resolve("luong_variants", REPO / "params.yaml")
    train = validate_params(merged)["train"]
    assert cells == ["encdec-30", "search-30", "luong_dot-30", "luong_concat-30",
                     "luong_local_m-30", "luong_no_feed-30"]
    variants = {name: train.model_config(name) for name in ("luong_dot", "luong_concat",
                                                            "luong_local_m", "luong_no_feed")}
    assert {m.score for m in variants.values()} == {"dot", "concat", "general"}
    assert variants["luong_local_m"].attention == "local_m"
    assert [m.input_feeding for m in variants.values()] == [True, True, True, False]


def test_preset_with_a_bad_value_fails_naming_the_key(tmp_path, monkeypatch):
    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "broken.yaml").write_text("train:\n  grid:\n    models: [search, nosuch]\n")
    monkeypatch.setenv("RNNSEARCH_ROOT", str(tmp_path))
    with pytest.raises(ConfigError, match=r"train\.grid\.models\[1\]"):
        definition.resolve("broken", REPO / "params.yaml")
    with pytest.raises(ConfigError, match="no preset 'absent'"):
        load_preset("absent")


def test_override_arguments_use_dvc_syntax():
    assert overrides.override_argument("a.b", [30, 50]) == "a.b=[30,50]"
    assert overrides.override_argument("a.m", ["search"]) == 'a.m=["search"]'
    assert overrides.override_argument("a.flag", False) == "a.flag=false"
    assert overrides.override_argument("a.p", "32-true") == "a.p=32-true"
    assert overrides.override_argument("a.x", None) == "a.x=null"
    cmd = definition.command("quick")
    assert cmd[:6] == ["dvc", "exp", "run", "--temp", "-n", "quick"]
    assert "prepare.corpus=multi30k" in cmd


def presets_cli(*argv: str) -> subprocess.CompletedProcess:
    """``python -m rnnsearch.presets ARGV`` in the repository."""
    return subprocess.run([sys.executable, "-m", "rnnsearch.presets", *argv], cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=str(REPO / "src")),
                          capture_output=True, text=True, timeout=120)


def test_several_names_run_in_order_each_a_temporary_experiment_and_its_branch():
    """``show A B`` prints, in order, each preset's temporary experiment and its promotion to
    the branch preset/<name>; only run, show and check take several names."""
    shown = presets_cli("show", "supervised_transformer", "supervised_transformer_stop_bound")
    runs = [line for line in shown.stdout.splitlines() if line.startswith("dvc exp run")]
    assert [line.split()[:6] for line in runs] == [
        ["dvc", "exp", "run", "--temp", "-n", name]
        for name in ("supervised_transformer", "supervised_transformer_stop_bound")]
    assert runs[1] == runs[0].replace("-n supervised_transformer ",
                                      "-n supervised_transformer_stop_bound ") \
        + " -S +translate.search.stop=bound"
    assert "dvc exp branch supervised_transformer_stop_bound " \
           "preset/supervised_transformer_stop_bound" in shown.stdout
    checked = presets_cli("check", "quick", "stop_bound").stdout.splitlines()
    assert [line.split("'")[1] for line in checked] == ["quick", "stop_bound"]
    for argv in (("export", "quick", "luong"), ("run", "a", "b", "--from", "my.yaml")):
        refused = presets_cli(*argv)
        assert refused.returncode == 2 and "Traceback" not in refused.stderr, refused.stderr
        assert "unrecognized arguments: luong" in refused.stderr or "one experiment name" in \
            refused.stderr, refused.stderr


def test_a_printed_command_pastes_back_into_a_shell_as_the_same_arguments():
    args = ["dvc", "exp", "run", "-S", 'train.grid.models=["search"]', "-S",
            "prepare.name=it's mine", "-S", "a.b=[30,50]"]
    line = cli.shell_line(args)
    assert line.startswith("dvc exp run -S ")
    echoed = subprocess.run(["bash", "-c", f"printf '%s\\n' {line}"], capture_output=True,
                            text=True, timeout=10, check=True)
    assert echoed.stdout.splitlines() == args


def test_relative_mirror_reaches_the_temporary_copy_resolved(tmp_path, monkeypatch):
    monkeypatch.setenv("RNNSEARCH_ROOT", str(tmp_path))
    monkeypatch.delenv("RNNSEARCH_CORPORA", raising=False)
    prepare = {"corpus": "hansard36", "src_lang": "en", "tgt_lang": "fr"}
    env = definition.run_environment({"prepare": {**prepare, "mirror": "../shared/corpora"}})
    assert env["RNNSEARCH_CORPORA"] == str((tmp_path.parent / "shared" / "corpora").resolve())
    assert "RNNSEARCH_CORPORA" not in definition.run_environment(
        {"prepare": {**prepare, "mirror": "/abs"}})



@pytest.mark.parametrize("action, name", [("check", "../params"), ("show", "../params"),
                                          ("export", "../params"), ("check", "presets/quick"),
                                          ("check", "quick.yaml"), ("check", "")])
def test_a_preset_name_that_is_not_a_plain_name_is_refused(action, name):
    """``presets/<name>.yaml`` must not reach another file (``../params`` is params.yaml)."""
    done = subprocess.run([sys.executable, "-m", "rnnsearch.presets", action, name], cwd=REPO,
                          env=dict(os.environ, PYTHONPATH=str(REPO / "src")),
                          capture_output=True, text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and "Traceback" not in done.stderr, (done.stdout, done.stderr)
    assert len(lines) == 1 and f"preset name '{name}'" in lines[0], lines
    assert "letters, digits, _ and -" in lines[0]
    assert not done.stdout


# A one-cell grid on test_pipeline_e2e's tiny params, so a default run takes about a minute.


def test_your_own_params_file_is_validated_and_never_overwrites_a_preset(tmp_path):
    """``make experiment NAME=envi PARAMS=my.yaml``'s first step: my.yaml (any path) is
    validated like a preset; ``check`` writes nothing, ``run`` copies it to presets/envi.yaml
    only once it is valid (a refused file leaves nothing behind, so the corrected file is taken
    under the same name); a different preset of that name stays."""
    (tmp_path / "presets").mkdir()
    (tmp_path / "params.yaml").write_bytes((REPO / "params.yaml").read_bytes())
    mine = tmp_path / "elsewhere" / "my.yaml"
    mine.parent.mkdir()
    mine.write_text("train:\n  grid: {models: [search], max_lens: [30]}\n")
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"), RNNSEARCH_ROOT=str(tmp_path))

    def presets_check(source: Path) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "rnnsearch.presets", "check", "envi",
                               "--from", str(source)], cwd=tmp_path, env=env,
                              capture_output=True, text=True, timeout=120)

    done = presets_check(mine)
    assert done.returncode == 0, done.stderr
    assert "grid cells: search-30" in done.stdout
    assert not (tmp_path / "presets/envi.yaml").exists()           # check only validates
    bad = tmp_path / "bad.yaml"
    bad.write_text("train:\n  grid: {models: [nosuch], max_lens: [30]}\n")
    refused = presets_run(bad, tmp_path, env)
    assert refused.returncode == 2 and "train.grid.models" in refused.stderr
    assert not (tmp_path / "presets/envi.yaml").exists()           # nothing adopted
    (tmp_path / "presets/envi.yaml").write_bytes(mine.read_bytes())  # as a valid run adopts it
    assert presets_check(mine).returncode == 0          # the same file again: fine
    other = tmp_path / "other.yaml"
    other.write_text("train:\n  grid: {models: [encdec], max_lens: [30]}\n")
    refused = presets_check(other)
    assert refused.returncode == 2 and "a different preset 'envi' exists" in refused.stderr
    assert (tmp_path / "presets/envi.yaml").read_bytes() == mine.read_bytes()
    missing = presets_check(tmp_path / "nope.yaml")
    assert missing.returncode == 2 and "nope.yaml: file not found" in missing.stderr


def presets_run(source: Path, root: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """``python -m rnnsearch.presets run envi --from SOURCE``."""
    return subprocess.run([sys.executable, "-m", "rnnsearch.presets", "run", "envi",
                           "--from", str(source)], cwd=root, env=env, capture_output=True,
                          text=True, timeout=120)


def test_overrides_set_a_mapping_whole_where_params_yaml_has_null():
    """``prepare.custom`` is null in params.yaml: Hydra cannot enter it key by key."""
    base = {"prepare": {"corpus": "hansard36", "custom": None, "clean": {"max_len": 80}}}
    preset = {"prepare": {"corpus": "custom", "clean": {"max_len": 50, "new": 1},
                          "custom": {"train": {"src": "own/a b.de", "tgt": "own/t.en"}}}}
    assert definition.override_arguments(base, preset) == [
        "prepare.corpus=custom", "prepare.clean.max_len=50", "+prepare.clean.new=1",
        'prepare.custom={train:{src:"own/a b.de",tgt:own/t.en}}']


def test_an_exported_preset_keeps_only_the_metrics_its_own_run_wrote():
    """Was: the quick preset's folder carried the default run's train and alignment metrics of
    three cells it never ran (the experiment's workspace copy starts with them, and DVC keeps
    their stages in the lock: here train@encdec-30)."""
    lock = {"stages": {"prepare": {"outs": [{"path": "metrics/prepare.json"}]},
                       "train@search-50": {"outs": [{"path": "metrics/train/search-50.json"}]},
                       "translate@search-50": {"outs": [{"path": "metrics/alignments/search-50.json"}]},
                       "evaluate": {"outs": [{"path": "metrics/eval"}]},
                       "report": {"outs": [{"path": "metrics/summary"}]}}}
    files = ["reports/README.md", "params.yaml", "metrics/prepare.json", "metrics/lm.json",
             "metrics/train/search-50.json", "metrics/train/encdec-30.json",
             "metrics/alignments/search-50.json", "metrics/alignments/search-30.json",
             "metrics/eval/search-50.json", "metrics/summary/search-50.json",
             "metrics/summary/encdec-50.json"]
    lock["stages"]["train@encdec-30"] = {"outs": [{"path": "metrics/train/encdec-30.json"}]}
    assert export.own_files(files, lock, ["search-50"]) == [
        "reports/README.md", "params.yaml", "metrics/prepare.json",
        "metrics/train/search-50.json", "metrics/alignments/search-50.json",
        "metrics/eval/search-50.json", "metrics/summary/search-50.json"]


def test_make_default_in_a_fresh_clone_restores_the_params_and_keeps_the_edit(tmp_path):
    """Was: ``git checkout -- ... && dvc checkout`` failed with exit 255 in a clone whose DVC
    cache holds none of the default run's data. ``make default`` restores what git has, stashes
    the replaced files and leaves the missing data to make repro."""
    project = make_project(tmp_path / "project", {})
    for folder in ("metrics", "plots", "reports"):          # a clone has the committed run's
        shutil.copytree(REPO / folder, project / folder)
    run_in(["git", "add", "metrics", "plots", "reports"], project)
    run_in(["git", "-c", "user.email=ci@example.org", "-c", "user.name=ci", "commit", "-qm",
            "the committed run"], project)
    committed = (project / "params.yaml").read_text()
    (project / "params.yaml").write_text(committed.replace("epochs: 5", "epochs: 6", 1))
    (project / ".venv").mkdir()
    (project / ".venv/.installed").touch()        # make's setup, done (the suite's env has dvc)
    done = run_in(["make", "default"], project)
    assert (project / "params.yaml").read_text() == committed
    assert "git stash pop brings them back" in done.stdout and "make repro" in done.stdout
    stashed = run_in(["git", "stash", "show", "-p"], project).stdout
    assert "+  epochs: 6" in stashed
    again = run_in(["make", "default"], project)          # nothing to stash: still fine
    assert "git stash" not in again.stdout.split("\n")[0]


def test_a_branchs_params_are_read_as_params_yaml_is():
    """Was: presets read a branch's params.yaml with plain yaml.safe_load (YAML 1.1), so an
    override of 1e-3 showed as the string '1e-3'."""
    from rnnsearch.config.base import parse_params
    from rnnsearch.errors import ConfigError

    assert parse_params("train:\n  lr: 1e-3\n", "x")["train"]["lr"] == 0.001
    with pytest.raises(ConfigError, match=r"^preset/x:params.yaml:3: duplicate key 'a'"):
        parse_params("t:\n  a: 1\n  a: 2\n", "preset/x:params.yaml")


def test_supervised_preset_supervises_the_attention_cells_with_word_links():
    merged, cells = definition.resolve("supervised", REPO / "params.yaml")
    configs = validate_params(merged)
    train = configs["train"]
    assert cells == ["encdec-50", "search-50", "luong_general-50"]
    assert [train.supervised(m) for m in train.grid.models] == [False, True, True]
    assert train.supervised_attention.weight == 1.0
    assert configs["align"].train_links == "fast_align_vb/grow-diag-final-and"
    assert configs["align"].max_pairs == 0 and configs["tokenize"].units == "word"
    default = validate_params(read_params(REPO / "params.yaml"))
    assert default["align"].train_links is None
    assert not default["train"].supervised_attention.on


@pytest.mark.parametrize("name, weight, decay_steps", [
    ("supervised_cond", 1.0, 0), ("supervised_cond_light", 0.1, 0),
    ("supervised_cond_decay", 0.1, 1000), ("conditional", 0.0, 0)])
def test_conditional_presets_train_the_search_cell_with_the_conditional_gru(name, weight,
                                                                            decay_steps):
    """The cell keeps the default run's name (search-50), so that beside_default.md puts it
    beside the default RNNsearch-50; only its architecture (and the supervision) differ."""
    merged, cells = definition.resolve(name, REPO / "params.yaml")
    train = validate_params(merged)["train"]
    assert cells == ["search-50"]
    assert train.model_config("search").model == "search_cond"
    assert train.supervised("search") == (weight > 0)
    assert train.supervised_attention.weight == weight
    assert train.supervised_attention.decay_steps == decay_steps


@pytest.mark.parametrize("name, layer", [("supervised_transformer", -1),
                                         ("supervised_transformer_penultimate", -2)])
def test_supervised_transformer_presets_supervise_the_transformer_cell_of_the_transformer_preset(
        name, layer):
    merged, cells = definition.resolve(name, REPO / "params.yaml")
    train = validate_params(merged)["train"]
    _, unsupervised = definition.resolve("transformer", REPO / "params.yaml")
    assert cells == ["transformer-50"] and cells[0] in unsupervised
    assert train.supervised("transformer")
    assert train.model_config("transformer").alignment_layer == layer


def test_stop_bound_preset_changes_only_the_stopping_rule_of_the_default_run():
    """Decoded again, not retrained: the default run's params but for ``translate.search.stop``."""
    merged, _ = definition.resolve("stop_bound", REPO / "params.yaml")
    before = yaml.safe_load((REPO / "params.yaml").read_text())
    assert merged["translate"]["search"]["stop"] == "bound"
    assert validate_params(before)["translate"].search.stop == "first_k"
    for params in (merged, before):
        params["translate"]["search"].pop("stop", None)
    assert merged == before


A_CHAIN_OF_SLEEPS = """
from rnnsearch.config.base import read_params
from rnnsearch.presets import cli
cli.command = lambda name: ["sh", "-c", "sleep 300 & sleep 300 & wait"]   # for dvc exp run
params = read_params("params.yaml")
cli.run(["first", "second"], [params, params])
"""


def test_kill_9_of_a_preset_chain_stops_its_dvc_exp_run():
    """Was: ``kill -9`` of ``make preset NAME="A B"`` left its ``dvc exp run`` running alone,
    and the next chain's run died under it. Each step now runs as a process group that a
    watcher stops when the chain's process ends, however it ends."""
    import psutil

    chain = subprocess.Popen([sys.executable, "-c", A_CHAIN_OF_SLEEPS], cwd=REPO,
                             env=dict(os.environ, PYTHONPATH=str(REPO / "src")),
                             stdout=subprocess.DEVNULL, start_new_session=True)
    sleeps: list[psutil.Process] = []
    try:
        deadline = time.time() + 60
        while time.time() < deadline and len(sleeps) < 2:
            time.sleep(0.1)
            sleeps = [p for p in psutil.Process(chain.pid).children(recursive=True)
                      if p.name() == "sleep"]
        assert len(sleeps) == 2, "the chain's first step did not start"
        chain.kill()
        chain.wait()
        _, alive = psutil.wait_procs(sleeps, timeout=45)
        assert alive == [], [p.pid for p in alive]
    finally:
        for process in sleeps:
            if process.is_running():
                process.kill()


A_STEP_THAT_NAMES_ITS_SIGNAL = """
import signal, sys, time
def stop(signum, frame):
    open(sys.argv[1], "w").write(signal.Signals(signum).name)
    sys.exit(1)
signal.signal(signal.SIGINT, stop)
signal.signal(signal.SIGTERM, stop)
open(sys.argv[1] + ".started", "w").close()
time.sleep(300)
"""


def start_chain(tmp_path: Path, step: str, presets: list[str],
                **popen: Any) -> tuple[subprocess.Popen, Path]:
    """``presets run`` of ``presets`` (default params) whose every ``dvc exp run`` is the
    Python code ``step`` (given a marker path), once the first has started; returns the chain
    and the marker."""
    marker = tmp_path / "signal"
    script = (f"from rnnsearch.config.base import read_params\n"
              f"from rnnsearch.presets import cli\n"
              f"cli.command = lambda name: [{sys.executable!r}, '-c', {step!r}, "
              f"{str(marker)!r}]\n"
              f"params = read_params('params.yaml')\n"
              f"raise SystemExit(cli.run({presets!r}, [params] * {len(presets)}))\n")
    chain = subprocess.Popen([sys.executable, "-c", script], cwd=REPO,
                             env=dict(os.environ, PYTHONPATH=str(REPO / "src")),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                             **popen)
    deadline = time.time() + 60
    while time.time() < deadline and not (tmp_path / "signal.started").exists():
        time.sleep(0.1)
    return chain, marker


@pytest.mark.parametrize("sent", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_stopped_chain_passes_ctrl_c_on_to_dvc_and_stops_there(sent, tmp_path):
    """Ctrl-C, SIGTERM or a closed terminal reach the running ``dvc exp run`` as SIGINT (as
    Ctrl-C in a terminal: DVC removes its temporary copy, which a SIGTERM left behind); the
    chain stops there with status 130."""
    chain, marker = start_chain(tmp_path, A_STEP_THAT_NAMES_ITS_SIGNAL, ["first", "second"])
    chain.send_signal(sent)
    _, err = chain.communicate(timeout=60)
    assert chain.returncode == 130, err
    assert marker.read_text() == "SIGINT" and "preset 'first': stopped" in err


def test_kill_9_of_a_chain_stops_its_dvc_exp_run_by_ctrl_c_too(tmp_path):
    """After a ``kill -9`` of the chain its watcher stops the ``dvc exp run`` as Ctrl-C does
    (SIGINT: DVC removes its temporary copy), not by SIGTERM (which leaves it behind)."""
    chain, marker = start_chain(tmp_path, A_STEP_THAT_NAMES_ITS_SIGNAL, ["first"])
    chain.kill()
    chain.communicate()
    deadline = time.time() + 60
    while time.time() < deadline and not marker.exists():
        time.sleep(0.1)
    assert marker.read_text() == "SIGINT"


A_STEP_THAT_STOPS_ON_CTRL_C = """
import sys, time
open(sys.argv[1] + ".started", "w").close()
try:
    time.sleep(300)
except KeyboardInterrupt:
    open(sys.argv[1], "w").write("KeyboardInterrupt")
"""


def test_a_chain_started_in_the_background_still_stops_dvc_by_ctrl_c(tmp_path):
    """A chain started in the background (``make preset ... &``: Ctrl-C ignored) still stops
    its ``dvc exp run`` with Ctrl-C's KeyboardInterrupt, on which DVC removes its temporary
    copy, not after the grace period by SIGKILL: the chain's own stop handlers, not an
    ignored SIGINT, are what the command inherits (as Ctrl-C's default action)."""
    chain, marker = start_chain(
        tmp_path, A_STEP_THAT_STOPS_ON_CTRL_C, ["first"],
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    started = time.monotonic()
    chain.send_signal(signal.SIGTERM)
    _, err = chain.communicate(timeout=90)
    assert chain.returncode == 130, err
    assert marker.read_text() == "KeyboardInterrupt", err
    assert time.monotonic() - started < cli.STOP_GRACE       # not the SIGKILL after it


def dvc_row(rev: str, name: str | None, params: dict, cells: dict[str, dict],
            experiments: list | None = None) -> dict:
    """One row of ``dvc exp show --json`` (DVC's ExpState) with these params and summaries."""
    metrics = {f"metrics/summary/{cell}.json": {"data": numbers}
               for cell, numbers in cells.items()}
    return {"rev": rev, "name": name, "error": None, "experiments": experiments,
            "data": {"rev": rev, "params": {"params.yaml": {"data": params}},
                     "metrics": {**metrics, "metrics/summary/lm.json": {"data": {"ppl": 9.0}}}}}


def test_make_exps_shows_each_experiments_changed_params_and_cell_numbers_in_80_columns():
    """Was: ``make exps`` printed dvc exp show's wide table, whose columns an experiment's
    numbers fell off at 200 columns (and piped, at 32)."""
    from rnnsearch.runs.exps import tables

    base = {"train": {"seed": 1234, "grid": {"max_lens": [30, 50]}}, "report": {"method": "beam"}}
    default = {"search-50": {"bleu": 12.19, "bleu_no_unk": 21.57, "dev_ppl": 14.4827}}
    own = dvc_row("e1" * 20, "own", {**base, "train": {"seed": 7, "grid": {"max_lens": [20]}}},
                  {"search-20": {"bleu": 3.456, "bleu_no_unk": 5.0}})
    shown = tables([dvc_row("workspace", None, base, default),
                    dvc_row("ab" * 20, "main", base, default,
                            [{"revs": [own], "executor": None, "name": "own"}])])
    lines = shown.splitlines()
    assert lines[1].split() == ["workspace", "–"]
    assert lines[3].split() == ["own", "train.seed=7,", "train.grid.max_lens=[20]"]
    assert ["own", "search-20", "3.46", "5.00", "–"] in [line.split() for line in lines]
    assert ["main", "search-50", "12.19", "21.57", "14.48"] in [line.split() for line in lines]
    assert "lm" not in shown.split() and max(len(line) for line in lines) <= 80


def test_make_exps_shows_a_presets_branch_once_also_after_the_baseline_moved_on():
    """Was: ``dvc exp show`` lists the experiments of HEAD only, so a preset run before the
    last commit vanished from ``make exps``. With ``--all-branches`` its ``preset/<name>``
    branch is a row; a branch made from an experiment of HEAD is the same commit, shown once."""
    from rnnsearch.runs.exps import tables

    base = {"translate": {"search": {"stop": "first_k"}}}
    bound = {"translate": {"search": {"stop": "bound"}}}
    numbers = {"search-50": {"bleu": 11.75}}
    own = dvc_row("e1" * 20, "own", base, numbers)
    shown = tables([dvc_row("workspace", None, base, numbers),
                    dvc_row("ab" * 20, "main", base, numbers,
                            [{"revs": [own], "executor": None, "name": "own"}]),
                    dvc_row("e1" * 20, "preset/own", base, numbers),
                    dvc_row("cd" * 20, "preset/stop_bound", bound, numbers)])
    names = [line.split()[0] for line in shown.split("\n\n")[0].splitlines()[1:]]
    assert names == ["workspace", "main", "own", "preset/stop_bound"]
    assert "preset/stop_bound  translate.search.stop=bound" in shown


def test_a_split_size_set_for_given_files_is_named_as_without_effect():
    """Was: an experiment that gave its own test file and set ``prepare.sizes.test: 1000`` was
    headed "Params changed: ..., prepare.sizes.test=1000", a param that did nothing."""
    overrides = ["prepare.corpus=custom", "prepare.sizes.test=1000", "prepare.sizes.train=5000"]
    prepared = {"test": {"pairs": 4076, "inputs": {"src": {"file": "test.xx"}}},
                "train": {"pairs": 5000, "not_sampled": 28_044}}
    assert export.unused_overrides(overrides, prepared) == ["prepare.sizes.test=1000"]
    assert export.unused_overrides(overrides, {}) == []
