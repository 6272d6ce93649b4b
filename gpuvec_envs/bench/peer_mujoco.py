"""The physics-only bound of a gpuvec MuJoCo env: its engine stepping state rows alone.

What the MuJoCo rows of the benchmark compare the env against besides gymnasium: the same
C engine (``mj_step`` ``frame_skip`` times and ``mj_rnePostConstraint`` per env, on the
env's threads) with no reward, observation, autoreset or torch work around it, from the
env's reset states with zero controls.
"""

from __future__ import annotations

import time

import gymnasium as gym
import torch

from gpuvec_envs.bench.measure import Opened, Result


def open_physics_bound(env_id: str, num_envs: int) -> Opened:
    """``env_id``'s engine stepping ``num_envs`` reset states (impl ``mj_step-bound``)."""
    t0 = time.perf_counter()
    env = gym.make_vec(env_id, num_envs=num_envs, dtype=torch.float64, backend="eager")
    env.reset(seed=0)
    inner = env.unwrapped
    params = inner.params
    eng = inner.env_def.engine(params, torch.device("cpu"))
    rows = inner.state.env.physics
    ctrl = torch.zeros(num_envs, eng.nu, dtype=torch.float64)
    eng.step(rows, ctrl, params.frame_skip)
    result = Result(env_id, "mj_step-bound", num_envs, 0.0, 0.0, time.perf_counter() - t0, [])
    return Opened(result, lambda _i: eng.step(rows, ctrl, params.frame_skip), env.close)
