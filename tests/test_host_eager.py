"""Eager host calls (``host_eager``): draws hash in numpy and an autoreset that resets no
env is skipped, with the outputs of the branch-free torch form; never inside a trace."""

from __future__ import annotations

import contextlib

import gymnasium as gym
import numpy as np
import pytest
import torch
from test_rng_lanes import REFERENCE, VALUES
from torch.fx.experimental.proxy_tensor import make_fx

import gpuvec_envs  # noqa: F401  (registers gpuvec/...)
from gpuvec_envs import compiler
from gpuvec_envs.core import rng
from gpuvec_envs.core.eager import host_eager
from gpuvec_envs.core.step import contiguous


@pytest.fixture
def host_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the numpy hashes (one entry per call)."""
    calls: list[int] = []
    real = rng._hash_np

    def counted(x: np.ndarray) -> np.ndarray:
        calls.append(x.size)
        return real(x)

    monkeypatch.setattr(rng, "_hash_np", counted)
    return calls


def test_numpy_hash_is_lowbias32():
    assert rng._hash_np(VALUES.numpy().astype(np.uint32)).tolist() == REFERENCE


def _draws(key0, key1, counter) -> list[torch.Tensor]:
    """One of every kind of draw, in a fixed order (streams are consumed in order)."""
    r = rng.Rng(key0, key1, counter, rng.STEP)
    n = counter.shape[0]
    low = -torch.arange(n, dtype=torch.float64)
    return [
        r.bits(3),
        r.bits32(2, 2),
        r.uniform(5, low=-2.0, high=0.5, dtype=torch.float64),
        r.randint(7, 4),
        r.randint(2**20, 2),
        r.bernoulli(0.3, 3),
        *r.columns(4, "uniform", low=-0.05, high=0.05),
        *r.columns(3, "bits32"),
        *r.columns(2, "uniform", low=low, high=low + 1, dtype=torch.float64),  # per-env
        r.uniform(),
    ]


def test_every_draw_is_bitwise_the_torch_form(host_calls: list[int]):
    n = 37
    key0, key1 = rng.keys_from_seeds(torch.arange(n) * 1_000_003)
    counter = torch.arange(n) * 11 + 2**32 - 5  # low words wrap
    plain = _draws(key0, key1, counter)
    assert host_calls == []
    with host_eager():
        host = _draws(key0, key1, counter)
    assert len(host_calls) > 0
    for a, b in zip(plain, host, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape
        assert torch.equal(a, b)
        assert b.is_contiguous()


def test_host_shortcuts_are_off_outside_the_context(host_calls: list[int]):
    key0, key1 = rng.keys_from_seeds(torch.arange(4))
    with host_eager():
        pass
    rng.Rng(key0, key1, torch.zeros(4, dtype=torch.int64), rng.STEP).bits(2)
    assert host_calls == []


def test_a_trace_inside_host_eager_records_the_torch_ops(host_calls: list[int]):
    """make_fx (fake tensors), a compiled call and dynamo: the graph computes the draws,
    it does not hold numpy results of the trace-time inputs as constants."""

    def draw(key0, key1, counter):
        r = rng.Rng(key0, key1, counter, rng.RESET)
        return r.uniform(2), *r.columns(2, "bits32")

    n = 8
    a = (*rng.keys_from_seeds(torch.arange(n)), torch.arange(n))
    b = (*rng.keys_from_seeds(torch.arange(n) + 100), torch.arange(n) * 9)
    dynamo = torch.compile(draw, fullgraph=True, backend="eager")
    with host_eager():
        graph = make_fx(draw, tracing_mode="fake")(*a)
        compiled = compiler.compile_flat(draw, a)
        traced = dynamo(*a)  # dynamo traces the same guard (it cannot read a ContextVar)
    assert host_calls == []
    for args in (a, b):
        want = draw(*args)
        for got in (graph(*args), compiled(*args), *([traced] if args is a else [])):
            for x, y in zip(want, got, strict=True):
                assert torch.equal(x, y)


@pytest.mark.parametrize("mode", ["same_step", "next_step"])
@pytest.mark.parametrize(
    "env_id",
    ["gpuvec/CartPole-v1", "gpuvec/MinAtar-Asterix-v1", "gpuvec/MinAtar-Seaquest-v1"],
)
def test_eager_env_steps_equal_the_torch_form(
    env_id: str, mode: str, host_calls: list[int], monkeypatch: pytest.MonkeyPatch
):
    """The shell's eager steps (numpy hashes; no reset where no env resets) against the
    pure step called directly, over steps with and without autoresets."""
    n = 16
    env = gym.make_vec(
        env_id, num_envs=n, backend="eager", autoreset_mode=mode, max_episode_steps=25
    )
    env_def = env.unwrapped.env_def
    resets: list[int] = []
    real_reset = type(env_def).reset

    def counted_reset(self, *args, **kwargs):
        resets.append(1)
        return real_reset(self, *args, **kwargs)

    monkeypatch.setattr(type(env_def), "reset", counted_reset)
    shell = env.unwrapped
    env.reset(seed=3)
    del resets[:]
    state = shell.state
    gen = torch.Generator().manual_seed(0)
    endings = 0
    for _ in range(60):
        action = torch.randint(0, shell.single_action_space.n, (n,), generator=gen)
        del host_calls[:]
        obs, reward, term, trunc, _ = env.step(action)
        assert host_calls, "the eager step did not hash on the host"
        del host_calls[:]
        ref = shell._step.eager_fn(state, action)  # outside host_eager: the torch form
        assert host_calls == []
        assert torch.equal(ref.obs, obs) and torch.equal(ref.reward, reward)
        assert torch.equal(ref.terminated.bool(), term)
        assert torch.equal(ref.truncated.bool(), trunc)
        for x, y in zip(
            torch.utils._pytree.tree_leaves(ref.state),
            torch.utils._pytree.tree_leaves(shell.state),
            strict=True,
        ):
            assert torch.equal(x, y)
        state = contiguous(shell.state)
        endings += int((term | trunc).sum())
    assert endings > 0, "need autoresets (reset draws)"
    # the torch form resets at every step; the eager steps only where an env resets
    assert 60 < len(resets) < 2 * 60
    env.close()


def test_backend_enters_the_eager_context_for_eager_calls_only():
    entered: list[str] = []

    @contextlib.contextmanager
    def mark():
        entered.append("in")
        yield

    def fn(scale, x):
        return (x * scale,)

    x = torch.arange(4.0)
    eager = compiler.Backend(fn, (2.0,), "eager", "t_eager", eager_context=mark)
    assert torch.equal(eager(x)[0], x * 2)
    assert entered == ["in"]
    entered.clear()
    compiled = compiler.Backend(fn, (2.0,), "compile", "t_compiled", eager_context=mark)
    assert torch.equal(compiled(x)[0], x * 2)
    assert torch.equal(compiled(x + 1)[0], (x + 1) * 2)
    assert compiled.name == "compile" and entered == []
