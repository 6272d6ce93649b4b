"""How to drive each gymnasium reference env in lock-step with its gpuvec twin.

One :class:`Reference` per registered ID that mirrors a gymnasium env with a flat float64
``state`` (classic control). Generic parity tests (``test_parity.py``) iterate
:data:`REFERENCES`; adding an env means adding one entry here.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch

import gpuvec_envs  # noqa: F401  (registers the IDs)
from gpuvec_envs.registry import entry


@dataclasses.dataclass(frozen=True)
class Reference:
    """A gymnasium reference env and how to move state between it and ours.

    Attributes:
        env_id: Our registered ID.
        random_states: ``(rng, n) -> (n, k)`` float64 states covering the interesting
            region (including states that terminate after one step).
        random_actions: ``(rng, n) -> (n, *action_shape)`` valid actions.
        near_boundary: ``(next_states (n, k) float64) -> (n,) bool``: states within float32
            rounding of a termination threshold (flags may legitimately differ in float32).
        observe: Observation of a reference env computed from its ``state``.
        kwargs: Env parameters passed to both sides.
        resync: Whole-episode tests copy our state into the reference before every step
            (for chaotic dynamics, where last-bit differences of sin/cos grow).
        float32_tol: Absolute and relative tolerance of one float32 step vs the reference.
        terminates: False for envs that only ever truncate (Pendulum).
    """

    env_id: str
    random_states: Callable[[np.random.Generator, int], np.ndarray]
    random_actions: Callable[[np.random.Generator, int], np.ndarray]
    near_boundary: Callable[[np.ndarray], np.ndarray]
    observe: Callable[[gym.Env], np.ndarray]
    kwargs: dict = dataclasses.field(default_factory=dict)
    resync: bool = False
    float32_tol: float = 2e-6
    terminates: bool = True

    @property
    def reference_id(self) -> str:
        """The gymnasium ID mirrored."""
        return entry(self.env_id).reference

    def make_reference(self, max_episode_steps: int | None = None) -> gym.Env:
        """A reference env; with a ``TimeLimit`` only if ``max_episode_steps`` is given."""
        return gym.make(
            self.reference_id,
            max_episode_steps=max_episode_steps if max_episode_steps else -1,
            disable_env_checker=True,
            **self.kwargs,
        )

    @staticmethod
    def get_state(env: gym.Env) -> np.ndarray:
        """The reference's float64 state vector."""
        return np.array(env.unwrapped.state, dtype=np.float64)

    @staticmethod
    def set_state(env: gym.Env, state: np.ndarray) -> None:
        """Overwrite the reference's state vector."""
        env.unwrapped.state = np.array(state, dtype=np.float64)

    def to_env_state(self, vec: gpuvec_envs.GpuVecEnv, states: np.ndarray) -> tuple:
        """Our env-state NamedTuple from (N, k) float64 states (one column per field)."""
        state_type = type(vec.state.env)
        cols = [torch.as_tensor(states[:, j], dtype=vec.dtype) for j in range(states.shape[1])]
        return state_type(*cols)

    @staticmethod
    def from_env_state(vec: gpuvec_envs.GpuVecEnv) -> np.ndarray:
        """(N, k) float64 states from our env-state NamedTuple."""
        return np.stack([f.double().cpu().numpy() for f in vec.state.env], axis=1)


def _cartpole_states(rng: np.random.Generator, n: int) -> np.ndarray:
    scale = np.array([2.5, 3.0, 0.22, 3.5])
    return rng.uniform(-1.0, 1.0, size=(n, 4)) * scale


def _cartpole_near_boundary(s: np.ndarray) -> np.ndarray:
    theta_thr = 12 * 2 * np.pi / 360
    eps = 1e-5
    return (np.abs(np.abs(s[:, 0]) - 2.4) < eps) | (np.abs(np.abs(s[:, 2]) - theta_thr) < eps)


def _discrete_actions(n_actions: int) -> Callable[[np.random.Generator, int], np.ndarray]:
    return lambda rng, n: rng.integers(0, n_actions, size=n)


def _state_as_obs(env: gym.Env) -> np.ndarray:
    return np.array(env.unwrapped.state, dtype=np.float32)


# classic-control suite helpers


def _box_actions(bound: float) -> Callable[[np.random.Generator, int], np.ndarray]:
    """(n, 1) float64 actions in ``[-bound, bound]``, a few exactly at ``±bound``."""

    def sample(rng: np.random.Generator, n: int) -> np.ndarray:
        a = rng.uniform(-bound, bound, size=(n, 1))
        a[rng.random(n) < 0.05, 0] = bound
        a[rng.random(n) < 0.05, 0] = -bound
        return a

    return sample


