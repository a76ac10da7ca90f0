"""Keep freed memory in processes the explorer owns, so large numpy temporaries do not fault in
again page by page.

glibc hands large blocks back to the kernel as soon as they are freed: a block above its mmap
threshold is unmapped, and the top of the heap is trimmed once enough of it is free. A sweep
worker builds and checks thousands of schedules, each allocating and freeing megabytes of
columns, so every schedule touches fresh pages again and pays a minor page fault for each
(measured on 640 1F1B sizes in one process, 2-core VM: 186,000 faults, 0.58 s of system time in
3.66 s CPU; with both thresholds raised, 31,000 faults, 0.09 s, and 2.69 s CPU in all).

Only for processes the explorer starts and owns (a sweep worker): a library must not change
the allocator of the process that imports it, so :func:`keep_freed_memory` is never called on
import. Elsewhere than glibc (macOS, musl) it does nothing.
"""

from __future__ import annotations

import ctypes
import sys

#: glibc's ``mallopt`` parameters (malloc.h).
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3
#: Largest mmap threshold glibc accepts on 64-bit (``DEFAULT_MMAP_THRESHOLD_MAX``): blocks up to
#: it come from the heap, which is reused across schedules instead of mapped and unmapped.
MMAP_THRESHOLD = 32 << 20
#: Free memory at the top of the heap kept rather than returned to the kernel.
TRIM_THRESHOLD = 256 << 20


def keep_freed_memory() -> bool:
    """Raise glibc's mmap and trim thresholds for this process; True when both took effect.

    Both are needed: a trim threshold alone also fixes the mmap threshold at its 128 KiB
    default (glibc stops adapting it once either is set), which maps every column afresh.
    """
    if not sys.platform.startswith("linux"):
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )


__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "keep_freed_memory"]
