"""Where the time goes (torch.profiler): host self time by operator category, a training step's
phases (marked by :func:`rnnsearch.training.harness.train_step`) and, on a GPU, the kernels and
the GPU's idle share (a GPU idle most of a step is launch-bound, not arithmetic-bound)."""
from __future__ import annotations

from typing import Any, Callable

from torch.autograd import DeviceType
from torch.profiler import ProfilerActivity, profile

from rnnsearch.bench.device import synchronize

CATEGORIES = {name: tuple(f"aten::{op}" for op in ops.split()) for name, ops in {
    "GEMM (mm, addmm, bmm)": "mm addmm addmm_ bmm baddbmm",
    "log-softmax + NLL (fwd, bwd)": "_log_softmax _log_softmax_backward_data nll_loss_forward "
                                    "nll_loss_backward exp_",   # exp_: the fused loss's softmax
    "top-k": "topk",
    "tanh, sigmoid (fwd, bwd)": "tanh tanh_ tanh_backward sigmoid sigmoid_ sigmoid_backward",
    "softmax, reductions (sum, max, norm)": "_softmax _softmax_backward_data sum max amax "
                                            "linalg_vector_norm logsumexp",
    "other elementwise (add, mul, Adam's updates, ...)": "add add_ mul mul_ sub rsub div div_ "
        "addcmul_ addcdiv_ lerp_ sqrt masked_fill masked_fill_ where eq ne clamp_ _foreach_norm "
        "_foreach_mul_ _fused_adam_",
    "copies, fills, concatenation, indexing": "copy_ fill_ zero_ cat index_select "
        "embedding_dense_backward index_add_ gather scatter_ scatter_add_ index_copy_"}.items()}
PHASES = ("forward", "backward", "clip", "optimizer")


def category(op: str) -> str:
    """The category of an operator name (``aten::mm`` -> GEMM); unknown ones are "other"."""
    return next((name for name, ops in CATEGORIES.items() if op in ops), "other")


def largest(named: dict[str, float], count: int) -> list[list[Any]]:
    return [[name, ms] for name, ms in sorted(named.items(), key=lambda kv: -kv[1])[:count]]


def profile_steps(step: Callable[[], Any], repeats: int, device: str) -> dict[str, Any]:
    """Per call of ``step`` over ``repeats`` calls: ms by operator category (each with its 3
    largest operators) and by phase, the wall time and, on a GPU, the kernels launched, their
    busy time and the GPU's idle share."""
    gpu, per_call = device == "cuda", 1e3 * repeats
    synchronize(device)
    with profile(activities=[ProfilerActivity.CPU] + [ProfilerActivity.CUDA] * gpu) as prof:
        for _ in range(repeats):
            step()
        synchronize(device)
    phases, operators = {}, {}
    for event in prof.key_averages():
        if event.key in PHASES:
            phases[event.key] = event.cpu_time_total / per_call
        else:
            operators.setdefault(category(event.key), {})[event.key] = \
                event.self_cpu_time_total / per_call
    sums = {name: sum(ops.values()) for name, ops in operators.items()}
    total = sum(sums.values())
    host = [e.time_range for e in prof.events() if e.device_type == DeviceType.CPU]
    wall = (max(r.end for r in host) - min(r.start for r in host)) / per_call if host else 0.0
    kernels: dict[str, float] = {}
    launched = [e for e in prof.events() if e.device_type == DeviceType.CUDA]
    for e in launched:
        kernels[e.name[:80]] = kernels.get(e.name[:80], 0.0) + e.time_range.elapsed_us() / per_call
    busy = sum(kernels.values())
    return {"repeats": repeats, "ms_per_repeat": total, "wall_ms_per_step": wall,
            "categories": {name: {"ms": ms, "share": ms / total if total else 0.0,
                                  "top": largest(operators[name], 3)}
                           for name, ms in sorted(sums.items(), key=lambda kv: -kv[1])},
            "phases_ms": phases, "kernels_per_step": len(launched) / repeats,
            "gpu_busy_ms_per_step": busy,
            "gpu_idle_share": max(0.0, 1 - busy / wall) if gpu and wall else None,
            "top_kernels_ms": [{"name": n, "ms": ms} for n, ms in largest(kernels, 5)]}
