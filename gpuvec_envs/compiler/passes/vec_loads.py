"""Full-width vector loads in inductor's generated C++ (CPU only).

Inductor writes every vector load with its element count,
``at::vec::Vectorized<int32_t>::loadu(ptr, static_cast<int64_t>(8))``, also when the count
is the whole vector. ATen's AVX2 integer vectors (``vec256_int.h``) serve that call by
copying the elements into a stack buffer with ``memcpy`` and loading the buffer; unless g++
folds the copy (it did with AVX-512 enabled, it did not for ``-march=x86-64-v3`` or
``znver3``), the load waits for two 16-byte stores to forward into one 32-byte load, a
stall of ~10 cycles per load. :func:`full_width_loads` rewrites each such call into
``(count == T::size() ? T::loadu(ptr) : T::loadu(ptr, count))``: the count is a literal
and ``size()`` a ``constexpr``, so g++ keeps one branch, the plain load where the count is
a whole vector and the original call elsewhere.
"""

from __future__ import annotations

import re

# ``at::vec::Vectorized<T>::loadu(`` or ``at::vec::VectorizedN<T,K>::loadu(``
_CALL = re.compile(r"at::vec::Vectorized(?:N)?<[\w:]+(?:,\s*\d+)?>::loadu\(")
_COUNT = re.compile(r"\s*(?:static_cast<int64_t>\((\d+)L?\)|(\d+)L?)\s*")


def _split_args(source: str, start: int) -> tuple[list[str], int] | None:
    """The top-level arguments of the call whose ``(`` is at ``start - 1``, and its end."""
    depth, args, begin = 0, [], start
    for i in range(start, len(source)):
        ch = source[i]
        if ch == "(":
            depth += 1
        elif ch == ")":
            if depth == 0:
                args.append(source[begin:i])
                return args, i + 1
            depth -= 1
        elif ch == "," and depth == 0:
            args.append(source[begin:i])
            begin = i + 1
    return None


def full_width_loads(source: str) -> tuple[str, int]:
    """``source`` with counted vector loads rewritten (module docstring); and how many."""
    out, pos, n = [], 0, 0
    for m in _CALL.finditer(source):
        if m.start() < pos:
            continue  # inside a call already rewritten
        parsed = _split_args(source, m.end())
        if parsed is None:
            continue
        args, end = parsed
        count = _COUNT.fullmatch(args[-1]) if len(args) == 2 else None
        if count is None:
            continue
        cls = m.group(0)[: -len("::loadu(")]
        ptr, k = args[0].strip(), count.group(1) or count.group(2)
        out.append(source[pos : m.start()])
        full, counted = f"{cls}::loadu({ptr})", f"{cls}::loadu({ptr},{args[1]})"
        out.append(f"({k} == {cls}::size() ? {full} : {counted})")
        pos, n = end, n + 1
    out.append(source[pos:])
    return "".join(out), n
