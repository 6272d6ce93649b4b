"""Faster forms of five ATen vector operations in inductor's generated C++ (CPU only).

ATen's AVX2 code takes a path through a stack buffer for two operations inductor emits in
every fused step; unless g++ folds the copy (it did with AVX-512 enabled, it does not when
it targets an AVX2 CPU, ``-march=znver3`` or ``x86-64-v3``), each waits for small stores
to forward into a wider load (~10 cycles). The third is built from scalars:

* **Counted loads.** Inductor writes every vector load with its element count,
  ``at::vec::Vectorized<int32_t>::loadu(ptr, static_cast<int64_t>(8))``, also for a whole
  vector; the AVX2 integer vectors (``vec256_int.h``) serve it with a ``memcpy`` into a
  buffer. :func:`full_width_loads` rewrites each such call into
  ``(count == T::size() ? T::loadu(ptr) : T::loadu(ptr, count))``: the count is a literal
  and ``size()`` a ``constexpr``, so g++ keeps one branch.
* **int32 -> uint8.** ``at::vec::convert<uint8_t>`` of an AVX2 ``Vectorized<int32_t>``
  (flags stored as bytes) converts lane by lane into a buffer. :func:`byte_conversions`
  calls :data:`HELPER`'s ``gpuvec::to_u8`` instead: two ``packus`` instructions for that
  argument type on AVX2, ATen's conversion for any other.
* **int32 ranges.** ``Vectorized<int32_t>::arange(base, step)`` (a cell index compared
  with positions, in grid observations) builds its lanes one scalar insert at a time
  (~12 instructions per AVX2 vector). :func:`broadcast_ranges` writes
  ``(Vectorized<int32_t>(base) + Vectorized<int32_t>::arange(0, step))`` for a literal
  ``step``: the second term is a constant, so a broadcast and an add remain.
* **bool masks.** A bool tensor's vector load (``VecMask<float,1>::from(ptr, 16)``) and
  store (``mask.store(bool_ptr, 16)``) go lane by lane through buffers, the store through
  a 64-lane bool vector on AVX-512, and so does a mask's conversion to bytes
  (``to<uint8_t,1>``, ``cast<uint8_t,1>``): Craftax's compiled step, whose state holds
  bool maps, ran 2x slower than its eager one. :func:`bool_masks` calls
  :data:`MASK_HELPER` instead: a byte test and a mask expansion on AVX-512, ATen's form
  elsewhere and for partial vectors.
* **stride-2 loads.** A column of an (N, 2) tensor (a two-action one-hot, TorchRL's
  default action encoding) is loaded 16 scalars at a time into a buffer, then as a
  vector. :func:`strided_loads` calls :data:`STRIDED_HELPER` instead: whole-vector loads
  and a permute on AVX-512 (TorchRL's CartPole step at N = 65536: ~10 µs less).
"""

from __future__ import annotations

import re
from collections.abc import Callable

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


#: Inserted after inductor's prefix header by :func:`byte_conversions`.
HELPER = """
namespace gpuvec {
template <typename T>
inline auto to_u8(const T& v) { return at::vec::convert<uint8_t>(v); }
#if defined(CPU_CAPABILITY_AVX2)
// static_cast<uint8_t> of each lane (the low byte), as ATen's conversion
inline at::vec::Vectorized<uint8_t> to_u8(const at::vec::Vectorized<int32_t>& v) {
  __m256i x = _mm256_and_si256(v, _mm256_set1_epi32(0xFF));
  __m128i w = _mm_packus_epi32(_mm256_castsi256_si128(x), _mm256_extracti128_si256(x, 1));
  return _mm256_zextsi128_si256(_mm_packus_epi16(w, w));
}
#endif
}  // namespace gpuvec
"""
_PREFIX = "#include <torch/csrc/inductor/cpp_prefix.h>\n"
_TO_U8 = "at::vec::convert<uint8_t>("


