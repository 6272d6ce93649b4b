"""The CleanRL-style examples run end to end (smoke), and learn (slow, deselected in CI)."""

from __future__ import annotations

import importlib.util
import math
import pathlib
import sys

import pytest

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # torch.compile (the fused rollout) looks the module up
    spec.loader.exec_module(module)
    return module


def test_rollout_episode_stats_match_step_by_step_accounting():
    """The fused path's whole-rollout episode stats equal a per-step running sum.

    Three rollouts of 7 steps x 5 envs with random rewards and endings (some envs end
    twice in one rollout, some never, some on the first or last step); the partial
    returns carry over from one rollout to the next.
    """
    torch = pytest.importorskip("torch")
    from gpuvec_envs.rollout import rollout_episode_stats as stats

    gen = torch.Generator().manual_seed(0)
    t_len, n = 7, 5
    carry = (torch.zeros(n, dtype=torch.float64), torch.zeros(n, dtype=torch.int64))
    run_r, run_l = [0.0] * n, [0] * n
    ended = 0
    for _ in range(3):
        rewards = torch.rand(t_len, n, generator=gen)
        dones = torch.rand(t_len, n, generator=gen) < 0.3
        dones[:, 4] = False  # never ends
        dones[0, 0] = dones[-1, 1] = True
        ep_r, ep_l, mask, carry = stats(rewards, dones, carry)
        assert torch.equal(mask, dones)
        for t in range(t_len):
            for i in range(n):
                run_r[i] += float(rewards[t, i])
                run_l[i] += 1
                if dones[t, i]:
                    assert float(ep_r[t, i]) == pytest.approx(run_r[i], rel=1e-12)
                    assert int(ep_l[t, i]) == run_l[i]
                    run_r[i], run_l[i] = 0.0, 0
                    ended += 1
                else:
                    assert float(ep_r[t, i]) == 0.0 and int(ep_l[t, i]) == 0
        assert carry[0].tolist() == pytest.approx(run_r, rel=1e-12)
        assert carry[1].tolist() == run_l
    assert ended > 10


@pytest.mark.parametrize(
    ("env_backend", "rollout"), [("gpuvec", "fused"), ("gpuvec", "loop"), ("gymnasium", "loop")]
)
def test_ppo_discrete_smoke(env_backend, rollout):
    result = load("cleanrl_ppo").main(
        f"--env-backend {env_backend} --rollout {rollout} --step-backend eager --no-cuda --quiet "
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
    """CleanRL's continuous defaults with gamma 0.9, 1M steps budget, seed 1: mean >= -200.

    With CleanRL's own gamma 0.99 the return stays near -1200 for the whole 1M steps (as
    with CleanRL's script itself, vwxyzjn/cleanrl#504); gamma 0.9 (rl-zoo's value for
    Pendulum) reached -175.6 at 122,880 steps (~2 min CPU).
    """
    result = load("cleanrl_ppo_continuous_action").main(
        ["--seed", "1", "--gamma", "0.9", "--target-return", "-200", "--quiet", "--no-cuda"]
    )
    assert result["reached_at_step"] is not None
