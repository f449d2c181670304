"""``python -m rnnsearch.bench`` (``make bench``): speed and memory of training and decoding.

Writes ``reports/bench.json`` and ``reports/bench.md`` and prints the table. Each measurement
runs in a fresh process so that its peak memory is its own. ``--tiny`` runs a seconds-long
version (few steps, small sets) used by the tests; its numbers mean nothing. Unless
``--skip-hansard``, the Hansard train split is Moses-tokenised and the subword preset's models
(joint BPE, and unigram) are learnt on its tokens and applied to them
(:mod:`rnnsearch.bench.subwords`); the tokens are kept in ``<cache>/hansard``.

Where torch sees a GPU, the device benchmark follows on its own. ``--device cuda`` (or
``cpu``, or ``auto``) runs only the device benchmark
(:mod:`rnnsearch.bench.device`: the train stage's Trainer at the default and the paper's width,
GEMM rates, decoding on the device) and writes ``reports/bench_gpu.{json,md}`` on a GPU; it needs
neither the corpora mirror nor sacremoses.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from pathlib import Path
from typing import Any, Callable, Protocol

import torch

from rnnsearch.allocator import keep_freed_memory
from rnnsearch.bench import parts, trust
from rnnsearch.bench.allocator import allocator_side_by_side, start_measurement
from rnnsearch.bench.table import markdown_report
from rnnsearch.bench.trust import load_average
from rnnsearch.bench.workload import tokenized_multi30k
from rnnsearch.command import entry_point
from rnnsearch.config.base import at_least
from rnnsearch.config.translate import DEVICES, resolve_device
from rnnsearch.data.textio import atomic_write_text, write_json
from rnnsearch.config.repository import repo_root

MODELS = ("search", "encdec", "luong")


class Part(Protocol):
    """Runs one named measurement, ``function(*args, **kwargs)``, timing it."""

    def __call__(self, name: str, function: Callable[..., dict[str, Any]], *args: Any,
                 **kwargs: Any) -> dict[str, Any]: ...


def _in_fresh_process(function: Callable[..., dict[str, Any]], *args: Any,
                      threads: int | None = None, uses_torch: bool = True) -> dict[str, Any]:
    """``function(*args)`` in a new process with ``threads`` torch threads (default: ours);
    with ``uses_torch=False`` the process never imports torch (so its peak memory is the
    function's own). The process ends with this one (:mod:`rnnsearch.bench.worker`)."""
    threads = (threads or torch.get_num_threads()) if uses_torch else None
    return start_measurement(function, *args, threads=threads).result()


def machine() -> dict[str, Any]:
    """What the numbers were measured on."""
    model = next((line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo", encoding="utf-8")
                  if line.startswith("model name")), platform.processor()) \
        if os.path.exists("/proc/cpuinfo") else platform.processor()
    return {"cpu": model, "cores": os.cpu_count(), "torch": torch.__version__,
            "threads": torch.get_num_threads(), "python": platform.python_version(),
            "cpu_capability": torch.backends.cpu.get_cpu_capability(),
            "command": " ".join(["python -m rnnsearch.bench", *sys.argv[1:]]),
            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "load_average_before": load_average()}


def run(args: argparse.Namespace) -> dict[str, Any]:
    """Every measurement; the reference (search) model also decodes. ``seconds``: per part."""
    tiny = args.tiny
    data = str(tokenized_multi30k(Path(args.cache), args.mirror))
    windows, steps = (2, 2) if tiny else (5, 30)
    results: dict[str, Any] = {"machine": machine(), "models": {}, "seconds": {}}

    def part(name: str, function: Callable[..., dict[str, Any]], *part_args: Any,
             **part_kwargs: Any) -> dict[str, Any]:
        print(f"bench: {name} ...", flush=True)
        start = time.perf_counter()
        result = function(*part_args, **part_kwargs)
        results["seconds"][name] = round(time.perf_counter() - start, 1)
        return result

    for model in MODELS:
        single = (5 if tiny else 100) if model == "search" else 0
        window_steps = steps if model == "search" else max(2, steps // 2)
        results["models"][model] = part(f"training {model}", _in_fresh_process, parts.training_part,
                                        data, model, windows, window_steps, single, tiny)
    results["threads"] = [part(f"training search, {n} thread(s)", _in_fresh_process,
                               parts.threads_part, data, windows, steps, tiny, threads=n)
                          for n in sorted({1, torch.get_num_threads(), os.cpu_count() or 1})]
    results["allocator"] = part("allocator settings side by side", allocator_side_by_side,
                                data, windows, steps, tiny)
    results["scaling"] = part("epoch scaling", _in_fresh_process, parts.epoch_scaling, data,
                              [16, 32] if tiny else [1500, 3000, 6000])
    results["scaling"].update(part("attention scaling", parts.attention_scaling,
                                   [5, 10] if tiny else [10, 20, 40, 80]))
    if not args.skip_hansard:
        results.update(hansard(part, args.mirror, Path(args.cache) / "hansard"))
    return results


def hansard(part: Part, mirror: str, cache: Path, lines: int = 0,
            vocab_size: int | None = None) -> dict[str, Any]:
    """The Hansard train split (its first ``lines`` pairs when given) Moses-tokenised
    (``tokenize``), then each subword model of the subword preset learnt on the tokens and
    applied to them, each in its own torch-free process (``subwords``: bpe, unigram);
    ``vocab_size`` replaces the preset's (a small split cannot fill it). Imported here: the
    subword models need sacremoses and sentencepiece, which the device bench goes without."""
    from rnnsearch.bench import subwords
    from rnnsearch.data.subword import SUBWORD_UNITS

    out = {"tokenize": part("tokenising the Hansard train split", parts.hansard_tokenization,
                            mirror, out=str(cache), lines=lines)}
    out["subwords"] = {units: part(f"learning and applying {units} on the Hansard train split",
                                   _in_fresh_process, subwords.subword_part, str(cache),
                                   parts.HANSARD_LANGS, units, vocab_size, uses_torch=False)
                       for units in SUBWORD_UNITS}
    return out


def run_device(args: argparse.Namespace) -> int:
    """The device benchmark: ``reports/bench_gpu.{json,md}`` (``bench_device_cpu`` on a CPU)."""
    from rnnsearch.bench import device, device_report    # only when the device bench is asked for

    name = resolve_device(args.device, "--device")
    start = time.perf_counter()
    out = (args.out or repo_root() / "reports") / device.report_name(name)

    def save(results: dict[str, Any]) -> str:
        results["machine"].update(command=" ".join(["python -m rnnsearch.bench", *sys.argv[1:]]),
                                  bench_seconds=round(time.perf_counter() - start, 1))
        report = device_report.markdown_report(results)
        write_json(out.with_suffix(".json"), results)
        atomic_write_text(out.with_suffix(".md"), report)
        return report

    size = "tiny" if args.tiny else "quick" if args.quick else "full"
    print(save(device.run(name, size, save=save)))
    return 0


@entry_point("bench")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnsearch.bench", description=__doc__)
    parser.add_argument("--out", type=Path, default=None, help="default: <repo>/reports")
    parser.add_argument("--cache", default=".cache/bench")
    parser.add_argument("--mirror", default=os.environ.get("RNNSEARCH_CORPORA", "../shared/corpora"))
    parser.add_argument("--threads", type=at_least(1), default=os.cpu_count() or 1)
    parser.add_argument("--skip-hansard", action="store_true",
                        help="skip the 1M-pair tokenisation and subword parts")
    parser.add_argument("--tiny", action="store_true", help="a seconds-long smoke run")
    parser.add_argument("--quick", action="store_true",
                        help="with --device: the shorter plan (what the targets need, about "
                             "half the full plan's time)")
    parser.add_argument("--device", choices=DEVICES, default=None,
                        help="run the device benchmark there (bench_gpu.* on a GPU)")
    args = parser.parse_args(argv)
    keep_freed_memory()
    torch.set_num_threads(args.threads)
    if args.device:
        return run_device(args)
    start = time.perf_counter()
    results = run(args)
    results["machine"].update(bench_seconds=round(time.perf_counter() - start, 1),
                              load_average_after=load_average())
    out = args.out or repo_root() / "reports"
    if not args.tiny:             # a seconds-long run's numbers mean nothing either way
        trust.check(results, out)
    report = markdown_report(results)
    write_json(out / "bench.json", results)
    atomic_write_text(out / "bench.md", report)
    print(report)
    if torch.cuda.is_available():      # a GPU machine: its GPU is measured too (bench_gpu.*)
        args.device = "cuda"
        return run_device(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
