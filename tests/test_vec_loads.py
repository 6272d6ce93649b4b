"""The full-width vector load pass (:mod:`gpuvec_envs.compiler.passes.vec_loads`)."""

from __future__ import annotations

import pytest
import torch

from gpuvec_envs.compiler import compile_flat, resolve
from gpuvec_envs.compiler.passes import vec_loads

SOURCE = """\
auto tmp0 = at::vec::Vectorized<int32_t>::loadu(in_ptr0 + static_cast<int64_t>((static_cast<int64_t>(x1) % static_cast<int64_t>(16L))), static_cast<int64_t>(16));
auto tmp1 = at::vec::VectorizedN<int64_t,2>::loadu(in_ptr1 + static_cast<int64_t>(x0), static_cast<int64_t>(8));
auto tmp2 = at::vec::Vectorized<float>::loadu(in_ptr2 + static_cast<int64_t>(x0));
auto tmp3 = at::vec::Vectorized<int32_t>::loadu(in_ptr3 + static_cast<int64_t>(x0), n);
auto tmp4 = in_ptr4[static_cast<int64_t>(x0)];"""  # noqa: E501


def test_counted_loads_get_a_full_width_branch():
    out, n = vec_loads.full_width_loads(SOURCE)
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
    assert vec_loads.full_width_loads(out.replace("loadu", "load_")) == (
        out.replace("loadu", "load_"),
        0,
    )


@pytest.mark.parametrize("on", [True, False])
def test_compiled_integer_kernels_compute_the_same(on):
    """Integer loads of full vectors and of a tail (N = 4099), both switch settings."""

    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, ...]:
        c = torch.where(a != 0, (a & 15) - 1, -9) + (b >> 3).to(torch.int32)
        return c, (b * 3) ^ a.to(torch.int64)

    gen = torch.Generator().manual_seed(0)
    a = torch.randint(-(2**31), 2**31 - 1, (4099,), dtype=torch.int32, generator=gen)
    b = torch.randint(-(2**62), 2**62, (4099,), dtype=torch.int64, generator=gen)
    opts = resolve({"vec_loads": on, "inductor": {"fx_graph_cache": False}})
    call = compile_flat(fn, (a, b), compiler=opts)
    status = dict((p.name, p.status) for p in call.passes)["vec_loads"]
    assert status == ("applied" if on else "off")
    assert all(map(torch.equal, call(a, b), fn(a, b)))
