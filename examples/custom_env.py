"""A custom env in ~100 lines of torch: use this file as a template for your own.

FruitCatch: fruit falls down a ``width`` x ``height`` grid, one row per step, drifting one
column sideways with probability ``wind`` (except onto the last row); a basket on the
bottom row moves left, stays or moves right. A caught fruit gives +1, a missed one -1 and
a life; a new fruit then appears at a random column of the top row. The episode
terminates when the lives are gone and is truncated by the registration's time limit (200
steps: at most 22 fruits, return <= 22).

It is registered as ``examples/FruitCatch-v0`` and trained with CleanRL-style PPO
(``examples/cleanrl_ppo.py``) or Stable-Baselines3's PPO::

    python examples/custom_env.py --algo cleanrl   # or --algo sb3
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import pathlib
import sys
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch

import gpuvec_envs
from gpuvec_envs import EnvDef, Rng

ENV_ID = "examples/FruitCatch-v0"


@dataclasses.dataclass(frozen=True)
class FruitCatchParams:
    """Primary constants (lengths in grid cells)."""

    width: int = 8  # columns
    height: int = 10  # rows; the basket is on the last one
    wind: float = 0.2  # probability that a fruit drifts one column per step
    lives: int = 3  # misses before the episode terminates
    cell: int = 16  # [px] side of a cell in rendered frames


class FruitCatchState(NamedTuple):
    """Each field shape (N,) int64, in grid cells."""

    basket: torch.Tensor  # column of the basket
    fruit_x: torch.Tensor  # column of the fruit
    fruit_y: torch.Tensor  # row of the fruit (0 = top)
    lives: torch.Tensor  # lives left


class FruitCatch(EnvDef[FruitCatchState, FruitCatchParams]):
    """Catch falling fruit in a basket; actions 0 left, 1 stay, 2 right."""

    params_type = FruitCatchParams
    metadata = {"render_modes": ["rgb_array"], "render_fps": 10}

    def observation_space(self, params: FruitCatchParams, dtype: torch.dtype) -> gym.Space:
        """Box(-1, 1, (5,), float32): basket, fruit x, fruit y, lives and fruit x - basket.

        Positions are scaled to [0, 1] (the offset to [-1, 1]), lives to [0, 1].
        """
        return gym.spaces.Box(-1.0, 1.0, (5,), dtype=np.float32)

    def action_space(self, params: FruitCatchParams, dtype: torch.dtype) -> gym.Space:
        """Discrete(3)."""
        return gym.spaces.Discrete(3)

    def reset(
        self, params: FruitCatchParams, rng: Rng, dtype: torch.dtype, options: dict[str, Any] | None
    ) -> FruitCatchState:
        """Basket and fruit at uniformly random columns, the fruit on the top row."""
        basket, fruit_x = rng.randint(params.width), rng.randint(params.width)
        zero = torch.zeros_like(basket)
        return FruitCatchState(basket, fruit_x, zero, zero + params.lives)

    def step(
        self, params: FruitCatchParams, state: FruitCatchState, action: torch.Tensor, rng: Rng
    ) -> tuple[FruitCatchState, torch.Tensor, torch.Tensor]:
        """Move the basket, drop and blow the fruit; score and respawn a landed fruit."""
        right = params.width - 1
        basket = (state.basket + action - 1).clamp(0, right)
        fruit_y = state.fruit_y + 1
        landed = fruit_y == params.height - 1
        blown = rng.bernoulli(params.wind) & ~landed  # no drift onto the basket's row
        fruit_x = (state.fruit_x + torch.where(blown, 2 * rng.randint(2) - 1, 0)).clamp(0, right)
        caught = landed & (fruit_x == basket)
        missed = landed & ~caught
        reward = torch.where(caught, 1.0, torch.where(missed, -1.0, 0.0))
        lives = state.lives - missed.to(torch.int64)
        fruit_x = torch.where(landed, rng.randint(params.width), fruit_x)  # a new fruit
        fruit_y = torch.where(landed, 0, fruit_y)
        return FruitCatchState(basket, fruit_x, fruit_y, lives), reward, lives == 0

    def observation(self, params: FruitCatchParams, state: FruitCatchState) -> torch.Tensor:
        """(N, 5) float32."""
        w, h = params.width - 1, params.height - 1
        scale = torch.tensor([w, w, h, params.lives, w], device=state.basket.device)
        offset = state.fruit_x - state.basket
        return torch.stack([*state, offset], dim=1).to(torch.float32) / scale

    def render(self, params: FruitCatchParams, state: FruitCatchState) -> torch.Tensor:
        """(N, height * cell, width * cell, 3) uint8: red fruit, white basket on grey."""
        dev, c = state.basket.device, params.cell
        row = (torch.arange(params.height * c, device=dev) // c)[None, :, None]
        col = (torch.arange(params.width * c, device=dev) // c)[None, None, :]
        fruit = (row == state.fruit_y[:, None, None]) & (col == state.fruit_x[:, None, None])
        basket = (row == params.height - 1) & (col == state.basket[:, None, None])
        colours = torch.tensor([[40, 40, 40], [230, 40, 40], [240, 240, 240]], device=dev)
        index = torch.where(basket, 2, torch.where(fruit, 1, 0))
        return colours.to(torch.uint8)[index]


gpuvec_envs.register(ENV_ID, FruitCatch, max_episode_steps=200, replace=True)


def train_cleanrl(timesteps: int, target: float, seed: int, lr: float = 1e-3) -> dict:
    """CleanRL-style PPO from ``examples/cleanrl_ppo.py`` on FruitCatch; its summary dict."""
    if "cleanrl_ppo" in sys.modules:
        ppo = sys.modules["cleanrl_ppo"]
    else:
        path = pathlib.Path(__file__).with_name("cleanrl_ppo.py")
        spec = importlib.util.spec_from_file_location("cleanrl_ppo", path)
        ppo = importlib.util.module_from_spec(spec)
        sys.modules["cleanrl_ppo"] = ppo
        spec.loader.exec_module(ppo)
    argv = f"--env-id {ENV_ID} --no-cuda --quiet --seed {seed} --num-envs 8 --learning-rate {lr}"
    argv += f" --total-timesteps {timesteps} --target-return {target} --return-window 50"
    return ppo.main(argv.split())


def train_sb3(timesteps: int, seed: int) -> float:
    """SB3's PPO on FruitCatch; the mean return of 50 evaluation episodes."""
    from stable_baselines3 import PPO

    from gpuvec_envs.adapters import make_sb3_vec_env

    venv = make_sb3_vec_env(ENV_ID, n_envs=8, seed=seed)
    model = PPO("MlpPolicy", venv, n_steps=256, ent_coef=0.01, seed=seed, verbose=0)
    model.learn(total_timesteps=timesteps)
    obs, returns = venv.reset(), []
    while len(returns) < 50:
        obs, _, dones, infos = venv.step(model.predict(obs, deterministic=True)[0])
        returns += [infos[i]["episode"]["r"] for i in np.flatnonzero(dones)]
    return float(np.mean(returns))


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--algo", choices=("cleanrl", "sb3"), default="cleanrl")
    p.add_argument("--timesteps", type=int, default=300_000)
    p.add_argument("--target-return", type=float, default=20.0, help="CleanRL: stop here")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--learning-rate", type=float, default=1e-3, help="CleanRL PPO's")
    args = p.parse_args()
    if args.algo == "cleanrl":
        print(train_cleanrl(args.timesteps, args.target_return, args.seed, args.learning_rate))
    else:
        print(f"SB3 PPO mean return: {train_sb3(args.timesteps, args.seed):.2f}")
