"""Rendering speed: frames/s of gpuvec's batched draw against the reference renderers.

For each game and batch size N, interleaved in one process (best of ``--repeats`` rounds):
``render_frames()`` (one batched draw, frames stay on the device), ``render()`` (the same,
copied to the host as a tuple of numpy frames) and the reference's ``render()`` of N
envs in a gymnasium ``SyncVectorEnv`` (gymnasium's pygame renderer; minatar's
``rgb_array``). Prints one line per game and N.

Run: ``python examples/render_bench.py --sizes 1 256``
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("SDL_VIDEODRIVER", "dummy")

import gymnasium as gym
import torch

import gpuvec_envs  # noqa: F401  (registers gpuvec/...)

GAMES = {  # gpuvec ID: reference ID
    "CartPole-v1": "CartPole-v1",
    "Acrobot-v1": "Acrobot-v1",
    "Pendulum-v1": "Pendulum-v1",
    "MountainCar-v0": "MountainCar-v0",
    "MinAtar-Breakout-v1": "MinAtar/Breakout-v1",
    "MinAtar-Seaquest-v1": "MinAtar/Seaquest-v1",
}


def best_time(fn, calls: int, repeats: int) -> float:
    """Best mean seconds per call over ``repeats`` rounds of ``calls`` calls."""
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[1, 256])
    p.add_argument("--games", nargs="+", default=list(GAMES))
    p.add_argument("--device", default="cpu")
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--frames", type=int, default=256, help="frames per timed round")
    args = p.parse_args(argv)
    print(
        f"device={args.device} cpu_capability={torch.backends.cpu.get_cpu_capability()} "
        f"threads={torch.get_num_threads()}"
    )
    for game in args.games:
        ref_id = GAMES[game]
        if ref_id.startswith("MinAtar/"):
            from minatar.gym import register_envs

            if ref_id not in gym.registry:
                register_envs()
        for n in args.sizes:
            env = gym.make_vec(f"gpuvec/{game}", num_envs=n, device=args.device, backend="eager")
            env.unwrapped.render_mode = "rgb_array"
            env.reset(seed=0)
            for _ in range(5):
                env.step(env.action_space.sample())
            ref = gym.vector.SyncVectorEnv(
                [lambda r=ref_id: gym.make(r, render_mode="rgb_array") for _ in range(n)]
            )
            ref.reset(seed=0)
            ref.step(ref.action_space.sample())
            sync = torch.cuda.synchronize if env.unwrapped.device.type == "cuda" else None

            def batch(env=env, sync=sync) -> None:
                env.unwrapped.render_frames()
                if sync is not None:
                    sync()

            calls = max(1, args.frames // n)
            for fn in (batch, env.render, ref.render):  # warm-up (allocations, pygame)
                fn()
            times = {}
            for _ in range(args.repeats):  # interleaved rounds
                for name, fn in (("batch", batch), ("host", env.render), ("ref", ref.render)):
                    t = best_time(fn, calls, 1)
                    times[name] = min(times.get(name, float("inf")), t)
            fps = {k: n / v for k, v in times.items()}
            print(
                f"{game:22s} N={n:4d}  render_frames {fps['batch']:9.0f} f/s  "
                f"render() {fps['host']:9.0f} f/s  reference {fps['ref']:7.0f} f/s  "
                f"ratio {fps['host'] / fps['ref']:6.1f}x"
            )
            env.close()
            ref.close()


if __name__ == "__main__":
    main()
