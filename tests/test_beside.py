"""A preset beside the default run (``python -m rnnsearch.presets compare <name>``): built from
two small hand-made metrics folders, its table's numbers are the files' own, the cells the runs
do not share or that have the same numbers in both are left out, and a test set the two runs may
not share is refused with the reason."""
from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import yaml

from rnnsearch.presets import cli
from rnnsearch.runs import cells, comparison, export
from rnnsearch.data.vocab import Vocabulary
from conftest import REPO, run_script
from test_report import HANSARD, _eval, write_prepare

F1 = {"all": 40.0, "in_vocabulary": 45.5, "rare": 12.25, "unseen": 3.0}


def unigram_f1(shift: float) -> dict:
    """A system's ``unigram_f1`` block, every class ``shift`` above :data:`F1`."""
    f1 = {name: {"f1": value + shift, "ref_tokens": 50} for name, value in F1.items()}
    return {**f1, "by_rank": {"1-10": {"f1": 60.0 + shift, "step": 10}}}


def write_run(metrics: Path, cells: dict[str, float], units: dict, aer: float,
              f1_shift: float | None = None, seed: int = 1234) -> None:
    """A metrics folder (``cells``: name -> beam BLEU) and the params.yaml beside it."""
    write_prepare(metrics, HANSARD)
    for cell, bleu in cells.items():
        model, max_len = cell.split("-")
        data = _eval(model, int(max_len), bleu)
        data["speed"]["beam"]["seconds"] = 2.0 * bleu          # seconds for the test set
        if "subword" in units:       # the No-UNK subset of word-level vocabularies
            data["systems"]["beam"]["no_unk_words"] = {"bleu": bleu + 3.0, "n": 30}
        if f1_shift is not None:
            data["systems"]["beam"]["unigram_f1"] = unigram_f1(f1_shift)
            data["training_words"] = {"training_tokens": 900, "training_types": 120,
                                      "vocabulary_words": 100}
        (metrics / "eval").mkdir(exist_ok=True)
        (metrics / "eval" / f"{cell}.json").write_text(json.dumps(data))
    (metrics / "tokenize.json").write_text(json.dumps({"vocab_size": {"src": 100, "tgt": 90},
                                                       **units}))
    (metrics / "align_attention.json").write_text(json.dumps(
        {"threshold": 0.3, "cells": {"search-50": {"attention": True, "scores": {
            "argmax": {"aer": aer, "precision": 0.5, "recall": 0.5},
            "threshold 0.3": {"aer": aer + 0.01, "precision": 0.6, "recall": 0.4}}}}}))
    (metrics.parent / "params.yaml").write_text(yaml.safe_dump(
        {"prepare": {"corpus": "hansard36", "seed": seed, "mirror": str(metrics)},
         "report": {"method": "beam"}}))


@pytest.fixture
def runs(tmp_path, monkeypatch) -> Path:
    """A repository root with the default run's metrics (four word-level cells) and the
    exported preset ``subword`` (its two 50-word cells on joint BPE)."""
    monkeypatch.setenv("RNNSEARCH_ROOT", str(tmp_path))
    write_run(tmp_path / "metrics", {"encdec-30": 5.0, "search-30": 7.0, "encdec-50": 6.0,
                                     "search-50": 8.5}, {}, aer=0.4875)
    write_run(tmp_path / "reports/presets/subword/metrics", {"encdec-50": 6.75, "search-50": 9.25},
              {"subword": {"units": "bpe", "joint": True}}, aer=0.4125, f1_shift=10.0)
    return tmp_path


def table_rows(page: str) -> list[list[str]]:
    """The body rows of the Markdown table in ``page``."""
    lines = [line for line in page.splitlines() if line.startswith("| ")]
    return [[cell.strip() for cell in line.strip("|").split("|")] for line in lines[1:]]


def preset_folder(root: Path) -> Path:
    """The subword preset's exported folder, where the comparison is written."""
    return root / "reports/presets/subword"


def beside_files(folder: Path) -> list[str]:
    """The comparison's files in ``folder``."""
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("beside_"))


