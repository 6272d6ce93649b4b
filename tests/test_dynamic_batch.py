"""``dynamic_batch``: one compiled step for every ``num_envs``, equal to the fixed-size one."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch
from torch._dynamo.utils import counters

import gpuvec_envs  # noqa: F401 - registers the IDs
from gpuvec_envs.compiler import compile_flat, flat, warm
from gpuvec_envs.compiler.options import CompilerOptions

DYNAMIC = {"dynamic_batch": True}


def _run(env_id: str, n: int, backend: str, options: dict | None, steps: int) -> list:
    """Outputs of ``steps`` seeded steps (float64, autoresets every 7 steps at most)."""
    env = gym.make_vec(
        env_id,
        num_envs=n,
        backend=backend,
        dtype=torch.float64,
        max_episode_steps=7,
        compiler_options=options,
    )
    env.reset(seed=11)
    gen = torch.Generator().manual_seed(2)
    outs = []
    for _ in range(steps):
        action = torch.randint(0, int(env.single_action_space.n), (n,), generator=gen)
        outs.append([t.clone() for t in env.step(action)[:4]])
    return outs, env.unwrapped


@pytest.mark.parametrize(
    "env_id",
    [
        "gpuvec/CartPole-v1",
        pytest.param("gpuvec/MiniGrid-DoorKey-5x5-v0", marks=pytest.mark.slow),  # ~40 s
    ],
)
def test_a_second_size_reuses_the_first_ones_code_and_equals_eager(env_id):
    """N=48 compiles; N=80 reuses its call in this process (no trace, no cache lookup);
    N=112 in a fresh process (the in-process calls dropped) is a hit in inductor's cache.
    Every size steps like eager (integer worlds bitwise, float64 physics to 1e-9, flags
    exact; the grid's shifts broadcast a symbolic N)."""
    for n, source in ((48, None), (80, "process"), (112, "inductor cache")):
        if source == "inductor cache":
            flat._DYNAMIC_CALLS.clear()
        counters.clear()
        graphs = flat.compiled_graphs
        got, env = _run(env_id, n, "compile", DYNAMIC, 20)
        want, _ = _run(env_id, n, "eager", None, 20)
        for t, (x, y) in enumerate(zip(got, want, strict=True)):
            for u, v in zip(x[:2], y[:2], strict=True):  # float64 physics: to 1e-9
                torch.testing.assert_close(u, v, rtol=0, atol=1e-9, msg=f"N={n} step {t}")
            assert torch.equal(x[2], y[2]) and torch.equal(x[3], y[3]), (n, t)
        report = env.compile_report
        assert report.pass_status("dynamic_batch") == "applied", str(report)
        assert report.fallbacks == (), str(report)
        cache = counters["inductor"]
        lookups = (cache["fxgraph_cache_hit"], cache["fxgraph_cache_miss"])
        if source == "process":
            assert flat.compiled_graphs == graphs and lookups == (0, 0)
        elif source == "inductor cache":
            assert flat.compiled_graphs == graphs + 1 and lookups == (1, 0)


def test_a_function_that_fixes_the_size_compiles_for_it_and_says_so():
    """``int()`` of the batch size specialises it: the one size compiles, reported failed."""

    def fn(x: torch.Tensor) -> torch.Tensor:
        return x + torch.arange(int(x.shape[0]), dtype=x.dtype)

    x = torch.arange(16, dtype=torch.int64) * 3
    call = compile_flat(fn, (x,), compiler=CompilerOptions(dynamic_batch=True))
    assert torch.equal(call(x), fn(x))
    result = next(p for p in call.passes if p.name == "dynamic_batch")
    assert result.status == "failed" and "fixed the batch size to 16" in result.detail


def test_an_error_of_the_symbolic_trace_falls_back_to_the_one_size(monkeypatch):
    """Whatever fails under symbolic sizes: the fixed-size compile runs, reported failed."""
    real = flat._trace

    def trace(flat_fn, leaves, traced, fake_mode, batch, dynamic):
        if batch is not None:
            raise RuntimeError("no symbolic sizes here\nsecond line")
        return real(flat_fn, leaves, traced, fake_mode, batch, dynamic)

    monkeypatch.setattr(flat, "_trace", trace)
    x = torch.arange(16, dtype=torch.int64)
    call = compile_flat(lambda v: v * 2 + 1, (x,), compiler=CompilerOptions(dynamic_batch=True))
    assert torch.equal(call(x), x * 2 + 1)
    result = next(p for p in call.passes if p.name == "dynamic_batch")
    assert (result.status, result.detail) == ("failed", "RuntimeError: no symbolic sizes here")


def test_the_warm_start_marker_ignores_the_size_only_with_dynamic_batch():
    def fn(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return a + b

    def key(n: int, dynamic: bool) -> str | None:
        args = (torch.zeros(n, 3), torch.zeros(4))
        return warm.call_key(fn, (), args, ("settings",), dynamic)

    assert key(64, True) == key(100, True) != key(64, False) != key(100, False)