#: Inserted after inductor's prefix header by :func:`bool_masks`.
MASK_HELPER = """
namespace gpuvec {
template <typename U>
inline at::vec::VecMask<float, 1> mask_from(const U* b, int64_t count) {
  return at::vec::VecMask<float, 1>::from(b, count);
}
template <typename V, typename U>
inline void store_mask(V& v, U* b, int64_t count) { v.store(b, count); }
template <typename M>
inline auto mask_to_u8(const M& m) { return m.template to<uint8_t, 1>(); }
template <typename M>
inline auto mask_cast_u8(const M& m) { return m.template cast<uint8_t, 1>(); }
#if defined(CPU_CAPABILITY_AVX512)
// 16-lane float and int32 masks: their lanes as bits (nonzero lanes set)
template <typename T>
constexpr bool lanes16 = std::is_same_v<T, float> || std::is_same_v<T, int32_t>;
template <typename T>
inline __mmask16 mask_bits(const at::vec::VecMask<T, 1>& m) {
  __m512i x;
  if constexpr (std::is_same_v<T, float>) {
    x = _mm512_castps_si512(m[0]);
  } else {
    x = m[0];
  }
  return _mm512_test_epi32_mask(x, x);
}
// 16 bools -> 16 float mask lanes (all ones where the byte is nonzero), as ATen's from()
inline at::vec::VecMask<float, 1> mask_from(const bool* b, int64_t count) {
  if (count != 16) return at::vec::VecMask<float, 1>::from(b, count);
  __m128i x = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b));
  __m512i m = _mm512_movm_epi32(_mm_test_epi8_mask(x, x));
  return at::vec::VecMask<float, 1>(at::vec::Vectorized<float>(_mm512_castsi512_ps(m)));
}
// 16 mask lanes -> 16 bools (1 where the lane is nonzero), as ATen's store()
template <typename T, std::enable_if_t<lanes16<T>, int> = 0>
inline void store_mask(at::vec::VecMask<T, 1>& v, bool* b, int64_t count) {
  if (count != 16) { v.store(b, count); return; }
  _mm_storeu_si128(reinterpret_cast<__m128i*>(b), _mm_maskz_set1_epi8(mask_bits(v), 1));
}
// 16 mask lanes -> the low 16 of 64 byte lanes (1, or all ones as a mask), the rest 0
template <typename T, std::enable_if_t<lanes16<T>, int> = 0>
inline at::vec::Vectorized<uint8_t> mask_to_u8(const at::vec::VecMask<T, 1>& m) {
  return at::vec::Vectorized<uint8_t>(_mm512_maskz_set1_epi8(mask_bits(m), 1));
}
template <typename T, std::enable_if_t<lanes16<T>, int> = 0>
inline at::vec::VecMask<uint8_t, 1> mask_cast_u8(const at::vec::VecMask<T, 1>& m) {
  return at::vec::VecMask<uint8_t, 1>(at::vec::Vectorized<uint8_t>(_mm512_movm_epi8(mask_bits(m))));
}
#endif
}  // namespace gpuvec
"""
#: Inserted after inductor's prefix header by :func:`strided_loads`.
STRIDED_HELPER = """
namespace gpuvec {
// p[0], p[2], ..., p[30] as a 16-lane vector V, reading nothing past p[30]; ATen's form
// (a buffer) but on AVX-512
template <typename V, typename T>
inline V load_stride2(const T* p) {
#if defined(CPU_CAPABILITY_AVX512)
  if constexpr (sizeof(T) == 4) {  // two loads and a permute
    const __m512i even =
        _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    __m512i a = _mm512_loadu_si512(p), b = _mm512_maskz_loadu_epi32(0x7FFF, p + 16);
    __m512i r = _mm512_permutex2var_epi32(a, even, b);
    if constexpr (std::is_same_v<T, float>) {
      return V(_mm512_castsi512_ps(r));
    } else {
      return V(r);
    }
  } else {  // four loads and two permutes
    const __m512i even = _mm512_setr_epi64(0, 2, 4, 6, 8, 10, 12, 14);
    __m512i a = _mm512_loadu_si512(p), b = _mm512_loadu_si512(p + 8);
    __m512i c = _mm512_loadu_si512(p + 16), d = _mm512_maskz_loadu_epi64(0x7F, p + 24);
    __m512i lo = _mm512_permutex2var_epi64(a, even, b), hi = _mm512_permutex2var_epi64(c, even, d);
    V r;
    if constexpr (std::is_same_v<T, double>) {
      r[0] = at::vec::Vectorized<double>(_mm512_castsi512_pd(lo));
      r[1] = at::vec::Vectorized<double>(_mm512_castsi512_pd(hi));
    } else {
      r[0] = at::vec::Vectorized<T>(lo);
      r[1] = at::vec::Vectorized<T>(hi);
    }
    return r;
  }
#else
  __at_align__ std::array<T, 16> buf;
  for (int64_t i = 0; i < 16; i++) buf[i] = p[2 * i];
  return V::loadu(buf.data(), static_cast<int64_t>(16));
#endif
}
}  // namespace gpuvec
"""
# inductor's load of 16 elements through a buffer (one lambda): dtype, var, pointer, index, class
_STRIDED = re.compile(
    r"\[&\]\s*\{\s*__at_align__ std::array<(float|int32_t|int64_t|double), 16> tmpbuf;\s*"
    r"(?:#pragma GCC unroll 16\s*)?"
    r"for \(long (x\d+_inner) = 0; \2 < static_cast<int64_t>\(16\); \2\+\+\)\s*\{\s*"
    r"tmpbuf\[\2\] = (\w+)\[static_cast<int64_t>\(([^\[\];]*)\)\];\s*\}\s*"
    r"return (at::vec::VectorizedN?<\1(?:,\s*\d+)?>)::loadu\(tmpbuf\.data\(\), "
    r"static_cast<int64_t>\(16\)\);\s*\}\s*\(\)"
)
# the 16-lane vector class of each dtype, as inductor spells it on AVX-512
_LANES16 = {
    "float": "at::vec::Vectorized<float>",
    "int32_t": "at::vec::Vectorized<int32_t>",
    "int64_t": "at::vec::VectorizedN<int64_t,2>",
    "double": "at::vec::VectorizedN<double,2>",
}


