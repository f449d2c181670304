"""The device (``cpu`` or ``cuda``) a measurement runs on: syncing, peak memory, freeing leftovers,
a failure's one line, its description. Imports only torch and Lightning (minimal install)."""
from __future__ import annotations

import gc
import resource
import time
from typing import Any

import pytorch_lightning as pl
import torch


def synchronize(device: str | torch.device) -> None:
    """Wait until ``device`` has finished the work queued on it (a no-op on the CPU)."""
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize(device)


def failure(err: BaseException) -> str:
    """One line for a measurement that failed (``out of memory: ...`` or the error)."""
    text = " ".join(str(err).split())[:200] or type(err).__name__
    return f"out of memory: {text}" if isinstance(err, torch.cuda.OutOfMemoryError) else text


def reset_peak_memory(device: str) -> None:
    """Start counting the peak memory afresh (a GPU's; a CPU process' peak cannot be reset)."""
    if device == "cuda":
        torch.cuda.reset_peak_memory_stats()


def peak_memory_mib(device: str) -> float:
    """Peak GPU memory allocated by tensors since :func:`reset_peak_memory` (MiB); on a CPU the
    process' peak resident memory so far."""
    if device == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def release(device: str) -> None:
    """Free what the last measurement left, so that the next one's peak is its own."""
    gc.collect()
    if device == "cuda":
        torch.cuda.empty_cache()


def machine(device: str) -> dict[str, Any]:
    """The device and software the numbers were measured with."""
    info: dict[str, Any] = {"device": device, "torch": torch.__version__,
                            "lightning": pl.__version__, "threads": torch.get_num_threads(),
                            "date": time.strftime("%Y-%m-%d %H:%M:%S %Z")}
    if device == "cuda":
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1),
                    cuda=torch.version.cuda, multiprocessors=props.multi_processor_count)
    return info