def test_the_table_holds_each_runs_numbers_from_its_files(runs):
    assert "encdec-50, search-50 beside the default run's" in comparison.compare("subword").message
    folder = preset_folder(runs)
    assert beside_files(folder) == ["beside_default.md", "beside_default.png",
                                    "beside_default.tex"]
    page = (folder / "beside_default.md").read_text()
    assert "`metrics/` (the default run) and `reports/presets/subword/metrics/`" in page
    assert "The test set is the same" in page
    rows = table_rows(page)
    assert [row[:3] for row in rows] == [
        ["RNNencdec-50", "default", "word 100/90"], ["RNNencdec-50", "subword", "bpe (joint) 100/90"],
        ["RNNsearch-50", "default", "word 100/90"], ["RNNsearch-50", "subword", "bpe (joint) 100/90"]]
    for row, folder_name, cell in zip(rows, ["metrics", "reports/presets/subword/metrics"] * 2,
                                      ["encdec-50"] * 2 + ["search-50"] * 2):
        metrics = runs / folder_name
        beam = json.loads((metrics / "eval" / f"{cell}.json").read_text())["systems"]["beam"]
        replaced = json.loads((metrics / "eval" / f"{cell}.json").read_text())["systems"].get(
            "beam_unk", {}).get("all", {}).get("bleu")
        assert row[3] == f"{beam['all']['bleu']:.2f}"
        assert row[4] == (f"{replaced:.2f}" if replaced is not None else "–")
        no_unk = beam["no_unk_words"] if folder_name != "metrics" else beam["no_unk"]
        assert row[5] == f"{no_unk['bleu']:.2f} ({no_unk['n']})"
        assert row[6] == f"{beam['all']['chrf']:.2f}"
        assert row[7] == f"{beam['all']['len_ratio']:.3f}"
        f1 = beam.get("unigram_f1")
        assert row[8:12] == ([f"{f1[c]['f1']:.2f}" for c in F1] if f1 else ["–"] * 4)
        scores = json.loads((metrics / "align_attention.json").read_text())["cells"].get(
            cell, {}).get("scores", {})
        for column, name in ((12, "argmax"), (13, "threshold 0.3")):
            aer = scores.get(name, {}).get("aer")
            assert row[column] == (f"{aer:.3f}" if aer is not None else "–")
        assert row[14:16] == ["–", "–"]            # no significance.json: no p-values
        seconds = json.loads((metrics / "eval" / f"{cell}.json").read_text())["speed"]["beam"]
        assert row[16] == f"{seconds['seconds']:.1f}"
    assert rows[3][3:] == ["9.25", "9.75", "12.25 (30)", "29.25", "0.950", "50.00", "55.50",
                           "22.25", "13.00", "0.412", "0.422", "–", "–", "18.5"]


def test_a_cell_with_the_same_numbers_in_both_runs_is_left_out(runs):
    """The preset kept encdec-50 (DVC reused it): only its decode timings differ."""
    metrics = runs / "reports/presets/subword/metrics"
    default = json.loads((runs / "metrics/eval/encdec-50.json").read_text())
    default["speed"]["greedy"]["sentences_per_s"] = 123.0
    (metrics / "eval/encdec-50.json").write_text(json.dumps(default))
    (metrics / "tokenize.json").write_text((runs / "metrics/tokenize.json").read_text())
    comparison.compare("subword")
    rows = table_rows((preset_folder(runs) / "beside_default.md").read_text())
    assert [row[:2] for row in rows] == [["RNNsearch-50", "default"], ["RNNsearch-50", "subword"]]
    (metrics / "eval/search-50.json").write_text((runs / "metrics/eval/search-50.json").read_text())
    (metrics / "align_attention.json").write_text(
        (runs / "metrics/align_attention.json").read_text())
    outcome = comparison.compare("subword")
    assert not outcome.written and "same numbers in both runs" in outcome.message
    assert not beside_files(preset_folder(runs))        # the earlier files are gone


def test_a_preset_on_another_corpus_gets_no_page_and_one_line_saying_so(runs):
    """A corpus of one's own (another corpus or language pair) has nothing to put beside the
    default run: no page, and the outcome names both corpora."""
    write_prepare(runs / "reports/presets/subword/metrics",
                  {**HANSARD, "name": "custom", "src_lang": "de", "tgt_lang": "en"})
    outcome = comparison.compare("subword")
    assert not outcome.written and not beside_files(preset_folder(runs))
    assert outcome.message == ("not compared with the default run: it translates another corpus "
                               "(custom de->en; the default run: hansard36 en->fr)")


