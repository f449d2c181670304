"""Training with the pipeline's allocator settings against glibc's defaults, side by side.

``python -m rnnsearch.bench.allocator`` (and ``make bench``, its table "Memory allocator")
trains the bench's reference RNNsearch in two processes started at the same moment, one thread
each: one with freed memory kept for reuse, as every stage of the pipeline runs
(:mod:`rnnsearch.allocator`), one under glibc's defaults (``RNNSEARCH_MALLOC=system``). A
machine whose speed drifts slows both alike. Each reports its target tokens/s, its page faults
per step and its peak memory; the computed numbers are the same either way.
"""
from __future__ import annotations

import argparse
import concurrent.futures as futures
import multiprocessing as mp
import os
import sys
from pathlib import Path
from typing import Any, Callable

from rnnsearch.bench import parts, worker
from rnnsearch.bench.table import allocator_section
from rnnsearch.bench.workload import tokenized_multi30k
from rnnsearch.command import entry_point
from rnnsearch.config.base import at_least


def start_measurement(function: Callable[..., dict[str, Any]], *args: Any, threads: int | None,
                      keep_memory: bool = True) -> futures.Future:
    """Start ``function(*args)`` in a new process that ends with this one, with ``threads``
    torch threads (None: torch left unimported) and freed memory kept for reuse unless
    ``keep_memory`` is False (:func:`rnnsearch.bench.worker.start`); its future result."""
    pool = futures.ProcessPoolExecutor(max_workers=1, mp_context=mp.get_context("spawn"),
                                       initializer=worker.start,
                                       initargs=(os.getpid(), threads, keep_memory))
    future = pool.submit(function, *args)
    pool.shutdown(wait=False)          # the process ends once the function has returned
    return future


def allocator_side_by_side(data: str, windows: int, steps: int, tiny: bool) -> dict[str, Any]:
    """The reference model's training, ``windows`` timed windows of ``steps`` steps, with the
    pipeline's allocator settings (``kept``) and glibc's defaults (``system``), side by side;
    ``speedup``: kept over defaults."""
    started = {name: start_measurement(parts.allocator_part, data, windows, steps, tiny,
                                       threads=1, keep_memory=name == "kept")
               for name in ("kept", "system")}
    results: dict[str, Any] = {name: future.result() for name, future in started.items()}
    results["speedup"] = results["kept"]["tokens_per_s"] / results["system"]["tokens_per_s"]
    return results


@entry_point("bench.allocator")
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m rnnsearch.bench.allocator",
                                     description=__doc__)
    parser.add_argument("--cache", default=".cache/bench")
    parser.add_argument("--mirror", default=os.environ.get("RNNSEARCH_CORPORA", "../shared/corpora"))
    parser.add_argument("--windows", type=at_least(1), default=5)
    parser.add_argument("--steps", type=at_least(1), default=30, help="steps per window")
    args = parser.parse_args(argv)
    data = str(tokenized_multi30k(Path(args.cache), args.mirror))
    results = allocator_side_by_side(data, args.windows, args.steps, tiny=False)
    print("\n".join(allocator_section(results)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
