"""Register-pressure scheduling of inductor's generated C++ loop bodies (CPU only).

Inductor's C++ backend writes a loop body as all its loads, then all its computation, then
all its stores. In a fused step of hundreds of values every loaded value then lives from
the top of the body to its first use, and every stored value from its definition to the
bottom; gcc does not move them (it cannot prove that the output pointers do not alias the
inputs), so they are spilled to the stack and reloaded. :func:`schedule_source` moves each
load down to just before its first use and each store up to just after its value is
computed (see docs/compiler.md for the measurement that motivates it).

Only blocks with more loads and stores than :data:`MIN_ACCESSES` are reordered (see
:func:`_crowded`), and only blocks whose every top-level statement is one of inductor's
forms (``auto tmpN = ...;``, a store of a ``tmp`` into a pointer argument, or a bracketed
lambda of either). Program order is kept between every load and store of one buffer and
between stores to one buffer. A buffer can reach a kernel under two argument names (a
graph input the kernel both reads and writes is ``in_ptrK`` for its loads and
``out_ptrM`` for its stores), so :func:`kernel_aliases` maps the names to buffers from
the kernel's calls in inductor's generated wrapper; where that map cannot be built every
argument is treated as one buffer.
"""

from __future__ import annotations

import contextlib
import re
import sys
import threading
from collections.abc import Iterator
from typing import Any

from gpuvec_envs.compiler.passes import vec_paths

_TMP = re.compile(r"\btmp\d+\b")
_PTR = re.compile(r"\b(?:in_out|in|out)_ptr\d+\b")
_DEF = re.compile(r"\s*auto (tmp\d+) =")
_P = r"(?:in_out|in|out)_ptr\d+"
# A store into a buffer: ``tmpX.store(ptr + ...)`` or ``ptr[...] = ...``.
_WRITE = re.compile(rf"tmp\d+\.store\(({_P})|({_P})\[[^\]]*\] = ")
_NAME = r"[A-Za-z_]\w*"
_SIGNATURE = re.compile(r'extern "C"\s+void\s+kernel\(([^)]*)\)')
# Statements of the generated wrapper that make one buffer another's alias or view.
_WRAPPER_ALIAS = (
    re.compile(rf"^\s*({_NAME}) = reinterpret_tensor\(({_NAME}),", re.M),
    re.compile(rf"^\s*({_NAME}) = torch\.ops\.aten\.view\.dtype\(({_NAME}),", re.M),
    re.compile(rf"^\s*({_NAME}) = ({_NAME})\s*(?:;.*|#.*)?$", re.M),
)

#: Blocks with more loads and stores than this (AVX-512's vector registers) are scheduled.
MIN_ACCESSES = 32
#: The name every pointer maps to when the kernel's aliasing is unknown.
ONE_BUFFER = "*"


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


def _schedule(stmts: list[list[str]], aliases: dict[str, str] | None) -> list[list[str]]:
    """The statements reordered (see the module docstring).

    ``aliases`` maps each pointer argument to its buffer's representative name (None: one
    buffer for all).
    """

    def buffers(names: Any) -> set[str]:
        if aliases is None:
            return {ONE_BUFFER for _ in names}
        return {aliases.get(p, p) for p in names}

    texts = ["\n".join(s) for s in stmts]
    defs: dict[str, int] = {}
    kind, ptrs, names = [], [], []
    for k, (s, text) in enumerate(zip(stmts, texts, strict=True)):
        m = _DEF.match(s[0])
        names.append(m.group(1) if m else None)
        used = set(_PTR.findall(text))
        ptrs.append(buffers(used))
        if m:
            defs[m.group(1)] = k
            kind.append("pinned" if _WRITE.search(text) else "load" if used else "compute")
            continue
        # A store, or a lambda storing through one buffer (a strided store); anything else
        # stays where it is, and so do the loads of the buffers it touches.
        written = {a or b for a, b in _WRITE.findall(text)}
        kind.append("store" if len(written) == 1 and written == used else "pinned")
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
            (buf,) = ptrs[k]
            deps = [key[defs[t]] for t in _TMP.findall(text) if t in defs]
            before = [key[j] for j in range(k) if kind[j] != "compute" and buf in ptrs[j]]
            pos = max([*deps, -1.0]) + 0.5
            pos = max([pos, *(b + 1e-6 for b in before)])
        key.append(pos)
    order = sorted(range(len(stmts)), key=lambda k: (key[k], k))
    return [stmts[k] for k in order]


def _crowded(stmts: list[list[str]]) -> bool:
    """Whether a block's loads and stores alone outnumber the vector registers.

    Smaller blocks keep inductor's order: there it costs no spills, and issuing the loads
    early helps where they miss the cache.
    """
    accesses = sum(1 for s in stmts if _PTR.search("\n".join(s)))
    return accesses > MIN_ACCESSES


def schedule_blocks(source: str, aliases: dict[str, str] | None = None) -> tuple[str, int]:
    """``source`` with every recognised crowded block rescheduled, and how many were.

    Args:
        source: A C++ kernel as inductor generates it.
        aliases: Pointer argument -> buffer representative (see :func:`kernel_aliases`);
            None treats all arguments as one buffer.
    """
    lines = source.split("\n")
    out: list[str] = []
    done = 0
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
                out.extend(line for s in _schedule(stmts, aliases) for line in s)
                out.append(lines[j - 1])
                done += 1
                i = j
                continue
        i += 1
    return "\n".join(out), done


def schedule_source(source: str, aliases: dict[str, str] | None = None) -> str:
    """``source`` with every recognised crowded block rescheduled."""
    return schedule_blocks(source, aliases)[0]


