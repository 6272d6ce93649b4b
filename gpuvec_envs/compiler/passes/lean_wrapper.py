"""The lean form of inductor's generated CPU wrapper ``call(args)``.

The generated wrapper allocates every buffer, and every view of a buffer, on each call,
deletes each input and buffer by name and checks alignments: for a step with many scratch
views that is several microseconds per call. The lean call keeps the buffers that do not
reach the outputs (scratch) and their views from one call to the next, allocates only the
outputs' buffers, and runs the kernels as they are. It is built only if every statement of
the wrapper is one of the forms it knows (allocations, views, aliases, dtype views, size
reads, C++ kernel calls, ATen kernel calls of one buffer, buffer reuse, ``del``, asserts,
``return``).
"""

from __future__ import annotations

import inspect
import re
import textwrap
from collections.abc import Callable
from typing import Any

_NAME = r"[A-Za-z_]\w*"
_ALLOC = re.compile(rf"({_NAME}) = empty_strided_cpu\(.*\)$")
_VIEW = re.compile(rf"({_NAME}) = reinterpret_tensor\(({_NAME}), .*\)(  # alias)?$")
_DTYPE_VIEW = re.compile(rf"({_NAME}) = torch\.ops\.aten\.view\.dtype\(({_NAME}), torch\.\w+\)$")
_ALIAS = re.compile(rf"({_NAME}) = ({_NAME})$")
# an ATen kernel's call on one buffer (``eager_math``'s fallbacks): a fresh output per call
_ATEN_CALL = re.compile(rf"({_NAME}) = torch\.ops\.aten\.\w+\.default\(({_NAME})\)$")
_KERNEL = re.compile(rf"cpp_fused_\w*\(({_NAME}(?:, {_NAME})*)\)$")
_SIZES = re.compile(rf"{_NAME} = {_NAME}(\.size\(\)|\[\d+\])$")  # an input's size, read
_REUSE_SPLIT = re.compile(r"; (?=del )")
_ASSERT = r"assert_(size_stride|size_stride_grouped|alignment)\(.*\)"  # grouped: torch 2.14
_SKIP = re.compile(rf"(#.*|del .*|args\.clear\(\)|{_ASSERT})?$")


def lean_wrapper(call: Callable[..., Any]) -> tuple[Callable[..., Any] | None, str]:
    """``call`` without its per-call scratch work, or None, and what was done or why not.

    The returned call owns the scratch: calls must not overlap (the env shell steps
    sequentially).
    """
    try:
        return _make_lean(call)
    except Exception as exc:  # noqa: BLE001 - a form not foreseen: keep inductor's call
        return None, f"{type(exc).__name__}: {exc}"


def _make_lean(call: Callable[..., Any]) -> tuple[Callable[..., Any] | None, str]:
    """:func:`lean_wrapper`'s work; may raise on a source it does not expect."""
    lines = textwrap.dedent(inspect.getsource(call)).split("\n")
    # inductor writes a buffer reuse as one line, ``buf7 = buf6; del buf6  # reuse``
    body = [part.strip() for line in lines[1:] for part in _REUSE_SPLIT.split(line)]
    if not body or not body[0].endswith("= args"):
        return None, "the wrapper does not open with its arguments"
    setup, per_call, ret = [], [], None
    base: dict[str, str] = {}  # buffer or view -> the allocation it lives in
    for line in body[1:]:
        if _SKIP.match(line):
            continue
        if line.startswith("return ("):
            ret = line
            break
        m = _ALLOC.match(line) or _ATEN_CALL.match(line)
        if m:
            base[m.group(1)] = m.group(1)
        elif m := (_VIEW.match(line) or _DTYPE_VIEW.match(line) or _ALIAS.match(line)):
            if m.group(2) not in base:
                return None, f"a view of an input: {line!r}"
            base[m.group(1)] = base[m.group(2)]
        elif not (_KERNEL.match(line) or _SIZES.match(line)):
            return None, f"a statement of unknown form: {line!r}"
        per_call.append((m.group(1) if m else None, line))
    if ret is None:
        return None, "no return statement found"
    if any(b for b in re.findall(_NAME, ret) if b.startswith("arg")):
        return None, "an input is returned as it is"
    outputs = {base[n] for n in re.findall(_NAME, ret) if n in base}
    kept = []
    per_call_names = set(re.findall(_NAME, body[0]))  # the inputs, then what each call sets
    for name, line in per_call:
        scratch = name is not None and base[name] not in outputs
        reads = set(re.findall(_NAME, line.split(" = ", 1)[1])) if name is not None else set()
        if scratch and not _ATEN_CALL.match(line) and not reads & per_call_names:
            setup.append(line)
            continue
        if assigned := re.match(rf"({_NAME}) = ", line):
            per_call_names.add(assigned.group(1))
        if m := _DTYPE_VIEW.match(line):  # the tensor method is cheaper than the op
            kept.append(f"{m.group(1)} = {m.group(2)}.view({line.rsplit(', ', 1)[1][:-1]})")
        else:
            kept.append(line)
    source = "def make():\n"
    source += "".join(f"    {line}\n" for line in setup)
    source += f"    def call(args):\n        {body[0]}\n"
    source += "".join(f"        {line}\n" for line in kept)
    source += f"        {ret}\n    return call\n"
    namespace = dict(getattr(call, "__func__", call).__globals__)
    exec(source, namespace)  # noqa: S102
    lean = namespace["make"]()
    lean.source = source  # for inspection
    detail = f"{len(setup)} scratch statements hoisted, {len(kept)} per call"
    return lean, detail
