"""The physics-only bound of a gpuvec MuJoCo env: its engine stepping state rows alone.

What the MuJoCo rows of the benchmark compare the env against besides gymnasium: the same
C engine (``mj_step`` ``frame_skip`` times and ``mj_rnePostConstraint`` per env, on the
env's threads) with no reward, observation, autoreset or torch work around it, along a
random-control rollout from the env's reset states.
"""

from __future__ import annotations

import time

import gymnasium as gym
import torch

from gpuvec_envs.bench.measure import Opened, Result


def open_physics_bound(env_id: str, num_envs: int) -> Opened:
    """``env_id``'s engine alone along a random-control rollout (impl ``mj_step-bound``).

    The batch starts from the env's reset states and each call advances it one env step
    (``frame_skip`` substeps and the post-constraint pass) with uniform random controls in
    the actuators' range, as the env's random actions do; no resets (so bodies lie in
    contact, as in most of an episode), no torch work.
    """
    t0 = time.perf_counter()
    env = gym.make_vec(env_id, num_envs=num_envs, dtype=torch.float64, backend="eager")
    env.reset(seed=0)
    inner = env.unwrapped
    params = inner.params
    eng = inner.env_def.engine(params, torch.device("cpu"))
    low = torch.as_tensor(env.single_action_space.low, dtype=torch.float64)
    high = torch.as_tensor(env.single_action_space.high, dtype=torch.float64)
    gen = torch.Generator().manual_seed(0)
    ctrls = [
        low + (high - low) * torch.rand(num_envs, eng.nu, generator=gen, dtype=torch.float64)
        for _ in range(8)
    ]
    state = {"rows": inner.state.env.physics.clone()}

    def call(i: int) -> None:
        state["rows"] = eng.step(state["rows"], ctrls[i % len(ctrls)], params.frame_skip)[0]

    for i in range(10):  # past the reset pose: feet on the ground
        call(i)
    result = Result(env_id, "mj_step-bound", num_envs, 0.0, 0.0, time.perf_counter() - t0, [])
    return Opened(result, call, env.close)
