"""The paper-width curve's three steps (``python -m rnnsearch.experiments.paper_curve``) end to end
on the CPU at tiny sizes: ``pack`` (the real prepare and tokenize stages over a small slice of the
Hansard mirror), ``run --device cpu --tiny`` with a minimal install (tests/minimal_install.py), and ``report``,
which must refuse a run from another pack or a hypothesis file cut short; and
``scripts/gpu_paper_curve.sh --cpu`` (``make paper-curve``'s dry run) doing all three."""
from __future__ import annotations

import gzip
import json
import math
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

from conftest import REPO, SHARED_CORPORA
from minimal_install import NOT_IN_A_MINIMAL_INSTALL, run_with_minimal_install

from rnnsearch import presets
from rnnsearch.data.textio import read_lines
from rnnsearch.errors import DataError
from rnnsearch.experiments import paper_curve, paper_curve_report
from rnnsearch.experiments.paper_curve import PACK, PACKED, hyp_file, main

CELLS = ("search-50", "encdec-50")
METHODS = ("greedy", "beam")
SLICES = {"train": 400, "dev": 40, "test": 4000}   # first lines of each Hansard split
def hansard_slice(folder: Path) -> dict:
    """The first lines of every Hansard split as a custom corpus; its ``prepare`` params."""
    custom = {}
    for split, count in SLICES.items():
        custom[split] = {}
        for side, lang in (("src", "en"), ("tgt", "fr")):
            source = SHARED_CORPORA / "hansard36" / f"{split}.{lang}.gz"
            if not source.is_file():
                pytest.skip(f"corpora mirror not found at {SHARED_CORPORA}")
            with gzip.open(source, "rt", encoding="utf-8") as handle:
                lines = [next(handle) for _ in range(count)]
            (folder / f"{split}.{lang}").write_text("".join(lines), encoding="utf-8")
            custom[split][side] = str(folder / f"{split}.{lang}")
    custom["cut_given"] = ["test"]      # stratified by length like the Hansard's own test set
    return {"corpus": "custom", "custom": custom, "sizes": {"train": 0, "dev": 0, "test": 0},
            "test_per_bucket": 3}


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """A tiny pack built by ``pack`` (bootstrap shortened for speed)."""
    root = tmp_path_factory.mktemp("paper_curve")
    override = root / "override.yaml"
    override.write_text(yaml.safe_dump({"prepare": hansard_slice(root),
                                        "tokenize": {"workers": 1},
                                        "evaluate": {"bootstrap_samples": 100}}))
    assert main(["pack", "--work", str(root / "work"), "--override", str(override)]) == 0
    return root / "work"