def strided_loads(source: str) -> tuple[str, int]:
    """Loads of 16 elements at stride 2 through :data:`STRIDED_HELPER`; and how many.

    Inductor loads a column of a row-major (N, 2) tensor (``x[:, 1]``: a two-action
    one-hot, as TorchRL encodes CartPole's actions) 16 scalars at a time into a buffer,
    then as a vector. Such a lambda, index ``base + 2L*xK_inner``, becomes
    ``gpuvec::load_stride2<V>(ptr + (base))``. Other strides stay: AVX-512 gathers
    measured no faster than the buffer there.
    """
    if _PREFIX not in source:
        return source, 0
    n = 0

    def form(m: re.Match[str]) -> str:
        nonlocal n
        dtype, var, ptr, index, cls = m.groups()
        base = index.removesuffix(f" + 2L*{var}")
        if cls.replace(" ", "") != _LANES16[dtype] or base == index or var in base:
            return m.group(0)
        n += 1
        return f"gpuvec::load_stride2<{cls}>({ptr} + ({base}))"

    source = _STRIDED.sub(form, source)
    return (source.replace(_PREFIX, _PREFIX + STRIDED_HELPER, 1), n) if n else (source, 0)


_MASK_FROM = re.compile(r"at::vec::VecMask<float,\s*1>::from\(")
# a kernel's bool pointer parameters: ``bool* out_ptr3``, ``const bool* in_ptr8``
_BOOL_PTR = re.compile(r"\bbool\*\s*((?:in_out_ptr|out_ptr)\d+)\b")
_STORE = re.compile(r"\b(tmp\d+)\.store\(\s*((?:in_out_ptr|out_ptr)\d+)\b")
_TO_BYTES = re.compile(r"\b(tmp\d+)\.(?:template )?(to|cast)<uint8_t,\s*1>\(\)")


