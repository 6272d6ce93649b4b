"""CleanRL-style loops on gpuvec envs: tensor wrappers, array views and an episode helper.

A CleanRL script needs ``single_observation_space``, ``single_action_space``,
``reset(seed=)``, ``step(action)`` and ``info["episode"]``; a gpuvec env gives all of them
natively, as torch tensors on its device::

    import gymnasium as gym
    import gpuvec_envs  # registers gpuvec/...
    from gpuvec_envs.adapters.cleanrl import RecordEpisodeStatistics

    envs = gym.make_vec("gpuvec/CartPole-v1", num_envs=8, device="cuda",
                        autoreset_mode="SameStep", validate=False)
    envs = RecordEpisodeStatistics(envs)
    obs, _ = envs.reset(seed=1)
    obs, reward, terminated, truncated, info = envs.step(action)  # action: a tensor
    ended_returns = info["episode"]["r"][info["_episode"]]       # no host sync until read

The wrappers are those of :mod:`gpuvec_envs.wrappers` (tensor versions of gymnasium's
vector wrappers, every autoreset mode). :func:`to_numpy` runs an unmodified numpy loop
written for gymnasium 1.x; :func:`to_torch` runs a tensor loop on a numpy env such as
gymnasium's ``SyncVectorEnv`` (used by the examples' ``--env-backend gymnasium``).
"""

from __future__ import annotations

from typing import Any

import torch

from gpuvec_envs.wrappers import (
    ClipAction,
    FlattenObservation,
    NormalizeObservation,
    NormalizeReward,
    RecordEpisodeStatistics,
    RescaleAction,
    RunningMeanStd,
    TransformObservation,
    TransformReward,
    to_numpy,
    to_torch,
)

__all__ = [
    "ClipAction",
    "FlattenObservation",
    "NormalizeObservation",
    "NormalizeReward",
    "RecordEpisodeStatistics",
    "RescaleAction",
    "RunningMeanStd",
    "TransformObservation",
    "TransformReward",
    "episode_stats",
    "to_numpy",
    "to_torch",
]


def episode_stats(info: dict[str, Any], key: str = "episode") -> tuple[Any, Any, Any] | None:
    """``(r, l, mask)`` of the episodes that ended at this step, or ``None`` if none can have.

    Reads gymnasium's vector format (``info["episode"]``, ``info["_episode"]``) and, for a
    ``SAME_STEP`` ``SyncVectorEnv`` over single envs wrapped in gymnasium's
    ``RecordEpisodeStatistics``, the same entries under ``info["final_info"]``. Returns the
    full (N,) arrays and the (N,) bool mask without indexing them, so a tensor loop can
    store them and read them back to the host once per rollout.
    """
    for src in (info, info.get("final_info")):
        if isinstance(src, dict) and key in src and f"_{key}" in src:
            ep = src[key]
            mask = src[f"_{key}"]
            if isinstance(mask, torch.Tensor) and src is not info:
                mask = mask & info["_final_info"]
            return ep["r"], ep["l"], mask
    return None
