"""The CleanRL-style examples run end to end (smoke), and learn (slow, deselected in CI)."""

from __future__ import annotations

import importlib.util
import math
import pathlib

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("env_backend", ["gpuvec", "gymnasium"])
def test_ppo_discrete_smoke(env_backend):
    result = load("cleanrl_ppo").main(
        f"--env-backend {env_backend} --step-backend eager --no-cuda --quiet "
        "--total-timesteps 2048 --num-steps 64".split()
    )
    assert result["global_step"] == 2048
    assert result["episodes"] > 20  # random CartPole episodes last ~20 steps
    assert 8 < result["mean_return"] < 200


@pytest.mark.parametrize("env_backend", ["gpuvec", "gymnasium"])
def test_ppo_continuous_smoke(env_backend):
    result = load("cleanrl_ppo_continuous_action").main(
        f"--env-backend {env_backend} --step-backend eager --no-cuda --quiet "
        "--total-timesteps 1600 --num-envs 2 --num-steps 400 --num-minibatches 4 "
        "--update-epochs 2".split()
    )
    assert result["global_step"] == 1600
    assert result["episodes"] == 8  # Pendulum: 200-step episodes, 2 envs x 800 steps
    assert -1900 < result["mean_return"] < -100 and math.isfinite(result["mean_return"])


@pytest.mark.slow
def test_ppo_cartpole_reaches_475():
    """CleanRL's defaults (500k steps budget), seed 1: mean return of 20 episodes >= 475."""
    result = load("cleanrl_ppo").main(["--seed", "1", "--target-return", "475", "--quiet"])
    assert result["reached_at_step"] is not None


@pytest.mark.slow
def test_ppo_pendulum_reaches_minus_200():
    """CleanRL's continuous defaults (1M steps budget), seed 1: mean return >= -200."""
    result = load("cleanrl_ppo_continuous_action").main(
        ["--seed", "1", "--target-return", "-200", "--quiet"]
    )
    assert result["reached_at_step"] is not None
