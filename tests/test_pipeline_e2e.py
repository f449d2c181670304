"""End-to-end: the real DVC pipeline in a throw-away copy of the repository, on tiny params."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import make_project, run_in

pytestmark = pytest.mark.slow

# Tiny values for every stage, merged over the repository's params.yaml.
TINY = {
    "prepare": {"corpus": "multi30k", "src_lang": "en", "tgt_lang": "fr", "download": False,
                "sizes": {"train": 800, "dev": 60, "test": 60}, "test_buckets": [],
                "test_per_bucket": 0},
    "tokenize": {"vocab_size_src": 400, "vocab_size_tgt": 400},
    "embed": {"vector_size": 24, "epochs": 2, "plot_words": 40},
    "pretrain_lm": {"embedding_size": 24, "hidden_size": 24, "batch_size": 8, "max_steps": 20,
                    "max_minutes": 2.0, "val_every": 10, "checkpoint_every": 10,
                    "gradient_flow": {"max_k": 8, "samples": 2}},
    "train": {"grid": {"models": ["encdec", "search"], "max_lens": [20]},
              "base_model": {"embedding_size": 24, "hidden_size": 24, "attention_size": 24,
                             "output_size": 24},
              "data": {"batch_size": 16, "dev_bleu_sentences": 20},
              "budget": {"max_steps": 24, "max_minutes": 3.0, "val_every_steps": 12},
              "init": {"embeddings": True}},
    "translate": {"search": {"beam_size": 3, "nbest": 2}, "speed_sentences": 4},
    "evaluate": {"bootstrap_samples": 50},
    "align": {"iterations": 3},
}


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """A git copy of the tracked project files (no data, no outputs), with tiny params."""
    return make_project(tmp_path_factory.mktemp("project"), TINY)


def test_repro_whole_pipeline_then_up_to_date(project):
    run_in(["dvc", "repro"], project)
    metrics = json.loads((project / "metrics/tokenize.json").read_text())
    assert metrics["pairs"]["train"] == 800
    for cell in ("encdec-20", "search-20"):
        assert (project / f"data/models/{cell}/model.pt").is_file()
        assert json.loads((project / f"metrics/eval/{cell}.json").read_text())
    assert (project / "reports/README.md").is_file()
    check_alignment_outputs(project)
    again = run_in(["dvc", "repro"], project)
    assert "up to date" in again.stdout
    shown = run_in(["dvc", "metrics", "show", "--json"], project).stdout
    for name in ("vocab_size", "oov_rate", "wordsim353", "unigram_perplexity", "bleu"):
        assert name in shown, name
    plots = run_in(["dvc", "plots", "show", "--json"], project).stdout
    assert "bleu_by_length" in plots


@pytest.mark.parametrize("corpus, src, tgt", [("multi30k", "de", "en"), ("hansard36", "en", "fr")])
def test_exp_run_switches_corpus_and_direction(project, corpus, src, tgt):
    run_in(["dvc", "exp", "run", "tokenize", "-S", f"prepare.corpus={corpus}",
          "-S", f"prepare.src_lang={src}", "-S", f"prepare.tgt_lang={tgt}"], project)
    meta = json.loads((project / "data/prepared/meta.json").read_text())
    assert (meta["corpus"], meta["src_lang"], meta["tgt_lang"]) == (corpus, src, tgt)
    shown = json.loads(run_in(["dvc", "exp", "show", "--json"], project).stdout)
    assert shown  # the experiment is listed


def check_alignment_outputs(project: Path) -> None:
    """align and align_attention ran on the gold set: EM curves, scores, the report's table."""
    align = json.loads((project / "metrics/align.json").read_text())
    assert align["gold"]["sentences"] == 447
    for model in ("ibm1", "fast_align"):
        for curve in align["models"][model]["log_likelihood"].values():
            assert all(b >= a - 1e-9 for a, b in zip(curve, curve[1:])), curve
        for scores in align["models"][model]["scores"].values():
            assert 0.0 < scores["aer"] < 1.0
    attention = json.loads((project / "metrics/align_attention.json").read_text())
    assert attention["cells"]["encdec-20"] == {"attention": False}
    assert set(attention["cells"]["search-20"]["scores"]) == {"argmax", "threshold 0.3"}
    table = (project / "reports/results/alignment_quality.md").read_text()
    assert "IBM Model 1" in table and "RNNsearch-20" in table
    assert (project / "reports/results/alignment_gold_search-20.png").is_file()
