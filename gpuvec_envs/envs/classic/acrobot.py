"""Batched Acrobot (two-link pendulum swing-up).

Mirrors ``gymnasium/envs/classic_control/acrobot.py`` (gymnasium 1.4, ``AcrobotEnv``):
same constants, the "book" (default) or "nips" dynamics, one fourth-order Runge-Kutta step
over ``t = [0, dt]`` of the state augmented with the torque (``rk4``), ``wrap`` of both
angles into ``[-pi, pi]`` and ``bound`` of both velocities, termination when the tip is
above the bar, reward -1 per step and 0 on termination, the cos/sin observation, the
optional uniform torque noise, reset options ``low``/``high``, the reset state rounded to
float32, and the same order of floating-point operations.

Deliberate differences: the torque noise is drawn from the env's counter-based
:class:`~gpuvec_envs.core.rng.Rng` instead of ``np_random``; gymnasium's ``wrap`` loops until
the angle is in range, here it subtracts (adds) ``2 pi`` at most :data:`WRAP_ITERS` times,
which covers every angle reachable in one step from a state within the velocity bounds (and
falls back to ``fmod`` beyond); squares are ``x**2`` (one multiplication) where numpy's
scalar ``**`` calls libm's ``pow`` and float64 ``sin``/``cos`` are torch's (float32:
:mod:`~gpuvec_envs.envs.classic._trig`'s), so float64 results differ from the reference in
the last bit for ~0.5% of steps (< 1e-14).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from gpuvec_envs.core.env import EnvDef
from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.classic import _draw as draw
from gpuvec_envs.envs.classic import _trig
from gpuvec_envs.envs.classic._util import columns, numpy_dtype, reset_bounds, round32

#: Conditional subtractions (and additions) of ``2 pi`` in :func:`wrap`. One RK4 step from
#: any state within the velocity bounds moves an angle to at most ~29.8 rad (5 shifts).
WRAP_ITERS = 6

WHITE, BLACK = (255, 255, 255), (0, 0, 0)
LINK, JOINT = (0, 204, 204), (204, 204, 0)


@dataclasses.dataclass(frozen=True)
class AcrobotParams:
    """Primary constants (SI units)."""

    dt: float = 0.2  # [s] per step (one RK4 step)
    link_length_1: float = 1.0  # [m]
    link_length_2: float = 1.0  # [m] (only drawn in gymnasium; unused by the dynamics)
    link_mass_1: float = 1.0  # [kg]
    link_mass_2: float = 1.0  # [kg]
    link_com_pos_1: float = 0.5  # [m] centre of mass of link 1
    link_com_pos_2: float = 0.5  # [m] centre of mass of link 2
    link_moi: float = 1.0  # [kg m^2] moment of inertia of both links
    gravity: float = 9.8  # [m/s^2]
    max_vel_1: float = 4 * math.pi  # [rad/s] |dtheta1| bound
    max_vel_2: float = 9 * math.pi  # [rad/s] |dtheta2| bound
    avail_torque: tuple[float, float, float] = (-1.0, 0.0, 1.0)  # [N m] per action
    torque_noise_max: float = 0.0  # [N m] torque += U(-max, max) when > 0
    book_or_nips: str = "book"  # "book" (default) or "nips" dynamics
    reset_bound: float = 0.1  # initial state ~ U(-bound, bound) per component

    def __post_init__(self) -> None:
        if self.book_or_nips not in ("book", "nips"):
            raise ValueError(f"book_or_nips must be 'book' or 'nips', got {self.book_or_nips!r}")


class AcrobotState(NamedTuple):
    """Batched Acrobot state, each field shape (N,)."""

    theta1: torch.Tensor  # [rad] angle of link 1 from hanging down, in [-pi, pi]
    theta2: torch.Tensor  # [rad] angle of link 2 relative to link 1, in [-pi, pi]
    dtheta1: torch.Tensor  # [rad/s] in [-max_vel_1, max_vel_1]
    dtheta2: torch.Tensor  # [rad/s] in [-max_vel_2, max_vel_2]


def reset_sample(
    params: AcrobotParams, rng: Rng, dtype: torch.dtype, low: float, high: float
) -> AcrobotState:
    """N initial states, every component uniform in ``[low, high)`` and rounded to float32."""
    u = rng.columns(4, "uniform", low=low, high=high, dtype=dtype)
    return AcrobotState(*(round32(c) for c in u))


def torque(
    params: AcrobotParams, action: torch.Tensor, rng: Rng, dtype: torch.dtype
) -> torch.Tensor:
    """(N,) torque [N m] of ``action`` (N,) int64 in {0, 1, 2}, plus noise if enabled."""
    t0, t1, t2 = (float(t) for t in params.avail_torque)
    zero = torch.zeros(action.shape, dtype=dtype, device=action.device)
    tau = torch.where(action == 0, zero + t0, torch.where(action == 1, zero + t1, zero + t2))
    if params.torque_noise_max > 0:
        n = params.torque_noise_max
        tau = tau + rng.uniform(low=-n, high=n, dtype=dtype)
    return tau


def dsdt(
    params: AcrobotParams, s: tuple[torch.Tensor, ...], a: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """Time derivative of ``(theta1, theta2, dtheta1, dtheta2)`` under torque ``a``; each (N,).

    gymnasium's ``_dsdt`` (its fifth output, the torque's derivative, is always 0).
    """
    p = params
    m1, m2 = p.link_mass_1, p.link_mass_2
    l1, lc1, lc2 = p.link_length_1, p.link_com_pos_1, p.link_com_pos_2
    i1 = i2 = p.link_moi
    g = p.gravity
    pi = math.pi
    theta1, theta2, dtheta1, dtheta2 = s
    sin_theta2, cos_theta2 = _trig.sincos(theta2)
    d1 = m1 * lc1**2 + m2 * (l1**2 + lc2**2 + 2 * l1 * lc2 * cos_theta2) + i1 + i2
    d2 = m2 * (lc2**2 + l1 * lc2 * cos_theta2) + i2
    phi2 = m2 * lc2 * g * _trig.cos(theta1 + theta2 - pi / 2.0)
    phi1 = (
        -m2 * l1 * lc2 * dtheta2**2 * sin_theta2
        - 2 * m2 * l1 * lc2 * dtheta2 * dtheta1 * sin_theta2
        + (m1 * lc1 + m2 * l1) * g * _trig.cos(theta1 - pi / 2)
        + phi2
    )
    if p.book_or_nips == "nips":
        ddtheta2 = (a + d2 / d1 * phi1 - phi2) / (m2 * lc2**2 + i2 - d2**2 / d1)
    else:
        ddtheta2 = (a + d2 / d1 * phi1 - m2 * l1 * lc2 * dtheta1**2 * sin_theta2 - phi2) / (
            m2 * lc2**2 + i2 - d2**2 / d1
        )
    ddtheta1 = -(d2 * ddtheta2 + phi1) / d1
    return dtheta1, dtheta2, ddtheta1, ddtheta2


def rk4(params: AcrobotParams, s: AcrobotState, a: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The reference's ``rk4`` over ``t = [0, dt]``: one classic Runge-Kutta step, each (N,)."""
    dt = params.dt - 0
    dt2 = dt / 2.0
    y0 = tuple(s)
    k1 = dsdt(params, y0, a)
    k2 = dsdt(params, tuple(y + dt2 * k for y, k in zip(y0, k1, strict=True)), a)
    k3 = dsdt(params, tuple(y + dt2 * k for y, k in zip(y0, k2, strict=True)), a)
    k4 = dsdt(params, tuple(y + dt * k for y, k in zip(y0, k3, strict=True)), a)
    return tuple(
        y + dt / 6.0 * (q1 + 2 * q2 + 2 * q3 + q4)
        for y, q1, q2, q3, q4 in zip(y0, k1, k2, k3, k4, strict=True)
    )


