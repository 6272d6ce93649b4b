"""Batched Pendulum (swing-up with bounded torque).

Mirrors ``gymnasium/envs/classic_control/pendulum.py`` (gymnasium 1.4, ``PendulumEnv``):
same constants, the ``g`` parameter, the action clipped to ``±max_torque``, the cost
computed from the pre-step state with ``angle_normalize``, the same order of floating-point
operations, and the reset options ``x_init``/``y_init`` (symmetric bounds of the initial
angle and angular velocity). Pendulum never terminates; episodes end by the registration's
time limit.

Deliberate differences: ``angle_normalize`` is computed with ``fmod`` plus a sign fix, which
is exactly numpy's floor-mod for a positive divisor on every backend; gymnasium casts a
float32 action's terms in float32 before adding them to its float64 state, while here the
action is cast to the simulation dtype first. numpy's scalar ``**2`` calls libm's ``pow`` and
float64 ``sin`` is torch's (float32: :mod:`~gpuvec_envs.envs.classic._trig`'s), so float64
rewards (rarely states) differ in the last bit.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from gymnasium.envs.classic_control.utils import verify_number_and_cast

from gpuvec_envs.core.env import EnvDef
from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.classic import _draw as draw
from gpuvec_envs.envs.classic import _trig
from gpuvec_envs.envs.classic._util import columns, numpy_dtype

WHITE, BLACK, ROD = (255, 255, 255), (0, 0, 0), (204, 77, 77)


@dataclasses.dataclass(frozen=True)
class PendulumParams:
    """Primary constants (SI units)."""

    max_speed: float = 8.0  # [rad/s] angular velocity is clipped to ±max_speed
    max_torque: float = 2.0  # [N m] action is clipped to ±max_torque
    dt: float = 0.05  # [s] per step
    g: float = 10.0  # [m/s^2] gravity
    mass: float = 1.0  # [kg] gymnasium's m
    length: float = 1.0  # [m] gymnasium's l
    x_init: float = math.pi  # [rad] initial angle ~ U(-x_init, x_init)
    y_init: float = 1.0  # [rad/s] initial angular velocity ~ U(-y_init, y_init)

    @property
    def gravity_coef(self) -> float:
        """``3 g / (2 l)`` [1/s^2], the coefficient of ``sin(theta)`` in the acceleration."""
        return 3 * self.g / (2 * self.length)

    @property
    def torque_coef(self) -> float:
        """``3 / (m l^2)`` [1/(kg m^2)], the coefficient of the torque in the acceleration."""
        return 3.0 / (self.mass * self.length**2)


class PendulumState(NamedTuple):
    """Batched Pendulum state, each field shape (N,)."""

    th: torch.Tensor  # [rad] angle, 0 = upright, not wrapped
    thdot: torch.Tensor  # [rad/s] angular velocity


def reset_sample(
    params: PendulumParams, rng: Rng, dtype: torch.dtype, x_init: float, y_init: float
) -> PendulumState:
    """N initial states: ``th ~ U(-x_init, x_init)``, ``thdot ~ U(-y_init, y_init)``."""
    u0, u1 = rng.columns(2, "uniform", dtype=dtype)
    th = -x_init + (x_init - -x_init) * u0
    thdot = -y_init + (y_init - -y_init) * u1
    return PendulumState(th, thdot)


def angle_normalize(x: torch.Tensor) -> torch.Tensor:
    """``((x + pi) mod 2 pi) - pi`` with numpy's floor-mod semantics; (N,) -> (N,)."""
    two_pi = 2 * math.pi
    mod = torch.fmod(x + math.pi, two_pi)
    mod = torch.where(mod < 0, mod + two_pi, mod)
    return mod - math.pi


def clip_action(params: PendulumParams, action: torch.Tensor) -> torch.Tensor:
    """(N, 1) action -> (N,) torque [N m] clipped to ``±max_torque``."""
    return torch.clamp(action[:, 0], -params.max_torque, params.max_torque)


def dynamics(params: PendulumParams, s: PendulumState, u: torch.Tensor) -> PendulumState:
    """One semi-implicit Euler step with clipped torque ``u`` (N,) [N m]."""
    p = params
    newthdot = s.thdot + (p.gravity_coef * _trig.sin(s.th) + p.torque_coef * u) * p.dt
    newthdot = torch.clamp(newthdot, -p.max_speed, p.max_speed)
    newth = s.th + newthdot * p.dt
    return PendulumState(newth, newthdot)


