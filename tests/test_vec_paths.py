"""The ATen vector-path pass (:mod:`gpuvec_envs.compiler.passes.vec_paths`)."""

from __future__ import annotations

import pytest
import torch
from avx2_child import needs_avx2, run_avx2

from gpuvec_envs.compiler import compile_flat, resolve
from gpuvec_envs.compiler.passes import vec_paths

SOURCE = """\
auto tmp0 = at::vec::Vectorized<int32_t>::loadu(in_ptr0 + static_cast<int64_t>((static_cast<int64_t>(x1) % static_cast<int64_t>(16L))), static_cast<int64_t>(16));
auto tmp1 = at::vec::VectorizedN<int64_t,2>::loadu(in_ptr1 + static_cast<int64_t>(x0), static_cast<int64_t>(8));
auto tmp2 = at::vec::Vectorized<float>::loadu(in_ptr2 + static_cast<int64_t>(x0));
auto tmp3 = at::vec::Vectorized<int32_t>::loadu(in_ptr3 + static_cast<int64_t>(x0), n);
auto tmp4 = in_ptr4[static_cast<int64_t>(x0)];"""  # noqa: E501


def test_counted_loads_get_a_full_width_branch():
    out, n = vec_paths.full_width_loads(SOURCE)
    assert n == 2
    lines = out.split("\n")
    cls = "at::vec::Vectorized<int32_t>"
    ptr = "in_ptr0 + static_cast<int64_t>((static_cast<int64_t>(x1) % static_cast<int64_t>(16L)))"
    assert lines[0] == (
        f"auto tmp0 = (16 == {cls}::size() ? {cls}::loadu({ptr}) : "
        f"{cls}::loadu({ptr}, static_cast<int64_t>(16)));"
    )
    assert lines[1].startswith("auto tmp1 = (8 == at::vec::VectorizedN<int64_t,2>::size() ? ")
    # no count, a count that is not a literal, scalar loads: unchanged
    assert lines[2:] == SOURCE.split("\n")[2:]
    assert vec_paths.full_width_loads(out.replace("loadu", "load_")) == (
        out.replace("loadu", "load_"),
        0,
    )


def test_byte_conversions_call_the_helper():
    prefix = "#include <torch/csrc/inductor/cpp_prefix.h>\n"
    src = (
        prefix
        + "auto t1 = at::vec::convert<uint8_t>(t0);\nauto t3 = at::vec::convert<uint8_t>(t2);"
    )
    out, n = vec_paths.byte_conversions(src)
    assert n == 2 and out.count("namespace gpuvec {") == 1
    assert out.endswith("auto t1 = gpuvec::to_u8(t0);\nauto t3 = gpuvec::to_u8(t2);")
    assert out.startswith(prefix + vec_paths.HELPER)
    assert vec_paths.byte_conversions(src.replace(prefix, "")) == (src.replace(prefix, ""), 0)


def test_int32_ranges_become_a_broadcast_plus_a_constant():
    src = (
        "auto tmp5 = at::vec::Vectorized<int32_t>::arange(tmp4, 1);\n"
        "auto tmp6 = at::vec::Vectorized<int64_t>::arange(c10::convert<int64_t>(x1), 40L);\n"
        "auto tmp9 = at::vec::VectorizedN<int64_t,2>::arange(tmp14, 3);\n"
        "auto tmp7 = at::vec::Vectorized<float>::arange(tmp4, 1);\n"
        "auto tmp8 = at::vec::Vectorized<int32_t>::arange(tmp4, ks0);"
    )
    out, n = vec_paths.broadcast_ranges(src)
    assert n == 1
    assert out.split("\n") == [
        "auto tmp5 = (at::vec::Vectorized<int32_t>(tmp4) + "
        "at::vec::Vectorized<int32_t>::arange(0, 1));",
        *src.split("\n")[1:],  # int64, float, and a step that is not a literal: unchanged
    ]


BOOL_SOURCE = """\
#include <torch/csrc/inductor/cpp_prefix.h>
extern "C" void kernel(const bool* in_ptr0, const int32_t* in_ptr1, bool* out_ptr0, uint8_t* out_ptr1)
auto tmp0 = at::vec::VecMask<float,1>::from(in_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
auto tmp1 = at::vec::VecMask<float,1>::from(tmp9);
auto tmp2 = tmp0.template cast<int32_t,1>();
auto tmp3 = tmp2.to<uint8_t,1>();
auto tmp4 = tmp2.template cast<uint8_t,1>();
tmp2.store(out_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));
tmp3.store(out_ptr1 + static_cast<int64_t>(x0), static_cast<int64_t>(16));"""  # noqa: E501


