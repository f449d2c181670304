"""The benchmark command runs end to end on a tiny configuration and writes its report."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import REPO
from rnnsearch.bench.table import markdown_report


def test_bench_tiny_writes_json_and_markdown(tmp_path, mirror):
    result = subprocess.run(
        [sys.executable, "-m", "rnnsearch.bench", "--tiny", "--skip-hansard", "--threads", "1",
         "--out", str(tmp_path / "reports"), "--cache", str(tmp_path / "cache"), "--mirror", str(mirror)],
        cwd=REPO, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads((tmp_path / "reports" / "bench.json").read_text())
    assert set(data["models"]) == {"search", "encdec", "luong"}
    search = data["models"]["search"]
    assert search["tokens_per_s"] > 0 and 20 < search["mflop_per_token"] < 30
    assert search["gemm_gflops_fp32_before"] > 0 and search["gemm_gflops_fp32"] > 0
    assert len(data["machine"]["load_average_before"]) == 3
    assert len(data["machine"]["load_average_after"]) == 3
    assert 0 <= search["padding_fraction"] <= 1
    assert search["decoding"]["beam5"]["batched_sent_per_s"] > 0
    assert search["peak_rss_mb_training"] > 50
    side = search["side_by_side"]         # the variants, taking turns window by window
    native = search["bf16_native"]       # emulated bf16 gets a short look of its own
    assert list(side) == (["fp32", "bf16_autocast", "bf16_cross_entropy", "fused_adam",
                           "bf16_fused_adam", "bf16_cross_entropy_fused_adam", "fused_loss",
                           "fused_loss_fused_adam", "bf16_fused_loss_fused_adam"] if native
                          else ["fp32", "fused_adam", "fused_loss", "fused_loss_fused_adam"])
    assert all(len(row["windows"]) == 2 and row["tokens_per_s"] > 0 for row in side.values())
    assert side["fp32"]["speedup"] == 1.0
    bf16 = side["bf16_autocast"] if native else search["bf16_emulated"]
    assert search["bf16_autocast_tokens_per_s"] == bf16["tokens_per_s"]
    assert search["fused_adam_tokens_per_s"] == side["fused_adam"]["tokens_per_s"]
    assert [row["pairs"] for row in data["scaling"]["epochs"]] == [16, 32]
    assert set(data["seconds"]) >= {"training search", "epoch scaling", "attention scaling"}
    profile = search["profile"]
    assert set(profile["phases_ms"]) == {"forward", "backward", "clip", "optimizer"}
    assert profile["categories"]["GEMM (mm, addmm, bmm)"]["ms"] > 0
    assert sum(c["share"] for c in profile["categories"].values()) == pytest.approx(1.0)
    for c in profile["categories"].values():    # each names its largest operators, largest first
        top = [ms for _, ms in c["top"]]
        assert 1 <= len(top) <= 3 and top == sorted(top, reverse=True) and sum(top) <= c["ms"] + 1e-9
    gemms = [op for op, _ in profile["categories"]["GEMM (mm, addmm, bmm)"]["top"]]
    assert set(gemms) <= {"aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"}
    assert search["decoding"]["beam5"]["profile"]["categories"]["top-k"]["ms"] > 0
    fused = search["profile_fused"]      # the fastest fp32 variant profiled too
    assert fused["variant"] == "fused_loss_fused_adam"
    assert set(fused["phases_ms"]) == set(profile["phases_ms"]) and fused["categories"]
    assert "The same steps trained as \"fused output layer and loss, fused Adam\"" in \
        (tmp_path / "reports" / "bench.md").read_text()
    if search["bf16_native"]:       # and the fastest bf16 variant, where bf16 is native
        assert search["profile_bf16"]["variant"] == "bf16_cross_entropy_fused_adam"
        assert set(search["profile_bf16"]["phases_ms"]) == set(profile["phases_ms"])
    # 1 thread and one per core, whatever --threads says
    assert [row["threads"] for row in data["threads"]] == sorted({1, os.cpu_count()})
    assert all(row["tokens_per_s"] > 0 for row in data["threads"])
    allocator = data["allocator"]   # the pipeline's allocator settings against glibc's defaults
    for name in ("kept", "system"):
        assert allocator[name]["tokens_per_s"] > 0 and allocator[name]["peak_rss_mb"] > 50
        assert allocator[name]["page_faults_per_step"] > 0
    assert allocator["speedup"] == allocator["kept"]["tokens_per_s"] / \
        allocator["system"]["tokens_per_s"]
    report = (tmp_path / "reports" / "bench.md").read_text()
    assert "## Memory allocator (rnnsearch.allocator)" in report
    assert "## Threads" in report and "Load average (1, 5, 15 min)" in report
    assert "## Where the time goes" in report and "| largest operators (ms) |" in report and "### Side by side (search model)" in report
    assert ("The same steps trained as \"bf16 autocast, loss in bf16, fused Adam\"" in report) \
        is search["bf16_native"]
    assert "## Targets" in report and "torch" in report and "rnnsearch.bench --tiny" in report


@pytest.mark.parametrize("name", ["bench.json", "bench_intel_xeon.json",
                                  "bench_amd_epyc_avx512.json"])
def test_committed_reports_render_with_their_profile_tables(name):
    """The committed reports render from their JSON, each profile table naming each category's
    largest operators (a report made before the profile named them renders that column empty)."""
    results = json.loads((REPO / "reports" / name).read_text())
    report = markdown_report(results)
    rows = [line for line in report.splitlines() if line.startswith("| GEMM (mm, addmm, bmm) |")]
    assert rows, report
    named = "top" in results["models"]["search"]["profile"]["categories"]["GEMM (mm, addmm, bmm)"]
    for row in rows:
        operators = row.split("|")[-2].strip()          # the last cell
        assert (operators.startswith("mm ") or operators.startswith("addmm ")) if named \
            else operators == "", row
