"""The benchmark refuses numbers the machine changed under: a GEMM rate that moved during the
training windows, or training faster than its roofline."""
from __future__ import annotations

import pytest

import rnnsearch.bench.__main__ as bench_main
from rnnsearch.bench import trust


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


def test_the_bench_command_refuses_and_writes_nothing(tmp_path, monkeypatch, capsys):
    """Through the command's own ``main``: exit 2, one line naming the problem and the load,
    no report written (``run`` stands in for the measurements, which take minutes)."""
    busy = {"machine": {"load_average_before": [3.9, 3.1, 2.0]},
            "models": {"search": model(290.0, 11.0, 3.58)}}
    monkeypatch.setattr(bench_main, "run", lambda args: busy)
    status = bench_main.main(["--out", str(tmp_path), "--skip-hansard"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1
    assert err[0].startswith("bench: error: training search: the fp32 GEMM rate moved")
    assert "358% of the fp32 GEMM roofline" in err[0] and "[3.9, 3.1, 2.0]" in err[0]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("load", [[0.5, 0.4, 0.3], None])
def test_load_average_is_a_list_or_none(load, monkeypatch):
    if load is None:
        monkeypatch.delattr("os.getloadavg")
        assert trust.load_average() is None
    else:
        monkeypatch.setattr("os.getloadavg", lambda: tuple(load))
        assert trust.load_average() == load