def test_bool_masks_call_the_helper():
    """Two-argument mask loads, stores into ``bool*`` parameters and mask-to-byte
    conversions go through the helper; a scalar mask, a uint8 store: unchanged."""
    out, n = vec_paths.bool_masks(BOOL_SOURCE)
    assert n == 4 and out.count("namespace gpuvec {") == 1
    prefix = "#include <torch/csrc/inductor/cpp_prefix.h>\n"
    assert out.startswith(prefix + vec_paths.MASK_HELPER)
    body = out.split("\n")[-7:]
    assert body == [
        "auto tmp0 = gpuvec::mask_from(in_ptr0 + static_cast<int64_t>(x0), "
        "static_cast<int64_t>(16));",
        "auto tmp1 = at::vec::VecMask<float,1>::from(tmp9);",
        "auto tmp2 = tmp0.template cast<int32_t,1>();",
        "auto tmp3 = gpuvec::mask_to_u8(tmp2);",
        "auto tmp4 = gpuvec::mask_cast_u8(tmp2);",
        "gpuvec::store_mask(tmp2, out_ptr0 + static_cast<int64_t>(x0), static_cast<int64_t>(16));",
        "tmp3.store(out_ptr1 + static_cast<int64_t>(x0), static_cast<int64_t>(16));",
    ]
    assert vec_paths.bool_masks(BOOL_SOURCE.replace(prefix, "")) == (
        BOOL_SOURCE.replace(prefix, ""),
        0,
    )


STRIDED_SOURCE = """\
#include <torch/csrc/inductor/cpp_prefix.h>
auto tmp0 =
[&]
{
    __at_align__ std::array<int64_t, 16> tmpbuf;
    #pragma GCC unroll 16
    for (long x0_inner = 0; x0_inner < static_cast<int64_t>(16); x0_inner++)
    {
        tmpbuf[x0_inner] = in_ptr2[static_cast<int64_t>(1L + 2L*x0 + 2L*x0_inner)];
    }
    return at::vec::VectorizedN<int64_t,2>::loadu(tmpbuf.data(), static_cast<int64_t>(16));
}
()
;"""


def test_stride2_loads_call_the_helper():
    """A 16-lane buffer load at stride 2 becomes one helper call at its first element;
    another stride, a tail's count, a lane count that is not 16: unchanged."""
    prefix = "#include <torch/csrc/inductor/cpp_prefix.h>\n"
    out, n = vec_paths.strided_loads(STRIDED_SOURCE)
    assert n == 1 and out.startswith(prefix + vec_paths.STRIDED_HELPER)
    assert out.endswith(
        "auto tmp0 =\ngpuvec::load_stride2<at::vec::VectorizedN<int64_t,2>>"
        "(in_ptr2 + (1L + 2L*x0))\n;"
    )
    for old, new in [
        ("2L*x0_inner", "3L*x0_inner"),
        ("static_cast<int64_t>(16));", "static_cast<int64_t>(3L));"),
        ("VectorizedN<int64_t,2>::", "VectorizedN<int64_t,4>::"),
        ("2L*x0 + 2L", "2L*x0_inner + 2L"),
    ]:
        src = STRIDED_SOURCE.replace(old, new)
        assert vec_paths.strided_loads(src) == (src, 0), old
    # the whole pass: before the full-width rewrite would take the buffer load apart
    assert vec_paths.rewrite(STRIDED_SOURCE)[0] == out


