"""``python -m rnnsearch.bench`` (``make bench``): training and decoding speed, measured by
:mod:`rnnsearch.bench.measure`. Writes ``reports/bench.{json,md}`` (CPU) and
``reports/bench_gpu.{json,md}`` (GPU), or into ``--out DIR``; without ``--device``: the CPU, then
a GPU if torch sees one. A CPU runs the quick plan unless ``--full`` (``make bench-full``:
profiles, variants side by side, threads), a GPU the full plan unless ``--quick``; ``--tiny``:
seconds, meaningless numbers. Every finished measurement is written; rows measured while the GEMM
rate moved are marked (:func:`noisy`); each row is compared only with the same row of this
machine's previous report (``--against``)."""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any

import torch

from rnnsearch.allocator import keep_freed_memory
from rnnsearch.bench import measure
from rnnsearch.bench.report import markdown_report
from rnnsearch.command import entry_point
from rnnsearch.config.base import at_least
from rnnsearch.config.repository import repo_root
from rnnsearch.config.translate import DEVICES, resolve_device
from rnnsearch.data.textio import atomic_write_text, write_json
from rnnsearch.bench.device import machine as device_machine
from rnnsearch.environment import cpu_model

MAX_GEMM_DRIFT = 0.20     # a larger change of the GEMM rate over a model's runs marks them noisy
SAME_MACHINE = ("device", "cpu", "cores", "cpu_capability", "gpu", "threads")
ROW_KEYS = {"training": (("model", "batch", "precision", "cuda_graphs"), "tokens_per_s"),
            "decoding": (("model", "method", "batch"), "sentences_per_s")}


def machine(device: str) -> dict[str, Any]:
    """What the numbers were measured on: the device, the CPU, the software, the load."""
    return {**device_machine(device), "cpu": cpu_model(), "cores": os.cpu_count(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "python": platform.python_version(), "load_average_before": load_average(),
            "command": shown_command(sys.argv[1:])}


def shown_command(argv: list[str], program: str = "python -m rnnsearch.bench") -> str:
    """The command that made the numbers, without ``--out`` (a folder of this machine only)."""
    kept, skip = [], False
    for arg in argv:
        if skip or arg.startswith("--out="):
            skip = False
            continue
        skip = arg == "--out"
        kept += [] if skip else [arg]
    return " ".join([program, *kept])


def load_average() -> list[float] | None:
    try:   # not every OS has one
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def noisy(results: dict[str, Any]) -> dict[str, str]:
    """``{model: why}`` for each model whose CPU numbers a busy machine may have moved: the fp32
    GEMM rate drifted beyond :data:`MAX_GEMM_DRIFT` over its runs, or training beat its roofline."""
    found: dict[str, list[str]] = {}
    for a in results["arithmetic"]:
        before, after = a.get("gemm_gflops_fp32_before"), a.get("gemm_gflops_fp32")
        if before and after and abs(after - before) / before > MAX_GEMM_DRIFT:
            found.setdefault(a["model"], []).append(
                f"the fp32 GEMM rate moved from {before:.0f} to {after:.0f} GFLOP/s during its "
                f"measurement (more than {MAX_GEMM_DRIFT:.0%})")
    bound = {(a["model"], a["batch"]): a.get("roofline_tokens_per_s_fp32")
             for a in results["arithmetic"]}
    for r in results["training"]:
        share = r.get("tokens_per_s", 0) / (bound.get((r["model"], r["batch"])) or float("inf"))
        if r["precision"] == "32-true" and share > 1:
            found.setdefault(r["model"], []).append(
                f"{share:.0%} of the fp32 GEMM roofline, which no training step can reach")
    return {model: "; ".join(why) for model, why in found.items()}


def previous_rows(path: Path, about: dict[str, Any]) -> dict[str, Any] | None:
    """Rows of the report ``path`` by :data:`ROW_KEYS`, or None unless it exists and was made on
    this machine (:data:`SAME_MACHINE`)."""
    try:
        previous = json.loads(path.read_text(encoding="utf-8"))
        if any(previous["machine"].get(k) != about.get(k) for k in SAME_MACHINE):
            return None
    except (OSError, ValueError, KeyError, TypeError):
        return None
    rows = {part: {row_key(r, part): r[value] for r in previous.get(part, []) if value in r}
            for part, (_, value) in ROW_KEYS.items()}
    return {"file": path.name, "date": previous["machine"].get("date"), "rows": rows}


def row_key(row: dict[str, Any], part: str) -> str:
    return " ".join(str(row.get(field)) for field in ROW_KEYS[part][0])


def against(results: dict[str, Any], previous: dict[str, Any] | None) -> list[dict[str, Any]]:
    """Each row of ``results`` that ``previous`` measured too: before, now and their ratio."""
    found = []
    for part, (_, value) in ROW_KEYS.items():
        before = (previous or {}).get("rows", {}).get(part, {})
        for row in results[part]:
            key = row_key(row, part)
            if value in row and before.get(key):
                found.append({"part": part, "row": key, "before": before[key],
                              "now": row[value], "ratio": row[value] / before[key]})
    return found


def bench(device: str, args: argparse.Namespace) -> str:
    """One device's run, saved after each measurement, with noisy marks and the previous rows."""
    start = time.perf_counter()
    size = ("tiny" if args.tiny else "full" if args.full else "quick" if args.quick
            else "quick" if device == "cpu" else "full")
    out = (args.out or repo_root() / "reports") / ("bench_gpu" if device == "cuda" else "bench")
    about = machine(device)
    previous = previous_rows(args.against or out.with_suffix(".json"), about)

    def save(results: dict[str, Any]) -> str:
        results["machine"]["bench_seconds"] = round(time.perf_counter() - start, 1)
        results["noisy"] = noisy(results) if device == "cpu" and not args.tiny else {}
        results["against"] = {"file": previous and previous["file"],
                              "date": previous and previous["date"],
                              "rows": against(results, previous)}
        report = markdown_report(results)
        write_json(out.with_suffix(".json"), results)
        atomic_write_text(out.with_suffix(".md"), report)
        return report

    results = measure.run(device, size, repo_root() / "params.yaml", about, save)
    results["machine"]["load_average_after"] = load_average()
    return save(results)


@entry_point("bench")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnsearch.bench", description=__doc__)
    parser.add_argument("--out", type=Path, default=None, help="default: <repo>/reports")
    parser.add_argument("--device", choices=DEVICES, default=None,
                        help="measure this device only (default: the CPU, then a GPU if any)")
    parser.add_argument("--threads", type=at_least(1), default=os.cpu_count() or 1)
    parser.add_argument("--tiny", action="store_true", help="a seconds-long smoke run")
    parser.add_argument("--quick", action="store_true", help="on a GPU: the shorter plan")
    parser.add_argument("--full", action="store_true",
                        help="on a CPU: the full study (make bench-full): decoding one sentence "
                             "at a time too, profiles, the variants side by side, threads")
    parser.add_argument("--against", type=Path, metavar="JSON",
                        help="a previous bench.json of this machine to put each row beside "
                             "(default: the report this run replaces)")
    args = parser.parse_args(argv)
    keep_freed_memory()
    torch.set_num_threads(args.threads)
    devices = ([resolve_device(args.device, "--device")] if args.device else
               ["cpu"] + (["cuda"] if torch.cuda.is_available() else []))
    for device in devices:
        print(bench(device, args))
    return 0


if __name__ == "__main__":
    sys.exit(main())
