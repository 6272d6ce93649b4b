"""Trajectories of registered envs for the reproducibility tests (``test_reproducibility.py``).

A trajectory is every observation, reward and flag (and ``final_obs`` in SAME_STEP) of a
run from ``reset(seed=...)`` under actions drawn from a seeded generator, independent of
the env: the same actions reach every backend. Runnable as a script (the two-process
test): ``python tests/reproducibility.py ENV_ID STEPS N OUT.npz``.
"""

from __future__ import annotations

import sys

import gymnasium as gym
import numpy as np
import torch

import gpuvec_envs  # noqa: F401  (registers the IDs)
from gpuvec_envs.registry import REGISTRY, EnvEntry

#: The families whose eager and compiled steps are bitwise equal by construction (their
#: physics is torch arithmetic): classic control, MinAtar, MiniGrid. Other families (an
#: engine's physics, e.g. MuJoCo) are not in the sweep.
FAMILIES = ("gpuvec_envs.envs.classic.", "gpuvec_envs.envs.minatar.", "gpuvec_envs.envs.minigrid.")


def swept(entry: EnvEntry) -> bool:
    """Whether ``entry``'s env belongs to :data:`FAMILIES`."""
    return entry.env_def.startswith(FAMILIES)


SWEPT_IDS = [e.id for e in REGISTRY if swept(e)]
CLASSIC_IDS = [e.id for e in REGISTRY if e.env_def.startswith(FAMILIES[0])]
#: The integer games whose compiled-equality sweeps CI runs (``heavy``; every other
#: MinAtar and MiniGrid class is ``slow``: their compiles take minutes each on 2 cores):
#: two MinAtar games and two MiniGrid worlds, with moving objects and doors.
CI_GAME_IDS = (
    "gpuvec/MinAtar-Breakout-v0",
    "gpuvec/MinAtar-Seaquest-v0",
    "gpuvec/MiniGrid-DoorKey-5x5-v0",
    "gpuvec/MiniGrid-Dynamic-Obstacles-5x5-v0",
)


def actions(space: gym.Space, steps: int, seed: int) -> list[torch.Tensor]:
    """``steps`` batched actions of ``space`` (a vector env's ``action_space``)."""
    space.seed(seed)
    return [torch.as_tensor(space.sample()) for _ in range(steps)]


def run(env: gym.vector.VectorEnv, acts: list[torch.Tensor], seed: int = 0) -> np.ndarray:
    """Every output of ``reset(seed)`` and then a step per action, as one float64 array.

    Each step's row: observation (flattened per env), reward, terminated, truncated and,
    where the env gives it, ``final_obs``.
    """
    obs, _ = env.reset(seed=seed)
    width = _width(env)
    first = flat(obs)
    rows = [torch.nn.functional.pad(first, (0, width - first.shape[1])).cpu().numpy()]
    rows += [step_row(env, a) for a in acts]
    return np.stack(rows)


def _width(env: gym.vector.VectorEnv) -> int:
    """Columns of a step's row: observation, reward, the two flags and final_obs."""
    space = env.single_observation_space
    spaces = space.values() if isinstance(space, gym.spaces.Dict) else [space]
    return 2 * sum(int(np.prod(s.shape)) for s in spaces) + 3


def step_row(env: gym.vector.VectorEnv, a: torch.Tensor) -> np.ndarray:
    """One step's (N, width) float64 row: obs, reward, terminated, truncated, final_obs."""
    obs, reward, term, trunc, info = env.step(a)
    o = flat(obs)
    final = flat(info["final_obs"]) if "final_obs" in info else torch.zeros_like(o)
    flags = torch.stack([reward.double(), term.double(), trunc.double()], dim=1)
    return torch.cat([o, flags, final], dim=1).cpu().numpy()


def flat(obs: object) -> torch.Tensor:
    """(N, k) float64 of an observation (a tensor or a dict of tensors)."""
    if isinstance(obs, dict):
        return torch.cat([flat(obs[k]) for k in sorted(obs)], dim=1)
    t = torch.as_tensor(obs)
    return t.reshape(t.shape[0], -1).double()


def bits_equal(a: np.ndarray, b: np.ndarray) -> bool:
    """Bitwise equality of two float64 arrays (NaNs of the same bits are equal)."""
    return a.shape == b.shape and np.array_equal(a.view(np.int64), b.view(np.int64))


def main(argv: list[str]) -> None:
    """Run ``argv = [IDS, STEPS, N, WAIT_AT, OUT]`` with the default backend; save to ``OUT``.

    For each comma-separated ID: ``reset(seed=0)``, then ``STEPS`` steps of seeded random
    actions; before step ``WAIT_AT`` the env waits for its background compile (which
    lands there on a cold inductor cache; on a warm one the compiled step ran from the
    first step). ``OUT`` (``.npz``) holds each ID's trajectory and its eager steps.
    """
    ids, steps, n, wait_at, out = (
        argv[0].split(","),
        int(argv[1]),
        int(argv[2]),
        int(argv[3]),
        argv[4],
    )
    saved = {}
    for env_id in ids:
        env = gym.make_vec(env_id, num_envs=n, max_episode_steps=50)
        acts = actions(env.action_space, steps, 1)
        traj = run(env, acts[:wait_at])
        env.unwrapped.wait_compiled()
        rest = run_on(env, acts[wait_at:])
        saved[env_id] = np.concatenate([traj, rest]) if len(rest) else traj
        report = env.unwrapped.compile_report
        saved[env_id + ":eager_calls"] = np.array(report.eager_calls if report else -1)
        saved[env_id + ":backend"] = np.array(env.unwrapped.backend)
    np.savez(out, **saved)


def run_on(env: gym.vector.VectorEnv, acts: list[torch.Tensor]) -> np.ndarray:
    """:func:`run`'s rows of steps from the env's current state (no reset)."""
    rows = [step_row(env, a) for a in acts]
    return np.stack(rows) if rows else np.zeros((0,))


if __name__ == "__main__":
    main(sys.argv[1:])
