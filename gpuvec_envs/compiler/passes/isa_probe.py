"""Probing only the vector ISA that inductor will pick, not every one the CPU has.

Before its first C++ kernel in a process, inductor builds and loads a test program for
every vector ISA the CPU reports (``cpu_vec_isa.valid_vec_isa_list``; on an AVX-512 CPU
with VNNI: AVX-512 VNNI, AVX-512 and AVX2, a g++ build of ~1.7 s each on a cold cache and
a child Python that loads each), then picks one: the first in its order (AMX, AVX-512 VNNI,
AVX-512, AVX2) whose name contains ``ATEN_CPU_CAPABILITY``'s ISA, or the first of all if
that is unset. While :func:`picked_only` is active, that list is built by probing the
candidates in the same order, stopping at the first that would be picked, and holds just
that ISA; inductor then picks the same one after one probe.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import platform
import sys
import threading
from collections.abc import Iterator
from typing import Any

#: ``ATEN_CPU_CAPABILITY`` values that inductor matches against its ISAs' names.
_CAPABILITIES = ("avx2", "avx512")
#: ISAs picked so far in this process, per ``ATEN_CPU_CAPABILITY``.
_PICKED: dict[str | None, Any] = {}
_LOCK = threading.Lock()


@dataclasses.dataclass
class ProbeLog:
    """What one compilation's ISA list was (a pass status and its detail; None: not asked).

    ``applied``: only the picked ISA was probed; ``not_needed``: inductor's full list was
    already built in this process; ``failed``: the full list was built, for ``detail``.
    """

    status: str | None = None
    detail: str = ""

    def note(self, status: str, detail: str) -> None:
        """Record the outcome."""
        self.status, self.detail = status, detail


def picked_isa() -> tuple[Any | None, str]:
    """``(isa, its name)`` of the ISA inductor would pick, probing only up to it.

    ``(None, why)`` where the full list is needed: ``cpp.simdlen`` set (inductor then
    matches widths across all valid ISAs), another platform, an unknown
    ``ATEN_CPU_CAPABILITY``, a torch without the names used here, or no candidate built.
    """
    try:
        from torch._inductor import config
        from torch._inductor import cpu_vec_isa as m

        candidates, supported = m.supported_vec_isa_list, m.x86_isa_checker
    except (ImportError, AttributeError) as exc:
        return None, f"torch's inductor lacks a name this pass uses ({exc})"
    if config.cpp.simdlen is not None:
        return None, "cpp.simdlen is set (inductor matches it against every valid ISA)"
    if sys.platform != "linux" or platform.machine() not in ("x86_64", "AMD64"):
        return None, f"not an x86 Linux host ({sys.platform}, {platform.machine()})"
    capability = os.environ.get("ATEN_CPU_CAPABILITY") or None
    if capability is not None and capability not in _CAPABILITIES:
        return None, f"ATEN_CPU_CAPABILITY={capability} (inductor decides it)"
    with _LOCK:
        if capability not in _PICKED:
            flags = supported()
            for isa in candidates:
                name = str(isa)
                if not name or not all(f in flags for f in name.split()):
                    continue
                if capability is not None and capability not in name:
                    continue
                if isa:  # inductor's own probe of this ISA (cached per process)
                    _PICKED[capability] = isa
                    break
            else:
                _PICKED[capability] = None
        isa = _PICKED[capability]
    return (isa, str(isa)) if isa is not None else (None, "no candidate ISA built")


@contextlib.contextmanager
def picked_only(log: ProbeLog) -> Iterator[None]:
    """While active, inductor's list of valid vector ISAs is :func:`picked_isa`'s alone.

    Where that does not apply, inductor's own (full) list is used and ``log`` says why.
    Process-wide while active: callers serialise entries.
    """
    try:
        from torch._inductor import cpu_vec_isa as m

        original = m.valid_vec_isa_list
        known = original.cache_info().currsize > 0  # a functools.cache
    except (ImportError, AttributeError) as exc:
        log.note("failed", f"torch's inductor has no cached valid_vec_isa_list ({exc})")
        yield
        return
    if known:  # nothing left to probe
        log.note("not_needed", "inductor's full list was already built in this process")
        yield
        return

    def valid_vec_isa_list() -> list[Any]:
        isa, what = picked_isa()
        if isa is None:
            log.note("failed", what)
            return original()
        log.note("applied", f"probed only {what!r}")
        return [isa]

    m.valid_vec_isa_list = valid_vec_isa_list
    try:
        yield
    finally:
        m.valid_vec_isa_list = original
