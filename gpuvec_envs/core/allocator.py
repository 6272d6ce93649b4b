"""Keep freed host memory in the process, so fresh step outputs do not page-fault.

Every compiled step returns fresh output tensors (an observation of 1-3 MB for MinAtar at
N=4096). With glibc's default settings the memory freed by the previous step's outputs
is handed back to the OS (heap trimming, or ``munmap`` of large chunks), and the next
step's outputs page-fault it back in, costing as much system time as the game itself
(docs/design.md). :func:`retain_freed_memory` raises glibc's trim and
mmap thresholds (``mallopt``) so that freed blocks are reused instead. The cost is that the
process keeps its peak heap size. Disable with ``GPUVEC_RETAIN_MEMORY=0``.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_MMAP_THRESHOLD_MAX = 32 * 1024 * 1024  # glibc's upper limit on 64-bit

_done: bool | None = None


def retain_freed_memory() -> bool:
    """Set glibc's trim and mmap thresholds once per process; ``True`` if they are set.

    Does nothing (and returns ``False``) off Linux/glibc or with ``GPUVEC_RETAIN_MEMORY=0``.
    Blocks up to 32 MB then come from the heap and stay in the process when freed.
    """
    global _done
    if _done is not None:
        return _done
    _done = False
    if os.environ.get("GPUVEC_RETAIN_MEMORY", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc (e.g. musl)
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    _done = bool(mallopt(_M_MMAP_THRESHOLD, _MMAP_THRESHOLD_MAX)) and bool(
        mallopt(_M_TRIM_THRESHOLD, 2**31 - 1)
    )
    return _done