def wrap(x: torch.Tensor, m: float, big_m: float) -> torch.Tensor:
    """The reference's ``wrap``: shift ``x`` (N,) by ``big_m - m`` until it is in ``[m, big_m]``.

    The same sequence of subtractions (then additions) as gymnasium's loops, so equal to the
    last bit, for up to :data:`WRAP_ITERS` shifts each way; an angle still out of range after
    them (only from states far outside the velocity bounds) is wrapped with ``remainder``.
    """
    diff = big_m - m
    # Candidates x - diff, x - 2 diff, ... (each one rounded subtraction, as the loop does),
    # then pick the first in range. The compiler inlines every read of x (the whole RK4
    # expression), so reads are kept few: a chain of ``where(x > M, x - diff, x)`` reads x
    # three times per link and took minutes to compile.
    # Only one loop of the reference runs: after subtractions x >= m already.
    down = _first_in_range(x, -diff, lambda c: c > big_m)
    up = _first_in_range(x, diff, lambda c: c < m)
    x = torch.where(x > big_m, down, up)
    outside = (x > big_m) | (x < m)
    mod = torch.fmod(x - m, diff)  # exact; then the sign of diff, as ``remainder``
    mod = torch.where(mod < 0, mod + diff, mod)
    return torch.where(outside, mod + m, x)


def _first_in_range(x: torch.Tensor, shift: float, out_of_range) -> torch.Tensor:
    """``x + k shift`` (k sequential additions) for the smallest k <= WRAP_ITERS in range."""
    candidates = [x]
    for _ in range(WRAP_ITERS):
        candidates.append(candidates[-1] + shift)
    out = candidates[-1]
    for c in reversed(candidates[:-1]):
        out = torch.where(out_of_range(c), out, c)
    return out