def reward(params: PendulumParams, s: PendulumState, u: torch.Tensor) -> torch.Tensor:
    """(N,) reward ``-(angle^2 + 0.1 thdot^2 + 0.001 u^2)`` of the pre-step state."""
    costs = angle_normalize(s.th) ** 2 + 0.1 * s.thdot**2 + 0.001 * (u**2)
    return -costs


def render_frames(params: PendulumParams, s: PendulumState, size: int = 500) -> torch.Tensor:
    """(N, size, size, 3) uint8 RGB frames drawn like gymnasium's pygame renderer.

    Same geometry, colours and drawing order (rod, its two round ends, axle; y up), without
    the torque arrow: the state does not hold the last action.
    """
    bound = 2.2
    scale = size / (bound * 2)
    offset = size // 2
    rod_length, rod_width = 1 * scale, 0.2 * scale
    angle = s.th.double() + math.pi / 2
    centre = torch.full_like(angle, offset)
    frame = draw.blank(size, size, WHITE, s.th)
    xs, ys = draw.rotated_rect(0, rod_length, -rod_width / 2, rod_width / 2, angle, centre, centre)
    draw.fill_polygon(frame, xs, ys, math.hypot(rod_length, rod_width), ROD)
    draw.fill_circle(frame, centre, centre, int(rod_width / 2), ROD)
    end_x = torch.trunc(rod_length * torch.cos(angle) + offset)
    end_y = torch.trunc(rod_length * torch.sin(angle) + offset)
    draw.fill_circle(frame, end_x, end_y, int(rod_width / 2), ROD)
    draw.fill_circle(frame, centre, centre, int(0.05 * scale), BLACK)
    return frame


def observation(params: PendulumParams, s: PendulumState) -> torch.Tensor:
    """(N, 3) observation ``[cos th, sin th, thdot]``."""
    sin, cos = _trig.sincos(s.th)
    return columns(cos, sin, s.thdot)


class Pendulum(EnvDef[PendulumState, PendulumParams]):
    """Pendulum-v1 (200 steps by registration)."""

    params_type = PendulumParams
    metadata = {"render_modes": ["human", "rgb_array"], "render_fps": 30}

    def observation_space(self, params: PendulumParams, dtype: torch.dtype) -> gym.Space:
        """Box(3,): ``[-1, -1, -max_speed]`` to ``[1, 1, max_speed]``, as gymnasium."""
        high = np.array([1.0, 1.0, params.max_speed], dtype=np.float32).astype(numpy_dtype(dtype))
        return gym.spaces.Box(-high, high, dtype=numpy_dtype(dtype))

    def action_space(self, params: PendulumParams, dtype: torch.dtype) -> gym.Space:
        """Box(1,) torque in ``[-max_torque, max_torque]``."""
        return gym.spaces.Box(
            -params.max_torque, params.max_torque, shape=(1,), dtype=numpy_dtype(dtype)
        )

    def reset(
        self,
        params: PendulumParams,
        rng: Rng,
        dtype: torch.dtype,
        options: dict[str, Any] | None,
    ) -> PendulumState:
        """Uniform initial states; ``options`` may set ``x_init``/``y_init`` as gymnasium's."""
        x, y = params.x_init, params.y_init
        if options is not None:
            x = verify_number_and_cast(options.get("x_init", x))
            y = verify_number_and_cast(options.get("y_init", y))
        return reset_sample(params, rng, dtype, x, y)

    def step(
        self, params: PendulumParams, state: PendulumState, action: torch.Tensor, rng: Rng
    ) -> tuple[PendulumState, torch.Tensor, torch.Tensor]:
        """Reward of the pre-step state and clipped torque, then dynamics; never terminates."""
        u = clip_action(params, action)
        r = reward(params, state, u)
        nxt = dynamics(params, state, u)
        return nxt, r, torch.zeros(r.shape, dtype=torch.bool, device=r.device)

    def observation(self, params: PendulumParams, state: PendulumState) -> torch.Tensor:
        """(N, 3) observation."""
        return observation(params, state)

    def render(self, params: PendulumParams, state: PendulumState) -> torch.Tensor:
        """(N, 500, 500, 3) uint8 frames."""
        return render_frames(params, state)
