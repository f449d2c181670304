"""glibc's memory allocator set for training: freed memory is kept for reuse, not given back.

A training step frees and reallocates the same 128 KB - 45 MB tensors; glibc's defaults map large
blocks fresh and trim the heap, so each reuse faults zero-filled pages in (about 15,000 a reference
step). :func:`keep_freed_memory` turns mmap (its largest threshold, 32 MB, is too small) and
trimming off; results are bit for bit the same (docs/performance.md, "Memory allocator")."""
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
    """Apply the settings above unless ``RNNSEARCH_MALLOC=system``; returns whether all were set
    (False: not glibc, or opted out). Call it first thing: it applies to later allocations only."""
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
