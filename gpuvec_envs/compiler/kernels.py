"""The kernels of a compiled graph, as inductor's generated source states them.

The fusion claim as a number: how many kernels one compiled step launches, and (where the
source states it) how many bytes each reads and writes per call. Inductor writes the byte
count (``kernel_num_gb``, its own estimate: every buffer a kernel touches, once) into a
Triton kernel's metadata when ``benchmark_kernel`` is set, as the CUDA lowering check does
(:mod:`~gpuvec_envs.compiler.fake_cuda`).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

# ``name = async_compile.triton('name', '''...`` (Python wrapper); C++ kernels are
# ``async_compile.cpp_pybinding`` (or ``cpp``) there, and ``void name(`` in a C++ wrapper.
_DEFINITION = re.compile(r"^(\w+) = async_compile\.(triton|cpp_pybinding|cpp)\(", re.M)
_CPP_FUNCTION = re.compile(r'^extern "C"\s+(?:\w+\s+)*void\s+(cpp_fused_\w+)\(', re.M)
_NUM_GB = re.compile(r"'kernel_num_gb': ([0-9.eE+-]+)")


@dataclasses.dataclass(frozen=True)
class Kernel:
    """One kernel of a compiled graph."""

    name: str
    kind: str  # "triton" or "cpp"
    nbytes: int | None  # bytes read and written per call, if the source states them

    def __str__(self) -> str:
        size = "" if self.nbytes is None else f", {self.nbytes} B"
        return f"{self.name} ({self.kind}{size})"


def kernels_in(source: str) -> tuple[Kernel, ...]:
    """The kernels defined in inductor's generated wrapper ``source``, in order."""
    found = list(_DEFINITION.finditer(source))
    out = []
    for k, m in enumerate(found):
        end = found[k + 1].start() if k + 1 < len(found) else len(source)
        kind = "triton" if m.group(2) == "triton" else "cpp"
        gb = _NUM_GB.search(source, m.end(), end) if kind == "triton" else None
        nbytes = round(float(gb.group(1)) * 1e9) if gb else None
        out.append(Kernel(m.group(1), kind, nbytes))
    if not out:  # a C++ wrapper defines its kernels as functions
        out = [Kernel(name, "cpp", None) for name in _CPP_FUNCTION.findall(source)]
    return tuple(out)


def kernels_of(code: Any) -> tuple[Kernel, ...] | None:
    """The kernels of inductor's compiled output ``code``; None if it has no source."""
    source = getattr(code, "source_code", None)
    return kernels_in(source) if isinstance(source, str) else None
