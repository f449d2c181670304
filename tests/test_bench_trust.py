"""The benchmark refuses numbers the machine changed under: a GEMM rate that moved during the
training windows, or training faster than its roofline."""
from __future__ import annotations

import json

import pytest
import torch

import rnnsearch.bench.__main__ as bench_main
from rnnsearch.bench import gemm, trust
from rnnsearch.bench.flops import Gemm
from rnnsearch.bench.gemm import effective_gflops, measure_model_gemms
from rnnsearch.bench.parts import SIDE_BY_SIDE, side_by_side_part
from rnnsearch.bench.table import _side_by_side_section
from rnnsearch.bench.workload import Variant, Workload, measure_side_by_side
from rnnsearch.config.model import ModelConfig
from rnnsearch.data.vocab import SPECIALS, Vocabulary


def model(before: float, after: float, fraction: float) -> dict:
    """One model's entry of ``bench.json`` with the keys the checks read."""
    return {"gemm_gflops_fp32_before": before, "gemm_gflops_fp32": after,
            "roofline_fraction_fp32": fraction}


def test_a_steady_machine_passes():
    assert trust.problems({"search": model(180.0, 170.0, 0.61),
                           "encdec": model(180.0, 200.0, 0.99)}) == []


def test_a_gemm_rate_that_moved_more_than_a_fifth_is_named():
    found = trust.problems({"search": model(290.0, 11.0, 0.35), "luong": model(100.0, 125.0, 0.5)})
    assert len(found) == 2
    assert found[0].startswith("training search: the fp32 GEMM rate moved from 290 to 11")
    assert found[1].startswith("training luong: the fp32 GEMM rate moved from 100 to 125")


def test_training_above_its_roofline_is_an_error_not_a_result():
    found = trust.problems({"search": model(11.0, 11.0, 3.58)})
    assert found == ["training search: 358% of the fp32 GEMM roofline, which no training step "
                     "can reach"]


def test_an_older_report_without_the_first_rate_is_checked_on_its_roofline_only():
    older = {"gemm_gflops_fp32": 180.0, "roofline_fraction_fp32": 0.61}
    assert trust.problems({"search": older}) == []


def test_the_bench_command_refuses_and_keeps_the_numbers_apart(tmp_path, monkeypatch, capsys):
    """Through the command's own ``main``: exit 2, one line naming the problem, the load and
    where the numbers went; the reports left as they were, the refused numbers in
    bench.refused.json; a later run that passes removes them (``run`` stands in for the
    measurements, which take minutes)."""
    (tmp_path / "bench.md").write_text("an earlier report\n")
    busy = {"machine": {"load_average_before": [3.9, 3.1, 2.0]},
            "models": {"search": model(290.0, 11.0, 3.58)}}
    monkeypatch.setattr(bench_main, "run", lambda args: busy)
    status = bench_main.main(["--out", str(tmp_path), "--skip-hansard"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1
    assert err[0].startswith("bench: error: training search: the fp32 GEMM rate moved")
    assert "358% of the fp32 GEMM roofline" in err[0] and "[3.9, 3.1, 2.0]" in err[0]
    refused = tmp_path / trust.REFUSED_NAME
    assert f"numbers are in {refused}" in err[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bench.md", trust.REFUSED_NAME]
    assert (tmp_path / "bench.md").read_text() == "an earlier report\n"
    kept = json.loads(refused.read_text())
    assert kept["models"] == busy["models"] and len(kept["refused"]) == 2
    assert kept["machine"]["load_average_before"] == [3.9, 3.1, 2.0]
    trust.check({"machine": {}, "models": {"search": model(180.0, 170.0, 0.61)}}, tmp_path)
    assert not refused.exists()


@pytest.mark.parametrize("load", [[0.5, 0.4, 0.3], None])
def test_load_average_is_a_list_or_none(load, monkeypatch):
    if load is None:
        monkeypatch.delattr("os.getloadavg")
        assert trust.load_average() is None
    else:
        monkeypatch.setattr("os.getloadavg", lambda: tuple(load))
        assert trust.load_average() == load


def test_a_machine_that_slows_down_during_the_run_is_refused(monkeypatch):
    """A stand-in machine whose matrix products slow down between the GEMM measurement before
    the training windows and the one after (another job started): the real measurement sees
    the rate fall, and the run's numbers are refused. The stand-in keeps its own clock (each
    product advances it by its cost), so a busy test machine cannot change the outcome."""
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
    found = trust.problems({"search": {"gemm_gflops_fp32_before": before,
                                       "gemm_gflops_fp32": after, "roofline_fraction_fp32": 0.5}})
    assert found == ["training search: the fp32 GEMM rate moved from 5 to 1 GFLOP/s during the "
                     "measurement (more than 20%)"]


class RecordingWorkload(Workload):
    """A workload that notes the index of every batch it hands out."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.taken: list[int] = []

    def batch(self, index: int):
        self.taken.append(index)
        return super().batch(index)


def tiny_training() -> tuple[ModelConfig, RecordingWorkload]:
    """A model of width 4 and 8 sentence pairs of a 10-word vocabulary, in 4 batches."""
    vocab = Vocabulary(SPECIALS + tuple("abcdef"), (0,) * (len(SPECIALS) + 6))
    pairs = [([4 + i % 6, 5], [6, 4 + i % 5, 7]) for i in range(8)]
    work = RecordingWorkload(pairs, [], [[0, 1], [2, 3], [4, 5], [6, 7]], vocab, vocab)
    return ModelConfig(embedding_size=4, hidden_size=4, attention_size=4, output_size=4), work


def test_side_by_side_times_only_batches_every_variant_has_trained_on():
    """Each variant first trains once, untimed, on the batches its windows then take again (a
    batch shape costs extra the first time it comes: one-off kernel builds); the windows take
    turns between the variants on the same batches."""
    config, work = tiny_training()
    side = measure_side_by_side(config, work, {"a": Variant(), "b": Variant(bf16=True)},
                                rounds=2, window_steps=2)
    assert work.taken == [0, 1, 2, 3] * 2 + [0, 1, 0, 1, 2, 3, 2, 3]
    assert side["a"]["speedup"] == 1.0 and len(side["b"]["windows"]) == 2


@pytest.mark.parametrize("native", [True, False])
def test_bf16_variants_only_where_the_cpu_runs_bf16_natively(native):
    """Emulated bf16 steps take tens of times fp32's: without native bf16 the side by side
    holds the fp32 variants, and bf16 autocast gets a short look of its own beside fp32,
    which the report shows."""
    config, work = tiny_training()
    part = side_by_side_part(config, work, bf16_native=native, tiny=True)
    assert list(part["side_by_side"]) == (list(SIDE_BY_SIDE) if native else
                                          ["fp32", "fused_adam", "fused_loss",
                                           "fused_loss_fused_adam"])
    assert ("bf16_emulated" in part) is not native
    if not native:
        emulated = part["bf16_emulated"]
        assert emulated["windows"] == [emulated["tokens_per_s"]] and emulated["speedup"] > 0
    lines = _side_by_side_section({**part, "bf16_native": native})
    assert any(line.startswith("| fused Adam") for line in lines)
    assert any("no native bf16 instructions" in line for line in lines) is not native
