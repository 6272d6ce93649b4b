"""A device torch cannot use is a ``ValueError`` at construction, for the shell and every adapter.

The check lives once in the shell's argument parsing (``core.arguments.as_device``);
``gymnasium.make_vec``, :class:`GpuVecEnv` and the SB3 / TorchRL / CleanRL constructors
inherit it. CUDA's states are faked where this machine lacks them: a CPU-only torch is the
real case here, a CUDA build without a visible GPU and a machine with two GPUs are
monkeypatched into ``torch.version`` and ``torch.cuda``.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import pytest
import torch

import gpuvec_envs  # noqa: F401 - registers the IDs
from gpuvec_envs.adapters.cleanrl import to_torch
from gpuvec_envs.core.arguments import as_device
from gpuvec_envs.core.vector import GpuVecEnv
from gpuvec_envs.envs.classic.cartpole import CartPole


def _make_vec(device: Any) -> Any:
    return gym.make_vec("gpuvec/CartPole-v1", num_envs=4, device=device, backend="eager")


def _gpuvec(device: Any) -> Any:
    return GpuVecEnv(CartPole(), 4, device=device, backend="eager")


def _sb3(device: Any) -> Any:
    pytest.importorskip("stable_baselines3")
    from gpuvec_envs.adapters.sb3 import make_sb3_vec_env

    return make_sb3_vec_env("gpuvec/CartPole-v1", 4, device=device, backend="eager")


def _torchrl(device: Any) -> Any:
    pytest.importorskip("torchrl")
    from gpuvec_envs.adapters.torchrl import make_torchrl_env

    return make_torchrl_env("gpuvec/CartPole-v1", 4, device=device, backend="eager")


def _cleanrl_view(device: Any) -> Any:
    return to_torch(gym.make_vec("CartPole-v1", num_envs=2, vectorization_mode="sync"), device)


CONSTRUCTORS: dict[str, Callable[[Any], Any]] = {
    "make_vec": _make_vec,
    "GpuVecEnv": _gpuvec,
    "sb3": _sb3,
    "torchrl": _torchrl,
    "cleanrl.to_torch": _cleanrl_view,
}


@pytest.fixture
def cpu_only_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """A torch built without CUDA (this machine's real case; faked on a CUDA build)."""
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(torch.version, "hip", None)


@pytest.fixture
def cuda_build_without_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CUDA build of torch on a machine where it sees no GPU."""
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 0)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")


@pytest.fixture
def two_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CUDA build of torch that sees two GPUs."""
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)


@pytest.mark.parametrize("make", CONSTRUCTORS.values(), ids=CONSTRUCTORS.keys())
def test_cuda_on_a_torch_without_cuda_fails_at_construction(make, cpu_only_torch) -> None:
    version = torch.__version__
    match = (
        rf"device 'cuda': this torch \({re.escape(version)}\) was built without CUDA .*device='cpu'"
    )
    with pytest.raises(ValueError, match=match):
        make("cuda")


@pytest.mark.parametrize("make", CONSTRUCTORS.values(), ids=CONSTRUCTORS.keys())
def test_cuda_without_a_visible_gpu_fails_at_construction(make, cuda_build_without_gpu) -> None:
    match = (
        r"device 'cuda:0': torch .* \(CUDA 12\.8\) sees no GPU \(torch\.cuda\.is_available\(\) "
        r"is False, CUDA_VISIBLE_DEVICES=''\); check the driver"
    )
    with pytest.raises(ValueError, match=match):
        make("cuda:0")


@pytest.mark.parametrize("make", CONSTRUCTORS.values(), ids=CONSTRUCTORS.keys())
def test_an_index_past_the_last_gpu_fails_at_construction(make, two_gpus) -> None:
    match = r"device 'cuda:7': torch sees 2 GPU\(s\) \(cuda:0 to cuda:1\); pick one"
    with pytest.raises(ValueError, match=match):
        make("cuda:7")
    with pytest.raises(ValueError, match="cuda:0 to cuda:1"):
        make(torch.device("cuda", 2))


@pytest.mark.parametrize("make", CONSTRUCTORS.values(), ids=CONSTRUCTORS.keys())
@pytest.mark.parametrize(
    ("device", "match"),
    [
        ("tpu", r"device 'tpu': torch.device\(\) rejects it \(.*tpu\); use 'cpu', 'cuda'"),
        ("cuda:x", r"device 'cuda:x': torch.device\(\) rejects it \(Invalid device string"),
    ],
)
def test_an_unknown_device_string_fails_at_construction(make, device: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        make(device)


def test_other_accelerators_and_types() -> None:
    if not torch.backends.mps.is_available():
        with pytest.raises(ValueError, match=r"torch\.mps\.is_available\(\) == False"):
            as_device("mps")
    with pytest.raises(TypeError, match="device must be a str .* got NoneType"):
        as_device(None)
    with pytest.raises(TypeError, match="got bool"):
        as_device(True)
    assert as_device("cpu") == torch.device("cpu")
    assert as_device(torch.device("meta")) == torch.device("meta")


def test_usable_devices_pass(two_gpus) -> None:
    """The check passes what torch can use (no env is built on the faked GPUs)."""
    assert as_device("cuda") == torch.device("cuda")
    assert as_device("cuda:1") == torch.device("cuda", 1)
    env = _make_vec("cpu")
    assert env.unwrapped.device == torch.device("cpu")
    env.reset(seed=0)
