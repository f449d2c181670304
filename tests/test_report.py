"""The report stage: tables regenerate identically from fixture metrics, the paper's numbers sit
in their own columns, optional inputs are skipped, and it runs from metrics files only."""
from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from conftest import REPO, run_script
from rnnsearch.config.report import ReportConfig
from rnnsearch.reporting.inputs import ReportInputs
from rnnsearch.reporting.write import write_report
from rnnsearch.reporting.build import table1, variants_table

LABELS = [("0-10", 10), ("10-20", 20), ("20-30", 30), ("30+", 40)]


def _system(bleu: float, p: float | None = None, baseline: str = "encdec-50") -> dict:
    scores = {"n": 100, "bleu": bleu, "chrf": bleu + 20, "len_ratio": 0.95,
              "bleu_signature": "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"}
    system = {"all": scores, "no_unk": {**scores, "n": 40, "bleu": bleu + 5},
              "by_length": {label: {"n": 25, "bleu": bleu - i, "chrf": 1.0, "len_ratio": 1.0,
                                    "step": step} for i, (label, step) in enumerate(LABELS)}}
    system["by_length"]["signature"] = scores["bleu_signature"]
    if p is not None:
        system["vs_baseline"] = {"baseline": baseline, "all": {"p_value": p, "n": 100},
                                 "no_unk": {"p_value": p * 20, "n": 40},
                                 "by_length": {label: p for label, _ in LABELS}}
    return system


def _eval(name: str, max_len: int, bleu: float, kind: str | None = None, **model) -> dict:
    attention = name != "encdec"
    base = f"encdec-{max_len}"
    systems = {"greedy": _system(bleu - 1, 0.01 if attention else None, base),
               "beam": _system(bleu, 0.001 if attention else None, base)}
    if attention:
        systems["beam_unk"] = _system(bleu + 0.5, 0.001, base)
    return {"cell": f"{name}-{max_len}",
            "model": {"name": name, "kind": kind or name, "max_len": max_len, **model},
            "has_attention": attention, "sentences": 100, "no_unk_sentences": 40,
            "speed": {"greedy": {"sentences_per_s": 200.0, "batch_size": 64},
                      "beam": {"sentences_per_s": 60.0, "batch_size": 64},
                      "greedy_unbatched": {"sentences_per_s": 30.0, "batch_size": 1}},
            "systems": systems}


HANSARD = {"name": "hansard36", "title": "Aligned Hansards of the 36th Parliament of Canada",
           "src_lang": "en", "tgt_lang": "fr", "test_set": "hansard36 test.en.gz / test.fr.gz"}


def write_prepare(metrics: Path, corpus: dict, inputs: dict | None = None) -> None:
    """``metrics/prepare.json`` with its corpus block and split sizes."""
    splits = {split: {"pairs": n, **({"inputs": inputs[split]} if inputs else {})}
              for split, n in (("train", 1000), ("dev", 50), ("test", 100))}
    metrics.mkdir(parents=True, exist_ok=True)
    (metrics / "prepare.json").write_text(json.dumps({"corpus": corpus, **splits}))


def make_metrics(root: Path, extras: bool = True, corpus: dict | None = HANSARD) -> Path:
    metrics = root / "metrics"
    if corpus is not None:
        write_prepare(metrics, corpus)
    cells = [_eval("encdec", 30, 5.0), _eval("search", 30, 7.0), _eval("encdec", 50, 6.0),
             _eval("search", 50, 8.5)]
    if extras:
        cells.append(_eval("luong_dot", 50, 8.0, kind="luong", attention="global", score="dot",
                           input_feeding=True))
    for data in cells:
        path = metrics / "eval" / f"{data['cell']}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))
    if extras:
        (metrics / "alignments").mkdir()
        (metrics / "alignments" / "search-50.json").write_text(json.dumps({"cell": "search-50", "samples": [
            {"index": 3, "method": "beam", "source": ["the", "cat", "sat", "."],
             "target": ["le", "chat", "assis", ".", "</s>"],
             "attention": [[0.9, 0.1, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1], [0.25] * 4]}]}))
        (metrics / "train").mkdir()
        (metrics / "train" / "luong_dot-50.json").write_text(json.dumps({"val_ppl": 12.345}))
        (metrics / "embed.json").write_text(json.dumps({"en": {"coverage": 0.91, "wordsim353": 0.5}}))
    return metrics


