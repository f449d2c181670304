"""A CPU bench refuses numbers the machine changed under: a GEMM rate that moved during the
training runs, or training faster than its roofline; the variants side by side take turns."""
from __future__ import annotations

import json

import pytest
import torch

import rnnsearch.bench.__main__ as bench_main
from rnnsearch.bench import gemm
from rnnsearch.bench.data import Batches
from rnnsearch.bench.flops import Gemm
from rnnsearch.bench.gemm import effective_gflops, measure_model_gemms
from rnnsearch.bench.training import SIDE_BY_SIDE, Variant, measure_side_by_side, side_by_side_part
from rnnsearch.config.model import ModelConfig
from rnnsearch.config.train import OptimConfig
from rnnsearch.data.vocab import SPECIALS


def results(before: float, after: float, tokens_per_s: float, roofline: float = 1000.0) -> dict:
    """The keys of a CPU run's results that the checks read: one model, one training run."""
    return {"arithmetic": [{"model": "default", "batch": 64, "gemm_gflops_fp32_before": before,
                            "gemm_gflops_fp32": after, "roofline_tokens_per_s_fp32": roofline}],
            "training": [{"model": "default", "batch": 64, "precision": "32-true",
                          "tokens_per_s": tokens_per_s}]}


def test_a_steady_machine_passes_a_busy_one_is_named():
    assert bench_main.problems(results(180.0, 170.0, 610.0)) == []
    assert bench_main.problems(results(290.0, 11.0, 3580.0)) == [
        "training default: the fp32 GEMM rate moved from 290 to 11 GFLOP/s during the "
        "measurement (more than 20%)",
        "training default: 358% of the fp32 GEMM roofline, which no training step can reach"]


def test_the_bench_command_refuses_and_keeps_the_numbers_apart(tmp_path, monkeypatch, capsys):
    """Through the command's ``main``: exit 2, one line naming the problems, the load and where
    the numbers went; the reports left as they were; a later run that passes removes them
    (``measure.run`` stands in for the measurements, which take minutes)."""
    (tmp_path / "bench.md").write_text("an earlier report\n")
    busy = {"machine": {"load_average_before": [3.9, 3.1, 2.0]}, **results(290.0, 11.0, 3580.0)}
    monkeypatch.setattr(bench_main.measure, "run", lambda *args: busy)
    monkeypatch.setattr(bench_main, "markdown_report", lambda r: "a report\n")
    status = bench_main.main(["--out", str(tmp_path), "--device", "cpu"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1
    assert err[0].startswith("bench: error: training default: the fp32 GEMM rate moved")
    assert "358% of the fp32 GEMM roofline" in err[0] and "[3.9, 3.1, 2.0]" in err[0]
    refused = tmp_path / bench_main.REFUSED_NAME
    assert f"numbers are in {refused}" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.md", refused.name]
    assert (tmp_path / "bench.md").read_text() == "an earlier report\n"
    kept = json.loads(refused.read_text())
    assert kept["training"] == busy["training"] and len(kept["refused"]) == 2
    monkeypatch.setattr(bench_main.measure, "run", lambda *args: {
        "machine": {}, **results(180.0, 170.0, 610.0)})
    assert bench_main.main(["--out", str(tmp_path), "--device", "cpu"]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.json", "bench.md"]
    assert json.loads((tmp_path / "bench.json").read_text())["machine"]["load_average_after"]


def test_a_machine_that_slows_down_during_the_run_is_refused(monkeypatch):
    """A stand-in machine whose products slow down between the GEMM measurement before the
    training runs and the one after: the real measurement sees the rate fall. The stand-in
    keeps its own clock, so a busy test machine cannot change the outcome."""
    real_mm, clock = torch.mm, {"now": 0.0, "cost": 1e-4}

    def product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        clock["now"] += clock["cost"]
        return real_mm(a, b)

    monkeypatch.setattr(torch, "mm", product)
    monkeypatch.setattr(gemm.time, "perf_counter", lambda: clock["now"])
    gemms = [Gemm("output layer", 64, 64, 64, 1.0)]
    before = effective_gflops(measure_model_gemms(gemms, window_s=0.01))
    clock["cost"] = 1e-3              # each product now takes ten times as long
    after = effective_gflops(measure_model_gemms(gemms, window_s=0.01))
    assert before == pytest.approx(2 * 64**3 / 1e-4 / 1e9)
    assert after == pytest.approx(before / 10)
    assert bench_main.problems(results(before, after, 500.0)) == [
        "training default: the fp32 GEMM rate moved from 5 to 1 GFLOP/s during the "
        "measurement (more than 20%)"]


class RecordingBatches(Batches):
    """Batches that note the index of every batch handed out."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.taken: list[int] = []

    def batch(self, index: int):
        self.taken.append(index)
        return super().batch(index)


def tiny_training() -> tuple[ModelConfig, RecordingBatches]:
    """A model of width 4 and 8 sentence pairs of a 10-word vocabulary, in 4 batches."""
    pairs = [([4 + i % 6, 5], [6, 4 + i % 5, 7]) for i in range(8)]
    return (ModelConfig(embedding_size=4, hidden_size=4, attention_size=4, output_size=4),
            RecordingBatches(pairs, [[0, 1], [2, 3], [4, 5], [6, 7]]))


VOCAB, OPTIM = len(SPECIALS) + 6, OptimConfig(lr=1e-3, clip_norm=1.0)


def test_side_by_side_times_only_batches_every_variant_has_trained_on():
    """Each variant first trains once, untimed, on the batches its windows then take again (a
    batch shape costs extra the first time: one-off kernel builds); the windows take turns
    between the variants on the same batches."""
    config, batches = tiny_training()
    side = measure_side_by_side(config, VOCAB, OPTIM, batches,
                                {"a": Variant(), "b": Variant(bf16=True)}, 2, 2)
    assert batches.taken == [0, 1, 2, 3] * 2 + [0, 1, 0, 1, 2, 3, 2, 3]
    assert side["a"]["speedup"] == 1.0 and len(side["b"]["windows"]) == 2


@pytest.mark.parametrize("native", [True, False])
def test_bf16_variants_only_where_the_cpu_runs_bf16_natively(native):
    """Emulated bf16 steps take many times fp32's: without native bf16 the side by side holds
    the fp32 variants only."""
    config, batches = tiny_training()
    side = side_by_side_part(config, VOCAB, OPTIM, batches, native, 2, 1)
    assert list(side) == (list(SIDE_BY_SIDE) if native else
                          ["fp32", "fused_adam", "fused_loss", "fused_loss_fused_adam"])
    assert all(len(row["windows"]) == 2 for row in side.values())


def test_the_command_shown_in_a_report_leaves_out_the_machines_output_folder():
    """Was: reports printed `--out /tmp/bench2` and `/root/out`, the folders of the machine
    that ran them."""
    from rnnsearch.bench.__main__ import shown_command

    assert shown_command(["--out", "/tmp/b", "--threads", "2"]) == \
        "python -m rnnsearch.bench --threads 2"
    assert shown_command(["--quick", "--out=/root/out"]) == "python -m rnnsearch.bench --quick"
    assert shown_command([]) == "python -m rnnsearch.bench"
