"""Where the time goes: torch.profiler breakdowns of a training step and of batched beam search.

The roofline ratio says how far training is from the machine's GEMM rate; this says why. Each
operator's self time (time in the operator itself, not in its callees) is put into a category by
name, so the shares add up to the profiled time. A training step is also split into its phases
(forward, backward, gradient clipping, optimizer), which
:func:`rnnsearch.training.harness.train_step` marks with ``record_function``.
"""
from __future__ import annotations

from typing import Any, Callable

import torch
from torch.profiler import ProfilerActivity, profile

from rnnsearch.device import synchronize

CATEGORIES: dict[str, tuple[str, ...]] = {
    "GEMM (mm, addmm, bmm)": ("aten::mm", "aten::addmm", "aten::addmm_", "aten::bmm",
                              "aten::baddbmm"),
    "log-softmax + NLL (fwd, bwd)": ("aten::_log_softmax", "aten::_log_softmax_backward_data",
                                     "aten::nll_loss_forward", "aten::nll_loss_backward",
                                     "aten::exp_"),   # the fused loss's softmax
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
        "aten::ne", "aten::clamp_", "aten::_foreach_norm", "aten::_foreach_mul_",
        "aten::_fused_adam_"),
    "copies, fills, concatenation, indexing": ("aten::copy_", "aten::fill_", "aten::zero_",
                                               "aten::cat", "aten::index_select",
                                               "aten::embedding_dense_backward", "aten::index_add_",
                                               "aten::gather", "aten::scatter_",
                                               "aten::scatter_add_", "aten::index_copy_"),
}
PHASES = ("forward", "backward", "clip", "optimizer")


def category(op: str) -> str:
    """The category of an operator name (``aten::mm`` -> GEMM); unknown ones are "other"."""
    return next((name for name, ops in CATEGORIES.items() if op in ops), "other")


TOP_OPERATORS = 3   # the largest operators named in each category


def profile_shares(work: Callable[[], Any], repeats: int) -> dict[str, Any]:
    """Run ``work`` ``repeats`` times under the profiler: ms per repeat by category and phase;
    each category also names its :data:`TOP_OPERATORS` largest operators (``top``: [operator,
    ms per repeat] pairs), so that "other" says what it holds."""
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(repeats):
            work()
    phases: dict[str, float] = {}
    operators: dict[str, dict[str, float]] = {}      # category -> operator -> ms per repeat
    for event in prof.key_averages():
        if event.key in PHASES:
            phases[event.key] = event.cpu_time_total / 1e3 / repeats
            continue
        operators.setdefault(category(event.key), {})[event.key] = \
            event.self_cpu_time_total / 1e3 / repeats
    by_category = {name: sum(ops.values()) for name, ops in operators.items()}
    total = sum(by_category.values())
    return {"ms_per_repeat": total, "repeats": repeats,
            "categories": {name: {"ms": ms, "share": ms / total if total else 0.0,
                                  "top": _largest(operators[name])}
                           for name, ms in sorted(by_category.items(), key=lambda kv: -kv[1])},
            "phases_ms": phases}


def _largest(operators: dict[str, float]) -> list[list[Any]]:
    """The :data:`TOP_OPERATORS` largest of ``operators`` (name -> ms), largest first."""
    ranked = sorted(operators.items(), key=lambda kv: -kv[1])[:TOP_OPERATORS]
    return [[name, ms] for name, ms in ranked]


def profile_device_steps(step: Callable[[], Any], repeats: int, device: str) -> dict[str, Any]:
    """What a GPU does during ``repeats`` calls of ``step`` (the device drained before and after):
    wall ms per step, kernels launched per step, the GPU's busy ms per step (kernel, copy and
    fill time summed), hence how much of the step the GPU sits idle waiting for the host, and
    the five kernels that take the most GPU time.

    A step that launches thousands of short kernels and leaves the GPU mostly idle is bound by
    the host (Python, the dispatcher, launches), not by arithmetic: the evidence to look at where
    a throughput target is missed.
    """
    gpu = device == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if gpu else [])
    synchronize(device)
    with profile(activities=activities) as prof:
        for _ in range(repeats):
            step()
        synchronize(device)
    wall_ms = _span_ms(prof) / repeats
    kernels = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    busy_ms = sum(e.time_range.elapsed_us() for e in kernels) / 1e3 / repeats
    by_name: dict[str, float] = {}
    for event in kernels:
        ms = event.time_range.elapsed_us() / 1e3 / repeats
        by_name[event.name] = by_name.get(event.name, 0.0) + ms
    top = sorted(by_name.items(), key=lambda kv: -kv[1])[:5]
    return {"repeats": repeats, "wall_ms_per_step": wall_ms,
            "kernels_per_step": len(kernels) / repeats, "gpu_busy_ms_per_step": busy_ms,
            "gpu_idle_share": max(0.0, 1 - busy_ms / wall_ms) if gpu and wall_ms else None,
            "top_kernels_ms": [{"name": name[:80], "ms": ms} for name, ms in top]}


def _span_ms(prof: profile) -> float:
    """Wall time from the first to the last recorded host event (ms)."""
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CPU]
    if not events:
        return 0.0
    start = min(e.time_range.start for e in events)
    end = max(e.time_range.end for e in events)
    return (end - start) / 1e3
