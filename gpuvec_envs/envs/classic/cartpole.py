"""Batched CartPole.

Mirrors ``gymnasium/envs/classic_control/cartpole.py`` (gymnasium 1.4, ``CartPoleEnv``):
same constants, same order of floating-point operations (so float64 results agree to the
last bit, eager or compiled), same termination and the ``sutton_barto_reward`` option.
float32 ``sin``/``cos`` are :mod:`~gpuvec_envs.envs.classic._trig`'s. Deliberate
difference: stepping on after termination (only possible with autoreset ``DISABLED``) keeps
integrating and rewarding instead of warning and returning 0.
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
from gpuvec_envs.envs.classic._util import columns, numpy_dtype, reset_bounds

WHITE, BLACK = (255, 255, 255), (0, 0, 0)
POLE, AXLE = (202, 152, 101), (129, 132, 203)


@dataclasses.dataclass(frozen=True)
class CartPoleParams:
    """Primary constants (SI units)."""

    gravity: float = 9.8  # [m/s^2]
    masscart: float = 1.0  # [kg]
    masspole: float = 0.1  # [kg]
    length: float = 0.5  # [m] half the pole's length
    force_mag: float = 10.0  # [N]
    tau: float = 0.02  # [s] per step
    euler: bool = True  # False: semi-implicit Euler
    theta_threshold_degrees: float = 12.0  # [deg] |theta| beyond this terminates
    x_threshold: float = 2.4  # [m] |x| beyond this terminates
    sutton_barto_reward: bool = False  # reward 0 per step and -1 on termination
    reset_bound: float = 0.05  # initial state ~ U(-bound, bound) per component

    @property
    def total_mass(self) -> float:
        """Cart plus pole [kg]."""
        return self.masspole + self.masscart

    @property
    def polemass_length(self) -> float:
        """Pole mass times half length [kg m]."""
        return self.masspole * self.length

    @property
    def theta_threshold_radians(self) -> float:
        """Termination angle [rad]."""
        return self.theta_threshold_degrees * 2 * math.pi / 360


class CartPoleState(NamedTuple):
    """Batched CartPole state, each field shape (N,)."""

    x: torch.Tensor  # [m] cart position
    x_dot: torch.Tensor  # [m/s] cart velocity
    theta: torch.Tensor  # [rad] pole angle
    theta_dot: torch.Tensor  # [rad/s] pole angular velocity


def reset_sample(
    params: CartPoleParams, rng: Rng, dtype: torch.dtype, low: float, high: float
) -> CartPoleState:
    """N initial states, every component uniform in ``[low, high)``."""
    x, x_dot, theta, theta_dot = rng.columns(4, "uniform", low=low, high=high, dtype=dtype)
    return CartPoleState(x, x_dot, theta, theta_dot)


def dynamics(params: CartPoleParams, s: CartPoleState, action: torch.Tensor) -> CartPoleState:
    """One Euler (or semi-implicit Euler) step; ``action`` (N,) int64 in {0, 1}."""
    p = params
    force = torch.where(action == 1, p.force_mag, -p.force_mag).to(s.x.dtype)
    sintheta, costheta = _trig.sincos(s.theta)
    temp = (force + p.polemass_length * torch.square(s.theta_dot) * sintheta) / p.total_mass
    thetaacc = (p.gravity * sintheta - costheta * temp) / (
        p.length * (4.0 / 3.0 - p.masspole * torch.square(costheta) / p.total_mass)
    )
    xacc = temp - p.polemass_length * thetaacc * costheta / p.total_mass
    if p.euler:
        x = s.x + p.tau * s.x_dot
        x_dot = s.x_dot + p.tau * xacc
        theta = s.theta + p.tau * s.theta_dot
        theta_dot = s.theta_dot + p.tau * thetaacc
    else:
        x_dot = s.x_dot + p.tau * xacc
        x = s.x + p.tau * x_dot
        theta_dot = s.theta_dot + p.tau * thetaacc
        theta = s.theta + p.tau * theta_dot
    return CartPoleState(x, x_dot, theta, theta_dot)


def terminal(params: CartPoleParams, s: CartPoleState) -> torch.Tensor:
    """(N,) bool: cart out of bounds or pole past the threshold angle."""
    xt, tt = params.x_threshold, params.theta_threshold_radians
    return (s.x < -xt) | (s.x > xt) | (s.theta < -tt) | (s.theta > tt)


def reward(params: CartPoleParams, terminated: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """(N,) reward: 1 per step, or Sutton & Barto's 0 per step and -1 on failure."""
    one = torch.ones(terminated.shape, dtype=dtype, device=terminated.device)
    if params.sutton_barto_reward:
        return torch.where(terminated, -one, torch.zeros_like(one))
    return one


