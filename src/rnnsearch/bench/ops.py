"""The device side of a measurement: the GEMM rate, FLOPs counted by torch
(``torch.utils.flop_counter.FlopCounterMode``, so a new architecture needs no formula), peak
memory, freeing what a measurement left, a failure's one line."""
from __future__ import annotations

import gc
import resource
import statistics
import time
from typing import Any, Callable

import torch
from torch.utils.flop_counter import FlopCounterMode


def synchronize(device: str) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def failure(err: BaseException) -> str:
    """One line for a measurement that failed (``out of memory: ...`` or the error)."""
    text = " ".join(str(err).split())[:200] or type(err).__name__
    return f"out of memory: {text}" if isinstance(err, torch.cuda.OutOfMemoryError) else text


def peak_memory_mib(device: str) -> float:
    """The GPU's peak tensor memory since :func:`release`; a CPU process' peak RSS (which cannot
    be reset)."""
    if device == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def release(device: str) -> None:
    """Free what the last measurement left and restart the GPU's peak: the next one's is its own."""
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()


def flops(run: Callable[[], Any]) -> int:
    """The FLOPs of one ``run()``, counted by torch (a multiply-add is two)."""
    with FlopCounterMode(display=False) as counter:
        run()
    return counter.get_total_flops()


def gemm_gflops(n: int, dtype: torch.dtype, window_s: float, device: str,
                windows: int = 3) -> float:
    """Median GFLOP/s over timed windows of ``[n x n] @ [n x n]`` products: the roofline's rate."""
    a, b = (torch.randn(n, n, device=device).to(dtype) for _ in range(2))
    for _ in range(3):
        torch.mm(a, b)
    synchronize(device)
    rates = []
    for _ in range(windows):
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < window_s:
            torch.mm(a, b)
            calls += 1
        synchronize(device)
        rates.append(2.0 * n**3 * calls / (time.perf_counter() - start) / 1e9)
    return statistics.median(rates)
