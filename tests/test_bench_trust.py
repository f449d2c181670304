"""A CPU bench that the machine changed under keeps its numbers and marks them: a GEMM rate
that moved during the training runs, or training faster than its roofline; each row is put
beside the previous report of the same machine."""
from __future__ import annotations

import json

import pytest
import torch

import rnnsearch.bench.__main__ as bench_main
from rnnsearch.bench import ops, report


def results(before: float, after: float, tokens_per_s: float, roofline: float = 1000.0) -> dict:
    """The keys of a CPU run's results that the checks read: one model, one training run."""
    return {"arithmetic": [{"model": "default", "batch": 64, "gemm_gflops_fp32_before": before,
                            "gemm_gflops_fp32": after, "roofline_tokens_per_s_fp32": roofline}],
            "training": [{"model": "default", "batch": 64, "precision": "32-true",
                          "tokens_per_s": tokens_per_s, "roofline_share": tokens_per_s / roofline}],
            "decoding": [{"model": "default", "method": "beam5", "batch": 64,
                          "sentences_per_s": tokens_per_s / 10}]}


def test_a_steady_machine_passes_a_busy_one_is_named():
    assert bench_main.noisy(results(180.0, 170.0, 610.0)) == {}
    assert bench_main.noisy(results(290.0, 11.0, 3580.0)) == {"default": (
        "the fp32 GEMM rate moved from 290 to 11 GFLOP/s during its measurement (more than "
        "20%); 358% of the GEMM roofline, which no training step can reach")}


def test_a_busy_machines_report_is_written_with_its_rows_marked_and_set_beside_the_last(
        tmp_path, monkeypatch):
    """Was: a busy machine's run was refused after 17 minutes and the user got no report. Now
    every run writes its report: the rows of a model the machine moved are marked, and each
    row stands beside the same row of the previous report of this machine (``measure.run``
    stands in for the measurements, which take minutes)."""
    def measured(busy: bool, speed: float):
        def run(device, size, params, about, save):
            made = {"machine": about, **(results(290.0, 11.0, speed) if busy else
                                        results(180.0, 170.0, speed))}
            save(made)                       # as the real run saves after each part
            return made
        return run

    monkeypatch.setattr(bench_main, "markdown_report", lambda r: "\n".join(
        report.noisy_lines(r) + report.against_lines(r)))
    monkeypatch.setattr(bench_main.measure, "run", measured(True, 3580.0))
    assert bench_main.main(["--out", str(tmp_path), "--device", "cpu"]) == 0
    page = (tmp_path / "bench.md").read_text()
    assert "**Noisy rows.** default: the fp32 GEMM rate moved from 290 to 11" in page
    assert "No previous report of this machine" in page
    first = json.loads((tmp_path / "bench.json").read_text())
    assert first["training"][0]["tokens_per_s"] == 3580.0 and "default" in first["noisy"]
    monkeypatch.setattr(bench_main.measure, "run", measured(False, 716.0))
    assert bench_main.main(["--out", str(tmp_path), "--device", "cpu"]) == 0
    page = (tmp_path / "bench.md").read_text()
    assert "Noisy" not in page and "### Against the previous report (bench.json" in page
    assert "| training | default 64 32-true | 3,580.0 | 716.0 | 0.20x |" in page
    assert "| decoding | default beam5 64 | 358.0 | 71.6 | 0.20x |" in page


def test_a_report_of_another_machine_is_not_compared():
    now = {"machine": {"device": "cpu", "cpu": "AMD EPYC"}, **results(1.0, 1.0, 100.0)}
    other = {"machine": {"device": "cpu", "cpu": "Another CPU"}, **results(1.0, 1.0, 50.0)}
    assert bench_main.against(now, other, "bench.json")["rows"] == []
    same = bench_main.against(now, {**other, "machine": now["machine"]}, "bench.json")
    assert [(r["row"], r["ratio"]) for r in same["rows"]] == [("default 64 32-true", 2.0),
                                                               ("default beam5 64", 2.0)]


