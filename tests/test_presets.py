"""Presets resolve to valid configurations (every section, the grid) without training."""
from __future__ import annotations

import sys

import pytest
import yaml

from conftest import REPO, make_project, run_in
from test_pipeline_e2e import TINY

from rnnsearch import presets
from rnnsearch.config import ConfigError
from rnnsearch.config.sections import validate_params


def test_default_params_are_valid():
    merged = presets.read_params(REPO / "params.yaml")
    configs = validate_params(merged)
    assert configs["prepare"].corpus in ("multi30k", "hansard36")


def test_paper_preset_is_the_papers_setting():
    merged, cells = presets.resolve("paper", REPO / "params.yaml")
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
    merged, cells = presets.resolve("quick", REPO / "params.yaml")
    configs = validate_params(merged)
    assert cells == ["search-50"]
    assert (configs["prepare"].corpus, configs["prepare"].src_lang, configs["prepare"].tgt_lang) == \
        ("multi30k", "de", "en")
    assert configs["train"].budget.max_minutes == 20.0


def test_quick_preset_spends_little_on_the_language_model_it_never_loads():
    merged, _ = presets.resolve("quick", REPO / "params.yaml")
    configs = validate_params(merged)
    assert configs["train"].init.lm is False
    assert 0 < configs["pretrain_lm"].max_steps <= 100


def test_luong_preset_adds_two_cells_to_the_default_grid():
    _, cells = presets.resolve("luong", REPO / "params.yaml")
    assert cells[:4] == ["encdec-30", "encdec-50", "search-30", "search-50"] and len(cells) == 8


def test_preset_with_a_bad_value_fails_naming_the_key(tmp_path, monkeypatch):
    (tmp_path / "presets").mkdir()
    (tmp_path / "presets" / "broken.yaml").write_text("train:\n  grid:\n    models: [search, nosuch]\n")
    monkeypatch.setenv("RNNSEARCH_ROOT", str(tmp_path))
    with pytest.raises(ConfigError, match=r"train\.grid\.models\[1\]"):
        presets.resolve("broken", REPO / "params.yaml")
    with pytest.raises(ConfigError, match="no preset 'absent'"):
        presets.load_preset("absent")


def test_override_arguments_use_dvc_syntax():
    assert presets.override_argument("a.b", [30, 50]) == "a.b=[30,50]"
    assert presets.override_argument("a.m", ["search"]) == 'a.m=["search"]'
    assert presets.override_argument("a.flag", False) == "a.flag=false"
    assert presets.override_argument("a.p", "32-true") == "a.p=32-true"
    assert presets.override_argument("a.x", None) == "a.x=null"
    cmd = presets.command("quick")
    assert cmd[:6] == ["dvc", "exp", "run", "--temp", "-n", "quick"]
    assert presets.command("quick", ["data/lm"])[6:8] == ["-C", "data/lm"]
    assert "prepare.corpus=multi30k" in cmd


def test_relative_mirror_reaches_the_temporary_copy_resolved(tmp_path, monkeypatch):
    monkeypatch.setenv("RNNSEARCH_ROOT", str(tmp_path))
    monkeypatch.delenv("RNNSEARCH_CORPORA", raising=False)
    env = presets.run_environment({"prepare": {"mirror": "../shared/corpora"}})
    assert env["RNNSEARCH_CORPORA"] == str((tmp_path.parent / "shared" / "corpora").resolve())
    assert "RNNSEARCH_CORPORA" not in presets.run_environment({"prepare": {"mirror": "/abs"}})


# A one-cell grid on test_pipeline_e2e's tiny params, so a default run takes about a minute.
ONE_CELL = {"train": {"grid": {"models": ["search"], "max_lens": [20]},
                      "budget": {"max_steps": 12, "val_every_steps": 6}},
            "evaluate": {"baseline": "search"},
            "embed": {"epochs": 1},
            "pretrain_lm": {"max_steps": 10, "val_every": 5, "checkpoint_every": 5}}


@pytest.mark.slow
def test_preset_run_leaves_the_committed_default_run_intact(tmp_path):
    """The default run, committed; then a decoding-only preset: the workspace's params, lock,
    metrics, plots and report are untouched, no model is retrained, and the preset's results
    are an experiment (``dvc exp show``) and the branch ``preset/<name>``."""
    root = make_project(tmp_path, presets.merge(TINY, ONE_CELL))
    run_in(["dvc", "repro"], root)
    run_in(["git", "add", "metrics", "plots", "reports", "dvc.lock"], root)
    run_in(["git", "-c", "user.email=ci@example.org", "-c", "user.name=ci", "commit", "-qm",
            "default run"], root)
    (root / "presets" / "beam2.yaml").write_text("translate:\n  search: {beam_size: 2, nbest: 1}\n")
    ran = run_in([sys.executable, "-m", "rnnsearch.presets", "run", "beam2"], root)
    for stage in ("translate@search-20", "evaluate", "report"):
        assert f"Running stage '{stage}'" in ran.stdout, stage
    for stage in ("prepare", "pretrain_lm", "train@search-20"):   # copied into the temp copy
        assert f"Stage '{stage}' didn't change" in ran.stdout, stage
    status = run_in(["git", "status", "--porcelain", "metrics", "plots", "reports", "params.yaml",
                     "dvc.lock"], root).stdout
    assert status == ""
    assert "beam2" in run_in(["dvc", "exp", "show", "--json"], root).stdout
    kept = yaml.safe_load(run_in(["git", "show", "preset/beam2:params.yaml"], root).stdout)
    assert kept["translate"]["search"]["beam_size"] == 2
    assert "Table" in run_in(["git", "show", "preset/beam2:reports/README.md"], root).stdout