def kernel_aliases(source: str, wrapper: str) -> dict[str, str] | str:
    """Map each pointer argument of a kernel to a representative of its buffer.

    Two arguments map to one name when some call of the kernel in ``wrapper`` (inductor's
    generated Python module) passes one buffer, or two views or aliases of one buffer, to
    both.

    Returns:
        The map, or a string saying why it cannot be built.
    """
    sig = _SIGNATURE.search(source)
    if sig is None:
        return "no kernel signature"
    params = [p.strip().split()[-1].lstrip("*&") for p in sig.group(1).split(",") if p.strip()]
    at = wrapper.find(source)
    if at < 0:
        return "kernel source not found in the wrapper"
    defs = re.findall(rf"^({_NAME}) = async_compile\.cpp_pybinding\(", wrapper[:at], re.M)
    if not defs:
        return "kernel name not found in the wrapper"
    calls = re.findall(rf"^\s*{defs[-1]}\(([^()]*)\)\s*$", wrapper, re.M)
    if not calls:
        return f"no call of {defs[-1]} in the wrapper"
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.get(x, x) != x:
            x = parent[x]
        return x

    for pattern in _WRAPPER_ALIAS:
        for new, old in pattern.findall(wrapper):
            parent[find(new)] = find(old)
    param_parent = {p: p for p in params}

    def find_param(p: str) -> str:
        while param_parent[p] != p:
            p = param_parent[p]
        return p

    for call in calls:
        args = [a.strip() for a in call.split(",") if a.strip()]
        if len(args) != len(params):
            return f"a call of {defs[-1]} has {len(args)} arguments for {len(params)} parameters"
        first: dict[str, str] = {}
        for p, a in zip(params, args, strict=True):
            if not re.fullmatch(_NAME, a):
                return f"argument {a!r} is not a name"
            root = find(a)
            if root in first:
                param_parent[find_param(p)] = find_param(first[root])
            else:
                first[root] = p
    return {p: find_param(p) for p in params if _PTR.fullmatch(p)}


class ScheduleLog:
    """What :func:`scheduled_cpp_kernels` did to the kernels built while it was active."""

    def __init__(self) -> None:
        self.kernels = 0  # C++ kernels seen
        self.blocks = 0  # loop bodies rescheduled
        self.vec_sites = 0  # ATen calls rewritten by passes.vec_paths
        self.unknown_aliases: list[str] = []  # why a kernel's map was not built
        self.errors: list[str] = []  # kernels left unchanged by an unexpected form
        self.vec_errors: list[str] = []  # kernels vec_paths left unchanged (an error)
        self.hooked = False  # whether the hook could be installed


def _schedule_kernel(source_code: str, log: ScheduleLog) -> str:
    """:func:`schedule_blocks` with the alias map of the generated module calling us."""
    wrapper = _wrapper_source(3)
    aliases = (
        kernel_aliases(source_code, wrapper)
        if wrapper is not None
        else "generated module not found"
    )
    if isinstance(aliases, str):
        log.unknown_aliases.append(aliases)
        aliases = None
    source_code, n = schedule_blocks(source_code, aliases)
    log.blocks += n
    return source_code


def _wrapper_source(depth: int = 2) -> str | None:
    """The source of the generated module that is calling ``cpp_pybinding``, if found."""
    frame = sys._getframe(depth)
    for _ in range(8):
        if frame is None:
            return None
        path = frame.f_globals.get("__file__")
        if "async_compile" in frame.f_globals and path:
            try:
                with open(path) as f:
                    return f.read()
            except OSError:
                return None
        frame = frame.f_back
    return None


@contextlib.contextmanager
def scheduled_cpp_kernels(
    log: ScheduleLog | None = None, schedule: bool = True, vec: bool = False
) -> Iterator[ScheduleLog]:
    """While active, C++ kernels this thread builds go through the source passes.

    :func:`schedule_blocks` where ``schedule``, then
    :func:`~gpuvec_envs.compiler.passes.vec_paths.rewrite` where ``vec``.
    Patches ``AsyncCompile.cpp_pybinding`` (what inductor's generated modules call to
    build their C++ kernels) and restores it on exit; kernels built by other threads pass
    through unchanged. Callers serialise entries (see
    :data:`gpuvec_envs.compiler.flat.COMPILE_LOCK`).
    """
    log = log if log is not None else ScheduleLog()
    try:
        from torch._inductor.async_compile import AsyncCompile
    except ImportError:
        yield log
        return
    original = AsyncCompile.__dict__.get("cpp_pybinding")
    if original is None:
        yield log
        return
    owner = threading.get_ident()

    def cpp_pybinding(self: Any, argtypes: list[str], source_code: str) -> Any:
        if threading.get_ident() == owner:
            log.kernels += 1
            try:
                if schedule:
                    source_code = _schedule_kernel(source_code, log)
            except Exception as exc:  # noqa: BLE001 - an unexpected form: compile it unchanged
                log.errors.append(f"{type(exc).__name__}: {exc}")
            if vec:
                try:
                    source_code, n = vec_paths.rewrite(source_code)
                    log.vec_sites += n
                except Exception as exc:  # noqa: BLE001 - compile it as it is
                    log.vec_errors.append(f"{type(exc).__name__}: {exc}")
        return original(self, argtypes, source_code)

    AsyncCompile.cpp_pybinding = cpp_pybinding
    log.hooked = True
    try:
        yield log
    finally:
        AsyncCompile.cpp_pybinding = original
