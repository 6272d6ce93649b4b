"""The C++ loop-body scheduling pass (:mod:`gpuvec_envs.compiler.passes.cpp_schedule`)."""

from __future__ import annotations

import torch

from gpuvec_envs.compiler import compile_flat, resolve
from gpuvec_envs.compiler.passes import cpp_schedule

# Inductor's layout: loads, computation, stores (in_ptr1 is read and written in place).
BODY = """\
    for(int64_t x0=0; x0<64; x0+=16)
    {
        auto tmp0 = at::vec::Vectorized<int32_t>::loadu(in_ptr0 + x0, 16);
        auto tmp1 = at::vec::Vectorized<int32_t>::loadu(out_ptr1 + x0, 16);
        auto tmp2 = tmp0 + tmp0;
        auto tmp3 = tmp2 * tmp2;
        auto tmp4 = tmp1 | tmp3;
        auto tmp5 =
        [&]()
        {
            return tmp4 >> tmp2;
        }
        ()
        ;
        tmp3.store(out_ptr0 + x0, 16);
        tmp5.store(out_ptr1 + x0, 16);
        [&]
        {
            __at_align__ std::array<int32_t, 16> tmpbuf;
            tmp2.store(tmpbuf.data(), 16);
            for (long i = 0; i < 16; i++)
            {
                out_ptr2[2L*x0 + 2L*i] = tmpbuf[i];
            }
        }
        ()
        ;
    }"""


NAMES: dict[str, str] = {}  # an alias map in which every argument name is its own buffer


def stmt_order(source: str) -> list[str]:
    """The first token of each statement (``tmpN`` definitions and stores), in order."""
    out = []
    for line in source.split("\n"):
        s = line.strip()
        if s.startswith("auto tmp"):
            out.append(s.split()[1])
        elif ".store(out_ptr" in s or s.startswith("out_ptr"):
            out.append("store " + s.split("(")[1].split()[0] if ".store" in s else s[:8])
    return out


def test_loads_sink_to_their_first_use_and_stores_rise_to_their_value(monkeypatch):
    # a block this small keeps inductor's order unless the threshold is lowered
    assert cpp_schedule.schedule_source(BODY, NAMES) == BODY
    monkeypatch.setattr(cpp_schedule, "MIN_ACCESSES", 4)
    got = stmt_order(cpp_schedule.schedule_source(BODY, NAMES))
    assert got == [
        "tmp0",  # used at once
        "tmp2",
        "out_ptr2",  # the strided store (a lambda) right after its value
        "tmp3",
        "tmp1",  # the in-place load: moved down to its use, before the store to its buffer
        "store out_ptr0",
        "tmp4",
        "tmp5",
        "store out_ptr1",
    ]
    # the lambdas moved whole
    assert cpp_schedule.schedule_source(BODY, NAMES).count("[&]") == 2
    assert sorted(cpp_schedule.schedule_source(BODY, NAMES).split("\n")) == sorted(BODY.split("\n"))


def test_blocks_with_other_statements_are_left_as_they_are(monkeypatch):
    monkeypatch.setattr(cpp_schedule, "MIN_ACCESSES", 0)
    # an accumulator update (a reduction) is not one of the recognised forms
    body = BODY.replace(
        "        auto tmp2 = tmp0 + tmp0;\n", "        tmp_acc0 = tmp_acc0 + tmp0;\n"
    )
    assert cpp_schedule.schedule_source(body, NAMES) == body
    # a statement that touches a buffer some other way pins that buffer's loads
    pinned = BODY.replace(
        "        tmp3.store(out_ptr0 + x0, 16);\n",
        "        tmp3.store(out_ptr0 + x0, 16);\n        out_ptr1[x0] = in_ptr0[x0];\n",
    )
    order = stmt_order(cpp_schedule.schedule_source(pinned, NAMES))
    assert order.index("tmp1") == 1 and order.index("tmp0") == 0


def test_compiled_kernels_are_scheduled_and_compute_the_same(monkeypatch):
    """A compiled in-place update with several outputs: the C++ inductor builds goes through
    the pass (checked on the source it receives) and the results equal eager's."""
    seen: list[tuple[str, str]] = []
    schedule = cpp_schedule.schedule_blocks

    def spy(source: str, aliases: dict[str, str] | None) -> tuple[str, int]:
        out = schedule(source, aliases)
        seen.append((source, out[0]))
        return out

    def fn(s: torch.Tensor, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        t = (s * 3 + a) ^ (a >> 1)
        s.copy_(torch.where(t > 5, t - s, s + 1))
        return t & 0xFF, (t * s) | a

    gen = torch.Generator().manual_seed(0)
    s = torch.randint(-50, 50, (4096,), dtype=torch.int32, generator=gen)
    a = torch.randint(-50, 50, (4096,), dtype=torch.int32, generator=gen)
    monkeypatch.setattr(cpp_schedule, "schedule_blocks", spy)
    monkeypatch.setattr(cpp_schedule, "MIN_ACCESSES", 0)
    opts = resolve({"inductor": {"fx_graph_cache": False}})
    call = compile_flat(fn, (s.clone(), a), compiler=opts)
    assert dict((p.name, p.status) for p in call.passes)["cpp_schedule"] == "applied"
    # a vectorised loop body whose statements were moved
    assert any("loadu(in_ptr" in src and out != src for src, out in seen)
    want_s = s.clone()
    for _ in range(3):
        got, want = call(s, a), fn(want_s, a)
        assert all(map(torch.equal, got, want)) and torch.equal(s, want_s)
