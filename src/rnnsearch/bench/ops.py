"""What a training step or a decoding run computes, counted by torch while it runs, and the
roofline it implies. FLOPs come from ``torch.utils.flop_counter.FlopCounterMode``; each matrix
product by shape from a dispatch mode that sees every ``mm``, ``addmm``, ``bmm`` and ``baddbmm``
(backward's included), so a new architecture needs no formula. The roofline is the time the
recorded products alone take at the rates this device reaches on their own shapes: no step can be
faster. That bounds a step on a CPU only: a GPU runs a small product alone bound by its launch
(training read 160% of such a "roofline"), so there :func:`arithmetic` gives rates, no roofline."""
from __future__ import annotations

import statistics
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

from rnnsearch.bench.device import synchronize

aten = torch.ops.aten
# op -> where its first factor is; linear and matmul reach a mode undecomposed under
# inference_mode (decoding), the products they decompose into under autograd (training)
MATMULS = {aten.mm: 0, aten.bmm: 0, aten.addmm: 1, aten.baddbmm: 1, aten.matmul: 0,
           aten.linear: 0}
KINDS = {"fp32": torch.float32, "bf16": torch.bfloat16}


@dataclass(frozen=True)
class Product:
    """``batch`` products ``[m x k] @ [k x n]``."""

    batch: int
    m: int
    k: int
    n: int

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.k * self.n      # a multiply-add is two FLOPs


class ProductRecorder(TorchDispatchMode):
    """Counts the matrix products run under it, by :class:`Product`."""

    def __init__(self) -> None:
        super().__init__()
        self.products: Counter[Product] = Counter()

    def __torch_dispatch__(self, func: Any, types: Any, args: tuple = (),
                           kwargs: dict | None = None) -> Any:
        first = MATMULS.get(func._overloadpacket)
        if first is not None:
            self.products[product(func._overloadpacket, args[first], args[first + 1])] += 1
        return func(*args, **(kwargs or {}))


def product(op: Any, a: torch.Tensor, b: torch.Tensor) -> Product:
    """``op`` on ``a`` [(...,) m, k] and ``b`` [(...,) k, n] (``linear``: the weight [n, k]);
    leading dimensions of ``a`` alone are rows."""
    k = a.size(-1)
    n = b.size(0) if op is aten.linear else b.size(-1)
    if b.dim() <= 2 or a.dim() <= 2:
        return Product(1, a.numel() // max(k, 1), k, n)
    return Product(a.numel() // (a.size(-2) * k), a.size(-2), k, n)


@dataclass(frozen=True)
class Count:
    """What one call computed: torch's FLOP count, and its matrix products by shape."""

    flops: int
    products: Counter[Product]

    @property
    def product_flops(self) -> int:
        return sum(p.flops * n for p, n in self.products.items())


def count(run: Callable[[], Any]) -> Count:
    """Run ``run()`` once under torch's FLOP counter and the product recorder."""
    recorder = ProductRecorder()
    with FlopCounterMode(display=False) as flops, recorder:
        run()
    return Count(flops.get_total_flops(), recorder.products)


def roofline_seconds(products: Counter[Product], rate: Callable[[Product], float],
                     most: int = 48) -> float:
    """Seconds the ``products`` take at ``rate(product)`` GFLOP/s: the ``most`` shapes with the
    most FLOPs measured, the rest at their FLOP-weighted rate (decoding runs hundreds of tiny
    shapes)."""
    ranked = sorted(products, key=lambda p: p.flops * products[p], reverse=True)
    rates = {p: rate(p) for p in ranked[:most]}
    work = {p: p.flops * products[p] for p in products}
    rest = sum(work[p] for p in rates) / sum(work[p] / r for p, r in rates.items())
    return sum(w / (rates.get(p, rest) * 1e9) for p, w in work.items())


def measure_gemm(m: int, k: int, n: int, dtype: torch.dtype = torch.float32,
                 window_s: float = 0.05, windows: int = 5, device: str = "cpu",
                 warmup: int = 3, batch: int = 1) -> float:
    """Median GFLOP/s over timed windows of ``batch`` products ``[m x k] @ [k x n]``."""
    shape = (batch,) if batch > 1 else ()
    a = torch.randn(*shape, m, k, device=device).to(dtype)
    b = torch.randn(*shape, k, n, device=device).to(dtype)
    multiply = torch.bmm if batch > 1 else torch.mm
    for _ in range(warmup):
        multiply(a, b)
    synchronize(device)
    rates = []
    for _ in range(windows):
        calls, start = 0, time.perf_counter()
        while time.perf_counter() - start < window_s:
            multiply(a, b)
            calls += 1
        synchronize(device)
        rates.append(2.0 * batch * m * k * n * calls / (time.perf_counter() - start) / 1e9)
    return statistics.median(rates)


def product_rate(dtype: torch.dtype, window_s: float, windows: int, device: str
                 ) -> Callable[[Product], float]:
    """GFLOP/s of a :class:`Product`, each shape measured once."""
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
    """What ``run()`` (making ``units`` tokens or sentences) computes: FLOPs per unit, the
    FLOP-weighted rate of its products in each of ``kinds`` and (CPU) the roofline units/s."""
    counted = count(run)
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
