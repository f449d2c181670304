"""The device's matrix-multiply rate on a step's own product shapes (``torch.mm`` or
``torch.bmm``, median of timed windows after warm-up) and the roofline it implies: the work
:func:`rnnsearch.bench.ops.count` recorded, at those rates. That bounds a step only on a CPU: a
GPU runs a small product alone bound by its launch (training read 160% of such a "roofline"),
so on a GPU :func:`arithmetic` gives the rates and no roofline."""
from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any, Callable

import torch

from rnnsearch.bench.ops import Count, Product, count, roofline_seconds
from rnnsearch.bench.device import synchronize

KINDS = {"fp32": torch.float32, "bf16": torch.bfloat16}


def measure_gemm(m: int, k: int, n: int, dtype: torch.dtype = torch.float32,
                 window_s: float = 0.05, windows: int = 5, device: str = "cpu",
                 warmup: int = 3, batch: int = 1) -> float:
    """Median GFLOP/s of ``batch`` products ``[m x k] @ [k x n]`` in ``dtype`` on ``device``."""
    shape = (batch,) if batch > 1 else ()
    a = torch.randn(*shape, m, k, device=device).to(dtype)
    b = torch.randn(*shape, k, n, device=device).to(dtype)
    product = torch.bmm if batch > 1 else torch.mm
    for _ in range(warmup):
        product(a, b)
    synchronize(device)
    rates = []
    for _ in range(windows):
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < window_s:
            product(a, b)
            calls += 1
        synchronize(device)
        rates.append(2.0 * batch * m * k * n * calls / (time.perf_counter() - start) / 1e9)
    return statistics.median(rates)


def product_rate(dtype: torch.dtype, window_s: float, windows: int, device: str
                 ) -> Callable[[Product], float]:
    """GFLOP/s of a :class:`Product` (each shape measured once)."""
    cache: dict[Product, float] = {}

    def rate(p: Product) -> float:
        if p not in cache:
            cache[p] = measure_gemm(p.m, p.k, p.n, dtype, window_s, windows, device, windows,
                                    p.batch)
        return cache[p]
    return rate


def bf16_supported() -> bool:
    """Whether this CPU runs bf16 products natively (AVX512-BF16 or AMX)."""
    cpuinfo = Path("/proc/cpuinfo")
    flags = cpuinfo.read_text(encoding="ascii", errors="ignore") if cpuinfo.is_file() else ""
    return "avx512_bf16" in flags or "amx_bf16" in flags or \
        "bf16" in torch.backends.cpu.get_cpu_capability().lower()


def arithmetic(run: Callable[[], Any], units: float, device: str, window_s: float,
               kinds: tuple[str, ...] = ("fp32", "bf16"), unit: str = "tokens"
               ) -> dict[str, Any]:
    """What ``run()`` (producing ``units`` tokens or sentences) computes: torch's FLOP count
    per unit, the FLOP-weighted rate of its products in each of ``kinds`` and (on a CPU) the
    roofline ``<unit>/s`` those rates imply."""
    counted: Count = count(run)
    result: dict[str, Any] = {f"mflop_per_{unit[:-1]}": counted.flops / units / 1e6,
                              "product_shapes": len(counted.products)}
    emulated = device == "cpu" and not bf16_supported()
    for name in kinds if counted.products else ():      # no product recorded: no roofline
        repeats = 1 if emulated and name == "bf16" else 3   # emulated: one window tells enough
        seconds = roofline_seconds(counted.products,
                                   product_rate(KINDS[name], window_s, repeats, device))
        result[f"gemm_gflops_{name}"] = counted.product_flops / seconds / 1e9
        if device == "cpu":
            result[f"roofline_{unit}_per_s_{name}"] = units / seconds
    return result