def bool_masks(source: str) -> tuple[str, int]:
    """Bool vector loads, stores and byte conversions through :data:`MASK_HELPER`; and how many.

    Loads: every two-argument ``VecMask<float,1>::from(ptr, count)`` (the helper keeps
    ATen's form for pointers other than ``bool*``). Stores: ``tmpN.store(ptr, ...)`` into
    a kernel parameter declared ``bool*``. Conversions of a mask to bytes:
    ``tmpN.to<uint8_t,1>()`` and ``tmpN.template cast<uint8_t,1>()`` (the helper keeps
    ATen's form for masks other than 16-lane float and int32 ones).
    """
    if _PREFIX not in source:
        return source, 0

    def form(cls: str, args: list[str]) -> str | None:
        return f"gpuvec::mask_from({','.join(args)})" if len(args) == 2 else None

    source, loads = _rewrite_calls(source, _MASK_FROM, "from", form)
    bools = set(_BOOL_PTR.findall(source))
    stores = 0

    def store(m: re.Match[str]) -> str:
        nonlocal stores
        if m.group(2) not in bools:
            return m.group(0)
        stores += 1
        return f"gpuvec::store_mask({m.group(1)}, {m.group(2)}"

    source = _STORE.sub(store, source)
    source, casts = _TO_BYTES.subn(lambda m: f"gpuvec::mask_{m.group(2)}_u8({m.group(1)})", source)
    n = loads + stores + casts
    return (source.replace(_PREFIX, _PREFIX + MASK_HELPER, 1), n) if n else (source, 0)


def rewrite(source: str) -> tuple[str, int]:
    """The five rewrites (module docstring); returns the source and how many sites changed."""
    source, strided = strided_loads(source)  # before full_width_loads rewrites the lambda
    source, loads = full_width_loads(source)
    source, bytes_ = byte_conversions(source)
    source, ranges = broadcast_ranges(source)
    source, masks = bool_masks(source)
    return source, loads + bytes_ + ranges + masks + strided


# int32 only: an int64 range feeds operations that AVX2 emulates lane by lane (shifts,
# multiplies), which read the scalars g++ keeps for ATen's form; a vector sum would be
# taken apart again through the stack (SpaceInvaders' step: 1.3x slower).
_ARANGE = re.compile(r"at::vec::Vectorized<int32_t>::arange\(")
_LITERAL = re.compile(r"\s*-?\d+L?\s*")


def broadcast_ranges(source: str) -> tuple[str, int]:
    """int32 ``arange(b, s)`` (literal ``s``) as broadcast plus constant; and how many."""

    def form(cls: str, args: list[str]) -> str | None:
        if len(args) != 2 or _LITERAL.fullmatch(args[1]) is None:
            return None
        return f"({cls}({args[0].strip()}) + {cls}::arange(0, {args[1].strip()}))"

    return _rewrite_calls(source, _ARANGE, "arange", form)


def byte_conversions(source: str) -> tuple[str, int]:
    """``at::vec::convert<uint8_t>(x)`` -> ``gpuvec::to_u8(x)``; the count of calls."""
    n = source.count(_TO_U8)
    if n == 0 or _PREFIX not in source:
        return source, 0
    source = source.replace(_TO_U8, "gpuvec::to_u8(")  # before the helper, which calls it
    return source.replace(_PREFIX, _PREFIX + HELPER, 1), n


def full_width_loads(source: str) -> tuple[str, int]:
    """``source`` with counted vector loads rewritten (module docstring); and how many."""

    def form(cls: str, args: list[str]) -> str | None:
        count = _COUNT.fullmatch(args[-1]) if len(args) == 2 else None
        if count is None:
            return None
        ptr, k = args[0].strip(), count.group(1) or count.group(2)
        full, counted = f"{cls}::loadu({ptr})", f"{cls}::loadu({ptr},{args[1]})"
        return f"({k} == {cls}::size() ? {full} : {counted})"

    return _rewrite_calls(source, _CALL, "loadu", form)


def _rewrite_calls(
    source: str,
    call: re.Pattern[str],
    method: str,
    form: Callable[[str, list[str]], str | None],
) -> tuple[str, int]:
    """``source`` with each call matched by ``call`` replaced by ``form(cls, args)``.

    ``call`` matches up to ``<cls>::<method>(``; a call whose ``form`` is None stays.
    Returns the source and how many calls changed.
    """
    out, pos, n = [], 0, 0
    for m in call.finditer(source):
        if m.start() < pos:
            continue  # inside a call already rewritten
        parsed = _split_args(source, m.end())
        if parsed is None:
            continue
        args, end = parsed
        new = form(m.group(0)[: -len(f"::{method}(")], args)
        if new is None:
            continue
        out.append(source[pos : m.start()])
        out.append(new)
        pos, n = end, n + 1
    out.append(source[pos:])
    return "".join(out), n
