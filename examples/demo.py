"""Demo: a batched CartPole through gymnasium's own API, and its throughput.

python examples/demo.py --num-envs 65536 --steps 200 --backend compile
"""

from __future__ import annotations

import argparse
import time

import gymnasium as gym
import torch

import gpuvec_envs  # noqa: F401  (registers gpuvec/* IDs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env-id", default="gpuvec/CartPole-v1")
    parser.add_argument("--num-envs", type=int, default=65536)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--backend", default="compile", choices=["eager", "compile"])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    args = parser.parse_args()

    envs = gym.make_vec(
        args.env_id,
        num_envs=args.num_envs,
        device=args.device,
        backend=args.backend,
        validate=False,
    )
    obs, _ = envs.reset(seed=0)
    print(f"{envs}\nobservation {tuple(obs.shape)} {obs.dtype} on {obs.device}")
    actions = torch.as_tensor(envs.action_space.sample(), device=args.device)

    t0 = time.perf_counter()
    envs.step(actions)  # the first step compiles the whole step into one graph
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    print(f"warm-up (compile) {time.perf_counter() - t0:.1f} s, backend={envs.backend}")

    episodes = 0
    t0 = time.perf_counter()
    for _ in range(args.steps):
        obs, reward, terminated, truncated, info = envs.step(actions)
        episodes += int((terminated | truncated).sum())  # a host sync, for the printout only
    if args.device.startswith("cuda"):
        torch.cuda.synchronize()
    dt = time.perf_counter() - t0
    print(
        f"{args.steps} steps x {args.num_envs} envs in {dt:.3f} s: "
        f"{args.steps * args.num_envs / dt / 1e6:.1f} M env-steps/s "
        f"({torch.get_num_threads()} CPU threads); {episodes} episodes ended"
    )


if __name__ == "__main__":
    main()