def test_table1_layout_and_paper_columns(tmp_path):
    inputs = ReportInputs.load(make_metrics(tmp_path))
    table = table1(inputs)
    names = [row[0] for row in table.rows]
    assert names[:5] == ["RNNencdec-30", "RNNsearch-30", "RNNencdec-50", "luong_dot-50", "RNNsearch-50"]
    search50 = table.rows[names.index("RNNsearch-50")]
    assert search50[1:] == ("7.50", "12.50", "8.50", "13.50", "9.00", "0.001", "0.020", "26.75",
                             "34.16")
    assert table.rows[names.index("RNNencdec-30")][6] == "–"          # the baseline has no p
    assert "RNNsearch-50* (paper only)" in names and "Moses (paper only)" in names
    assert "100 sentences, 40 with no unknown word" in table.notes[0]
    assert "(hansard36 test.en.gz / test.fr.gz, en->fr)" in table.notes[0]
    variants = variants_table(inputs)     # Luong et al.'s numbers are En->De: not shown here
    assert variants.rows == (("luong_dot-50", "global", "dot", "yes", "12.35", "8.00"),)
    assert "En->De" in variants.notes[0]


def test_paper_columns_only_in_the_papers_setting(tmp_path):
    """An en->vi corpus of one's own: no paper column or row, the corpus, its files and the
    pair named first; En->De gets Luong et al.'s column."""
    given = {"src": {"file": "data/own/train.en", "sha256": "ab" * 32},
             "tgt": {"file": "data/own/train.vi", "sha256": "cd" * 32}}
    own = {"name": "custom", "title": "your own files", "src_lang": "en", "tgt_lang": "vi",
           "test_set": "tst2013.en / tst2013.vi"}
    metrics = make_metrics(tmp_path, corpus=None)
    write_prepare(metrics, own, {"train": given, "dev": given, "test": given})
    inputs = ReportInputs.load(metrics)
    table = table1(inputs)
    assert len(table.header) == 8 and not any("paper" in row[0] for row in table.rows)
    assert "(tst2013.en / tst2013.vi, en->vi)" in table.notes[0]
    index = {p.name: p.read_text() for p in write_report(inputs, ReportConfig(), tmp_path / "r")
             if p.suffix == ".md"}["README.md"]
    first_table = index[index.index("### "):index.index("### Table 1")]
    assert "en->vi" in first_table and "1,000 / 50 / 100" in first_table
    assert "data/own/train.vi" in first_table and "cd" * 32 in first_table
    assert "Paper" not in index and "Moses" not in index
    write_prepare(metrics, {**own, "name": "wmt14", "tgt_lang": "de"})
    variants = variants_table(ReportInputs.load(metrics))
    assert variants.rows[0][-1] == "18.6 (6.1)"


def test_a_run_without_a_recorded_corpus_says_so(tmp_path):
    inputs = ReportInputs.load(make_metrics(tmp_path, corpus=None))
    assert len(table1(inputs).header) == 8          # not known to be the paper's setting
    index = {p.name: p for p in write_report(inputs, ReportConfig(), tmp_path / "r")}["README.md"]
    assert "not recorded: metrics/prepare.json has no 'corpus' block" in index.read_text()


