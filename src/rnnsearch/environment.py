"""What produced a result: the machine and the numeric libraries, recorded with every stage.

Floating-point results depend on the CPU's vector instructions (AVX2 or AVX-512 kernels, picked
at run time), library versions and thread count, so every metrics file and MLflow run carries
this, telling last-digit differences from real changes (docs/reproducibility.md)."""
from __future__ import annotations

import functools
import os
import platform
import re
import sys
from typing import Any

# Environment variables that change which kernels run (and so the last digits of a result).
KERNEL_SETTINGS = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "MKL_CBWR",
                   "OPENBLAS_CORETYPE", "OMP_NUM_THREADS", "MKL_NUM_THREADS",
                   "CUBLAS_WORKSPACE_CONFIG")


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU's model name from ``/proc/cpuinfo`` (``platform.processor()`` elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def torch_environment() -> dict[str, Any]:
    """torch's version, the CPU kernels it dispatches to, MKL / oneDNN versions, threads, GPU."""
    import torch

    config = torch.__config__.show()
    mkl = re.search(r"Math Kernel Library Version ([\w.\-]+)", config)
    onednn = re.search(r"MKL-DNN (v[\w.]+)", config)
    info: dict[str, Any] = {
        "torch": torch.__version__,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "mkl": mkl.group(1) if mkl else None,
        "onednn": onednn.group(1) if onednn else None,
        "threads": torch.get_num_threads(),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }
    if torch.cuda.is_available():
        info["cuda"] = torch.version.cuda
        info["gpu"] = torch.cuda.get_device_name(0)
    return info


def describe_environment() -> dict[str, Any]:
    """The machine, Python, and the numeric libraries this process has loaded."""
    env: dict[str, Any] = {
        "cpu": cpu_model(), "cpu_count": os.cpu_count(), "machine": platform.machine(),
        "python": platform.python_version(),
    }
    if "numpy" in sys.modules:
        env["numpy"] = sys.modules["numpy"].__version__
    if "torch" in sys.modules:   # only stages that compute with torch depend on it
        env.update(torch_environment())
    for package in ("gensim", "sacrebleu", "pytorch_lightning"):
        module = sys.modules.get(package)
        if module is not None:
            env[package] = getattr(module, "__version__", "unknown")
    settings = {name: os.environ[name] for name in KERNEL_SETTINGS if name in os.environ}
    if settings:
        env["settings"] = settings
    return env


def is_main_process() -> bool:
    """False in the extra processes of a DDP run (the stage script rerun by Lightning with
    ``LOCAL_RANK``/``NODE_RANK`` set): they train; the main one writes outputs, holds their lock."""
    return os.environ.get("LOCAL_RANK", "0") == "0" and os.environ.get("NODE_RANK", "0") == "0"
