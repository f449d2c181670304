"""glibc's memory allocator set for training: freed memory is kept for reuse, not given back.

A training step allocates and frees the same tensors again and again, many of them between 128
KB and a few MB (a decoder step's attention scores and gates, the output layer's logits and
their gradients). With glibc's defaults a block above the mmap threshold is mapped fresh from
the kernel on every allocation and unmapped when freed, and the top of the heap is handed back
to the kernel whenever enough of it is free; every next use of that memory then faults its pages
in again, each zero-filled by the kernel. On the reference RNNsearch training step (the bench's)
that is about 15,000 page faults per step.

:func:`keep_freed_memory` sets both with ``mallopt``: every block comes from the heap (no block
is mapped on its own: the largest mmap threshold glibc accepts is 32 MB, and the reference
step's logits and their gradients reach 45 MB, so mapping is turned off instead), and the heap
is not trimmed, so a freed block is reused as it is. Nothing computed changes (the same
numbers, bit for bit); the process keeps the heap it grew until it ends (docs/performance.md,
"Memory allocator", has the difference measured).
``RNNSEARCH_MALLOC=system`` leaves glibc's settings as they are; with another C library (musl,
macOS) there is nothing to set.
"""
from __future__ import annotations

import ctypes
import os
from typing import Callable

M_TRIM_THRESHOLD = -1        # malloc.h's mallopt parameters
M_MMAP_THRESHOLD = -3
M_MMAP_MAX = -4
MMAP_THRESHOLD = 32 * 1024 * 1024      # glibc's maximum on 64-bit (HEAP_MAX_SIZE / 2)
MMAP_MAX = 0                           # no block mapped on its own, however large
TRIM_THRESHOLD = 2**31 - 1             # mallopt takes an int: never trim, in practice
ENV = "RNNSEARCH_MALLOC"


def keep_freed_memory() -> bool:
    """Set glibc's mmap and trim settings as described above, unless ``RNNSEARCH_MALLOC`` is
    ``system``; returns whether all were set (False: not glibc, or left as they are). Call it
    first thing in a process: it applies to the allocations after it."""
    if os.environ.get(ENV, "").strip().lower() == "system":
        return False
    mallopt = _glibc_mallopt()
    if mallopt is None:
        return False
    settings = ((M_MMAP_THRESHOLD, MMAP_THRESHOLD), (M_MMAP_MAX, MMAP_MAX),
                (M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return all([bool(mallopt(option, value)) for option, value in settings])   # every one set


def _glibc_mallopt() -> Callable[[int, int], int] | None:
    """glibc's ``mallopt``, or None where the C library is another."""
    try:
        libc = ctypes.CDLL(None)
        libc.gnu_get_libc_version       # glibc only  # noqa: B018
        mallopt = libc.mallopt
    except (OSError, AttributeError):
        return None
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt
