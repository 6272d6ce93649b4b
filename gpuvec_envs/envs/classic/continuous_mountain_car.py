"""Batched MountainCarContinuous (continuous force, shaped reward).

Mirrors ``gymnasium/envs/classic_control/continuous_mountain_car.py`` (gymnasium 1.4,
``Continuous_MountainCarEnv``): same constants (goal at 0.45), the ``goal_velocity``
parameter, the force clipped to ``[min_action, max_action]`` while the reward's action
penalty ``-0.1 a^2`` uses the unclipped action, +100 on reaching the goal, the walls of
MountainCar, reset options ``low``/``high`` for the initial position, and the same order of
floating-point operations.

gymnasium stores this env's state as float32 after every step (the float64 state after a
reset is used once). The step here does the same: it computes in the simulation dtype,
decides termination on the unrounded values, and stores position and velocity rounded to
float32; in float64 it equals gymnasium's step from the same state held as float64 to the
last bit (eager or compiled; float32 ``cos`` is :mod:`~gpuvec_envs.envs.classic._trig`'s).
From its own float32 state gymnasium's arithmetic varies with numpy scalar
types (``3 * position`` in float32; float32 additions when the force is clipped to a Python
float; float32 products for a float32 action), which no single-dtype simulation reproduces:
whole-episode parity tests therefore copy the state into the reference before every step.

Deliberate differences: gymnasium computes a float32 action's force term in float32 before
adding it to a float64 velocity; here the action is cast to the simulation dtype first. The
reward's ``a**2`` is one multiplication where gymnasium calls libm's ``pow`` (which differs
in the last bit for ~0.1% of actions).
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import gymnasium as gym
import torch

from gpuvec_envs.core.env import EnvDef
from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.classic import _trig
from gpuvec_envs.envs.classic._util import columns, numpy_dtype, reset_bounds, round32
from gpuvec_envs.envs.classic.mountain_car import (
    clip_state,
    observation_space,
    render_frames,
    reset_sample,
)


@dataclasses.dataclass(frozen=True)
class ContinuousMountainCarParams:
    """Primary constants (position in [m], one step = one time unit)."""

    min_action: float = -1.0  # force is clipped to [min_action, max_action]
    max_action: float = 1.0
    min_position: float = -1.2  # [m] left wall
    max_position: float = 0.6  # [m] right wall
    max_speed: float = 0.07  # [m/step] velocity is clipped to ±max_speed
    goal_position: float = 0.45  # [m] terminate at position >= goal_position ...
    goal_velocity: float = 0.0  # [m/step] ... and velocity >= goal_velocity
    power: float = 0.0015  # [m/step^2] per unit of force
    gravity: float = 0.0025  # [m/step^2]
    goal_reward: float = 100.0  # reward on reaching the goal
    action_cost: float = 0.1  # reward -= action_cost * action^2 (unclipped action)
    reset_low: float = -0.6  # [m] initial position ~ U(reset_low, reset_high), velocity 0
    reset_high: float = -0.4  # [m]


class ContinuousMountainCarState(NamedTuple):
    """Batched MountainCarContinuous state, each field shape (N,)."""

    position: torch.Tensor  # [m]
    velocity: torch.Tensor  # [m/step]


def dynamics(
    params: ContinuousMountainCarParams, s: ContinuousMountainCarState, force: torch.Tensor
) -> ContinuousMountainCarState:
    """One step with clipped ``force`` (N,); returns the unrounded next state."""
    p = params
    velocity = s.velocity + (force * p.power - p.gravity * _trig.cos(3 * s.position))
    position, velocity = clip_state(
        p.min_position, p.max_position, p.max_speed, s.position, velocity
    )
    return ContinuousMountainCarState(position, velocity)


def terminal(params: ContinuousMountainCarParams, s: ContinuousMountainCarState) -> torch.Tensor:
    """(N,) bool: at or past the goal with at least the goal velocity."""
    return (s.position >= params.goal_position) & (s.velocity >= params.goal_velocity)


def reward(
    params: ContinuousMountainCarParams, terminated: torch.Tensor, action: torch.Tensor
) -> torch.Tensor:
    """(N,) reward: ``goal_reward`` on termination, minus ``action_cost * action^2``."""
    zero = torch.zeros_like(action)
    bonus = torch.where(terminated, zero + params.goal_reward, zero)
    return bonus - action**2 * params.action_cost


def observation(params: ContinuousMountainCarParams, s: ContinuousMountainCarState) -> torch.Tensor:
    """(N, 2) observation ``[position, velocity]``."""
    return columns(s.position, s.velocity)


class ContinuousMountainCar(EnvDef[ContinuousMountainCarState, ContinuousMountainCarParams]):
    """MountainCarContinuous-v0 (999 steps by registration)."""

    params_type = ContinuousMountainCarParams
    metadata = {"render_modes": ["human", "rgb_array"], "render_fps": 30}

    def observation_space(
        self, params: ContinuousMountainCarParams, dtype: torch.dtype
    ) -> gym.Space:
        """Box(2,) bounded by the walls and the speed limit, as gymnasium."""
        return observation_space(params, dtype)

    def action_space(self, params: ContinuousMountainCarParams, dtype: torch.dtype) -> gym.Space:
        """Box(1,) force in ``[min_action, max_action]``."""
        return gym.spaces.Box(
            params.min_action, params.max_action, shape=(1,), dtype=numpy_dtype(dtype)
        )

    def reset(
        self,
        params: ContinuousMountainCarParams,
        rng: Rng,
        dtype: torch.dtype,
        options: dict[str, Any] | None,
    ) -> ContinuousMountainCarState:
        """Uniform initial positions; ``options`` may set ``low``/``high`` as gymnasium's."""
        low, high = reset_bounds(options, params.reset_low, params.reset_high)
        return ContinuousMountainCarState(*reset_sample(rng, dtype, low, high))

    def step(
        self,
        params: ContinuousMountainCarParams,
        state: ContinuousMountainCarState,
        action: torch.Tensor,
        rng: Rng,
    ) -> tuple[ContinuousMountainCarState, torch.Tensor, torch.Tensor]:
        """Dynamics and termination, reward, then the state stored rounded to float32."""
        a = action[:, 0]
        force = torch.clamp(a, params.min_action, params.max_action)
        nxt = dynamics(params, state, force)
        term = terminal(params, nxt)
        stored = ContinuousMountainCarState(round32(nxt.position), round32(nxt.velocity))
        return stored, reward(params, term, a), term

    def observation(
        self, params: ContinuousMountainCarParams, state: ContinuousMountainCarState
    ) -> torch.Tensor:
        """(N, 2) observation."""
        return observation(params, state)

    def render(
        self, params: ContinuousMountainCarParams, state: ContinuousMountainCarState
    ) -> torch.Tensor:
        """(N, 400, 600, 3) uint8 frames."""
        return render_frames(params, state)