@pytest.fixture(scope="module")
def results(work) -> Path:
    """``run --device cpu --tiny`` on the pack, two steps a cell, with a minimal install (no
    matplotlib either)."""
    out = work.parent / "results"
    done = run_with_minimal_install(
        work.parent / "site", "rnnsearch.experiments.paper_curve", "run", "--pack", str(work / PACK), "--out", str(out),
        "--device", "cpu", "--tiny", "--threads", "1", "--max-steps", "2", "--progress-every", "0",
        absent=(*NOT_IN_A_MINIMAL_INSTALL, "matplotlib"), timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "search-50: step 2" in done.stdout                    # a progress line per step
    return out


def test_gpu_curve_preset_is_the_papers_width_on_320k_pairs():
    merged, cells = presets.resolve("gpu_curve")
    paper, _ = presets.resolve("paper")
    assert cells == ["encdec-50", "search-50"]
    assert merged["train"]["base_model"] == {**merged["train"]["base_model"],
                                             **paper["train"]["base_model"]}
    assert merged["prepare"]["sizes"]["train"] == 320000
    assert merged["tokenize"]["vocab_size_src"] == merged["tokenize"]["vocab_size_tgt"] == 30000
    assert merged["translate"]["search"]["beam_size"] == 12


def test_pack_holds_the_tokenized_data_and_is_reproducible(work, tmp_path):
    info = json.loads((work / "pack.json").read_text())
    test_lines = read_lines(work / "tokenized" / "test.src")
    assert info["pairs"]["test"] == len(test_lines) == 7 * 3      # 3 per length bucket
    assert 0 < info["train_pairs_max50"] <= info["pairs"]["train"] <= SLICES["train"]
    assert info["sha256"] == paper_curve.sha256_of(work / PACK)
    with tarfile.open(work / PACK, "r:xz") as tar:
        assert sorted(tar.getnames()) == sorted(PACKED)
        manifest = json.load(tar.extractfile("manifest.json"))
        params = yaml.safe_load(tar.extractfile("params.yaml"))
    assert manifest["train_pairs_max50"] == info["train_pairs_max50"]
    assert params["train"]["base_model"]["hidden_size"] == 1000
    again = tmp_path / PACK                  # the same files make the same pack, byte for byte
    paper_curve.write_pack(again, work / "tokenized", work / "params.yaml", manifest)
    assert paper_curve.sha256_of(again) == info["sha256"]


def test_a_damaged_pack_is_refused_naming_it(work, tmp_path):
    cut = tmp_path / PACK
    cut.write_bytes((work / PACK).read_bytes()[:5000])
    with pytest.raises(DataError, match=f"{cut}: not a readable pack"):
        paper_curve.unpack(cut, tmp_path)
    with pytest.raises(DataError, match="no pack here"):
        paper_curve.unpack(tmp_path / "absent.tar.xz", tmp_path)


def test_run_writes_hypotheses_and_run_json(work, results):
    test_lines = len(read_lines(work / "tokenized" / "test.src"))
    names = sorted(p.name for p in results.iterdir())
    assert names == sorted(["run.json", *(hyp_file(c, m) for c in CELLS for m in METHODS)])
    for cell in CELLS:
        for method in METHODS:
            assert len(read_lines(results / hyp_file(cell, method))) == test_lines
    run = json.loads((results / "run.json").read_text())
    pack = json.loads((work / "pack.json").read_text())
    assert run["finished"] and run["pack"]["sha256"] == pack["sha256"]
    assert run["machine"]["device"] == "cpu" and "run --pack" in run["command"]
    assert run["settings"]["search"]["beam_size"] == 12 and run["settings"]["tiny"]
    for cell in CELLS:
        c = run["cells"][cell]
        assert c["steps"] == 2 and c["stopped_by"] == "steps" and c["epochs"] > 0
        assert c["train_pairs"] == pack["train_pairs_max50"] and c["parameters"] > 0
        assert c["tokens_per_s"] > 0 and math.isfinite(c["dev_loss"]) and c["dev_ppl"] > 1
        assert c["model"]["hidden_size"] == paper_curve.TINY_WIDTH
        for method in METHODS:
            assert c["decode"][method]["sentences"] == test_lines
            assert c["decode"][method]["sentences_per_s"] > 0


def test_report_writes_the_tables_and_figure_2(work, results, tmp_path):
    assert main(["report", "--results", str(results), "--work", str(work),
                 "--reports", str(tmp_path), "--cpu-metrics", str(REPO / "metrics")]) == 0
    folder = tmp_path / "paper_curve"
    assert sorted(p.name for p in folder.iterdir()) == [
        "paper_curve.md", "paper_curve.png", "paper_curve.tex", "run.json"]
    assert (folder / "paper_curve.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (folder / "paper_curve.md").read_text()
    table = page.split("### BLEU by source sentence length (beam)")[1].split("###")[0]
    rows = [line.split(" | ") for line in table.splitlines() if line.startswith("| ")][1:]
    assert [row[0] for row in rows] == ["| 0-10", "| 10-20", "| 20-30", "| 30-40", "| 40-50",
                                        "| 50-60", "| 60+"]       # a row per length bucket
    assert sum(int(row[1]) for row in rows) == 21 and all(len(row) == 6 for row in rows)
    assert "RNNsearch-50, default (CPU) |" in table and "DIFFERENT per-bucket counts" in table
    assert "Attention's gain by source length" in page and "pack sha256" in page
    assert "\\begin{table}" in (folder / "paper_curve.tex").read_text()
    scores = json.loads((work / "metrics" / "eval" / "search-50.json").read_text())
    assert scores["systems"]["beam"]["vs_baseline"]["baseline"] == "encdec-50"


def test_report_reads_the_run_as_a_tarball_too(work, results, tmp_path, capsys):
    """A run's folder brought back from a GPU box as one .tar.gz: the report from it is the
    report from the folder; a damaged one is refused by name."""
    tarball = tmp_path / "paper_curve.tar.gz"
    with tarfile.open(tarball, "w:gz") as archive:
        for path in sorted(results.iterdir()):
            archive.add(path, arcname=path.name)
    pages = []
    for source, reports in ((results, tmp_path / "from_folder"), (tarball, tmp_path / "from_tar")):
        assert main(["report", "--results", str(source), "--work", str(work),
                     "--reports", str(reports), "--cpu-metrics", str(REPO / "metrics")]) == 0
        pages.append((reports / "paper_curve" / "paper_curve.md").read_text())
    assert pages[0] == pages[1] and "### BLEU by source sentence length" in pages[0]
    damaged = tmp_path / "damaged.tar.gz"
    damaged.write_bytes(tarball.read_bytes()[:100])
    assert main(["report", "--results", str(damaged), "--work", str(work),
                 "--reports", str(tmp_path / "none")]) == 2
    assert f"{damaged}: not a results folder or a readable .tar.gz" in capsys.readouterr().err
    assert not (tmp_path / "none").exists()


def refused(work: Path, results: Path, capsys) -> str:
    """The report's exit status must be 2; returns its error line."""
    assert main(["report", "--results", str(results), "--work", str(work),
                 "--reports", str(results / "reports")]) == 2
    return capsys.readouterr().err


def test_report_refuses_a_run_from_another_pack(work, results, tmp_path, capsys):
    copy = Path(shutil.copytree(results, tmp_path / "results"))
    run = json.loads((copy / "run.json").read_text())
    run["pack"]["sha256"] = "0" * 64
    (copy / "run.json").write_text(json.dumps(run))
    err = refused(work, copy, capsys)
    assert f"{copy / 'run.json'}: made from a pack with sha256 {'0' * 64}" in err
    assert not (copy / "reports").exists()


def test_report_refuses_a_hypothesis_file_cut_short(work, results, tmp_path, capsys):
    copy = Path(shutil.copytree(results, tmp_path / "results"))
    path = copy / hyp_file("search-50", "beam")
    path.write_text("".join(line + "\n" for line in read_lines(path)[:-2]))
    err = refused(work, copy, capsys)
    assert f"{path}: 19 lines, but the test set has 21 sentences" in err


def test_training_budget_keeps_time_for_the_cells_still_to_decode():
    args = paper_curve.parser().parse_args(["run", "--total-seconds", "500",
                                            "--reserve-seconds", "40"])
    run = paper_curve.Run(args, "cpu", {})
    first, second = run.clock("search", 2), run.clock("encdec", 1)
    assert (first.cell, first.seconds, second.seconds) == ("search-50", 270.0, 150.0)
    assert second.deadline - first.deadline == pytest.approx(40.0)
    assert first.deadline == pytest.approx(run.start + 420.0)


@pytest.mark.slow
@pytest.mark.timeout(7200)       # the script's own limits stop a hang; a slow CPU is no fault
def test_paper_curve_script_dry_run_on_the_cpu(tmp_path):
    """``scripts/gpu_paper_curve.sh --cpu``, as ``make paper-curve`` runs it on a GPU: the tiny
    pack built by the real stages, the run (its arguments passed on), and the report."""
    if not (SHARED_CORPORA / "hansard36").is_dir():
        pytest.skip(f"corpora mirror not found at {SHARED_CORPORA}")
    tiny = tmp_path / "tiny"
    done = subprocess.run(["bash", str(REPO / "scripts" / "gpu_paper_curve.sh"), "--cpu",
                           "--progress-every", "0"], capture_output=True, text=True,
                          env=dict(os.environ, TINY_WORK=str(tiny), PYTHON=sys.executable))
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (tiny / PACK).is_file() and json.loads((tiny / "run" / "run.json").read_text())["finished"]
    assert "--progress-every 0" in json.loads((tiny / "run" / "run.json").read_text())["command"]
    assert sorted(p.name for p in (tiny / "reports" / "paper_curve").iterdir()) == [
        "paper_curve.md", "paper_curve.png", "paper_curve.tex", "run.json"]
    assert "gpu_paper_curve: done in" in done.stdout


def test_cuda_graphs_without_a_gpu_fail_naming_the_key(work, tmp_path, capsys):
    if paper_curve.torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    assert main(["run", "--pack", str(work / PACK), "--out", str(tmp_path), "--device", "cpu",
                 "--tiny", "--max-steps", "1", "--cuda-graphs"]) == 2
    assert "train.trainer.cuda_graphs: true, but torch sees no CUDA GPU" in capsys.readouterr().err


def test_a_cell_or_method_that_fails_costs_itself_only(work, tmp_path, monkeypatch):
    """A failure costs only what failed, not minutes of GPU time already spent: RNNsearch's
    training failing (a CUDA error) and RNNencdec's beam search running out of memory are
    recorded in run.json, the rest of the run goes on, and the report scores what was decoded."""
    real_train, real_translate = paper_curve.train_cell, paper_curve.Translator.translate

    def train_cell(config, model_name, *args):
        if model_name == "search":
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return real_train(config, model_name, *args)

    def translate(self, sources, method, options, batch_size, **kwargs):
        if method == "beam" and len(sources) > 1:
            raise paper_curve.torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to "
                                                           "allocate 9.00 GiB")
        return real_translate(self, sources, method, options, batch_size, **kwargs)

    monkeypatch.setattr(paper_curve, "train_cell", train_cell)
    monkeypatch.setattr(paper_curve.Translator, "translate", translate)
    out = tmp_path / "results"
    assert main(["run", "--pack", str(work / PACK), "--out", str(out), "--device", "cpu",
                 "--tiny", "--max-steps", "1", "--progress-every", "0"]) == 0
    run = json.loads((out / "run.json").read_text())
    assert run["finished"]
    assert run["cells"]["search-50"] == {
        "error": "CUDA error: an illegal memory access was encountered"}
    decode = run["cells"]["encdec-50"]["decode"]
    assert decode["beam"]["error"].startswith("out of memory: CUDA out of memory.")
    assert decode["greedy"]["sentences"] == 21
    assert sorted(p.name for p in out.iterdir()) == ["encdec-50.greedy.tok.txt", "run.json"]
    assert main(["report", "--results", str(out), "--work", str(work),
                 "--reports", str(tmp_path / "reports"), "--cpu-metrics", str(REPO / "metrics")]) == 0
    page = (tmp_path / "reports" / "paper_curve" / "paper_curve.md").read_text()
    assert "| encdec-50 |" in page and "| search-50 |" not in page
    assert ("Not in the tables: search-50 (training failed: CUDA error: an illegal memory access "
            "was encountered); encdec-50 beam (failed: out of memory: CUDA out of memory.") in page


def test_report_says_how_the_cuda_graphs_went():
    run = {"cells": {
        "search-50": {"cuda_graph_shapes": 12, "cuda_graph_capture_seconds": 4.2,
                      "cuda_graph_check_difference": 3e-7},
        "encdec-50": {"steps": 5}}}
    assert paper_curve_report.graph_lines(run) == [
        "CUDA graphs: search-50: 12 shapes captured in 4.2 s, the first replayed within "
        "3.0e-07 (relative) of the eager loop.", ""]
    run["cells"]["search-50"] = {"cuda_graph_shapes": 0, "cuda_graph_capture_seconds": 0.3,
                                 "cuda_graph_error": "the captured loop disagrees"}
    assert paper_curve_report.graph_lines(run)[0] == (
        "CUDA graphs: search-50: 0 shapes captured in 0.3 s; then the eager loop: the captured "
        "loop disagrees.")
    assert paper_curve_report.graph_lines({"cells": {"encdec-50": {}}}) == []
