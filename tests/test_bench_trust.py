"""A CPU bench that the machine changed under keeps its numbers and marks them: a GEMM rate
that moved during the training runs, or training faster than its roofline; each row is put
beside the previous report of the same machine; the variants side by side take turns."""
from __future__ import annotations

import json

import pytest
import torch

import rnnsearch.bench.__main__ as bench_main
from rnnsearch.bench import gemm, report
from rnnsearch.bench.data import Batches
from rnnsearch.bench.ops import Product
from rnnsearch.bench.training import SIDE_BY_SIDE, Variant, measure_side_by_side, side_by_side_part
from rnnsearch.config.model import ModelConfig
from rnnsearch.config.train import OptimConfig
from rnnsearch.data.vocab import SPECIALS


def results(before: float, after: float, tokens_per_s: float, roofline: float = 1000.0) -> dict:
    """The keys of a CPU run's results that the checks read: one model, one training run."""
    return {"arithmetic": [{"model": "default", "batch": 64, "gemm_gflops_fp32_before": before,
                            "gemm_gflops_fp32": after, "roofline_tokens_per_s_fp32": roofline}],
            "training": [{"model": "default", "batch": 64, "precision": "32-true",
                          "cuda_graphs": False, "tokens_per_s": tokens_per_s}],
            "decoding": [{"model": "default", "method": "beam5", "batch": 64,
                          "sentences_per_s": tokens_per_s / 10}]}


def test_a_steady_machine_passes_a_busy_one_is_named():
    assert bench_main.noisy(results(180.0, 170.0, 610.0)) == {}
    assert bench_main.noisy(results(290.0, 11.0, 3580.0)) == {"default": (
        "the fp32 GEMM rate moved from 290 to 11 GFLOP/s during its measurement (more than "
        "20%); 358% of the fp32 GEMM roofline, which no training step can reach")}


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
    assert "| training | default 64 32-true False | 3,580.0 | 716.0 | 0.20x |" in page
    assert "| decoding | default beam5 64 | 358.0 | 71.6 | 0.20x |" in page


def test_a_report_of_another_machine_is_not_compared(tmp_path):
    other = tmp_path / "bench.json"
    other.write_text(json.dumps({"machine": {"device": "cpu", "cpu": "Another CPU"},
                                 **results(1.0, 1.0, 100.0)}))
    assert bench_main.previous_rows(other, {"device": "cpu", "cpu": "AMD EPYC"}) is None


def test_a_machine_that_slows_down_during_the_run_is_measured_so(monkeypatch):
    """A stand-in machine whose products slow down between the GEMM measurement before the
    training runs and the one after: the real measurement sees the rate fall. The stand-in
    keeps its own clock, so a busy test machine cannot change the outcome."""
    real_mm, clock = torch.mm, {"now": 0.0, "cost": 1e-4}

    def product(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        clock["now"] += clock["cost"]
        return real_mm(a, b)

    monkeypatch.setattr(torch, "mm", product)
    monkeypatch.setattr(gemm.time, "perf_counter", lambda: clock["now"])
    shape = Product(1, 64, 64, 64)
    before = gemm.product_rate(torch.float32, 0.01, 3, "cpu")(shape)
    clock["cost"] = 1e-3              # each product now takes ten times as long
    after = gemm.product_rate(torch.float32, 0.01, 3, "cpu")(shape)
    assert before == pytest.approx(2 * 64**3 / 1e-4 / 1e9)
    assert after == pytest.approx(before / 10)
    assert bench_main.noisy(results(before, after, 500.0)) == {"default": (
        "the fp32 GEMM rate moved from 5 to 1 GFLOP/s during its measurement (more than 20%)")}


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
