"""The machine's matrix-multiply rate on a model's own GEMM shapes, and the roofline it implies.

For every product of :func:`rnnsearch.bench.flops.model_gemms` the rate of ``torch.mm`` on that
exact ``[m x k] @ [k x n]`` shape is measured (median of several timed windows after warm-up).
The roofline is the training throughput the model would reach if it did nothing but those
products at those rates: ``1 / sum_i(3 * flops_i / rate_i)`` target tokens per second.

On a GPU (``device="cuda"``) products are queued asynchronously: each timed window ends when the
device has finished every product queued in it, so the rate counts execution, launches included.
"""
from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

import torch

from rnnsearch.bench.flops import TRAIN_FACTOR, Gemm
from rnnsearch.device import synchronize


@dataclass(frozen=True)
class GemmRate:
    """Measured rate of one GEMM shape."""

    gemm: Gemm
    gflops: float  # achieved GFLOP/s


def measure_gemm(m: int, k: int, n: int, dtype: torch.dtype = torch.float32,
                 window_s: float = 0.05, windows: int = 5, device: str = "cpu",
                 warmup: int = 3) -> float:
    """Median GFLOP/s of ``torch.mm`` on ``[m x k] @ [k x n]`` in ``dtype`` on ``device``,
    after ``warmup`` untimed calls."""
    a = torch.randn(m, k, device=device).to(dtype)
    b = torch.randn(k, n, device=device).to(dtype)
    for _ in range(warmup):
        torch.mm(a, b)
    synchronize(device)
    rates = []
    for _ in range(windows):
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < window_s:
            torch.mm(a, b)
            calls += 1
        synchronize(device)
        rates.append(2.0 * m * k * n * calls / (time.perf_counter() - start) / 1e9)
    return statistics.median(rates)


def measure_model_gemms(gemms: list[Gemm], dtype: torch.dtype = torch.float32,
                        window_s: float = 0.05, windows: int = 5, device: str = "cpu",
                        warmup: int = 3) -> list[GemmRate]:
    """The rate of each distinct GEMM shape of a model on ``device`` (shapes measured once)."""
    cache: dict[tuple[int, int, int], float] = {}
    rates = []
    for gemm in gemms:
        key = (gemm.m, gemm.k, gemm.n)
        if key not in cache:
            cache[key] = measure_gemm(*key, dtype=dtype, window_s=window_s, windows=windows,
                                      device=device, warmup=warmup)
        rates.append(GemmRate(gemm, cache[key]))
    return rates


def roofline_tokens_per_second(rates: list[GemmRate]) -> float:
    """Training target tokens/s if the step were only these products at these rates."""
    seconds = sum(TRAIN_FACTOR * r.gemm.flops_per_token / (r.gflops * 1e9) for r in rates)
    return 1.0 / seconds


def effective_gflops(rates: list[GemmRate]) -> float:
    """The FLOP-weighted rate of the model's products (GFLOP/s)."""
    flops = sum(r.gemm.flops_per_token for r in rates)
    seconds = sum(r.gemm.flops_per_token / r.gflops for r in rates)
    return flops / seconds


def bf16_supported() -> bool:
    """Whether this CPU runs bf16 matrix products natively (AVX512-BF16 or AMX)."""
    try:
        return "bf16" in torch.backends.cpu.get_cpu_capability().lower() or _cpu_flag("avx512_bf16") \
            or _cpu_flag("amx_bf16")
    except Exception:  # noqa: BLE001 - capability probing must never break the benchmark
        return False


def _cpu_flag(flag: str) -> bool:
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="ignore") as handle:
            return any(flag in line for line in handle if line.startswith("flags"))
    except OSError:
        return False