def render_frames(
    params: CartPoleParams, s: CartPoleState, width: int = 600, height: int = 400
) -> torch.Tensor:
    """(N, height, width, 3) uint8 RGB frames drawn like gymnasium's pygame renderer.

    Same geometry, colours and drawing order (cart, pole, axle, track; y up), rasterised
    for the whole batch by :mod:`gpuvec_envs.envs.classic._draw` without anti-aliasing.
    """
    scale = width / (params.x_threshold * 2)
    pole_w, pole_len, cart_w, cart_h, cart_y = 10.0, scale * 2 * params.length, 50.0, 30.0, 100
    axle_y = cart_y + cart_h / 4.0
    cart_x = s.x.double() * scale + width / 2.0  # (N,) [px]
    frame = draw.blank(height, width, WHITE, s.x)
    zero = torch.zeros_like(cart_x)
    xs, ys = draw.rotated_rect(
        -cart_w / 2, cart_w / 2, -cart_h / 2, cart_h / 2, zero, cart_x, zero + cart_y
    )
    draw.fill_polygon(frame, xs, ys, cart_w, BLACK)
    xs, ys = draw.rotated_rect(
        -pole_w / 2,
        pole_w / 2,
        -pole_w / 2,
        pole_len - pole_w / 2,
        -s.theta.double(),
        cart_x,
        zero + axle_y,
    )
    draw.fill_polygon(frame, xs, ys, math.hypot(pole_w, pole_len), POLE)
    draw.fill_circle(frame, torch.trunc(cart_x), zero + int(axle_y), int(pole_w / 2), AXLE)
    draw.fill_box(frame, zero.long(), zero.long() + cart_y, width, 0, BLACK)
    return frame


def observation(params: CartPoleParams, s: CartPoleState) -> torch.Tensor:
    """(N, 4) observation ``[x, x_dot, theta, theta_dot]``."""
    return columns(s.x, s.x_dot, s.theta, s.theta_dot)


class CartPole(EnvDef[CartPoleState, CartPoleParams]):
    """CartPole-v1 / v0 (the episode length is the registration's time limit)."""

    params_type = CartPoleParams
    metadata = {"render_modes": ["human", "rgb_array"], "render_fps": 50}

    def observation_space(self, params: CartPoleParams, dtype: torch.dtype) -> gym.Space:
        """Box(4,) bounded at twice the termination thresholds, as gymnasium."""
        high = np.array(
            [params.x_threshold * 2, np.inf, params.theta_threshold_radians * 2, np.inf],
            dtype=np.float32,
        ).astype(numpy_dtype(dtype))
        return gym.spaces.Box(-high, high, dtype=numpy_dtype(dtype))

    def action_space(self, params: CartPoleParams, dtype: torch.dtype) -> gym.Space:
        """Discrete(2): push left (0) or right (1)."""
        return gym.spaces.Discrete(2)

    def reset(
        self,
        params: CartPoleParams,
        rng: Rng,
        dtype: torch.dtype,
        options: dict[str, Any] | None,
    ) -> CartPoleState:
        """Uniform initial states; ``options`` may set ``low``/``high`` as gymnasium's."""
        low, high = reset_bounds(options, -params.reset_bound, params.reset_bound)
        return reset_sample(params, rng, dtype, low, high)

    def step(
        self, params: CartPoleParams, state: CartPoleState, action: torch.Tensor, rng: Rng
    ) -> tuple[CartPoleState, torch.Tensor, torch.Tensor]:
        """Dynamics, then termination and reward on the new state."""
        nxt = dynamics(params, state, action)
        term = terminal(params, nxt)
        return nxt, reward(params, term, state.x.dtype), term

    def observation(self, params: CartPoleParams, state: CartPoleState) -> torch.Tensor:
        """(N, 4) observation."""
        return observation(params, state)

    def render(self, params: CartPoleParams, state: CartPoleState) -> torch.Tensor:
        """(N, 400, 600, 3) uint8 frames."""
        return render_frames(params, state)
