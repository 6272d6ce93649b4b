"""Craftax-Classic's torch modules on their own (no jax needed): batch independence, and
CUDA bitwise equal to the CPU (``cuda`` marker; tools/gpu_check.sh runs it).

Parity with craftax itself is in tests/test_craftax.py.
"""

from __future__ import annotations

import pytest
import torch

from gpuvec_envs.envs.craftax import _threefry as tf
from gpuvec_envs.envs.craftax.obs import symbolic_obs
from gpuvec_envs.envs.craftax.state import CraftaxParams
from gpuvec_envs.envs.craftax.step import craftax_step
from gpuvec_envs.envs.craftax.worldgen import generate_world


def test_generate_world_batch_independent() -> None:
    """A world depends on its key only: alone, in a batch, in any order."""
    keys = tf.prng_key(torch.arange(12))
    batch = generate_world(keys)
    alone = generate_world(keys[9:10])
    flipped = generate_world(keys.flip(0))
    for a, b, c in zip(batch, alone, flipped, strict=True):
        assert torch.equal(a[9:10], b)
        assert torch.equal(a, c.flip(0))


def _rollout(device: str, steps: int = 30, n: int = 6) -> list[torch.Tensor]:
    """Worlds, then ``steps`` steps of fixed actions: every state field, obs and reward."""
    params = CraftaxParams()
    keys = tf.prng_key(torch.arange(n, device=device) + 11)
    keys, sub = tf.split2(keys)
    state = generate_world(sub, params)
    actions = torch.randint(0, 17, (steps, n), generator=torch.Generator().manual_seed(0))
    out = [*state, symbolic_obs(state)]
    for t in range(steps):
        keys, sub = tf.split2(keys)
        state, reward = craftax_step(sub, state, actions[t].to(device), params)
        out += [*state, symbolic_obs(state), reward]
    return [x.cpu() for x in out]


def test_step_batch_independent() -> None:
    """Env i's trajectory is the same in a batch of 6 and alone."""
    params = CraftaxParams()
    keys = tf.prng_key(torch.arange(6) + 3)
    state = generate_world(keys, params)
    one = generate_world(keys[2:3], params)
    action = torch.tensor([5, 1, 2, 3, 4, 5])
    for _ in range(5):
        keys, sub = tf.split2(keys)
        state, reward = craftax_step(sub, state, action, params)
        one, reward_one = craftax_step(sub[2:3], one, action[2:3], params)
        assert torch.equal(reward[2:3], reward_one)
        for a, b in zip(state, one, strict=True):
            assert torch.equal(a[2:3], b)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_equals_cpu_bitwise() -> None:
    """World generation, steps and observations on CUDA equal the CPU's bit for bit."""
    for a, b in zip(_rollout("cpu"), _rollout("cuda"), strict=True):
        assert a.dtype == b.dtype
        if a.dtype.is_floating_point:
            assert torch.equal(a.view(torch.int32), b.view(torch.int32))
        else:
            assert torch.equal(a, b)
