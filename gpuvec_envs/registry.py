"""The one table of registered env IDs; registration and tests both iterate it."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import gymnasium as gym

from gpuvec_envs.core.single import GpuEnv
from gpuvec_envs.core.vector import GpuVecEnv


@dataclasses.dataclass(frozen=True)
class EnvEntry:
    """One registered ID."""

    id: str  # "gpuvec/<Name>-v<k>"
    env_def: str  # "module:EnvDefClass", imported on first make
    max_episode_steps: int | None
    reference: str | None = None  # the gymnasium/minatar ID it mirrors
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)


REGISTRY: tuple[EnvEntry, ...] = (
    EnvEntry("gpuvec/CartPole-v0", "gpuvec_envs.envs.cartpole:CartPole", 200, "CartPole-v0"),
    EnvEntry("gpuvec/CartPole-v1", "gpuvec_envs.envs.cartpole:CartPole", 500, "CartPole-v1"),
    # classic-control suite
    # MinAtar
)


def entry(env_id: str) -> EnvEntry:
    """The registry entry of ``env_id`` (with or without the ``gpuvec/`` namespace)."""
    for e in REGISTRY:
        if env_id in (e.id, e.id.removeprefix("gpuvec/")):
            return e
    raise KeyError(f"no gpuvec env {env_id!r}; known: {[e.id for e in REGISTRY]}")


def register_all() -> None:
    """Register every entry with gymnasium (``make`` and ``make_vec``); idempotent."""
    for e in REGISTRY:
        if e.id in gym.registry:
            continue
        gym.register(
            id=e.id,
            entry_point=functools.partial(GpuEnv, e.env_def),
            vector_entry_point=functools.partial(GpuVecEnv, e.env_def),
            max_episode_steps=e.max_episode_steps,
            kwargs=dict(e.kwargs),
        )
