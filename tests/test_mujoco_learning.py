"""SB3 PPO learns gpuvec/Hopper-v5 as it learns gymnasium's Hopper-v5 (slow, not in CI).

``examples/sb3_mujoco.py`` (rl-zoo's PPO hyperparameters for Hopper, ``VecNormalize``, one
env) trains on both envs with the same seeds. Return: the mean of each run's last 20
training episodes. The two sides agree when the gap between their means over the seeds is
no larger than the spread (max - min) of the seeds on either side, and both learn well
beyond a random policy (~18 per episode).
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import numpy as np
import pytest
import torch

pytest.importorskip("mujoco")

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
SEEDS = (0, 1, 2)
BUDGET = 20_000  # env steps per run (~40 CPU s per run at 1 thread)


def load_example():
    name = "sb3_mujoco"
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
        sys.modules[name] = module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return sys.modules[name]


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.mark.slow
def test_ppo_hopper_gpuvec_within_gymnasium_seed_spread(one_thread) -> None:
    train = load_example().train
    returns = {
        impl: np.array([train("Hopper-v5", impl, s, BUDGET)["mean_return"] for s in SEEDS])
        for impl in ("gpuvec", "gymnasium")
    }
    spread = max(np.ptp(r) for r in returns.values())
    gap = abs(returns["gpuvec"].mean() - returns["gymnasium"].mean())
    assert gap <= spread, returns
    assert min(r.min() for r in returns.values()) > 100, returns
