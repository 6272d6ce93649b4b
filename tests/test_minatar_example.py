"""``examples/minatar_ppo.py`` runs end to end (smoke) and learns Breakout (slow)."""

from __future__ import annotations

import importlib.util
import math
import pathlib

import pytest
import torch

import gpuvec_envs  # noqa: F401  (registers gpuvec/...)

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
TINY = (
    "--step-backend eager --no-cuda --quiet --total-timesteps 2048 --num-envs 8 "
    "--num-steps 64 --num-minibatches 4 --update-epochs 2 --seed 3"
).split()


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def minatar_ppo():
    return load("minatar_ppo")


def test_smoke_breakout(minatar_ppo):
    """4 iterations of 8 envs x 64 steps: finite losses, Breakout episodes recorded."""
    result = minatar_ppo.main(TINY)
    assert result["global_step"] == 2048
    assert len(result["history"]) == 4
    # random Breakout-v1 episodes last ~10 steps: 2048 steps end well over 100 of them
    assert result["episodes"] > 100
    assert len(result["returns"]) == 100  # the --return-window
    assert all(r >= 0 and r == int(r) for r in result["returns"])  # +1 per brick
    assert 0.0 <= result["mean_return"] < 3.0  # a barely trained policy, near random (0.37)
    assert all(math.isfinite(v) for v in result["losses"].values())
    assert 0.0 < result["losses"]["entropy"] <= math.log(3) + 1e-6  # 3 minimal actions


def test_smoke_is_deterministic(minatar_ppo):
    """Same seed, same run: the losses and returns repeat exactly (CPU)."""
    a = minatar_ppo.main(TINY)
    b = minatar_ppo.main(TINY)
    assert a["losses"] == b["losses"]
    assert a["returns"] == b["returns"]


def test_agent_reads_channels_last_bool(minatar_ppo):
    """The agent takes the env's (N, 10, 10, C) bool obs and permutes it to channels-first."""
    args = minatar_ppo.parse_args(["--env-id", "MinAtar-SpaceInvaders-v1", "--num-envs", "3"])
    envs = minatar_ppo.make_envs(args, torch.device("cpu"))
    obs, _ = envs.reset(seed=0)
    assert obs.shape == (3, 10, 10, 6) and obs.dtype == torch.bool
    agent = minatar_ppo.Agent(envs)
    conv = agent.network[0]
    assert conv.in_channels == 6
    action, logprob, entropy, value = agent.get_action_and_value(obs)
    assert action.shape == logprob.shape == entropy.shape == (3,) and value.shape == (3, 1)
    assert int(action.max()) < envs.single_action_space.n
    # the conv's input is channels-first: grid cell (row, col) of channel c -> [c, row, col]
    seen = []
    conv.register_forward_hook(lambda _m, inp, _out: seen.append(inp[0]))
    probe = torch.zeros(1, 10, 10, 6, dtype=torch.bool)
    probe[0, 2, 7, 4] = True  # row 2, column 7, channel 4
    agent.get_value(probe)
    expected = torch.zeros(1, 6, 10, 10)
    expected[0, 4, 2, 7] = 1.0
    assert torch.equal(seen[-1], expected)
    envs.close()


@pytest.mark.slow
def test_breakout_learns(minatar_ppo):
    """300k steps, 64 envs, seed 1 (~45 s CPU): mean return of the last 100 episodes >= 3.

    A uniform-random policy scores 0.38 per episode (20,000 episodes; minatar's own Breakout
    gives 0.38 too), so 3.0 is 8x random; the mean of 100 random episodes (std 0.64) is
    practically never above 1. Measured: 4.48 (64 envs learn faster per step than the default
    128 at this budget: 3.09 with 128).
    """
    result = minatar_ppo.main(
        ["--seed", "1", "--total-timesteps", "300000", "--num-envs", "64", "--quiet"]
    )
    assert result["global_step"] == 294912  # 36 iterations of 64 envs x 128 steps
    assert len(result["returns"]) == 100
    assert result["mean_return"] >= 3.0