def _strided_fn(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Column 1 of (N, 2) float32, int32, int64 and float64 tensors, each beside math on an
    (N,) tensor of its dtype (without contiguous loads, inductor makes no vector loop)."""
    pairs = zip(args[:4], args[4:], strict=True)
    return tuple(c[:, 1] * 3 + d * d - (d > 0).to(d.dtype) for c, d in pairs)


def _strided_inputs(n: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(2)
    cols = (
        torch.randn(n, 2, generator=gen),
        torch.randint(-9, 9, (n, 2), dtype=torch.int32, generator=gen),
        torch.randint(-(2**40), 2**40, (n, 2), generator=gen),
        torch.randn(n, 2, dtype=torch.float64, generator=gen),
    )
    return cols + tuple(c[:, 0].clone() for c in cols)


@pytest.mark.heavy
@pytest.mark.parametrize("on", [True, False])
def test_compiled_stride2_loads_compute_the_same(on, monkeypatch):
    """Stride-2 column loads of four dtypes, whole vectors and a tail (N = 4099), both
    settings; with the pass on, the AVX-512 kernels take the helper."""
    sites: list[int] = []
    rewrite = vec_paths.strided_loads

    def counted(source: str) -> tuple[str, int]:
        out = rewrite(source)
        sites.append(out[1])
        return out

    monkeypatch.setattr(vec_paths, "strided_loads", counted)
    args = _strided_inputs(4099)
    opts = resolve({"vec_paths": on, "inductor": {"fx_graph_cache": False}})
    call = compile_flat(_strided_fn, args, compiler=opts)
    assert all(map(torch.equal, call(*args), _strided_fn(*args)))
    if on and torch.backends.cpu.get_cpu_capability() == "AVX512":
        assert sum(sites) >= 4
    elif not on:
        assert sites == []


def _bool_fn(m: torch.Tensor, a: torch.Tensor, idx: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Bool maps copied, scattered into, selected with, combined and cast to bytes."""
    flat = m.reshape(m.shape[0], -1)
    m2 = flat.scatter(1, idx[:, None], (a[:, None] > 0)).reshape(m.shape)
    m3 = m2 & ~m
    return (
        m2,
        m3,
        torch.where(m2, a[:, None, None].float(), 0.5),
        (m3 | m).to(torch.uint8),
        torch.where(m3, 7, a[:, None, None].to(torch.uint8)),
    )


def _bool_inputs(n: int) -> tuple[torch.Tensor, ...]:
    gen = torch.Generator().manual_seed(1)
    m = torch.rand(n, 13, 11, generator=gen) < 0.3  # 143 cells: full vectors and a tail
    a = torch.randint(-3, 3, (n,), generator=gen)
    return m, a, torch.randint(0, 143, (n,), generator=gen)


@pytest.mark.heavy
@pytest.mark.parametrize("on", [True, False])
def test_compiled_bool_kernels_compute_the_same(on):
    """Bool loads, stores and byte conversions, whole vectors and tails, both settings."""
    args = _bool_inputs(37)
    opts = resolve({"vec_paths": on, "inductor": {"fx_graph_cache": False}})
    call = compile_flat(_bool_fn, args, compiler=opts)
    status = dict((p.name, p.status) for p in call.passes)["vec_paths"]
    assert status == ("applied" if on else "off")
    assert all(map(torch.equal, call(*args), _bool_fn(*args)))


def _fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
    c = torch.where(a != 0, (a & 15) - 1, -9) + (b >> 3).to(torch.int32)
    # a cell index against per-row positions: Vectorized<int32_t>::arange per vector
    cell = torch.arange(37, dtype=torch.int32)
    hit = torch.where(cell == (a[:37, None] & 31), 1 << 8, 0) | (cell * 3)
    return (
        c,
        (b * 3) ^ a.to(torch.int64),
        a.to(torch.uint8),
        (c > 5).to(torch.uint8),
        hit.to(torch.int32),
    )


def _inputs() -> tuple[torch.Tensor, torch.Tensor]:
    gen = torch.Generator().manual_seed(0)
    a = torch.randint(-(2**31), 2**31 - 1, (4099,), dtype=torch.int32, generator=gen)
    b = torch.randint(-(2**62), 2**62, (4099,), dtype=torch.int64, generator=gen)
    return a, b


@pytest.mark.heavy
@pytest.mark.parametrize("on", [True, False])
def test_compiled_integer_kernels_compute_the_same(on):
    """Integer loads of full vectors and of a tail (N = 4099), int32 -> uint8 conversions
    (low byte, negative and large values), both switch settings, on this CPU's ISA."""
    a, b = _inputs()
    opts = resolve({"vec_paths": on, "inductor": {"fx_graph_cache": False}})
    call = compile_flat(_fn, (a, b), compiler=opts)
    status = dict((p.name, p.status) for p in call.passes)["vec_paths"]
    assert status == ("applied" if on else "off")
    assert all(map(torch.equal, call(a, b), _fn(a, b)))


@pytest.mark.heavy
@needs_avx2
def test_avx2_code_computes_the_same(tmp_path):
    """The same check on AVX2 code, where the pass's forms differ from ATen's, built for an
    AVX2 CPU (``-march=x86-64-v3``) in a child process with a fresh inductor cache."""
    script = (
        "import test_vec_paths as t\n"
        "from gpuvec_envs.compiler import compile_flat, resolve\n"
        "a, b = t._inputs()\n"
        "call = compile_flat(t._fn, (a, b), compiler=resolve({}))\n"
        "print(dict((p.name, p.status) for p in call.passes)['vec_paths'],\n"
        "      all(map(torch.equal, call(a, b), t._fn(a, b))))\n"
        "args = t._bool_inputs(37)\n"
        "call = compile_flat(t._bool_fn, args, compiler=resolve({}))\n"
        "print(all(map(torch.equal, call(*args), t._bool_fn(*args))))\n"
    )
    assert run_avx2(script, tmp_path) == ["applied", "True", "True"]
