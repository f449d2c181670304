"""The device's matrix-multiply rate on a model's own GEMM shapes (``torch.mm``, median of timed
windows after warm-up) and the roofline it implies, ``1 / sum_i(3 * flops_i / rate_i)`` tokens/s.
That bounds training only on a CPU: a GPU runs a small product alone bound by its launch
(training read 160% of such a "roofline"), so on a GPU :func:`arithmetic` gives none."""
from __future__ import annotations

import dataclasses
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from rnnsearch.bench.flops import TRAIN_FACTOR, Gemm, Shape, model_gemms, training_flops_per_token
from rnnsearch.config.model import ModelConfig
from rnnsearch.device import synchronize


def measure_gemm(m: int, k: int, n: int, dtype: torch.dtype = torch.float32,
                 window_s: float = 0.05, windows: int = 5, device: str = "cpu",
                 warmup: int = 3) -> float:
    """Median GFLOP/s of ``[m x k] @ [k x n]`` in ``dtype`` on ``device``."""
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
                        warmup: int = 3) -> list[tuple[Gemm, float]]:
    cache: dict[tuple[int, int, int], float] = {}
    for gemm in gemms:
        key = (gemm.m, gemm.k, gemm.n)
        if key not in cache:
            cache[key] = measure_gemm(*key, dtype=dtype, window_s=window_s, windows=windows,
                                      device=device, warmup=warmup)
    return [(g, cache[(g.m, g.k, g.n)]) for g in gemms]   # (product, GFLOP/s)


def roofline_tokens_per_second(rates: list[tuple[Gemm, float]]) -> float:
    return 1.0 / sum(TRAIN_FACTOR * g.flops_per_token / (rate * 1e9) for g, rate in rates)


def effective_gflops(rates: list[tuple[Gemm, float]]) -> float:
    """The FLOP-weighted rate of the model's products (GFLOP/s)."""
    return sum(g.flops_per_token for g, _ in rates) / sum(g.flops_per_token / r for g, r in rates)


def bf16_supported() -> bool:
    """Whether this CPU runs bf16 products natively (AVX512-BF16 or AMX)."""
    cpuinfo = Path("/proc/cpuinfo")
    flags = cpuinfo.read_text(encoding="ascii", errors="ignore") if cpuinfo.is_file() else ""
    return "avx512_bf16" in flags or "amx_bf16" in flags or \
        "bf16" in torch.backends.cpu.get_cpu_capability().lower()


def arithmetic(config: ModelConfig, shape: Shape, device: str, window_s: float,
               batch: int | None = None, kinds: tuple[str, ...] = ("fp32", "bf16")
               ) -> dict[str, Any]:
    """FLOPs per target token at ``batch``, the effective rate of the model's products in each
    of ``kinds`` and (on a CPU) the roofline they imply."""
    shape = dataclasses.replace(shape, batch=batch or shape.batch)
    gemms = model_gemms(config, shape)
    result: dict[str, Any] = {"batch": shape.batch, "src_len": shape.src_len, "tgt_len": shape.tgt_len,
                              "mflop_per_token": training_flops_per_token(config, shape) / 1e6}
    emulated = device == "cpu" and not bf16_supported()
    for name in kinds:
        dtype = torch.float32 if name == "fp32" else torch.bfloat16
        repeats = 1 if emulated and name == "bf16" else 3   # emulated: one window tells enough
        rates = measure_model_gemms(gemms, dtype, window_s, repeats, device, repeats)
        result[f"gemm_gflops_{name}"] = effective_gflops(rates)
        if device == "cpu":
            result[f"roofline_tokens_per_s_{name}"] = roofline_tokens_per_second(rates)
    return result
