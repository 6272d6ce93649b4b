"""Batched MountainCar (discrete actions).

Mirrors ``gymnasium/envs/classic_control/mountain_car.py`` (gymnasium 1.4,
``MountainCarEnv``): same constants, the ``goal_velocity`` parameter, velocity and position
clipping, the velocity reset to 0 at the left wall, termination at the goal, reward -1 per
step, reset options ``low``/``high`` for the initial position, and the same order of
floating-point operations (float64 agrees with the reference to the last bit, eager or
compiled; float32 ``cos`` is :mod:`~gpuvec_envs.envs.classic._trig`'s).

Deliberate difference: gymnasium tests ``position == min_position`` after clipping; here
``position <= min_position``, which is the same in float64 and also holds in float32, where
the clipped value is ``float32(min_position)``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from gpuvec_envs.core.constants import table
from gpuvec_envs.core.env import EnvDef
from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.classic import _draw as draw
from gpuvec_envs.envs.classic import _trig
from gpuvec_envs.envs.classic._util import columns, numpy_dtype, reset_bounds

WHITE, BLACK, WHEEL, FLAG = (255, 255, 255), (0, 0, 0), (128, 128, 128), (204, 204, 0)


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
    velocity = s.velocity + (push + _trig.cos(3 * s.position) * (-p.gravity))
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


def _height(x: Any) -> Any:
    """Hill height [m] at position ``x`` [m] (numpy or torch), as gymnasium's ``_height``."""
    return (torch.sin(3 * x) if isinstance(x, torch.Tensor) else np.sin(3 * x)) * 0.45 + 0.55


@functools.lru_cache(maxsize=16)
def _scenery(
    min_position: float, max_position: float, width: int, height: int, device: torch.device
) -> torch.Tensor:
    """(height, width) bool mask of the hill line, drawn once per geometry and device."""
    scale = width / (max_position - min_position)
    xs = torch.linspace(min_position, max_position, 100, dtype=torch.float64, device=device)
    return draw.polyline_mask(height, width, (xs - min_position) * scale, _height(xs) * scale)


def render_frames(params: Any, s: Any, width: int = 600, height: int = 400) -> torch.Tensor:
    """(N, height, width, 3) uint8 RGB frames drawn like gymnasium's pygame renderer.

    Same geometry, colours and drawing order (hill, car, wheels, flag; y up) for
    MountainCar and MountainCarContinuous (``params`` of either, ``s`` with a ``position``
    field (N,) [m]), rasterised for the whole batch without anti-aliasing.
    """
    p = params
    scale = width / (p.max_position - p.min_position)
    car_w, car_h, clearance = 40, 20, 10
    pos = s.position.double()
    dev = pos.device
    frame = draw.blank(height, width, WHITE, pos)
    draw.paint_mask(frame, _scenery(p.min_position, p.max_position, width, height, dev), BLACK)
    angle = torch.cos(3 * pos)
    ox, oy = (pos - p.min_position) * scale, clearance + _height(pos) * scale
    xs, ys = draw.rotated_rect(-car_w / 2, car_w / 2, 0, car_h, angle, ox, oy)
    draw.fill_polygon(frame, xs, ys, math.hypot(car_w, car_h), BLACK)
    cos, sin = torch.cos(angle), torch.sin(angle)
    for dx in (car_w / 4, -car_w / 4):
        wx, wy = torch.trunc(dx * cos + ox), torch.trunc(dx * sin + oy)
        draw.fill_circle(frame, wx, wy, int(car_h / 2.5), WHEEL)
    flag_x = int((p.goal_position - p.min_position) * scale)
    flag_y1 = int(_height(p.goal_position) * scale)
    flag_y2 = flag_y1 + 50
    zero = torch.zeros_like(pos)
    draw.fill_box(frame, zero.long() + flag_x, zero.long() + flag_y1, 0, flag_y2 - flag_y1, BLACK)
    fx = zero[:, None] + table((flag_x, flag_x, flag_x + 25.0), dtype=zero.dtype, like=zero)
    fy = zero[:, None] + table(
        (flag_y2, flag_y2 - 10.0, flag_y2 - 5.0), dtype=zero.dtype, like=zero
    )
    draw.fill_polygon(frame, fx, fy, 25.0, FLAG)
    return frame


class MountainCar(EnvDef[MountainCarState, MountainCarParams]):
    """MountainCar-v0 (200 steps by registration)."""

    params_type = MountainCarParams
    metadata = {"render_modes": ["human", "rgb_array"], "render_fps": 30}

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

    def render(self, params: MountainCarParams, state: MountainCarState) -> torch.Tensor:
        """(N, 400, 600, 3) uint8 frames."""
        return render_frames(params, state)
