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
    EnvEntry("gpuvec/Pendulum-v1", "gpuvec_envs.envs.pendulum:Pendulum", 200, "Pendulum-v1"),
    EnvEntry(
        "gpuvec/MountainCar-v0", "gpuvec_envs.envs.mountain_car:MountainCar", 200, "MountainCar-v0"
    ),
    EnvEntry(
        "gpuvec/MountainCarContinuous-v0",
        "gpuvec_envs.envs.continuous_mountain_car:ContinuousMountainCar",
        999,
        "MountainCarContinuous-v0",
    ),
    EnvEntry("gpuvec/Acrobot-v1", "gpuvec_envs.envs.acrobot:Acrobot", 500, "Acrobot-v1"),
    # MinAtar
    EnvEntry(
        "gpuvec/MinAtar-Asterix-v0",
        "gpuvec_envs.envs.minatar_asterix:Asterix",
        None,
        "MinAtar/Asterix-v0",
    ),
    EnvEntry(
        "gpuvec/MinAtar-Asterix-v1",
        "gpuvec_envs.envs.minatar_asterix:Asterix",
        None,
        "MinAtar/Asterix-v1",
        kwargs={"minimal_action_set": True},
    ),
    EnvEntry(
        "gpuvec/MinAtar-Breakout-v0",
        "gpuvec_envs.envs.minatar_breakout:Breakout",
        None,
        "MinAtar/Breakout-v0",
    ),
    EnvEntry(
        "gpuvec/MinAtar-Breakout-v1",
        "gpuvec_envs.envs.minatar_breakout:Breakout",
        None,
        "MinAtar/Breakout-v1",
        kwargs={"minimal_action_set": True},
    ),
    EnvEntry(
        "gpuvec/MinAtar-Freeway-v0",
        "gpuvec_envs.envs.minatar_freeway:Freeway",
        None,
        "MinAtar/Freeway-v0",
    ),
    EnvEntry(
        "gpuvec/MinAtar-Freeway-v1",
        "gpuvec_envs.envs.minatar_freeway:Freeway",
        None,
        "MinAtar/Freeway-v1",
        kwargs={"minimal_action_set": True},
    ),
    EnvEntry(
        "gpuvec/MinAtar-SpaceInvaders-v0",
        "gpuvec_envs.envs.minatar_space_invaders:SpaceInvaders",
        None,
        "MinAtar/SpaceInvaders-v0",
    ),
    EnvEntry(
        "gpuvec/MinAtar-SpaceInvaders-v1",
        "gpuvec_envs.envs.minatar_space_invaders:SpaceInvaders",
        None,
        "MinAtar/SpaceInvaders-v1",
        kwargs={"minimal_action_set": True},
    ),
    EnvEntry(
        "gpuvec/MinAtar-Seaquest-v0",
        "gpuvec_envs.envs.minatar_seaquest:Seaquest",
        None,
        "MinAtar/Seaquest-v0",
    ),
    EnvEntry(
        "gpuvec/MinAtar-Seaquest-v1",
        "gpuvec_envs.envs.minatar_seaquest:Seaquest",
        None,
        "MinAtar/Seaquest-v1",
        kwargs={"minimal_action_set": True},
    ),
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
