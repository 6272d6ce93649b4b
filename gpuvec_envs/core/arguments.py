"""What users pass the shell, parsed and checked: env, device, dtype, autoreset, actions, seeds.

Every function raises a ``TypeError`` or ``ValueError`` naming the problem, before any
state changes.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from gpuvec_envs.core.env import EnvDef

_MAX_SEED = 2**63


def resolve_env_def(env_def: EnvDef | str) -> EnvDef:
    """Accept an :class:`EnvDef` instance or a ``"module:ClassName"`` string."""
    if isinstance(env_def, str):
        module, _, name = env_def.partition(":")
        env_def = getattr(importlib.import_module(module), name)()
    if not isinstance(env_def, EnvDef):
        raise TypeError(f"expected an EnvDef, got {type(env_def).__name__}")
    return env_def


#: Device types that need no accelerator (``meta``: shapes only, for checks and tracing).
_HOST_DEVICES = ("cpu", "meta")


def as_device(device: Any) -> torch.device:
    """Parse ``device`` and check that this torch can use it, before anything is built.

    Accepts what ``torch.device`` accepts (``"cpu"``, ``"cuda"``, ``"cuda:1"``,
    ``torch.device(...)``, ``"mps"``...).

    Raises:
        TypeError: not a str, ``torch.device`` or int.
        ValueError: an unknown device string; an accelerator this torch was built without,
            or one it sees no device of; an index past its last device. The message says
            what torch reports and what to do.
    """
    if isinstance(device, bool) or not isinstance(device, str | torch.device | int):
        raise TypeError(
            f"device must be a str such as 'cpu' or 'cuda:0', or a torch.device, "
            f"got {type(device).__name__}"
        )
    try:
        dev = torch.device(device)
    except (RuntimeError, ValueError) as exc:
        raise ValueError(
            f"device {device!r}: torch.device() rejects it ({exc}); use 'cpu', 'cuda' or "
            "'cuda:<index>' (an int index), or another type of torch.device"
        ) from exc
    if dev.type in _HOST_DEVICES:
        return dev
    if dev.type == "cuda":
        _check_cuda(dev, device)
        return dev
    module = getattr(torch, dev.type, None)
    available = getattr(module, "is_available", None)
    if available is not None and not available():
        raise ValueError(
            f"device {device!r}: torch {torch.__version__} reports "
            f"torch.{dev.type}.is_available() == False; run on a machine with a {dev.type} "
            "device and a torch build for it, or use device='cpu'"
        )
    count = getattr(module, "device_count", None)
    if dev.index is not None and count is not None and dev.index >= count():
        raise ValueError(
            f"device {device!r}: torch sees {count()} {dev.type} device(s) "
            f"(indices 0 to {count() - 1}); pick one of these or use device='cpu'"
        )
    return dev


def _check_cuda(dev: torch.device, asked: Any) -> None:
    """Raise ``ValueError`` unless torch can run on CUDA device ``dev``."""
    if torch.version.cuda is None and torch.version.hip is None:
        raise ValueError(
            f"device {str(asked)!r}: this torch ({torch.__version__}) was built without CUDA "
            "(torch.version.cuda is None); install a CUDA build of torch "
            "(https://pytorch.org/get-started/locally/) or use device='cpu'"
        )
    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    seen = "" if visible is None else f", CUDA_VISIBLE_DEVICES={visible!r}"
    if count == 0:
        raise ValueError(
            f"device {str(asked)!r}: torch {torch.__version__} (CUDA {torch.version.cuda}) "
            f"sees no GPU (torch.cuda.is_available() is False{seen}); check the driver "
            "(nvidia-smi) and CUDA_VISIBLE_DEVICES, or use device='cpu'"
        )
    if dev.index is not None and dev.index >= count:
        raise ValueError(
            f"device {str(asked)!r}: torch sees {count} GPU(s) (cuda:0 to cuda:{count - 1}"
            f"{seen}); pick one of these or use device='cpu'"
        )


def as_dtype(dtype: Any) -> torch.dtype:
    """Normalise ``torch.float32``, ``"float64"``, ``np.float32`` etc. to a float torch dtype."""
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype, None)
    elif not isinstance(dtype, torch.dtype):
        try:
            dtype = getattr(torch, np.dtype(dtype).name)
        except TypeError:
            dtype = None
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    return dtype


def as_autoreset_mode(mode: str | AutoresetMode) -> AutoresetMode:
    """Accept an ``AutoresetMode``, its value (``"NextStep"``) or ``"next_step"`` (any case)."""
    if isinstance(mode, AutoresetMode):
        return mode
    key = str(mode).replace("_", "").replace("-", "").lower()
    for m in AutoresetMode:
        if m.value.lower() == key:
            return m
    names = [m.value for m in AutoresetMode]
    raise ValueError(f"autoreset_mode must be one of {names}, got {mode!r}")


def action_tensor(
    actions: Any, space: gym.Space, dtype: torch.dtype, shape: tuple[int, ...], device: torch.device
) -> torch.Tensor:
    """``actions`` as a contiguous tensor of ``dtype`` and ``shape`` (N, ...) on ``device``.

    Checks the dtype kind, shape and device (not values).

    Raises:
        TypeError: wrong dtype kind (e.g. floats for a discrete space).
        ValueError: wrong shape, or a device it cannot be moved from.
    """
    if isinstance(actions, torch.Tensor):
        t = actions
    else:
        arr = np.asarray(actions)
        if arr.dtype == object or arr.dtype.kind not in "biuf":
            raise TypeError(f"actions must be numeric, got numpy dtype {arr.dtype}")
        t = torch.from_numpy(np.ascontiguousarray(arr))
    discrete = dtype == torch.int64
    if t.dtype == torch.bool or t.is_complex() or (discrete and t.is_floating_point()):
        kind = "integer" if discrete else "real"
        raise TypeError(f"{space} expects {kind} actions, got {t.dtype}")
    if tuple(t.shape) != shape:
        raise ValueError(f"actions must have shape {shape}, got {tuple(t.shape)}")
    if t.device != device:
        try:
            t = t.to(device)
        except (RuntimeError, NotImplementedError) as exc:
            raise ValueError(f"cannot move actions from {t.device} to {device}: {exc}") from exc
    return t.to(dtype).contiguous()


def check_action_values(t: torch.Tensor, space: gym.Space) -> None:
    """Raise a ``ValueError`` naming the first env whose action (N, ...) is outside ``space``."""
    # one pass over the actions and one read-back; the first bad env only on failure
    if isinstance(space, gym.spaces.Discrete):
        low, high = int(space.start), int(space.start + space.n)
        lo, hi = torch.stack(torch.aminmax(t)).tolist()
        if low <= lo and hi < high:
            return
        bad, what = (t < low) | (t >= high), f"outside [{low}, {high})"
    else:
        if bool(torch.isfinite(t).all()):
            return
        bad, what = ~torch.isfinite(t).reshape(t.shape[0], -1).all(1), "not finite"
    first = int(bad.to(torch.uint8).argmax())
    raise ValueError(f"action {t[first].cpu().numpy()} of env {first} is {what}")


def seed_tensor(
    seed: int | Sequence[int | None] | None, num_envs: int, device: torch.device
) -> torch.Tensor | None:
    """Per-env seeds (N,) int64: ``seed + i`` for an int, a list's entries (``None``: fresh)."""
    if seed is None:
        return None
    if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
        seed = int(seed)
        if not 0 <= seed <= _MAX_SEED - num_envs:
            raise ValueError(f"seed must be in [0, 2**63 - num_envs], got {seed}")
        return torch.arange(seed, seed + num_envs, dtype=torch.int64, device=device)
    if isinstance(seed, (list, tuple, np.ndarray, torch.Tensor)):
        seeds = list(seed.cpu().numpy() if isinstance(seed, torch.Tensor) else seed)
        if len(seeds) != num_envs:
            raise ValueError(f"a seed list must have num_envs={num_envs} entries, got {len(seeds)}")
        entropy = np.random.SeedSequence().entropy
        out = []
        for i, s in enumerate(seeds):
            if s is None:
                s = (entropy + i) % _MAX_SEED
            if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
                raise ValueError(f"seed {i} must be an int or None, got {s!r}")
            if not 0 <= s < _MAX_SEED:
                raise ValueError(f"seed {i} must be an int in [0, 2**63) or None, got {s!r}")
            out.append(int(s))
        return torch.tensor(out, dtype=torch.int64, device=device)
    raise TypeError(f"seed must be an int, a list of ints or None, got {type(seed).__name__}")


