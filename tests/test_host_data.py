"""Eager steps as they run on CUDA make no host data and read nothing back (no GPU needed).

On CUDA, a tensor built from host data (``torch.tensor(list, device=...)``, a host tensor
moved to the device) is a copy and a host synchronisation per call, and so is every value
read back (``.item()``, ``bool()``, a boolean mask index). Every env steps on PyTorch's
``meta`` device (shapes only, no data) through the same code as on CUDA: a device that is
not the host, without the shell's host shortcuts. Watching its torch calls shows what a
CUDA step would do.
"""

from __future__ import annotations

import functools
import traceback

import gymnasium as gym
import pytest
import torch
from registry_ids import PER_ID
from torch.overrides import TorchFunctionMode

import gpuvec_envs  # noqa: F401 - registers the IDs
from gpuvec_envs.core.rng import RESET, Rng, keys_from_seeds
from gpuvec_envs.core.step import pure_step

#: One registered ID per env class (the first).
CLASS_REPS = list({e.env_def: e.id for e in reversed(PER_ID)}.values())
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
    torch.repeat_interleave,
    T.repeat_interleave,
    torch.bincount,
}


def _mask_index(func, args) -> bool:  # noqa: ANN001 - any indexing call
    """Whether a ``__getitem__``/``__setitem__`` indexes with a bool tensor (a sync on CUDA)."""
    if func not in (T.__getitem__, T.__setitem__) or len(args) < 2:
        return False
    index = args[1] if isinstance(args[1], tuple) else (args[1],)
    return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in index)


class HostData(TorchFunctionMode):
    """Records the torch calls in :data:`HOST`, bool-mask indexing and every call that
    makes a host tensor while the env lives on another device, with the env code's line."""

    def __init__(self, device: str = "meta") -> None:
        super().__init__()
        self.device = device
        self.calls: list[str] = []

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        out = func(*args, **(kwargs or {}))
        results = out if isinstance(out, tuple | list) else (out,)
        host = self.device != "cpu" and any(
            isinstance(t, torch.Tensor) and t.device.type == "cpu" for t in results
        )
        if func in HOST or _mask_index(func, args) or host:
            ours = [f for f in traceback.extract_stack()[:-1] if "gpuvec_envs/" in f.filename]
            where = "?"
            if ours:
                where = f"{ours[-1].filename.split('gpuvec_envs/')[-1]}:{ours[-1].lineno}"
            self.calls.append(f"{getattr(func, '__name__', func)} at {where}")
        return out


def _device_path_step(env_id: str, mode: str):  # noqa: ANN202
    """A reset env on the meta device and its pure step (the code path of CUDA)."""
    env = gym.make_vec(
        env_id, num_envs=16, device="meta", backend="eager", validate=False, autoreset_mode=mode
    ).unwrapped
    env.reset(seed=3)
    step = functools.partial(pure_step, env.env_def, env.params, env._step_cfg)
    return env, step


@pytest.mark.parametrize("env_id", CLASS_REPS)
@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_an_eager_step_makes_no_host_data_after_its_first_call(env_id: str, mode: str) -> None:
    env, step = _device_path_step(env_id, mode)
    action = torch.as_tensor(env.action_space.sample()).to("meta")
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
    watch = HostData(device="cpu")
    with watch:
        rng.bits(3)  # the table built once: nothing
        torch.tensor([1, 2, 3]) ^ rng.bits(3)
        rng.uniform()[rng.uniform() > 0.5]
    assert [c.split(" at ")[0] for c in watch.calls] == ["tensor", "__getitem__"]


def test_the_watch_sees_a_host_tensor_moved_to_the_device() -> None:
    x = torch.zeros(4, dtype=torch.int64, device="meta")
    watch = HostData()
    with watch:
        x + torch.arange(4, device="meta")  # made on the device: nothing
        x + torch.arange(4).to("meta")  # made on the host, then copied: a sync on CUDA
    assert [c.split(" at ")[0] for c in watch.calls] == ["arange"]
