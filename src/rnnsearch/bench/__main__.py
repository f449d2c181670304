"""``python -m rnnsearch.bench`` (``make bench``): training and decoding speed, measured by
:mod:`rnnsearch.bench.measure`. Writes ``reports/bench.{json,md}`` (CPU) and
``reports/bench_gpu.{json,md}`` (GPU), or into ``--out DIR``; without ``--device``: the CPU, then
a GPU if torch sees one. ``--full`` (``make bench-full``) adds profiles and, on a CPU, decoding
one sentence at a time and with the exact stop; a GPU runs its own plan; ``--tiny``:
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

import pytorch_lightning as pl
import torch

from rnnsearch.allocator import keep_freed_memory
from rnnsearch.bench import measure
from rnnsearch.bench.report import markdown_report
from rnnsearch.command import entry_point
from rnnsearch.config.base import at_least
from rnnsearch.config.repository import repo_root
from rnnsearch.config.translate import DEVICES, resolve_device
from rnnsearch.data.textio import atomic_write_text, write_json
from rnnsearch.environment import cpu_model

MAX_GEMM_DRIFT = 0.20     # a larger change of the GEMM rate over a model's runs marks them noisy
SAME_MACHINE = ("device", "cpu", "cores", "cpu_capability", "gpu", "threads")
ROW_KEYS = {"training": (("model", "batch", "precision"), "tokens_per_s"),
            "decoding": (("model", "method", "batch"), "sentences_per_s")}


def machine(device: str) -> dict[str, Any]:
    """What the numbers were measured on: the device, the CPU, the software, the load."""
    about = {"device": device, "cpu": cpu_model(), "cores": os.cpu_count(),
             "cpu_capability": torch.backends.cpu.get_cpu_capability(),
             "threads": torch.get_num_threads(), "torch": torch.__version__,
             "lightning": pl.__version__, "python": platform.python_version(),
             "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
             "load_average_before": load_average(), "command": shown_command(sys.argv[1:])}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        about.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1),
                     cuda=torch.version.cuda)
    return about


def shown_command(argv: list[str], program: str = "python -m rnnsearch.bench") -> str:
    """The command that made the numbers, without ``--out`` (a folder of this machine only)."""
    dropped = {i + 1 for i, arg in enumerate(argv) if arg == "--out"}
    return " ".join([program, *(arg for i, arg in enumerate(argv) if arg != "--out"
                                and i not in dropped and not arg.startswith("--out="))])


def load_average() -> list[float] | None:
    return [round(x, 2) for x in os.getloadavg()] if hasattr(os, "getloadavg") else None


def noisy(results: dict[str, Any]) -> dict[str, str]:
    """``{model: why}`` for each model whose numbers a busy machine may have moved: the fp32
    GEMM rate drifted beyond :data:`MAX_GEMM_DRIFT` over its runs, or training beat its roofline."""
    found: dict[str, list[str]] = {}
    for a in results["arithmetic"]:
        before, after = a.get("gemm_gflops_fp32_before"), a.get("gemm_gflops_fp32")
        if before and after and abs(after - before) / before > MAX_GEMM_DRIFT:
            found.setdefault(a["model"], []).append(
                f"the fp32 GEMM rate moved from {before:.0f} to {after:.0f} GFLOP/s during its "
                f"measurement (more than {MAX_GEMM_DRIFT:.0%})")
    for r in results["training"]:
        if r.get("roofline_share", 0) > 1:
            found.setdefault(r["model"], []).append(f"{r['roofline_share']:.0%} of the GEMM "
                                                    "roofline, which no training step can reach")
    return {model: "; ".join(why) for model, why in found.items()}


def rows(results: dict[str, Any]) -> dict[str, float]:
    """``{"part row": value}`` of each measured row by :data:`ROW_KEYS`."""
    return {f"{part} " + " ".join(str(r.get(k)) for k in keys): r[value]
            for part, (keys, value) in ROW_KEYS.items() for r in results.get(part, [])
            if value in r}


def against(results: dict[str, Any], previous: dict[str, Any] | None, name: str
            ) -> dict[str, Any]:
    """Each row of ``results`` beside the same row of the report ``previous`` (file ``name``),
    when it was made on this machine (:data:`SAME_MACHINE`): before, now and their ratio."""
    if not isinstance(previous, dict) or any(previous.get("machine", {}).get(k) !=
                                             results["machine"].get(k) for k in SAME_MACHINE):
        return {"file": None, "date": None, "rows": []}
    before = rows(previous)
    return {"file": name, "date": previous["machine"].get("date"), "rows": [
        {"part": key.split()[0], "row": key.split(" ", 1)[1], "before": before[key], "now": now,
         "ratio": now / before[key]} for key, now in rows(results).items() if before.get(key)]}


def bench(device: str, args: argparse.Namespace) -> str:
    """One device's run, saved after each part, with noisy marks and the previous rows."""
    start = time.perf_counter()
    size = "tiny" if args.tiny else "full" if args.full else "quick"
    out = (args.out or repo_root() / "reports") / ("bench_gpu" if device == "cuda" else "bench")
    previous_path = args.against or out.with_suffix(".json")
    try:
        previous = json.loads(previous_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):    # none yet, or not a report: nothing to compare with
        previous = None

    def save(results: dict[str, Any]) -> str:
        results["machine"]["bench_seconds"] = round(time.perf_counter() - start, 1)
        results["noisy"] = noisy(results) if not args.tiny else {}
        results["against"] = against(results, previous, previous_path.name)
        report = markdown_report(results)
        write_json(out.with_suffix(".json"), results)
        atomic_write_text(out.with_suffix(".md"), report)
        return report

    results = measure.run(device, size, repo_root() / "params.yaml", machine(device), save)
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
    parser.add_argument("--full", action="store_true",
                        help="on a CPU: the study (make bench-full): profiles, decoding one "
                             "sentence at a time and with the exact stop too")
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
