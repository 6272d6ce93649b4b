"""Batched, tensor-native RL environments for gymnasium, on GPU or CPU.

Importing the package registers every ``gpuvec/<Name>-v<k>`` ID, so
``gymnasium.make_vec("gpuvec/CartPole-v1", num_envs=4096, device="cuda")`` works. An env of
your own is an :class:`EnvDef`; :func:`check_env_def` tests it against the contract and
:func:`register` registers it with gymnasium.

The package, layer by layer (docs/design.md has the map): ``compiler`` (compiling pure
functions of tensors), ``render``, ``core`` (the env contract, RNG, the vector-env shell,
checkpoints), ``envs`` (``classic``, ``minatar``, ``minigrid``), ``registry``, ``rollout``,
``distributed``, ``adapters`` (SB3, CleanRL, TorchRL), ``sdk`` (custom envs) and ``bench``
(benchmarks, the report, autotune). Importing it loads only what ``make_vec`` needs; the
other public names below load on first access.
"""

from __future__ import annotations

import importlib
from typing import Any

from gpuvec_envs.core import EnvDef, GpuEnv, GpuVecEnv, ObservationView, Rng, ShellState
from gpuvec_envs.registry import REGISTRY, register_all

register_all()

__version__ = "0.1.0"

#: Public names loaded on first access, by the module that defines them.
_LAZY = {
    "autotune": "gpuvec_envs.bench.tuning",
    "EnvDefError": "gpuvec_envs.sdk.check",
    "Violation": "gpuvec_envs.sdk.check",
    "check_env_def": "gpuvec_envs.sdk.check",
    "register": "gpuvec_envs.sdk.custom",
}

__all__ = [
    "REGISTRY",
    "EnvDef",
    "EnvDefError",
    "GpuEnv",
    "GpuVecEnv",
    "ObservationView",
    "Rng",
    "ShellState",
    "Violation",
    "__version__",
    "autotune",
    "check_env_def",
    "register",
]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first access (the SDK, autotune)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