def test_report_regenerates_identically(tmp_path):
    inputs = ReportInputs.load(make_metrics(tmp_path))
    first = {p.name: p.read_bytes() for p in write_report(inputs, ReportConfig(), tmp_path / "a")}
    second = {p.name: p.read_bytes() for p in write_report(inputs, ReportConfig(), tmp_path / "a")}
    assert first == second
    expected = {"table1.md", "table1.tex", "bleu_by_length.md", "speed.md", "variants.tex",
                "word_vectors.md", "figure2_bleu_by_length.png", "figure3_search-50.png", "README.md"}
    assert expected <= set(first)
    assert "language_model.md" not in first                 # metrics/lm.json absent: skipped
    index = first["README.md"].decode()
    assert "![Figure 2" in index and "results/figure3_search-50.png" in index
    assert "dvc repro report" in index
    assert r"RNNsearch-50 & 7.50 & 12.50 & 8.50 & 13.50 & 9.00 & 0.001 & 0.020 & 26.75 & 34.16 \\" in \
        first["table1.tex"].decode()


def test_report_stage_minimal_metrics(tmp_path):
    make_metrics(tmp_path, extras=False)
    params = Path(__file__).resolve().parents[1] / "params.yaml"
    (tmp_path / "params.yaml").write_text(params.read_text())
    done = run_script("report.py", "--no-mlflow", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    files = {p.name for p in (tmp_path / "reports/results").iterdir()}
    assert "variants.md" not in files and "figure2_bleu_by_length.png" in files
    assert (tmp_path / "reports/README.md").is_file()


def test_gain_table_relative_to_the_shortest_bucket(tmp_path):
    from rnnsearch.reporting.build import gain_tables

    inputs = ReportInputs.load(make_metrics(tmp_path, extras=False))
    tables = gain_tables(inputs, "beam")
    assert set(tables) == {"gain_search-30", "gain_search-50"}
    rows = tables["gain_search-50"].rows
    # search-50 beam BLEU by bucket 8.5, 7.5, 6.5, 5.5 against encdec-50's 6, 5, 4, 3
    assert [row[4] for row in rows] == ["1.42", "1.50", "1.62", "1.83"]
    assert rows[-1][5] == "1.29"  # (5.5 / 3) / (8.5 / 6)
    assert rows[0][1] == "25" and rows[0][6] == "0.001"


def test_search_error_table_lists_the_measured_cells_in_the_papers_order(tmp_path):
    from rnnsearch.reporting.build import search_error_table

    metrics = make_metrics(tmp_path, extras=False)
    assert search_error_table(ReportInputs.load(metrics)) is None       # no cell measured
    (metrics / "search_error").mkdir()
    for cell, model_error in (("search-50", 0.625), ("encdec-30", 0.5), ("gone-50", 0.0)):
        (metrics / "search_error" / f"{cell}.json").write_text(json.dumps({
            "cell": cell, "sentences": 8, "beam_size": 5, "wide_beam": 50, "stop": "bound",
            "length_penalty": "mean", "reference_above_beam": 0.125,
            "wide_beam_above_beam": 0.25, "model_error": model_error}))
    table = search_error_table(ReportInputs.load(metrics))
    assert table.rows == (("RNNencdec-30", "8", "0.125", "0.250", "0.500"),
                          ("RNNsearch-50", "8", "0.125", "0.250", "0.625"))
    assert "beam 5, stop bound, length penalty mean" in table.notes[0]
    assert "a beam of 50" in table.notes[0]


def test_single_cell_grid_ignores_files_an_earlier_grid_left(tmp_path):
    """The quick preset's grid (search-50 only, no baseline) in a workspace where the default
    grid's per-cell files are still lying around: only the evaluated cell is reported."""
    metrics = make_metrics(tmp_path)
    for stale in ("encdec-30", "search-30", "encdec-50", "luong_dot-50"):
        (metrics / "eval" / f"{stale}.json").unlink()
    search = json.loads((metrics / "eval" / "search-50.json").read_text())
    for system in search["systems"].values():       # evaluate writes no comparison without one
        system.pop("vs_baseline")
    (metrics / "eval" / "search-50.json").write_text(json.dumps(search))
    (metrics / "alignments" / "search-30.json").write_text(
        (metrics / "alignments" / "search-50.json").read_text())
    inputs = ReportInputs.load(metrics)
    assert set(inputs.alignments) == {"search-50"} and inputs.train == {}
    files = {p.name for p in write_report(inputs, ReportConfig(), tmp_path / "out")}
    assert "figure3_search-50.png" in files and "figure3_search-30.png" not in files
    assert not any(name.startswith("gain_") for name in files)       # no baseline to compare
    rows = {row[0]: row for row in table1(inputs).rows}
    assert rows["RNNsearch-50"][6] == "–"                              # no p without a baseline


def test_stage_tables_leave_out_the_environment_block():
    from rnnsearch.reporting.tables import key_value_table

    table = key_value_table("Word vectors", {"src": {"coverage": 0.5},
                                             "environment": {"cpu": "AMD EPYC", "threads": 2}})
    assert table.rows == (("src.coverage", "0.5000"),)


def test_a_pair_without_gold_alignments_says_why_the_aer_is_absent(tmp_path):
    metrics = make_metrics(tmp_path, extras=False)
    (metrics / "align.json").write_text(json.dumps(
        {"languages": {"e": "en", "f": "vi"}, "models": {},
         "gold": "no gold alignments for en-vi (only English-French)"}))
    written = {p.name: p for p in write_report(ReportInputs.load(metrics), ReportConfig(),
                                               tmp_path / "r")}
    table = written["alignment_quality.md"].read_text()
    assert "not measured" in table and "no gold alignments for en-vi" in table


def test_a_bucket_below_the_minimum_gets_no_p_value_and_no_figure_point(tmp_path):
    """Buckets of 25 sentences (the fixture's) against a minimum of 30: the gain table prints
    'too few' for p, the length table marks the count, and Figure 2 draws no point while its
    ticks still give n; at a minimum of 25 every bucket counts."""
    from rnnsearch.reporting.build import figure2, gain_table, length_table

    inputs = ReportInputs.load(make_metrics(tmp_path, extras=False))
    gain = gain_table(inputs, "search-50", "beam", min_sentences=30)
    assert [row[6] for row in gain.rows] == ["too few"] * 4
    assert "evaluate.min_bucket_sentences" in gain.markdown()
    assert length_table(inputs, "beam", 30).rows[0][1] == "5.00 (25; too few)"
    assert [row[6] for row in gain_table(inputs, "search-50", "beam", 25).rows] == ["0.001"] * 4
    for fewest, points in ((30, 0), (25, 4)):
        figure = figure2(inputs, "beam", fewest)
        axes = figure.axes[0]
        assert all(len(line.get_xdata()) == points for line in axes.get_lines())
        ticks = [tick.get_text() for tick in axes.get_xticklabels()]
        assert ticks[0] == "1-10\nn=25" + ("\nno point" if fewest == 30 else "")


REGENERATE_COMMAND = re.compile(r"Regenerate with `PYTHONPATH=src python pipeline/report\.py "
                                r"([^`]+)`")


def copied_reports() -> list[Path]:
    """Every committed report index page but the default run's (presets, experiments)."""
    return sorted(page for page in (REPO / "reports").rglob("README.md")
                  if REGENERATE_COMMAND.search(page.read_text(encoding="utf-8")))


@pytest.mark.parametrize("page", copied_reports(), ids=lambda p: str(p.parent.relative_to(REPO)))
def test_a_copied_report_regenerates_itself_from_its_line(page, tmp_path):
    """Was: every copied report (reports/presets/*, reports/experiments/cpu_kinds/*) said
    "Regenerate with dvc repro report", which rebuilds the default run's. Its line now names
    its own params, metrics and folder: run in a copy of those, it writes the page as committed."""
    text = page.read_text(encoding="utf-8")
    args = shlex.split(REGENERATE_COMMAND.search(text).group(1))
    places = dict(zip(args[:-1:2], args[1::2]))
    assert places["--reports"] == page.parent.relative_to(REPO).as_posix()
    for key in ("--params", "--metrics", "--reports"):
        source, copy = REPO / places[key], tmp_path / places[key]
        copy.parent.mkdir(parents=True, exist_ok=True)
        if source.is_dir():
            shutil.copytree(source, copy, dirs_exist_ok=True)
        else:
            shutil.copy2(source, copy)
    (tmp_path / places["--reports"] / "README.md").unlink()
    result = run_script("report.py", *args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    body = text[text.index("# Results"):]          # an exported preset's heading comes first
    assert (tmp_path / places["--reports"] / "README.md").read_text(encoding="utf-8") == body


def test_a_subword_run_says_what_no_unk_and_in_vocabulary_mean(tmp_path):
    """Was: a BPE run's Table 1 showed No UNK = 499 of 500 sentences without a word, and the
    rare-word table called the piece count "the word-level vocabulary"."""
    metrics = make_metrics(tmp_path, extras=False)
    for path in (metrics / "eval").glob("*.json"):
        data = json.loads(path.read_text())
        data["no_unk_words_sentences"] = 37
        path.write_text(json.dumps(data))
    inputs = ReportInputs.load(metrics)
    notes = " ".join(table1(inputs).notes)
    assert "No UNK holds nearly every sentence; 37 have no word outside word-level" in notes
    from rnnsearch.reporting.rare_words import vocabulary_meaning

    assert "holds subword pieces" in vocabulary_meaning(inputs)
    assert vocabulary_meaning(ReportInputs.load(make_metrics(tmp_path / "words", extras=False))
                              ) == "the word-level vocabulary"


@pytest.mark.parametrize("train, reason", [
    ({"steps": 4000, "train_minutes": 15.0, "epochs": 1.6}, "max_steps"),
    ({"steps": 3296, "train_minutes": 20.0, "epochs": 1.3}, "max_minutes"),
    ({"steps": 1900, "train_minutes": 8.0, "epochs": 2.0}, "max_epochs"),
    ({"steps": 2500, "train_minutes": 9.0, "epochs": 1.0}, "early_stopping"),
    ({"steps": 4000, "train_minutes": 9.0, "stop_reason": "early_stopping"}, "early_stopping"),
    ({"val_ppl": 12.3}, None)])
def test_the_limit_that_stopped_a_cell_is_its_record_or_read_from_the_budget(train, reason):
    from rnnsearch.config.train import BudgetConfig
    from rnnsearch.reporting.training import stop_reason

    budget = BudgetConfig(max_steps=4000, max_epochs=2, max_minutes=20.0,
                          early_stopping_patience=3)
    assert stop_reason(train, budget) == reason


def test_cells_stopped_by_other_limits_get_a_warning_under_table1(tmp_path):
    """Was: with a wall-clock cap, RNNencdec-50 stopped at 3,296 steps and RNNsearch-50 at 4,000,
    and nothing in the report said the two had trained unequally."""
    from rnnsearch.config.train import BudgetConfig

    metrics = make_metrics(tmp_path, extras=False)
    budget = BudgetConfig(max_steps=4000, max_minutes=20.0)
    (metrics / "train").mkdir()
    for cell, steps, minutes in [("encdec-30", 4000, 11.0), ("search-30", 4000, 14.5),
                                 ("encdec-50", 3296, 20.0), ("search-50", 4000, 19.2)]:
        (metrics / "train" / f"{cell}.json").write_text(json.dumps(
            {"steps": steps, "best_step": steps, "epochs": 1.5, "train_minutes": minutes}))
    write_report(ReportInputs.load(metrics), ReportConfig(), tmp_path / "r", budget=budget)
    results = tmp_path / "r/results"
    assert ("Warning: the cells trained unequally (encdec-30 4000 steps (train.budget.max_steps)"
            in (results / "table1.md").read_text())
    assert "encdec-50 3296 steps (train.budget.max_minutes)" in (results / "table1.md").read_text()
    training = (results / "training.md").read_text()
    assert "| encdec-50 | 3296 | 3296 | 1.50 | 20.0 | – | train.budget.max_minutes |" in training
    (metrics / "train" / "encdec-50.json").write_text(json.dumps({"steps": 4000,
                                                                  "train_minutes": 12.0}))
    write_report(ReportInputs.load(metrics), ReportConfig(), tmp_path / "r", budget=budget)
    assert "Warning" not in (results / "table1.md").read_text()
