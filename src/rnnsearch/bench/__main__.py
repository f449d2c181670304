"""``python -m rnnsearch.bench`` (``make bench``): training and decoding speed, by
:mod:`rnnsearch.bench.measure`. Writes ``reports/bench.{json,md}`` for the CPU and
``reports/bench_gpu.{json,md}`` for a GPU (``--out DIR``: there); without ``--device``, the CPU
then a GPU if torch sees one. ``--tiny``: seconds, numbers that mean nothing; ``--quick``: a
GPU's shorter plan. A full CPU run refuses numbers the machine changed under (:func:`problems`)."""
from __future__ import annotations

import argparse
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
from rnnsearch.device import machine as device_machine
from rnnsearch.environment import cpu_model
from rnnsearch.errors import StageError

REFUSED_NAME = "bench.refused.json"   # where a refused run's numbers go, beside the reports
MAX_GEMM_DRIFT = 0.20     # the largest accepted change of the GEMM rate over a measurement


class UnreliableBench(StageError):
    """The machine changed during the measurement."""


def machine(device: str) -> dict[str, Any]:
    """What the numbers were measured on: the device, the CPU, the software, the load."""
    return {**device_machine(device), "cpu": cpu_model(), "cores": os.cpu_count(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "python": platform.python_version(), "load_average_before": load_average(),
            "command": shown_command(sys.argv[1:])}


def shown_command(argv: list[str]) -> str:
    """The command that made the numbers, as another machine would repeat it: without
    ``--out``, whose folder is this machine's (the report lies beside the numbers anyway)."""
    kept, skip = [], False
    for arg in argv:
        if skip or arg.startswith("--out="):
            skip = False
            continue
        skip = arg == "--out"
        kept += [] if skip else [arg]
    return " ".join(["python -m rnnsearch.bench", *kept])


def load_average() -> list[float] | None:
    try:   # not every OS has one
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):
        return None


def problems(results: dict[str, Any]) -> list[str]:
    """Why a CPU run's numbers cannot be trusted: the products' fp32 rate moved by more than
    :data:`MAX_GEMM_DRIFT` over a model's training runs, or training beat its roofline."""
    found = []
    for a in results["arithmetic"]:
        before, after = a.get("gemm_gflops_fp32_before"), a.get("gemm_gflops_fp32")
        if before and after and abs(after - before) / before > MAX_GEMM_DRIFT:
            found.append(f"training {a['model']}: the fp32 GEMM rate moved from {before:.0f} to "
                         f"{after:.0f} GFLOP/s during the measurement (more than "
                         f"{MAX_GEMM_DRIFT:.0%})")
    bound = {(a["model"], a["batch"]): a.get("roofline_tokens_per_s_fp32")
             for a in results["arithmetic"]}
    for r in results["training"]:
        share = r.get("tokens_per_s", 0) / (bound.get((r["model"], r["batch"])) or float("inf"))
        if r["precision"] == "32-true" and share > 1:
            found.append(f"training {r['model']}: {share:.0%} of the fp32 GEMM roofline, which "
                         "no training step can reach")
    return found


def bench(device: str, args: argparse.Namespace) -> str:
    """One device's run: a GPU's or a tiny run's results saved after each measurement (a run cut
    by a time limit leaves what it had); a full CPU run's checked first (:func:`problems`)."""
    start, size = time.perf_counter(), "tiny" if args.tiny else "quick" if args.quick else "full"
    out = (args.out or repo_root() / "reports") / ("bench_gpu" if device == "cuda" else "bench")
    checked, refused = device == "cpu" and not args.tiny, out.with_name(REFUSED_NAME)

    def save(results: dict[str, Any], final: bool = False) -> str:
        results["machine"]["bench_seconds"] = round(time.perf_counter() - start, 1)
        report = markdown_report(results)
        if final or not checked:
            write_json(out.with_suffix(".json"), results)
            atomic_write_text(out.with_suffix(".md"), report)
        return report

    results = measure.run(device, size, repo_root() / "params.yaml", machine(device), save)
    results["machine"]["load_average_after"] = load_average()
    found = problems(results) if checked else []
    if found:
        write_json(refused, {**results, "refused": found})
        raise UnreliableBench("; ".join(found) + f". The machine was busy (load average "
                              f"{results['machine']['load_average_before']} at the start, "
                              f"{os.cpu_count()} cores): the reports are left as they were, "
                              f"this run's numbers are in {refused}; rerun make bench with the "
                              "machine to itself")
    if checked:
        refused.unlink(missing_ok=True)
    return save(results, final=True)


@entry_point("bench")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnsearch.bench", description=__doc__)
    parser.add_argument("--out", type=Path, default=None, help="default: <repo>/reports")
    parser.add_argument("--device", choices=DEVICES, default=None,
                        help="measure this device only (default: the CPU, then a GPU if any)")
    parser.add_argument("--threads", type=at_least(1), default=os.cpu_count() or 1)
    parser.add_argument("--tiny", action="store_true", help="a seconds-long smoke run")
    parser.add_argument("--quick", action="store_true",
                        help="on a GPU: the shorter plan (what the targets need)")
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