@pytest.mark.parametrize("change, reason", [
    (lambda m: write_prepare(m, {**HANSARD, "test_set": "another test set"}),
     "the 'corpus' blocks of metrics/prepare.json and reports/presets/subword/metrics/prepare.json"),
    (lambda m: (m / "prepare.json").write_text(json.dumps(
        {**json.loads((m / "prepare.json").read_text()), "test": {"pairs": 99}})),
     "the 'test' blocks"),
    (lambda m: (m / "prepare.json").unlink(),
     "reports/presets/subword/metrics/prepare.json is missing"),
    (lambda m: (m.parent / "params.yaml").write_text(yaml.safe_dump(
        {"prepare": {"corpus": "hansard36", "seed": 7, "mirror": "elsewhere"}})),
     "set prepare.seed differently")])
def test_a_test_set_that_may_differ_refuses_the_table_with_the_reason(runs, change, reason):
    change(runs / "reports/presets/subword/metrics")
    outcome = comparison.compare("subword")
    page = (preset_folder(runs) / "beside_default.md").read_text()
    assert reason in outcome.message and reason in page
    assert outcome.written == [preset_folder(runs) / "beside_default.md"]
    assert "|" not in page and len(page.strip().splitlines()) == 3   # heading, blank, reason


def test_against_another_preset_puts_the_cells_beside_that_presets(runs):
    """``compare supervised --against luong``: the cells two presets share, beside each other,
    in ``beside_<other>.md``; the default run's comparison is left as it was."""
    write_run(runs / "reports/presets/luong/metrics", {"encdec-50": 6.0, "search-50": 8.0,
                                                       "luong_general-50": 7.0}, {}, aer=0.456)
    write_run(runs / "reports/presets/supervised/metrics", {"encdec-50": 6.0, "search-50": 8.25,
                                                            "luong_general-50": 7.25}, {},
              aer=0.3125)
    outcome = comparison.compare("supervised", against="luong")
    assert "beside the preset 'luong''s in reports/presets/supervised/beside_luong.md" in outcome.message
    folder = runs / "reports/presets/supervised"
    assert beside_files(folder) == ["beside_luong.md", "beside_luong.png", "beside_luong.tex"]
    page = (folder / "beside_luong.md").read_text()
    assert page.startswith("# The preset 'supervised' beside the preset 'luong'")
    assert "`reports/presets/luong/metrics/` (the preset 'luong')" in page
    assert "compare supervised --against luong" in page
    assert [row[:2] + row[12:14] for row in table_rows(page)] == [
        ["luong_general-50", "luong", "–", "–"], ["luong_general-50", "supervised", "–", "–"],
        ["RNNsearch-50", "luong", "0.456", "0.466"], ["RNNsearch-50", "supervised", "0.312", "0.323"]]
    assert cli.main(["compare", "supervised", "--against", "nowhere"]) == 2


