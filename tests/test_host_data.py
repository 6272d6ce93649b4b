"""Eager steps as they run on CUDA make no host data and read nothing back (CPU-checked).

On CUDA, a tensor built from host data (``torch.tensor(list, device=...)``) is a copy and a
host synchronisation per call, and so is every value read back (``.item()``, ``bool()``, a
boolean mask index). An eager step on the CPU runs the same code as on CUDA when it runs
outside the shell's host shortcuts (``host_eager``), so watching its torch calls here shows
what a CUDA step would do, without a GPU.
"""

from __future__ import annotations

import functools
import traceback

import gymnasium as gym
import pytest
import torch
from torch.overrides import TorchFunctionMode

import gpuvec_envs  # noqa: F401 - registers the IDs
from gpuvec_envs.core.rng import RESET, Rng, keys_from_seeds
from gpuvec_envs.core.vector import pure_step
from gpuvec_envs.registry import REGISTRY

#: One registered ID per env class (the first).
CLASS_REPS = list({e.env_def: e.id for e in reversed(REGISTRY)}.values())
T = torch.Tensor
#: Calls that make a tensor of host data or read device values back.
HOST = {
    torch.tensor,
    torch.as_tensor,
    torch.from_numpy,
    T.item,
    T.tolist,
    T.numpy,
    T.cpu,
    T.__bool__,
    T.__int__,
    T.__float__,
    T.__index__,
    T.nonzero,
    torch.nonzero,
    torch.masked_select,
    T.masked_select,
    torch.unique,
}


def _mask_index(func, args) -> bool:  # noqa: ANN001 - any indexing call
    """Whether a ``__getitem__``/``__setitem__`` indexes with a bool tensor (a sync on CUDA)."""
    if func not in (T.__getitem__, T.__setitem__) or len(args) < 2:
        return False
    index = args[1] if isinstance(args[1], tuple) else (args[1],)
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in index)


class HostData(TorchFunctionMode):
    """Records the torch calls in :data:`HOST` (and bool-mask indexing), with their line."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        if func in HOST or _mask_index(func, args):
            ours = [f for f in traceback.extract_stack()[:-1] if "gpuvec_envs/" in f.filename]
            where = (
                f"{ours[-1].filename.split('gpuvec_envs/')[-1]}:{ours[-1].lineno}" if ours else "?"
            )
            self.calls.append(f"{getattr(func, '__name__', func)} at {where}")
        return func(*args, **(kwargs or {}))


def _device_path_step(env_id: str, mode: str):  # noqa: ANN202
    """A reset env and its pure step, called as on CUDA (no host shortcuts)."""
    env = gym.make_vec(env_id, num_envs=16, backend="eager", validate=False, autoreset_mode=mode)
    env = env.unwrapped
    env.reset(seed=3)
    step = functools.partial(pure_step, env.env_def, env.params, env._step_cfg)
    return env, step


@pytest.mark.parametrize("env_id", CLASS_REPS)
@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_an_eager_step_makes_no_host_data_after_its_first_call(env_id: str, mode: str) -> None:
    env, step = _device_path_step(env_id, mode)
    action = torch.as_tensor(env.action_space.sample())
    state = step(env.state, action).state  # the first call builds the constant tables
    watch = HostData()
    with watch:
        for _ in range(3):
            state = step(state, action).state
    assert watch.calls == []


def test_the_watch_sees_the_host_data_of_a_per_call_table() -> None:
    """The form the RNG had: a table of stream constants built per draw from a list."""
    k0, k1 = keys_from_seeds(torch.arange(4))
    warm = Rng(k0, k1, torch.zeros(4, dtype=torch.int64), RESET)
    warm.bits(3), warm.bits(3)  # builds the tables of streams 0-2 and 3-5
    rng = Rng(k0, k1, torch.zeros(4, dtype=torch.int64), RESET)
    watch = HostData()
    with watch:
        rng.bits(3)  # the table built once: nothing
        torch.tensor([1, 2, 3]) ^ rng.bits(3)
        rng.uniform()[rng.uniform() > 0.5]
    assert [c.split(" at ")[0] for c in watch.calls] == ["tensor", "__getitem__"]
