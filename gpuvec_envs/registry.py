"""The one table of registered env IDs; registration and tests both iterate it."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

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


def gym_register(
    env_id: str, env_def: Any, max_episode_steps: int | None, kwargs: dict[str, Any]
) -> EnvSpec:
    """Register one ID with gymnasium: a single-env ``entry_point`` and a vector one.

    Args:
        env_id: The gymnasium ID.
        env_def: An :class:`~gpuvec_envs.core.env.EnvDef` instance or ``"module:Class"``.
        max_episode_steps: The time limit (``TimeLimit`` for ``make``, the shell's own for
            ``make_vec``), or ``None``.
        kwargs: Default keyword arguments of every ``make``/``make_vec`` call.

    Returns:
        The new spec.
    """
    gym.register(
        id=env_id,
        entry_point=functools.partial(GpuEnv, env_def),
        vector_entry_point=functools.partial(GpuVecEnv, env_def),
        max_episode_steps=max_episode_steps,
        kwargs=dict(kwargs),
    )
    return gym.spec(env_id)


def gym_id(env_id: str) -> str:
    """The gymnasium ID of a built-in env (``gpuvec/`` namespace optional) or a registered one.

    Raises:
        KeyError: if ``env_id`` is neither.
    """
    try:
        return entry(env_id).id
    except KeyError:
        if env_id in gym.registry:
            return env_id
        raise


def register_all() -> None:
    """Register every entry with gymnasium (``make`` and ``make_vec``); idempotent."""
    for e in REGISTRY:
        if e.id not in gym.registry:
            gym_register(e.id, e.env_def, e.max_episode_steps, e.kwargs)
