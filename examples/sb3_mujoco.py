"""SB3 PPO with RL Zoo's hyperparameters on gpuvec's or gymnasium's MuJoCo v5 env, side by side.

The same script, seed and hyperparameters train on ``gpuvec/<env>`` (through
``make_sb3_vec_env``) or on gymnasium's ``<env>`` (through SB3's ``make_vec_env``); only the
line that makes the env differs. Hyperparameters are rl-baselines3-zoo's ``hyperparams/ppo.yml``
entries for ``Hopper-v4`` and ``HalfCheetah-v4`` (one env, ``VecNormalize`` of observations
and rewards, 256x256 ReLU nets, ``log_std_init=-2``, no orthogonal init); the zoo trains them
for 1M steps. It prints the mean return of the last ``--window`` training episodes (raw
returns, from the ``Monitor`` statistics, before ``VecNormalize``) and the training speed.

    python examples/sb3_mujoco.py --env Hopper-v5 --impl gpuvec --seed 0 --timesteps 100000
    python examples/sb3_mujoco.py --env Hopper-v5 --impl gymnasium --seed 0 --timesteps 100000
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

import numpy as np
import torch
import torch.nn as nn
from stable_baselines3 import PPO
from stable_baselines3.common.env_util import make_vec_env
from stable_baselines3.common.vec_env import VecNormalize

from gpuvec_envs.adapters import make_sb3_vec_env

_NETS = dict(
    log_std_init=-2,
    ortho_init=False,
    activation_fn=nn.ReLU,
    net_arch=dict(pi=[256, 256], vf=[256, 256]),
)

# rl-baselines3-zoo hyperparams/ppo.yml (Hopper-v4, HalfCheetah-v4): normalize: true, n_envs: 1.
ZOO_PPO: dict[str, dict[str, Any]] = {
    "Hopper-v5": dict(
        batch_size=32,
        n_steps=512,
        gamma=0.999,
        learning_rate=9.80828e-05,
        ent_coef=0.00229519,
        clip_range=0.2,
        n_epochs=5,
        gae_lambda=0.99,
        max_grad_norm=0.7,
        vf_coef=0.835671,
        policy_kwargs=_NETS,
    ),
    "HalfCheetah-v5": dict(
        batch_size=64,
        n_steps=512,
        gamma=0.98,
        learning_rate=2.0633e-05,
        ent_coef=0.000401762,
        clip_range=0.1,
        n_epochs=20,
        gae_lambda=0.92,
        max_grad_norm=0.8,
        vf_coef=0.58096,
        policy_kwargs=_NETS,
    ),
}


def make_env(env: str, impl: str, seed: int) -> VecNormalize:
    """One env, wrapped in ``VecNormalize`` as the zoo's ``normalize: true`` does."""
    if impl == "gpuvec":
        # one env: the eager step needs no compile time
        venv = make_sb3_vec_env(f"gpuvec/{env}", n_envs=1, seed=seed, backend="eager")
    else:
        venv = make_vec_env(env, n_envs=1, seed=seed)
    return VecNormalize(venv, gamma=ZOO_PPO[env]["gamma"])


def train(env: str, impl: str, seed: int, timesteps: int, window: int = 20) -> dict[str, Any]:
    """Train PPO and return the mean return of the last ``window`` episodes and the speed."""
    venv = make_env(env, impl, seed)
    model = PPO("MlpPolicy", venv, seed=seed, device="cpu", verbose=0, **ZOO_PPO[env])
    wall, cpu = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=timesteps)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    returns = [ep["r"] for ep in model.ep_info_buffer][-window:]
    venv.close()
    return dict(
        env=env,
        impl=impl,
        seed=seed,
        timesteps=model.num_timesteps,
        mean_return=float(np.mean(returns)),
        window=len(returns),
        wall_s=round(wall, 1),
        cpu_s=round(cpu, 1),
        steps_per_s=round(model.num_timesteps / wall, 1),
    )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env", choices=sorted(ZOO_PPO), default="Hopper-v5")
    p.add_argument("--impl", choices=("gpuvec", "gymnasium"), default="gpuvec")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--timesteps", type=int, default=100_000)
    p.add_argument("--window", type=int, default=20, help="episodes in the final mean")
    args = p.parse_args()
    torch.set_num_threads(1)  # small nets, batches of 32-64: one thread is fastest
    r = train(args.env, args.impl, args.seed, args.timesteps, args.window)
    print(
        f"{r['env']} {r['impl']} seed {r['seed']}: mean return of the last {r['window']} "
        f"episodes {r['mean_return']:.1f} after {r['timesteps']} steps; "
        f"{r['steps_per_s']:.0f} env-steps/s (training), {r['wall_s']} s wall, {r['cpu_s']} s CPU"
    )
    print(json.dumps(r))


if __name__ == "__main__":
    main()