def env_indices(
    indices: Sequence[int] | torch.Tensor, num_envs: int, device: torch.device
) -> torch.Tensor:
    """``indices`` as a 1-D int64 tensor on ``device``, checked to lie in ``[0, num_envs)``."""
    if isinstance(indices, torch.Tensor):
        t = indices
    else:
        values = list(indices)
        if any(isinstance(i, bool) or not isinstance(i, (int, np.integer)) for i in values):
            raise TypeError(f"render indices must be ints, got {values!r}")
        t = torch.tensor(values, dtype=torch.int64)
    if t.dtype != torch.int64 or t.dim() != 1:
        raise TypeError(f"render indices must be a 1-D int64 tensor, got {t.dtype} {t.dim()}-D")
    if t.numel() and bool(((t < 0) | (t >= num_envs)).any()):
        raise ValueError(f"render indices must lie in [0, {num_envs}), got {t.tolist()}")
    return t.to(device)


def reset_mask_tensor(mask: Any, num_envs: int, device: torch.device) -> torch.Tensor:
    """``options["reset_mask"]`` as an (N,) bool tensor on ``device``, type and shape checked."""
    t = mask if isinstance(mask, torch.Tensor) else torch.as_tensor(np.asarray(mask))
    if t.dtype != torch.bool:
        raise TypeError(f"options['reset_mask'] must be bool, got {t.dtype}")
    if tuple(t.shape) != (num_envs,):
        raise ValueError(
            f"options['reset_mask'] must have shape ({num_envs},), got {tuple(t.shape)}"
        )
    return t.to(device)
