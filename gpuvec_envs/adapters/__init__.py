"""Adapters from gpuvec vector envs to other libraries' interfaces.

Each adapter lives in its own submodule and imports its library only there, so this package
imports without any of them installed. Names are loaded on first access:
``from gpuvec_envs.adapters import make_sb3_vec_env`` needs stable-baselines3.
"""

from __future__ import annotations

import importlib
from typing import Any

_LAZY = {
    **{
        name: "gpuvec_envs.adapters.cleanrl"
        for name in (
            "ClipAction",
            "FlattenObservation",
            "NormalizeObservation",
            "NormalizeReward",
            "RecordEpisodeStatistics",
            "RescaleAction",
            "TransformObservation",
            "TransformReward",
            "episode_stats",
            "to_numpy",
            "to_torch",
        )
    },
    "SB3VecEnv": "gpuvec_envs.adapters.sb3",
    "make_sb3_vec_env": "gpuvec_envs.adapters.sb3",
    "TorchRLEnv": "gpuvec_envs.adapters.torchrl",
    "make_torchrl_env": "gpuvec_envs.adapters.torchrl",
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    """Import an adapter's public name from its submodule on first access."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
