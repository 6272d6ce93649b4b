"""Batched MountainCar (discrete actions).

Mirrors ``gymnasium/envs/classic_control/mountain_car.py`` (gymnasium 1.4,
``MountainCarEnv``): same constants, the ``goal_velocity`` parameter, velocity and position
clipping, the velocity reset to 0 at the left wall, termination at the goal, reward -1 per
step, reset options ``low``/``high`` for the initial position, and the same order of
floating-point operations (float64 agrees with the reference to the last bit on the eager
backend).

Deliberate difference: gymnasium tests ``position == min_position`` after clipping; here
``position <= min_position``, which is the same in float64 and also holds in float32, where
the clipped value is ``float32(min_position)``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from gpuvec_envs.core.env import EnvDef
from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs._util import columns, numpy_dtype, reset_bounds


@dataclasses.dataclass(frozen=True)
class MountainCarParams:
    """Primary constants (position in [m], one step = one time unit)."""

    min_position: float = -1.2  # [m] left wall
    max_position: float = 0.6  # [m] right wall
    max_speed: float = 0.07  # [m/step] velocity is clipped to ±max_speed
    goal_position: float = 0.5  # [m] terminate at position >= goal_position ...
    goal_velocity: float = 0.0  # [m/step] ... and velocity >= goal_velocity
    force: float = 0.001  # [m/step^2] per unit of action
    gravity: float = 0.0025  # [m/step^2]
    reset_low: float = -0.6  # [m] initial position ~ U(reset_low, reset_high), velocity 0
    reset_high: float = -0.4  # [m]


class MountainCarState(NamedTuple):
    """Batched MountainCar state, each field shape (N,)."""

    position: torch.Tensor  # [m]
    velocity: torch.Tensor  # [m/step]


def reset_sample(rng: Rng, dtype: torch.dtype, low: float, high: float) -> MountainCarState:
    """N initial states: position uniform in ``[low, high)``, velocity 0."""
    position = rng.uniform(low=low, high=high, dtype=dtype)
    return MountainCarState(position, torch.zeros_like(position))


def clip_state(
    min_position: float,
    max_position: float,
    max_speed: float,
    position: torch.Tensor,
    velocity: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Shared wall logic: clip velocity, move, clip position, stop at the left wall.

    Args:
        min_position: Left wall [m].
        max_position: Right wall [m].
        max_speed: Speed limit [m/step].
        position: (N,) position before the move [m].
        velocity: (N,) velocity after the acceleration, before clipping [m/step].

    Returns:
        ``(position, velocity)`` after the move, each (N,).
    """
    velocity = torch.clamp(velocity, -max_speed, max_speed)
    position = torch.clamp(position + velocity, min_position, max_position)
    at_wall = (position <= min_position) & (velocity < 0)
    velocity = torch.where(at_wall, torch.zeros_like(velocity), velocity)
    return position, velocity


def dynamics(
    params: MountainCarParams, s: MountainCarState, action: torch.Tensor
) -> MountainCarState:
    """One step; ``action`` (N,) int64 in {0, 1, 2} (push left, none, right)."""
    p = params
    push = (action - 1).to(s.position.dtype) * p.force
    velocity = s.velocity + (push + torch.cos(3 * s.position) * (-p.gravity))
    position, velocity = clip_state(
        p.min_position, p.max_position, p.max_speed, s.position, velocity
    )
    return MountainCarState(position, velocity)


def terminal(params: MountainCarParams, s: MountainCarState) -> torch.Tensor:
    """(N,) bool: at or past the goal with at least the goal velocity."""
    return (s.position >= params.goal_position) & (s.velocity >= params.goal_velocity)


def reward(params: MountainCarParams, terminated: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(N,) reward: -1 every step."""
    return torch.full(terminated.shape, -1.0, dtype=dtype, device=terminated.device)


def observation(params: MountainCarParams, s: MountainCarState) -> torch.Tensor:
    """(N, 2) observation ``[position, velocity]``."""
    return columns(s.position, s.velocity)


def observation_space(params: Any, dtype: torch.dtype) -> gym.spaces.Box:
    """Box(2,) from ``[min_position, -max_speed]`` to ``[max_position, max_speed]``."""
    low = np.array([params.min_position, -params.max_speed], dtype=np.float32)
    high = np.array([params.max_position, params.max_speed], dtype=np.float32)
    nd = numpy_dtype(dtype)
    return gym.spaces.Box(low.astype(nd), high.astype(nd), dtype=nd)


class MountainCar(EnvDef[MountainCarState, MountainCarParams]):
    """MountainCar-v0 (200 steps by registration)."""

    params_type = MountainCarParams

    def observation_space(self, params: MountainCarParams, dtype: torch.dtype) -> gym.Space:
        """Box(2,) bounded by the walls and the speed limit, as gymnasium."""
        return observation_space(params, dtype)

    def action_space(self, params: MountainCarParams, dtype: torch.dtype) -> gym.Space:
        """Discrete(3): push left (0), no push (1), push right (2)."""
        return gym.spaces.Discrete(3)

    def reset(
        self,
        params: MountainCarParams,
        rng: Rng,
        dtype: torch.dtype,
        options: dict[str, Any] | None,
    ) -> MountainCarState:
        """Uniform initial positions; ``options`` may set ``low``/``high`` as gymnasium's."""
        low, high = reset_bounds(options, params.reset_low, params.reset_high)
        return reset_sample(rng, dtype, low, high)

    def step(
        self,
        params: MountainCarParams,
        state: MountainCarState,
        action: torch.Tensor,
        rng: Rng,
    ) -> tuple[MountainCarState, torch.Tensor, torch.Tensor]:
        """Dynamics, then termination on the new state; reward -1."""
        nxt = dynamics(params, state, action)
        term = terminal(params, nxt)
        return nxt, reward(params, term, state.position.dtype), term

    def observation(self, params: MountainCarParams, state: MountainCarState) -> torch.Tensor:
        """(N, 2) observation."""
        return observation(params, state)
