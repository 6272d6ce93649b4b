"""The wrapping int32 product pass (:mod:`gpuvec_envs.compiler.passes.wrapping`)."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import torch
from avx2_child import needs_avx2, run_avx2

from gpuvec_envs.compiler import compile_flat, resolve
from gpuvec_envs.compiler.passes import wrapping
from gpuvec_envs.core import rng as rng_mod
from gpuvec_envs.core.rng import STEP, Rng, keys_from_seeds

#: Hashes traced by :func:`_draws`: two for the base, one broadcast hash per draw call.
HASHES = 2 + 2


def _draws(k0: torch.Tensor, k1: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, ...]:
    rng = Rng(k0, k1, c, STEP)
    return rng.bits(4), rng.uniform(3, low=-0.05, high=0.05, dtype=torch.float64)


def _inputs(n: int = 1003) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """N not a multiple of any vector width: the kernels' tails run too."""
    k0, k1 = keys_from_seeds(torch.arange(n))
    return k0, k1, torch.arange(n) * 3 + 2**31 - 700  # counters across the int32 sign bit


def _status(call) -> tuple[str, str]:  # noqa: ANN001
    p = {p.name: p for p in call.passes}["wrapping_mul"]
    return p.status, p.detail


def _numpy_bits(k0: torch.Tensor, k1: torch.Tensor, c: torch.Tensor) -> np.ndarray:
    """The draws' bits by numpy's uint32 arithmetic (wrapping multiply), for reference."""
    low = lambda t: t.numpy().astype(np.uint32)  # noqa: E731
    base = rng_mod._hash_np(rng_mod._hash_np(low(c) ^ low(k1) ^ np.uint32(STEP)) ^ low(k0))
    consts = np.array([rng_mod.stream_constant(k) for k in range(4)], np.uint32)
    return rng_mod._hash_np(base[:, None] ^ consts[None, :]).astype(np.int64)


@pytest.mark.heavy
@pytest.mark.parametrize("on", [True, False])
def test_draws_compiled_either_way_equal_eager_and_numpy(on):
    args = _inputs()
    eager = _draws(*args)
    call = compile_flat(_draws, args, compiler=resolve({"wrapping_mul": on}))
    out = call(*args)
    assert all(map(torch.equal, out, eager))
    assert np.array_equal(out[0].numpy(), _numpy_bits(*args))
    if on:  # two products per hash, each traced as one multiply
        assert _status(call) == ("applied", f"{2 * HASHES} products; -fwrapv on 1 kernels")
    else:
        assert _status(call) == ("off", "")


def test_single_multiply_only_while_a_cpu_trace_is_flagged():
    """Outside the pass (eager, dynamo) the 16-bit form is traced and no product counted."""
    x = torch.tensor([-1, 2**31 - 1, -(2**31), 0x12345678], dtype=torch.int32)
    want = torch.from_numpy((x.numpy().view(np.uint32) * np.uint32(rng_mod._M1)).view(np.int32))
    assert wrapping.product_log() is None
    assert torch.equal(rng_mod._mul32(x, rng_mod._M1), want)
    log = wrapping.WrapLog()
    with wrapping.wrapping_products(log):
        assert torch.equal(rng_mod._mul32(x, rng_mod._M1), want)
        assert log.products == 1
        compiled = torch.compile(rng_mod._mul32, backend="eager", fullgraph=True)
        assert torch.equal(compiled(x, rng_mod._M1), want)
        assert log.products == 1  # dynamo saw no log
    assert wrapping.product_log() is None


@pytest.mark.heavy
def test_the_flag_reaches_the_kernel_command_line(monkeypatch):
    from torch._inductor import cpp_builder

    lines: list[str] = []
    original = cpp_builder.CppBuilder.get_command_line

    def spy(self):  # noqa: ANN001, ANN202
        line = original(self)
        lines.append(line)
        return line

    monkeypatch.setattr(cpp_builder.CppBuilder, "get_command_line", spy)
    args = _inputs(67)
    for on in (True, False):
        lines.clear()
        compile_flat(_draws, args, compiler=resolve({"wrapping_mul": on}))
        assert lines, "no C++ build seen"
        # any: a process's first compile also builds inductor's ISA probes, without it
        flagged = [wrapping.FLAG in line.split() for line in lines]
        assert any(flagged) if on else not any(flagged), on


@pytest.mark.heavy
def test_without_the_hook_point_the_pass_fails_and_traces_the_16_bit_form(monkeypatch):
    from torch._inductor.codecache import CppPythonBindingsCodeCache as cache

    plain = cache.load_pybinding_async.__func__
    monkeypatch.setattr(cache, "load_pybinding_async", lambda *a, **k: plain(cache, *a, **k))
    args = _inputs(67)
    call = compile_flat(_draws, args, compiler=resolve({}))
    assert _status(call) == (
        "failed",
        "CppPythonBindingsCodeCache.load_pybinding_async is not a classmethod",
    )
    assert all(map(torch.equal, call(*args), _draws(*args)))


def test_no_flag_on_windows(monkeypatch):
    monkeypatch.setattr(sys, "platform", "win32")
    log = wrapping.WrapLog()
    with wrapping.wrapv_kernels(log) as why:
        assert why == "-fwrapv is a GCC/Clang flag (inductor builds with MSVC on Windows)"


def test_the_hook_is_removed_after_an_error():
    from torch._inductor.codecache import CppPythonBindingsCodeCache as cache

    before = cache.__dict__["load_pybinding_async"]
    with pytest.raises(ZeroDivisionError), wrapping.wrapv_kernels(wrapping.WrapLog()) as why:
        assert why is None and cache.__dict__["load_pybinding_async"] is not before
        1 / 0  # noqa: B018
    assert cache.__dict__["load_pybinding_async"] is before


@pytest.mark.heavy
@needs_avx2
def test_avx2_code_computes_the_same(tmp_path):
    """AVX2 kernels (``-march=x86-64-v3``, fresh inductor cache, a child process)."""
    script = (
        "import numpy as np, test_wrapping as t\n"
        "from gpuvec_envs.compiler import compile_flat, resolve\n"
        "args = t._inputs()\n"
        "call = compile_flat(t._draws, args, compiler=resolve({}))\n"
        "out = call(*args)\n"
        "print(t._status(call)[0], all(map(torch.equal, out, t._draws(*args))),\n"
        "      np.array_equal(out[0].numpy(), t._numpy_bits(*args)))\n"
    )
    assert run_avx2(script, tmp_path) == ["applied", "True", "True"]


def test_minigrid_entries_switch_the_pass_off():
    """Their resets broadcast per-env draws into grid kernels (docs/compiler.md)."""
    from gpuvec_envs.compiler import resolve as resolve_options
    from gpuvec_envs.registry import REGISTRY, compiler_options_for

    for e in REGISTRY:
        on = resolve_options(compiler_options_for(e.id)).wrapping_mul
        assert on == (not e.id.startswith("gpuvec/MiniGrid-")), e.id
