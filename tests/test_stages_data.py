"""The prepare and tokenize stage scripts, run as DVC runs them, on the real Multi30k mirror."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from conftest import REPO, run_script

from rnnsearch.data.vocab import SPECIALS


def write_params(path: Path, mirror: Path, **prepare_overrides) -> Path:
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["prepare"].update(corpus="multi30k", src_lang="de", tgt_lang="en", mirror=str(mirror),
                             download=False, sizes={"train": 600, "dev": 50, "test": 40},
                             test_buckets=[], test_per_bucket=0)
    params["prepare"].update(prepare_overrides)
    params["tokenize"].update(vocab_size_src=300, vocab_size_tgt=250, workers=2)
    path.write_text(yaml.safe_dump(params))
    return path


@pytest.fixture
def prepared(tmp_path, mirror):
    """Run prepare and tokenize in ``tmp_path``; return the directory."""
    write_params(tmp_path / "params.yaml", mirror)
    for script in ("prepare.py", "tokenize_text.py"):
        result = run_script(script, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    return tmp_path


def test_prepare_and_tokenize_outputs(prepared):
    meta = json.loads((prepared / "data/prepared/meta.json").read_text())
    assert (meta["src_lang"], meta["tgt_lang"]) == ("de", "en")
    assert {s: meta["splits"][s]["pairs"] for s in meta["splits"]} == {"train": 600, "dev": 50, "test": 40}
    for split, n in (("train", 600), ("dev", 50), ("test", 40)):
        for side in ("src", "tgt"):
            assert len((prepared / f"data/tokenized/{split}.{side}").read_text().splitlines()) == n
    vocab_lines = (prepared / "data/tokenized/vocab.tgt.txt").read_text().splitlines()
    assert len(vocab_lines) == 250 and tuple(l.split("\t")[0] for l in vocab_lines[:4]) == SPECIALS
    metrics = json.loads((prepared / "metrics/tokenize.json").read_text())
    assert metrics["pairs"] == {"train": 600, "dev": 50, "test": 40}
    assert metrics["vocab_size"] == {"src": 300, "tgt": 250}
    assert 0 < metrics["oov_rate"]["dev"]["src"] < 1
    assert metrics["oov_rate"]["dev"]["src"] > metrics["oov_rate"]["train"]["src"]
    assert metrics["length"]["train"]["src"]["p95"] >= metrics["length"]["train"]["src"]["p50"]
    header = (prepared / "plots/lengths.csv").read_text().splitlines()[0]
    assert header == "length,train_src,train_tgt"


def test_same_seed_same_output(prepared, tmp_path_factory, mirror):
    again = tmp_path_factory.mktemp("again")
    write_params(again / "params.yaml", mirror)
    assert run_script("prepare.py", cwd=again).returncode == 0
    for name in ("train.src", "test.tgt"):
        assert (again / "data/prepared" / name).read_text() == \
            (prepared / "data/prepared" / name).read_text()


def test_stratified_test_split(tmp_path, mirror):
    write_params(tmp_path / "params.yaml", mirror, test_buckets=[8, 16, 40], test_per_bucket=20)
    result = run_script("prepare.py", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    metrics = json.loads((tmp_path / "metrics/prepare.json").read_text())
    assert metrics["test"]["per_bucket"] == {"1-8": 20, "9-16": 20, "17-40": 20}
    lengths = [len(l.split()) for l in (tmp_path / "data/prepared/test.src").read_text().splitlines()]
    assert sum(n <= 8 for n in lengths) == 20 and sum(n > 16 for n in lengths) == 20


@pytest.mark.parametrize("override, message", [
    ({"corpus": "nope"}, "prepare.corpus: unknown corpus 'nope'"),
    ({"src_lang": "es"}, "prepare.src_lang: corpus 'multi30k' has no language 'es'"),
    ({"sizes": {"train": -1, "dev": 5, "test": 5}}, "prepare.sizes.train: must be >= 0"),
    ({"colour": "blue"}, "prepare.colour: unknown key"),
])
def test_bad_params_fail_cleanly(tmp_path, mirror, override, message):
    write_params(tmp_path / "params.yaml", mirror, **override)
    result = run_script("prepare.py", cwd=tmp_path)
    assert result.returncode != 0
    assert message in result.stderr
    assert not (tmp_path / "data").exists() and not (tmp_path / "metrics").exists()


def test_checksum_failure_keeps_previous_outputs(prepared, tmp_path_factory):
    before = (prepared / "data/prepared/train.src").read_text()
    fake = tmp_path_factory.mktemp("fake_mirror")
    (fake / "multi30k").mkdir()
    for name in ("train.de.gz", "train.en.gz"):
        (fake / "multi30k" / name).write_bytes(b"corrupted")
    result = run_script("prepare.py", cwd=prepared, env={"RNNSEARCH_CORPORA": str(fake)})
    assert result.returncode != 0
    assert "checksum mismatch" in result.stderr and "train.de.gz" in result.stderr
    assert (prepared / "data/prepared/train.src").read_text() == before
    assert sorted(p.name for p in (prepared / "data").iterdir()) == ["prepared", "tokenized"]


def test_tokenize_without_prepared_data_fails_cleanly(tmp_path, mirror):
    write_params(tmp_path / "params.yaml", mirror)
    result = run_script("tokenize_text.py", cwd=tmp_path)
    assert result.returncode != 0 and "tokenize: error:" in result.stderr
    assert not (tmp_path / "data" / "tokenized").exists()


def test_prepare_and_tokenize_log_their_runs_to_mlflow(prepared):
    """Each stage's MLflow run: its stage and git commit tags, its params and its metrics, what
    the UI lists (tests/test_mlflow_ui_browser.py serves runs logged the same way)."""
    from mlflow.tracking import MlflowClient

    from rnnsearch import tracking

    client = MlflowClient(tracking.tracking_uri())
    experiment = client.get_experiment_by_name(tracking.experiment_name())
    by_stage = {}
    for run in client.search_runs([experiment.experiment_id]):
        assert "git_commit" in run.data.tags
        by_stage[run.data.tags["stage"]] = run
    assert set(by_stage) == {"prepare", "tokenize"}
    prepare_params = by_stage["prepare"].data.params
    assert prepare_params["corpus"] == "multi30k" and prepare_params["sizes.train"] == "600"
    tokenize_metrics = by_stage["tokenize"].data.metrics
    assert tokenize_metrics["pairs/train"] == 600
    assert tokenize_metrics["vocab_size/tgt"] == 250


def test_the_hansard_is_read_either_way_round(tmp_path, mirror):
    """The default run's corpus, French to English (the default run reads it the other way):
    1.02M training pairs cleaned and sampled down to the tiny sizes, then tokenised."""
    write_params(tmp_path / "params.yaml", mirror, corpus="hansard36", src_lang="fr",
                 tgt_lang="en", sizes={"train": 800, "dev": 60, "test": 60})
    for script in ("prepare.py", "tokenize_text.py"):
        result = run_script(script, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
    meta = json.loads((tmp_path / "data/prepared/meta.json").read_text())
    assert (meta["corpus"], meta["src_lang"], meta["tgt_lang"]) == ("hansard36", "fr", "en")
    assert {split: meta["splits"][split]["pairs"] for split in meta["splits"]} == {
        "train": 800, "dev": 60, "test": 60}
    assert json.loads((tmp_path / "metrics/tokenize.json").read_text())["pairs"]["train"] == 800
