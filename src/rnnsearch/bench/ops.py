"""What a training step or a decoding run computes, counted by torch while it runs: its FLOPs
(``torch.utils.flop_counter.FlopCounterMode``) and each matrix product by shape (a dispatch mode
that sees every ``mm``, ``addmm``, ``bmm`` and ``baddbmm``, backward's included), so that any
architecture gets a FLOP count and a GEMM roofline without a formula of its own. The roofline
is the time the recorded products alone would take at the rates this device reaches on their
own shapes (:mod:`rnnsearch.bench.gemm`): no step can be faster."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import FlopCounterMode

aten = torch.ops.aten
# op -> where its first factor is; linear and matmul reach a mode undecomposed under
# inference_mode (decoding), the products they decompose into under autograd (training)
MATMULS = {aten.mm: 0, aten.bmm: 0, aten.addmm: 1, aten.baddbmm: 1, aten.matmul: 0,
           aten.linear: 0}


@dataclass(frozen=True)
class Product:
    """``batch`` products ``[m x k] @ [k x n]``."""

    batch: int
    m: int
    k: int
    n: int

    @property
    def flops(self) -> int:
        """A multiply-add is two FLOPs."""
        return 2 * self.batch * self.m * self.k * self.n


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
    """The :class:`Product` of ``op`` on factors ``a`` [(...,) m, k] and ``b``: [(...,) k, n],
    or for ``linear`` the weight [n, k]; leading dimensions of ``a`` alone are rows."""
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
    most FLOPs measured, the rest at their FLOP-weighted rate (decoding runs hundreds of
    shapes, most of them tiny)."""
    ranked = sorted(products, key=lambda p: p.flops * products[p], reverse=True)
    rates = {p: rate(p) for p in ranked[:most]}
    work = {p: p.flops * products[p] for p in products}
    rest = sum(work[p] for p in rates) / sum(work[p] / r for p, r in rates.items())
    return sum(w / (rates.get(p, rest) * 1e9) for p, w in work.items())