def test_compare_before_export_is_one_line_naming_the_folder(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RNNSEARCH_ROOT", str(tmp_path))
    assert cli.main(["compare", "subword"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "reports/presets/subword/metrics: not found" in err[0], err


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=root,
                   check=True, capture_output=True)


def test_export_puts_the_preset_beside_the_default_run_and_links_it(runs, capsys):
    """``make preset``'s last step: the branch's report copied, the comparison written from its
    metrics and the workspace's, and the copied report's heading links it; its line names the
    page where it ends up (was: the temporary folder export writes it in)."""
    preset = runs / "reports/presets/subword"
    git(runs, "init", "-q", "-b", "main")
    git(runs, "add", "metrics", "params.yaml")
    git(runs, "commit", "-q", "-m", "default run")
    git(runs, "checkout", "-q", "-b", "preset/subword")
    shutil.rmtree(runs / "metrics")                    # the branch holds the preset's run
    (preset / "metrics").rename(runs / "metrics")
    (preset / "params.yaml").replace(runs / "params.yaml")
    (runs / "reports/README.md").write_text("# Results\n")
    git(runs, "add", "metrics", "params.yaml", "reports/README.md")
    git(runs, "commit", "-q", "-m", "preset run")
    git(runs, "checkout", "-q", "main")
    export.export("subword")
    assert "beside the default run's in reports/presets/subword/beside_default.md" in \
        capsys.readouterr().out
    readme = (preset / "README.md").read_text()
    assert "Beside the default run: [beside_default.md]" in readme
    assert readme.endswith("# Results\n")
    rows = table_rows((preset / "beside_default.md").read_text())
    assert [row[3] for row in rows] == ["6.00", "6.75", "8.50", "9.25"]


def commit_run(root: Path, translations: dict[str, list[str]], message: str) -> None:
    """Each cell's beam translations tracked by DVC (its cache, as a run leaves them), and the
    metrics and params committed."""
    for cell, lines in translations.items():
        folder = root / "data/translations" / cell
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "beam.detok.txt").write_text("".join(f"{line}\n" for line in lines))
        subprocess.run([sys.executable, "-m", "dvc", "add", "-q", str(folder)], cwd=root,
                       check=True, capture_output=True)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", message)


def write_test_set(root: Path, sources: list[str], refs: list[str]) -> None:
    """The test set as the prepare and tokenize stages leave it, its vocabularies, and
    evaluate's bootstrap (200 samples, seed 7) in params.yaml."""
    for folder in ("prepared", "tokenized"):
        for side, text in zip(("src", "tgt"), (sources, refs)):
            (root / "data" / folder).mkdir(parents=True, exist_ok=True)
            (root / "data" / folder / f"test.{side}").write_text("".join(f"{t}\n" for t in text))
    for side in ("src", "tgt"):
        Vocabulary.build(Counter(" ".join(sources + refs).split()), 100).save(
            root / "data/tokenized" / f"vocab.{side}.txt")
    params = yaml.safe_load((root / "params.yaml").read_text())
    (root / "params.yaml").write_text(yaml.safe_dump(
        {**params, "evaluate": {"bootstrap_samples": 200, "bootstrap_seed": 7}}))


def test_export_tests_the_preset_against_the_default_runs_translations(runs):
    """The paired bootstrap of the two runs' own translations (read through DVC at each
    commit) gives every preset row its p-value and every length bucket of enough sentences
    its own; without the translations in the cache the comparison is written without them."""
    from rnnsearch.evaluation.scores import paired_bootstrap

    refs = [f"the house meets at {i} o'clock today ." for i in range(40)]
    sources = [" ".join(["word"] * (5 if i < 32 else 15)) for i in range(40)]   # 32 + 8
    default = {cell: [r.replace("meets", "sits") if i % 3 else r for i, r in enumerate(refs)]
               for cell in ("encdec-50", "search-50")}
    preset = {cell: [r.replace("today", "now") if i % 2 else r for i, r in enumerate(refs)]
              for cell in ("encdec-50", "search-50")}
    write_test_set(runs, sources, refs)
    git(runs, "init", "-q", "-b", "main")
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=runs, check=True)
    commit_run(runs, default, "default run")
    git(runs, "checkout", "-q", "-b", "preset/subword")
    shutil.rmtree(runs / "metrics")
    (runs / "reports/presets/subword/metrics").rename(runs / "metrics")
    commit_run(runs, preset, "preset run")
    git(runs, "checkout", "-q", "main")
    subprocess.run([sys.executable, "-m", "dvc", "checkout", "-q"], cwd=runs, check=True)

    folder = export.export("subword")
    tests = json.loads((folder / "significance.json").read_text())
    assert tests["method"] == "beam" and tests["samples"] == 200
    for cell in ("encdec-50", "search-50"):
        expected = paired_bootstrap(preset[cell], default[cell], refs, samples=200, seed=7)
        assert tests["cells"][cell]["all"] == expected
        short = paired_bootstrap(preset[cell], default[cell], refs, list(range(32)),
                                 samples=200, seed=7)
        assert tests["cells"][cell]["by_length"]["0-10"] == short["p_value"]
        assert tests["cells"][cell]["by_length"]["10-20"] is None        # 8 sentences: untested
    page = (folder / "beside_default.md").read_text()
    rows = table_rows(page)
    assert [row[-2] for row in rows[:4]] == ["–", fmt_p(tests, "encdec-50"), "–",
                                             fmt_p(tests, "search-50")]
    assert "BLEU by source sentence length, default run vs 'subword'" in page

    shutil.rmtree(runs / ".dvc/cache")                 # a clone without the translations
    folder = export.export("subword")
    assert not (folder / "significance.json").exists()
    assert all(row[-2] == "–" for row in table_rows((folder / "beside_default.md").read_text()))


