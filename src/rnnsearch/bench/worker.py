"""Start-up of the benchmark's measurement processes: each one ends with the benchmark.

Every measurement runs in a process of its own (so that its peak memory is its own). Were the
benchmark stopped by a signal it cannot catch (``kill -9``, a job scheduler's time limit), that
process would run its measurement to the end, up to an hour of every core taken from whatever
runs next, the next benchmark included. On Linux the process asks the kernel for a signal
when its parent ends (``prctl(PR_SET_PDEATHSIG)``) and so ends with the benchmark.

This module imports no torch: a measurement that must not load it starts with it too.
"""
from __future__ import annotations

import ctypes
import os
import signal
import sys

from rnnsearch.allocator import keep_freed_memory

PR_SET_PDEATHSIG = 1   # linux/prctl.h


def end_with_parent(parent: int) -> None:
    """Have Linux send this process SIGTERM when its parent ends; if the parent (pid
    ``parent``) has already ended, end now. Does nothing on other systems."""
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM) != 0:
        return                  # no parent-death signal here: the process runs to its end
    if os.getppid() != parent:  # the parent ended before the request was in place
        os.kill(os.getpid(), signal.SIGTERM)


def start(parent: int, threads: int | None, keep_memory: bool = True) -> None:
    """The measurement process' initializer: end with ``parent``; keep freed memory for reuse
    as the pipeline's stages do (:mod:`rnnsearch.allocator`; ``keep_memory=False``: glibc's
    defaults); with ``threads``, import torch and give it that many threads (``None``: torch
    is left unimported)."""
    end_with_parent(parent)
    if keep_memory:
        keep_freed_memory()
    if threads is not None:
        import torch
        torch.set_num_threads(threads)
