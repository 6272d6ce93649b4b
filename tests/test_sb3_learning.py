"""SB3 PPO learns gpuvec/CartPole-v1 through the adapter (CPU, fixed seeds, < 1 minute).

Hyperparameters are rl-zoo's for CartPole-v1 PPO (n_steps 32, batch 256, gae_lambda 0.8,
gamma 0.98, linear learning-rate and clip schedules from 1e-3 and 0.2) with 16 envs and 10
epochs for wall-clock speed. Every 5,000 env steps, SB3's ``EvalCallback`` runs
``evaluate_policy`` (20 deterministic episodes, read from the adapter's ``Monitor``-style
``info["episode"]``) on a separately seeded gpuvec eval env; training stops at a mean of 475.
"""

from __future__ import annotations

import pytest
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.callbacks import EvalCallback, StopTrainingOnRewardThreshold

import gpuvec_envs  # noqa: F401  (registers the IDs)
from gpuvec_envs.adapters import make_sb3_vec_env

SEED = 0
N_ENVS = 16
BUDGET = 100_000  # env steps; seeds 0-5 all reached 475 within 35k


@pytest.fixture
def one_thread():
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # deterministic and fastest for this small MLP
    yield
    torch.set_num_threads(threads)


def test_ppo_reaches_475_on_gpuvec_cartpole(one_thread) -> None:
    env = make_sb3_vec_env("gpuvec/CartPole-v1", n_envs=N_ENVS, seed=SEED, backend="eager")
    eval_env = make_sb3_vec_env("gpuvec/CartPole-v1", n_envs=20, seed=10_000, backend="eager")
    model = PPO(
        "MlpPolicy",
        env,
        n_steps=32,
        batch_size=256,
        gae_lambda=0.8,
        gamma=0.98,
        n_epochs=10,
        ent_coef=0.0,
        learning_rate=lambda progress: 1e-3 * progress,
        clip_range=lambda progress: 0.2 * progress,
        seed=SEED,
        device="cpu",
    )
    stop = StopTrainingOnRewardThreshold(reward_threshold=475, verbose=0)
    evals = EvalCallback(
        eval_env,
        callback_on_new_best=stop,
        n_eval_episodes=20,
        eval_freq=5_000 // N_ENVS,
        deterministic=True,
        verbose=0,
    )
    model.learn(BUDGET, callback=evals)
    assert evals.best_mean_reward >= 475, evals.evaluations_results
    assert model.num_timesteps < BUDGET  # stopped by the threshold, not the budget
    # the training env's own episode statistics reached SB3's logger buffer
    assert len(model.ep_info_buffer) > 0
    assert all(ep["l"] <= 500 and ep["r"] == ep["l"] for ep in model.ep_info_buffer)