def fmt_p(tests: dict, cell: str) -> str:
    return f"{tests['cells'][cell]['all']['p_value']:.3f}"


def test_compare_against_another_preset_tests_the_two_branches_translations(runs,
                                                                              monkeypatch):
    """``compare NAME --against OTHER``: the paired bootstrap of the two presets' branches
    (read through DVC), written to significance_<other>.json and shown in beside_<other>.md;
    with the attention's AER counts of both branches, the same test of their AER."""
    from rnnsearch.alignment.aer import paired_bootstrap_aer
    from rnnsearch.evaluation.scores import paired_bootstrap

    perfect, wrong = [2, 2, 2, 2], [1, 0, 0, 2]      # |A|, |A∩S|, |A∩P|, |S| of a gold sentence
    gold_counts = {"conditional": np.array([perfect] * 20 + [wrong] * 20),
                   "supervised_cond": np.array([perfect] * 26 + [wrong] * 14)}
    fetched = []

    def counts_at(root, rev, label, cells):
        fetched.append((rev, label, cells))
        return {cell: {"argmax": gold_counts[label], "threshold 0.3": gold_counts[label][::-1]}
                for cell in cells}

    monkeypatch.setattr(comparison, "attention_counts_at", counts_at)

    refs = [f"the house meets at {i} o'clock today ." for i in range(40)]
    sources = [" ".join(["word"] * 5) for _ in range(40)]
    other = {"search-50": [r.replace("meets", "sits") if i % 3 else r for i, r in enumerate(refs)]}
    mine = {"search-50": [r.replace("today", "now") if i % 2 else r for i, r in enumerate(refs)]}
    write_test_set(runs, sources, refs)
    write_run(runs / "reports/presets/conditional/metrics", {"search-50": 8.0}, {}, aer=0.34)
    write_run(runs / "reports/presets/supervised_cond/metrics", {"search-50": 7.5}, {}, aer=0.33)
    git(runs, "init", "-q", "-b", "main")
    subprocess.run([sys.executable, "-m", "dvc", "init", "-q"], cwd=runs, check=True)
    commit_run(runs, {}, "default run")
    for name, lines in (("conditional", other), ("supervised_cond", mine)):
        git(runs, "checkout", "-q", "-b", f"preset/{name}", "main")
        commit_run(runs, lines, f"{name} run")
    git(runs, "checkout", "-q", "main")

    done = run_script("compare.py", "--preset", "supervised_cond", "--against", "conditional",
                      cwd=runs)
    assert done.returncode == 0, done.stderr
    folder = runs / "reports/presets/supervised_cond"
    tests = json.loads((folder / "significance_conditional.json").read_text())
    assert tests["baseline"] == "conditional" and not (folder / "significance.json").exists()
    expected = paired_bootstrap(mine["search-50"], other["search-50"], refs, samples=200, seed=7)
    assert tests["cells"]["search-50"]["all"] == expected
    page = (folder / "beside_conditional.md").read_text()
    assert [row[-2] for row in table_rows(page)[:2]] == ["–", fmt_p(tests, "search-50")]
    assert fetched == [("preset/supervised_cond", "supervised_cond", ["search-50"]),
                       ("preset/conditional", "conditional", ["search-50"])]
    aer = tests["cells"]["search-50"]["aer"]
    p_argmax = paired_bootstrap_aer(gold_counts["supervised_cond"], gold_counts["conditional"],
                                    200, 7)
    # 1 - (|A∩S| + |A∩P|) / (|A| + |S|): 1 - 104/146 (26 perfect sentences), 1 - 80/140 (20)
    assert aer["argmax"] == {"n": 40, "p_value": p_argmax, "aer": pytest.approx(42 / 146),
                             "baseline_aer": pytest.approx(60 / 140)}
    assert [row[-3] for row in table_rows(page)[:2]] == [
        "–", f"{p_argmax:.3f} / {aer['threshold 0.3']['p_value']:.3f}"]
    assert "BLEU by source sentence length, preset 'conditional' vs 'supervised_cond'" in page
    assert "against the preset 'conditional''s on the same sentences" in page

    (runs / "reports/README.md").write_text("# Results\n")   # export again: the comparison stays
    git(runs, "checkout", "-q", "preset/supervised_cond")
    shutil.rmtree(runs / "metrics", ignore_errors=True)
    shutil.copytree(folder / "metrics", runs / "metrics")
    git(runs, "add", "-A", "metrics", "reports/README.md")
    git(runs, "commit", "-q", "-m", "its metrics on the branch")
    git(runs, "checkout", "-q", "main")
    export.export("supervised_cond")
    assert json.loads((folder / "significance_conditional.json").read_text())["cells"] == \
        tests["cells"]
    assert (folder / "beside_conditional.md").read_text() == page