def _pendulum_states(rng: np.random.Generator, n: int) -> np.ndarray:
    """Angles over two turns each way (unwrapped), velocities over the whole range ±8."""
    th = rng.uniform(-4 * np.pi, 4 * np.pi, size=n)
    thdot = rng.uniform(-8.0, 8.0, size=n)
    thdot[rng.random(n) < 0.1] = 8.0
    thdot[rng.random(n) < 0.1] = -8.0
    return np.stack([th, thdot], axis=1)


def _never(s: np.ndarray) -> np.ndarray:
    return np.zeros(len(s), dtype=bool)


def _mountain_car_states(goal: float) -> Callable[[np.random.Generator, int], np.ndarray]:
    """Positions over the track (a fifth near the goal, some at both walls), all velocities."""

    def sample(rng: np.random.Generator, n: int) -> np.ndarray:
        pos = rng.uniform(-1.2, 0.6, size=n)
        near_goal = rng.random(n) < 0.2
        pos[near_goal] = rng.uniform(goal - 0.08, goal + 0.02, size=near_goal.sum())
        pos[rng.random(n) < 0.05] = -1.2
        pos[rng.random(n) < 0.05] = 0.6
        vel = rng.uniform(-0.07, 0.07, size=n)
        vel[rng.random(n) < 0.05] = 0.07
        vel[rng.random(n) < 0.05] = -0.07
        return np.stack([pos, vel], axis=1)

    return sample


def _mountain_car_near_boundary(goal: float) -> Callable[[np.ndarray], np.ndarray]:
    eps = 1e-6
    return lambda s: (np.abs(s[:, 0] - goal) < eps) | (np.abs(s[:, 1]) < eps)


def _acrobot_states(rng: np.random.Generator, n: int) -> np.ndarray:
    """Angles over the circle, velocities over both bounds (some exactly at them)."""
    hi = np.array([np.pi, np.pi, 4 * np.pi, 9 * np.pi])
    s = rng.uniform(-1.0, 1.0, size=(n, 4)) * hi
    for j in (2, 3):
        s[rng.random(n) < 0.05, j] = hi[j]
        s[rng.random(n) < 0.05, j] = -hi[j]
    return s


def _acrobot_near_boundary(s: np.ndarray) -> np.ndarray:
    height = -np.cos(s[:, 0]) - np.cos(s[:, 1] + s[:, 0])
    return np.abs(height - 1.0) < 1e-4


REFERENCES: dict[str, Reference] = {
    r.env_id: r
    for r in (
        Reference(
            "gpuvec/CartPole-v1",
            _cartpole_states,
            _discrete_actions(2),
            _cartpole_near_boundary,
            _state_as_obs,
        ),
        Reference(
            "gpuvec/CartPole-v0",
            _cartpole_states,
            _discrete_actions(2),
            _cartpole_near_boundary,
            _state_as_obs,
            {"sutton_barto_reward": True},
        ),
        # classic-control suite
        Reference(
            "gpuvec/Pendulum-v1",
            _pendulum_states,
            _box_actions(3.0),
            _never,
            lambda env: env.unwrapped._get_obs(),
            terminates=False,
        ),
        Reference(
            "gpuvec/MountainCar-v0",
            _mountain_car_states(0.5),
            _discrete_actions(3),
            _mountain_car_near_boundary(0.5),
            _state_as_obs,
        ),
        Reference(
            "gpuvec/MountainCarContinuous-v0",
            _mountain_car_states(0.45),
            _box_actions(1.5),
            _mountain_car_near_boundary(0.45),
            _state_as_obs,
            # gymnasium keeps a float32 state whose arithmetic depends on numpy scalar types
            # (see continuous_mountain_car.py): compare steps from the same float64 state.
            resync=True,
        ),
        Reference(
            "gpuvec/Acrobot-v1",
            _acrobot_states,
            _discrete_actions(3),
            _acrobot_near_boundary,
            lambda env: env.unwrapped._get_ob(),
            resync=True,
            # float32 rounding of the RK4 stage angles times dtheta2^2 (up to ~10^3 inside the
            # stages) gives up to ~2e-3 absolute error in dtheta1 at the velocity bounds.
            float32_tol=5e-4,
        ),
    )
}
