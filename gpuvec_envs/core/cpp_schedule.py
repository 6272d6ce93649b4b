"""Register-pressure scheduling of inductor's generated C++ loop bodies (CPU only).

Inductor's C++ backend writes a loop body as all its loads, then all its computation, then
all its stores. In a fused step of hundreds of values (MinAtar Seaquest's batch loop holds
~3,700 statements) every loaded value then lives from the top of the body to its first use,
and every stored value from its definition to the bottom. gcc does not move them (it
cannot prove that the output pointers do not alias the inputs), so they are spilled to the
stack and reloaded. :func:`schedule_source` moves each load down to just before its first
use and each store up to just after its value is computed; in Seaquest's batch loop this
removes ~10 % of the stack accesses and ~5 % of the step's time.

Only blocks with more loads and stores than :data:`MIN_ACCESSES` are reordered (see
:func:`_crowded`). The pass is conservative: it only reorders a block whose every
top-level statement is one of inductor's forms (``auto tmpN = ...;``, a store of a ``tmp``
into an ``in_ptr`` / ``out_ptr`` buffer, or a bracketed lambda of either), and it keeps
program order between a load and a store of the same buffer and between stores to the
same buffer. Anything else leaves the block as it is. Buffers with different names are
distinct memory (inductor names kernel arguments per buffer).
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

_TMP = re.compile(r"\btmp\d+\b")
_PTR = re.compile(r"\b(?:in|out)_ptr\d+\b")
_DEF = re.compile(r"\s*auto (tmp\d+) =")
# A store into a buffer: ``tmpX.store(ptr + ...)`` or ``ptr[...] = ...``.
_WRITE = re.compile(r"tmp\d+\.store\(((?:in|out)_ptr\d+)|((?:in|out)_ptr\d+)\[[^\]]*\] = ")


def _statements(lines: list[str]) -> list[list[str]] | None:
    """Split a block's lines into statements (lambdas kept whole); None if unrecognised."""
    out: list[list[str]] = []
    i = 0
    while i < len(lines):
        line = lines[i].strip()
        if line.endswith(";") and (line.startswith("auto tmp") or _WRITE.match(line)):
            out.append([lines[i]])
            i += 1
            continue
        # ``[&]`` / ``auto tmpN =`` then ``[&]()``, a braced body, then ``()`` and ``;``.
        j = i + 1 if re.fullmatch(r"auto tmp\d+ =", line) else i
        if j >= len(lines) or lines[j].strip() not in ("[&]", "[&]()"):
            return None
        j += 1
        depth = 0
        while j < len(lines):
            depth += lines[j].count("{") - lines[j].count("}")
            j += 1
            if depth == 0:
                break
        while j < len(lines) and lines[j].strip() in ("()", ";", "();"):
            j += 1
        if depth != 0 or not lines[j - 1].strip().endswith(";"):
            return None
        out.append(lines[i:j])
        i = j
    return out


def _schedule(stmts: list[list[str]]) -> list[list[str]]:
    """The statements reordered (see the module docstring)."""
    texts = ["\n".join(s) for s in stmts]
    defs: dict[str, int] = {}
    kind, ptrs, names = [], [], []
    for k, (s, text) in enumerate(zip(stmts, texts, strict=True)):
        m = _DEF.match(s[0])
        names.append(m.group(1) if m else None)
        if m:
            defs[m.group(1)] = k
            ptrs.append(set(_PTR.findall(text)))
            kind.append("pinned" if _WRITE.search(text) else "load" if ptrs[-1] else "compute")
            continue
        # A store, or a lambda storing through one buffer (a strided store); anything else
        # stays where it is, and so do the loads of the buffers it touches.
        written = {a or b for a, b in _WRITE.findall(text)}
        ptrs.append(set(_PTR.findall(text)))
        kind.append("store" if len(written) == 1 and written == ptrs[-1] else "pinned")
    first_use: dict[str, int] = {}
    for k, text in enumerate(texts):
        for t in _TMP.findall(text):
            if t != names[k] and t not in first_use:
                first_use[t] = k
    writers = [k for k in range(len(stmts)) if kind[k] != "load" and kind[k] != "compute"]
    key: list[float] = []
    for k, text in enumerate(texts):
        pos = float(k)
        if kind[k] == "load" and not any(
            ptrs[k] & ptrs[j] and (j < k or kind[j] == "pinned") for j in writers
        ):
            pos = first_use.get(names[k], k) - 0.5  # just before its first use
        elif kind[k] == "store":
            # after its value, and after every earlier access to its buffer (as moved)
            (ptr,) = ptrs[k]
            deps = [key[defs[t]] for t in _TMP.findall(text) if t in defs]
            before = [key[j] for j in range(k) if kind[j] != "compute" and ptr in ptrs[j]]
            pos = max([*deps, -1.0]) + 0.5
            pos = max([pos, *(b + 1e-6 for b in before)])
        key.append(pos)
    order = sorted(range(len(stmts)), key=lambda k: (key[k], k))
    return [stmts[k] for k in order]


#: Blocks with more loads and stores than this (AVX-512's vector registers) are scheduled.
MIN_ACCESSES = 32


def _crowded(stmts: list[list[str]]) -> bool:
    """Whether a block's loads and stores alone outnumber the vector registers.

    Smaller blocks keep inductor's order: there it costs no spills, and issuing the loads
    early helps where they miss the cache (CartPole at N=65536: 3 % slower scheduled).
    """
    accesses = sum(1 for s in stmts if _PTR.search("\n".join(s)))
    return accesses > MIN_ACCESSES


def schedule_source(source: str) -> str:
    """``source`` with every recognised straight-line block rescheduled."""
    lines = source.split("\n")
    out: list[str] = []
    i = 0
    while i < len(lines):
        out.append(lines[i])
        # A vectorised or scalar loop body opens with ``{`` after an ``if(C10_LIKELY(...))``
        # guard or a ``for`` header; try every ``{`` line and keep only recognised blocks.
        if lines[i].strip() == "{":
            depth, j = 1, i + 1
            while j < len(lines) and depth:
                depth += lines[j].count("{") - lines[j].count("}")
                j += 1
            body = lines[i + 1 : j - 1]
            stmts = _statements(body) if body else None
            if stmts and _crowded(stmts):
                out.extend(line for s in _schedule(stmts) for line in s)
                out.append(lines[j - 1])
                i = j
                continue
        i += 1
    return "\n".join(out)


@contextlib.contextmanager
def scheduled_cpp_kernels() -> Iterator[None]:
    """While active, C++ kernels inductor compiles go through :func:`schedule_source`.

    Patches ``AsyncCompile.cpp_pybinding`` (what inductor's generated modules call to
    build their C++ kernels), where it exists; otherwise does nothing.
    """
    try:
        from torch._inductor.async_compile import AsyncCompile
    except ImportError:  # pragma: no cover - other torch versions
        yield
        return
    original = getattr(AsyncCompile, "cpp_pybinding", None)
    if original is None:  # pragma: no cover
        yield
        return

    def cpp_pybinding(self: Any, argtypes: list[str], source_code: str) -> Any:
        try:
            source_code = schedule_source(source_code)
        except Exception:  # noqa: BLE001 - an unexpected form: compile it unchanged
            pass
        return original(self, argtypes, source_code)

    AsyncCompile.cpp_pybinding = cpp_pybinding
    try:
        yield
    finally:
        AsyncCompile.cpp_pybinding = original