def test_layers_scores_a_transformer_cells_attention_from_each_decoder_layer(runs, monkeypatch,
                                                                             capsys):
    """``layers NAME CELL`` reads the cell's attention from each of its decoder layers in turn
    (the model and gold set from the branch's DVC files: replaced here by their counts) and
    refuses a cell without layers of attention, naming it."""
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["train"]["grid"] = {"models": ["search", "transformer"], "max_lens": [50]}
    (runs / "params.yaml").write_text(yaml.safe_dump(params))
    git(runs, "init", "-q", "-b", "main")
    git(runs, "add", "params.yaml")
    git(runs, "commit", "-q", "-m", "preset run")
    git(runs, "branch", "preset/transformer")
    perfect, wrong = [2, 2, 2, 2], [1, 0, 0, 2]      # |A|, |A∩S|, |A∩P|, |S| of a gold sentence
    read = []

    def counts_at(root, rev, label, cells, layer=None):
        read.append((rev, label, cells, layer))
        return {cells[0]: {"argmax": np.array([perfect] * layer + [wrong] * (4 - layer))}}

    monkeypatch.setattr(cells, "attention_counts_at", counts_at)
    assert cli.main(["layers", "transformer", "transformer-50"]) == 0
    assert read == [("preset/transformer", "transformer", ["transformer-50"], layer)
                    for layer in range(3)]
    # 1 - 2 * found / (|A| + |S|): 4 sentences, 0, 1 and 2 of them perfect
    assert capsys.readouterr().out.splitlines() == [
        f"decoder layer {layer}: AER argmax {1 - 2 * found / total:.3f}"
        for layer, (found, total) in enumerate([(0, 12), (2, 13), (4, 14)])]
    assert cli.main(["layers", "transformer", "search-50"]) == 2
    assert "search-50 of preset/transformer is a 'search' model" in capsys.readouterr().err


def test_a_zero_aer_difference_reads_same_aer_not_a_p_value():
    """One model decoded twice (the stop_bound preset) has the same attention: the smoothed
    bootstrap's p = 1/(samples+1) of a zero difference is not shown as if it were a finding."""
    from rnnsearch.reporting.beside import p_difference

    assert p_difference({"p_value": 1 / 1001, "aer": 0.4878, "baseline_aer": 0.4878}) == "same AER"
    assert p_difference({"p_value": 0.0123, "aer": 0.41, "baseline_aer": 0.49}) == "0.012"
    assert p_difference({}) == "–"


def test_a_zero_bleu_difference_reads_same_bleu_not_a_p_value():
    """Was: the seeds presets' first replicate, the default run's own model and translations,
    showed p BLEU 0.001 against the default run (in every length bucket too)."""
    from rnnsearch.reporting.beside import p_difference

    assert p_difference({"p_value": 1 / 1001, "bleu": 4.37, "baseline_bleu": 4.37},
                        "bleu") == "same BLEU"
    assert p_difference({"p_value": 0.001, "bleu": 9.44, "baseline_bleu": 10.14}, "bleu") == \
        "0.001"
    assert p_difference({"p_value": 0.406, "bleu": 12.02, "baseline_bleu": 12.02}, "bleu") == \
        "0.406"                         # different translations, equal to two decimals