def dynamics(params: AcrobotParams, s: AcrobotState, a: torch.Tensor) -> AcrobotState:
    """RK4 step under torque ``a`` (N,), then wrap the angles and bound the velocities."""
    p = params
    ns = rk4(params, s, a)
    return AcrobotState(
        wrap(ns[0], -math.pi, math.pi),
        wrap(ns[1], -math.pi, math.pi),
        torch.clamp(ns[2], -p.max_vel_1, p.max_vel_1),
        torch.clamp(ns[3], -p.max_vel_2, p.max_vel_2),
    )


def terminal(params: AcrobotParams, s: AcrobotState) -> torch.Tensor:
    """(N,) bool: the tip is more than one link length above the pivot."""
    return -_trig.cos(s.theta1) - _trig.cos(s.theta2 + s.theta1) > 1.0


def reward(params: AcrobotParams, terminated: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(N,) reward: -1 per step, 0 on termination."""
    zero = torch.zeros(terminated.shape, dtype=dtype, device=terminated.device)
    return torch.where(terminated, zero, zero - 1.0)


def observation(params: AcrobotParams, s: AcrobotState) -> torch.Tensor:
    """(N, 6) observation ``[cos th1, sin th1, cos th2, sin th2, dth1, dth2]``."""
    sin1, cos1 = _trig.sincos(s.theta1)
    sin2, cos2 = _trig.sincos(s.theta2)
    return columns(cos1, sin1, cos2, sin2, s.dtheta1, s.dtheta2)


def render_frames(params: AcrobotParams, s: AcrobotState, size: int = 500) -> torch.Tensor:
    """(N, size, size, 3) uint8 RGB frames drawn like gymnasium's pygame renderer.

    Same geometry, colours and drawing order (ground line, then each link and its joint;
    y up), rasterised for the whole batch without anti-aliasing.
    """
    p = params
    bound = p.link_length_1 + p.link_length_2 + 0.2
    scale = size / (bound * 2)
    offset = size / 2
    th1, th2 = s.theta1.double(), s.theta2.double()
    frame = draw.blank(size, size, WHITE, th1)
    zero = torch.zeros_like(th1)
    ground_y = int(1 * scale + offset)
    draw.fill_box(frame, zero.long(), zero.long() + ground_y, size - 1, 0, BLACK)
    x1 = p.link_length_1 * torch.sin(th1) * scale + offset
    y1 = -p.link_length_1 * torch.cos(th1) * scale + offset
    joints = ((zero + offset, zero + offset), (x1, y1))
    thetas = (th1 - math.pi / 2, th1 + th2 - math.pi / 2)
    lengths = (p.link_length_1 * scale, p.link_length_2 * scale)
    half, radius = 0.1 * scale, int(0.1 * scale)
    for (x, y), th, length in zip(joints, thetas, lengths, strict=True):
        xs, ys = draw.rotated_rect(0, length, -half, half, th, x, y)
        draw.fill_polygon(frame, xs, ys, math.hypot(length, 2 * half), LINK)
        draw.fill_circle(frame, torch.trunc(x), torch.trunc(y), radius, JOINT)
    return frame


class Acrobot(EnvDef[AcrobotState, AcrobotParams]):
    """Acrobot-v1 (500 steps by registration)."""

    params_type = AcrobotParams
    metadata = {"render_modes": ["human", "rgb_array"], "render_fps": 15}

    def observation_space(self, params: AcrobotParams, dtype: torch.dtype) -> gym.Space:
        """Box(6,): cos/sin in ``[-1, 1]``, velocities within their bounds, as gymnasium."""
        high = np.array(
            [1.0, 1.0, 1.0, 1.0, params.max_vel_1, params.max_vel_2], dtype=np.float32
        ).astype(numpy_dtype(dtype))
        return gym.spaces.Box(-high, high, dtype=numpy_dtype(dtype))

    def action_space(self, params: AcrobotParams, dtype: torch.dtype) -> gym.Space:
        """Discrete(3): torque ``avail_torque[action]``."""
        return gym.spaces.Discrete(3)

    def reset(
        self,
        params: AcrobotParams,
        rng: Rng,
        dtype: torch.dtype,
        options: dict[str, Any] | None,
    ) -> AcrobotState:
        """Uniform initial states; ``options`` may set ``low``/``high`` as gymnasium's."""
        low, high = reset_bounds(options, -params.reset_bound, params.reset_bound)
        return reset_sample(params, rng, dtype, low, high)

    def step(
        self, params: AcrobotParams, state: AcrobotState, action: torch.Tensor, rng: Rng
    ) -> tuple[AcrobotState, torch.Tensor, torch.Tensor]:
        """Torque (with noise), dynamics, then termination and reward on the new state."""
        dtype = state.theta1.dtype
        nxt = dynamics(params, state, torque(params, action, rng, dtype))
        term = terminal(params, nxt)
        return nxt, reward(params, term, dtype), term

    def observation(self, params: AcrobotParams, state: AcrobotState) -> torch.Tensor:
        """(N, 6) observation."""
        return observation(params, state)

    def render(self, params: AcrobotParams, state: AcrobotState) -> torch.Tensor:
        """(N, 500, 500, 3) uint8 frames."""
        return render_frames(params, state)
