"""Where the time goes: torch.profiler breakdowns of a training step and of batched beam search.

The roofline ratio says how far training is from the machine's GEMM rate; this says why. Each
operator's self time (time in the operator itself, not in its callees) is put into a category by
name, so the shares add up to the profiled time. A training step is also split into its phases
(forward, backward, gradient clipping, optimizer), which :func:`rnnsearch.bench.workload.train_step`
marks with ``record_function``.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch.profiler import ProfilerActivity, profile

CATEGORIES: dict[str, tuple[str, ...]] = {
    "GEMM (mm, addmm, bmm)": ("aten::mm", "aten::addmm", "aten::bmm", "aten::baddbmm"),
    "log-softmax + NLL (fwd, bwd)": ("aten::_log_softmax", "aten::_log_softmax_backward_data",
                                     "aten::nll_loss_forward", "aten::nll_loss_backward"),
    "top-k": ("aten::topk",),
    "tanh, sigmoid (fwd, bwd)": ("aten::tanh", "aten::tanh_", "aten::tanh_backward",
                                 "aten::sigmoid", "aten::sigmoid_", "aten::sigmoid_backward"),
    "softmax, reductions (sum, max, norm)": ("aten::_softmax", "aten::_softmax_backward_data",
                                             "aten::sum", "aten::max", "aten::amax",
                                             "aten::linalg_vector_norm", "aten::logsumexp"),
    "other elementwise (add, mul, Adam's updates, ...)": (
        "aten::add", "aten::add_", "aten::mul", "aten::mul_", "aten::sub", "aten::rsub",
        "aten::div", "aten::div_", "aten::addcmul_", "aten::addcdiv_", "aten::lerp_",
        "aten::sqrt", "aten::masked_fill", "aten::masked_fill_", "aten::where", "aten::eq",
        "aten::ne", "aten::clamp_", "aten::_foreach_norm", "aten::_foreach_mul_"),
    "copies, fills, concatenation, indexing": ("aten::copy_", "aten::fill_", "aten::zero_",
                                               "aten::cat", "aten::index_select",
                                               "aten::embedding_dense_backward", "aten::index_add_",
                                               "aten::gather", "aten::scatter_"),
}
PHASES = ("forward", "backward", "clip", "optimizer")


def category(op: str) -> str:
    """The category of an operator name (``aten::mm`` -> GEMM); unknown ones are "other"."""
    return next((name for name, ops in CATEGORIES.items() if op in ops), "other")


def profile_shares(work: Callable[[], Any], repeats: int) -> dict[str, Any]:
    """Run ``work`` ``repeats`` times under the profiler: ms per repeat by category and phase."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(repeats):
            work()
    events = prof.key_averages()
    by_category: dict[str, float] = {}
    phases: dict[str, float] = {}
    for event in events:
        if event.key in PHASES:
            phases[event.key] = event.cpu_time_total / 1e3 / repeats
            continue
        name = category(event.key)
        by_category[name] = by_category.get(name, 0.0) + event.self_cpu_time_total / 1e3 / repeats
    total = sum(by_category.values())
    return {"ms_per_repeat": total, "repeats": repeats,
            "categories": {name: {"ms": ms, "share": ms / total if total else 0.0}
                           for name, ms in sorted(by_category.items(), key=lambda kv: -kv[1])},
            "phases_ms": phases}

