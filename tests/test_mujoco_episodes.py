"""Random-policy episode statistics of the MuJoCo IDs against gymnasium's envs (heavy).

For each of the eleven v5 IDs, episodes of uniformly random actions on our env (C engine,
float64, a batch of envs with SAME_STEP autoreset, each env's first ``k`` episodes) and on
gymnasium's env (one env, seeds ``SEED0 + i``): episode lengths and returns are compared with
two-sample Kolmogorov-Smirnov tests. The two sides use independent seeds, so this checks
the distributions (reset noise, dynamics, reward, termination, time limit), not the
bitwise parity that tests/test_mujoco.py checks. Every env contributes a fixed number of
episodes (not the first ones to end, which would favour short episodes).

Episodes per side: 1000 for the IDs with short random-policy episodes (Hopper, Walker2d,
Humanoid, the pendulums, Ant) and the short fixed-length ones (Reacher 50 steps, Pusher
100); HalfCheetah and Swimmer (always 1000 steps) 200, HumanoidStandup (never terminates,
1000 steps) 100, to fit the heavy suite: gymnasium's single env runs 1.4k-11k steps/s here.
Fixed-length IDs have one episode length, so only their returns are informative.
The same comparison runs on the MuJoCo Warp engine (Warp's CPU device, one thread) for the
IDs whose episodes are short enough for it.
"""

from __future__ import annotations

import functools
import importlib.util
import time

import numpy as np
import pytest
import torch

pytest.importorskip("mujoco")
gym = pytest.importorskip("gymnasium")
pytest.importorskip("gymnasium.envs.mujoco.mujoco_env")
stats = pytest.importorskip("scipy.stats")

import gpuvec_envs  # noqa: E402,F401  (registers the IDs)

#: ID: (episodes per side, envs of our batch; each runs episodes / envs of them).
EPISODES = {
    "Ant": (1000, 100),
    "HalfCheetah": (200, 200),
    "Hopper": (1000, 250),
    "Humanoid": (1000, 250),
    "HumanoidStandup": (100, 100),
    "InvertedDoublePendulum": (1000, 250),
    "InvertedPendulum": (1000, 250),
    "Pusher": (1000, 500),
    "Reacher": (1000, 500),
    "Swimmer": (200, 200),
    "Walker2d": (1000, 250),
}
SEED0 = 100_000  # gymnasium's episodes: seeds SEED0, SEED0 + 1, ...
P_MIN = 1e-3
"""Smallest accepted p-value (22 tests; under equal distributions each p is uniform)."""


@functools.cache
def gymnasium_episodes(name: str, episodes: int) -> tuple[np.ndarray, np.ndarray]:
    """Lengths and returns of ``episodes`` random-policy episodes of gymnasium's env."""
    env = gym.make(f"{name}-v5")
    rng = np.random.default_rng(1)
    low, high = env.action_space.low, env.action_space.high
    lengths, returns = np.zeros(episodes, np.int64), np.zeros(episodes)
    for i in range(episodes):
        env.reset(seed=SEED0 + i)
        done = False
        while not done:
            _, reward, terminated, truncated, _ = env.step(rng.uniform(low, high))
            lengths[i] += 1
            returns[i] += reward
            done = terminated or truncated
    env.close()
    return lengths, returns


def gpuvec_episodes(
    name: str, episodes: int, n: int, engine: str = "c"
) -> tuple[np.ndarray, np.ndarray]:
    """Lengths and returns of the first ``episodes / n`` episodes of each of ``n`` envs."""
    per_env = episodes // n
    env = gym.make_vec(
        f"gpuvec/{name}-v5",
        num_envs=n,
        dtype=torch.float64,
        backend="eager",
        autoreset_mode="SameStep",
        engine=engine,
    )
    env.reset(seed=0)
    rng = np.random.default_rng(2)
    low, high = env.single_action_space.low, env.single_action_space.high
    length, ret = np.zeros(n, np.int64), np.zeros(n)
    lengths: list[list[int]] = [[] for _ in range(n)]
    returns: list[list[float]] = [[] for _ in range(n)]
    while min(len(x) for x in lengths) < per_env:
        _, reward, terminated, truncated, _ = env.step(rng.uniform(low, high, (n, len(low))))
        length += 1
        ret += reward.numpy()
        for i in np.flatnonzero((terminated | truncated).numpy()):
            if len(lengths[i]) < per_env:
                lengths[i].append(int(length[i]))
                returns[i].append(float(ret[i]))
            length[i], ret[i] = 0, 0.0
    env.close()
    return np.array(sum(lengths, [])), np.array(sum(returns, []))


def compare(name: str, engine: str = "c") -> None:
    """Runs both sides, prints the figures, asserts the KS p-values."""
    episodes, n = EPISODES[name]
    t0 = time.perf_counter()
    ref_len, ref_ret = gymnasium_episodes(name, episodes)
    t1 = time.perf_counter()
    our_len, our_ret = gpuvec_episodes(name, episodes, n, engine)
    t2 = time.perf_counter()
    assert len(our_len) == len(ref_len) == episodes
    p_len = stats.ks_2samp(our_len, ref_len).pvalue
    p_ret = stats.ks_2samp(our_ret, ref_ret).pvalue
    print(
        f"\n{name} ({engine}): {episodes} episodes a side; length mean {our_len.mean():.1f} vs "
        f"{ref_len.mean():.1f}, p = {p_len:.3g}; return mean {our_ret.mean():.2f} vs "
        f"{ref_ret.mean():.2f}, p = {p_ret:.3g} (gymnasium {t1 - t0:.0f} s, ours {t2 - t1:.0f} s)"
    )
    assert p_len >= P_MIN and p_ret >= P_MIN, (p_len, p_ret)


@pytest.mark.heavy
@pytest.mark.parametrize("name", list(EPISODES))
def test_random_policy_episodes_match_gymnasium(name: str) -> None:
    """C engine: episode length and return distributions, KS p-values above P_MIN."""
    compare(name)


#: IDs whose episodes fit Warp's single-threaded CPU device (the others: CUDA).
WARP_IDS = ("Hopper", "InvertedDoublePendulum", "InvertedPendulum", "Pusher", "Reacher", "Walker2d")


@pytest.mark.heavy
@pytest.mark.skipif(
    importlib.util.find_spec("mujoco_warp") is None, reason="mujoco_warp is not installed"
)
@pytest.mark.parametrize("name", WARP_IDS)
def test_random_policy_episodes_on_warp_match_gymnasium(name: str) -> None:
    """MuJoCo Warp (float32, Warp's CPU device): the same statistics as gymnasium's."""
    compare(name, "warp")
