"""Pictures of random agents for the docs: a PNG strip of every game and a GIF of a batch.

Every frame comes from ``env.render_frames()``: one batched draw on the env's device.

Run: ``python examples/render_strip.py --out docs/img`` (writes ``render_strip.png``, one
row per game with four envs of the batch, and ``cartpole_batch.gif``, 16 CartPole envs
tiled, random actions).
"""

from __future__ import annotations

import argparse
import pathlib

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from PIL import Image

import gpuvec_envs  # noqa: F401  (registers gpuvec/...)
from gpuvec_envs.render.viewer import tile

GAMES = (
    "CartPole-v1",
    "Acrobot-v1",
    "Pendulum-v1",
    "MountainCar-v0",
    "MinAtar-Breakout-v1",
    "MinAtar-SpaceInvaders-v1",
    "MinAtar-Asterix-v1",
    "MinAtar-Freeway-v1",
    "MinAtar-Seaquest-v1",
)


def shrink(frames: torch.Tensor, height: int) -> torch.Tensor:
    """(N, H, W, 3) uint8 -> (N, height, W * height / H, 3), area-averaged."""
    n, h, w, _ = frames.shape
    x = frames.permute(0, 3, 1, 2).float()
    x = F.interpolate(x, size=(height, round(w * height / h)), mode="area")
    return x.round().clamp(0, 255).to(torch.uint8).permute(0, 2, 3, 1)


def random_frames(env_id: str, num_envs: int, steps: int, seed: int) -> torch.Tensor:
    """Frames (num_envs, H, W, 3) after ``steps`` random actions from ``reset(seed)``."""
    env = gym.make_vec(f"gpuvec/{env_id}", num_envs=num_envs, backend="eager")
    env.action_space.seed(seed)
    env.reset(seed=seed)
    for _ in range(steps):
        env.step(env.action_space.sample())
    return env.unwrapped.render_frames()


def strip(height: int, seed: int, gap: int = 6) -> np.ndarray:
    """One row per game: four envs of a batch, each ``height`` pixels high, white gaps."""
    rows = []
    for env_id in GAMES:
        frames = shrink(random_frames(env_id, 4, steps=12, seed=seed), height)
        frames = F.pad(frames, (0, 0, 0, gap, 0, gap), value=255)  # right and bottom gaps
        rows.append(torch.cat(list(frames), dim=1))  # side by side
    width = max(r.shape[1] for r in rows)
    padded = [F.pad(r, (0, 0, 0, width - r.shape[1]), value=255) for r in rows]
    return torch.cat(padded, dim=0).numpy()


def batch_gif(path: pathlib.Path, steps: int, seed: int) -> None:
    """16 CartPole envs tiled 4x4, one frame per step of random actions."""
    env = gym.make_vec("gpuvec/CartPole-v1", num_envs=16, backend="eager")
    env.action_space.seed(seed)
    env.reset(seed=seed)
    images = []
    for _ in range(steps):
        frames = shrink(env.unwrapped.render_frames(), 100)
        images.append(Image.fromarray(tile(frames).numpy()).convert("P", palette=Image.ADAPTIVE))
        env.step(env.action_space.sample())
    images[0].save(path, save_all=True, append_images=images[1:], duration=40, loop=0)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--out", default="docs/img")
    p.add_argument("--height", type=int, default=100, help="pixel height of a strip frame")
    p.add_argument("--gif-steps", type=int, default=60)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    Image.fromarray(strip(args.height, args.seed)).save(out / "render_strip.png", optimize=True)
    batch_gif(out / "cartpole_batch.gif", args.gif_steps, args.seed)
    for name in ("render_strip.png", "cartpole_batch.gif"):
        print(f"{out / name}: {(out / name).stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