def test_a_damaged_previous_report_is_not_compared(tmp_path, monkeypatch):
    (tmp_path / "bench.json").write_text("{ not json")
    monkeypatch.setattr(bench_main.measure, "run", lambda device, size, params, about, save: {
        "machine": about, **results(1.0, 1.0, 10.0)})
    monkeypatch.setattr(bench_main, "markdown_report", lambda r: "\n".join(report.against_lines(r)))
    assert bench_main.main(["--out", str(tmp_path), "--device", "cpu"]) == 0
    assert "No previous report" in (tmp_path / "bench.md").read_text()


def test_a_machine_that_slows_down_during_the_run_is_measured_so(monkeypatch):
    """A stand-in machine whose products slow down between the GEMM measurement before the
    training runs and the one after: the real measurement sees the rate fall. The stand-in
    keeps its own clock, so a busy test machine cannot change the outcome."""
    real_mm, clock = torch.mm, {"now": 0.0, "cost": 1e-4}

    def product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        clock["now"] += clock["cost"]
        return real_mm(a, b)

    monkeypatch.setattr(torch, "mm", product)
    monkeypatch.setattr(ops.time, "perf_counter", lambda: clock["now"])
    before = ops.gemm_gflops(64, torch.float32, 0.01, "cpu")
    clock["cost"] = 1e-3              # each product now takes ten times as long
    after = ops.gemm_gflops(64, torch.float32, 0.01, "cpu")
    assert before == pytest.approx(2 * 64**3 / 1e-4 / 1e9)
    assert after == pytest.approx(before / 10)
    assert bench_main.noisy(results(before, after, 500.0)) == {"default": (
        "the fp32 GEMM rate moved from 5 to 1 GFLOP/s during its measurement (more than 20%)")}


def test_the_command_shown_in_a_report_leaves_out_the_machines_output_folder():
    """Was: reports printed `--out /tmp/bench2` and `/root/out`, the folders of the machine
    that ran them."""
    from rnnsearch.bench.__main__ import shown_command

    assert shown_command(["--out", "/tmp/b", "--threads", "2"]) == \
        "python -m rnnsearch.bench --threads 2"
    assert shown_command(["--full", "--out=/root/out"]) == "python -m rnnsearch.bench --full"
    assert shown_command([]) == "python -m rnnsearch.bench"


def test_two_checkouts_decode_side_by_side_with_the_same_weights_and_outputs():
    """The side by side loads one set of weights into both checkouts (here the same one twice),
    starts them together and compares every output by its digest."""
    from rnnsearch.bench.measure import PLANS, bench_models
    from rnnsearch.bench.side_by_side import markdown, side_by_side
    from rnnsearch.config.repository import repo_root

    root = repo_root()
    model = bench_models(PLANS["tiny"], root / "params.yaml")[0]
    row = side_by_side(model, {"against": root, "this": root}, "beam5", 1)
    assert row["against"]["outputs"] == row["this"]["outputs"]
    assert row["this"]["sentences"] == 70 and row["this"]["sentences_per_s"] > 0
    assert 0 < row["this"]["copies_share"] < 1
    row["speed_up"] = 1.0
    page = markdown({"machine": {"this": "a", "against": "b", "cpu": "CPU", "cores": 2,
                                 "date": "today", "rounds": 1, "sentences": 70,
                                 "command": "python -m rnnsearch.bench.side_by_side"},
                     "rows": {"default beam5": row}})
    assert "| default beam5 |" in page and "identical" in page


def test_a_side_by_side_against_an_unknown_commit_is_refused_naming_it(tmp_path, capsys):
    from rnnsearch.bench.side_by_side import main

    assert main(["--against", "no-such-commit", "--out", str(tmp_path)]) == 2
    assert "--against no-such-commit: no such commit" in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []
