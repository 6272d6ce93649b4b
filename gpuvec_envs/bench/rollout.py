"""The rollout collector against a loop of ``env.step(policy(obs))`` with the same policy.

Both sides run :class:`~gpuvec_envs.bench.suites.LinearPolicy` on the same env ID and N,
each on its own env (compiled, ``validate=False``), in interleaved timed blocks of T-step
rollouts in one process. The loop stores what a hand-written training loop keeps
(CleanRL's ``obs``, ``actions``, ``rewards`` and ``dones`` buffers); the collector fills its
own buffers (observations, actions, rewards, both flags). Optionally with busy competitor
processes (``--competitor K``).

Usage: ``python -m gpuvec_envs.bench.rollout --envs CartPole-v1,MinAtar-Breakout-v1``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

import gymnasium as gym
import torch

import gpuvec_envs  # noqa: F401 - registers the IDs
from gpuvec_envs.bench.measure import LinearPolicy, busy_processes
from gpuvec_envs.rollout import RolloutCollector


def _block(fn: Any, seconds: float) -> tuple[int, float]:
    calls, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        calls += 1
    return calls, time.perf_counter() - t0


def measure(env_id: str, n: int, t: int, blocks: int, seconds: float) -> dict[str, Any]:
    """Median env-steps/s of the collector and of the loop, interleaved."""
    kw = dict(num_envs=n, backend="compile", validate=False)
    loop_env, coll_env = gym.make_vec(env_id, **kw), gym.make_vec(env_id, **kw)
    policy = LinearPolicy(loop_env.single_observation_space, loop_env.single_action_space)
    obs = [loop_env.reset(seed=0)[0]]
    coll_env.reset(seed=0)
    collector = RolloutCollector(coll_env, policy, t)
    collector.wait_compiled()

    # what a hand-written training loop keeps (CleanRL's obs/actions/rewards/dones buffers)
    o0 = obs[0]
    bufs = (
        torch.empty((t, *o0.shape), dtype=o0.dtype),
        torch.empty((t, n, *loop_env.single_action_space.shape), dtype=torch.float32),
        torch.empty((t, n)),
        torch.empty((t, n), dtype=torch.bool),
    )

    @torch.no_grad()
    def loop() -> None:
        o = obs[0]
        for i in range(t):
            bufs[0][i] = o
            a = policy(o)
            bufs[1][i] = a.reshape(bufs[1][i].shape)
            o, r, term, trunc, _ = loop_env.step(a)
            bufs[2][i] = r
            bufs[3][i] = term | trunc
        obs[0] = o

    for _ in range(2 + 2 * (RolloutCollector.TRIALS + 1)):  # compile; the collector decides
        loop()
        collector.collect()
    rates: dict[str, list[float]] = {"collector": [], "loop": []}
    for _ in range(blocks):
        for name, fn in (("collector", collector.collect), ("loop", loop)):
            calls, dt = _block(fn, seconds)
            rates[name].append(calls * t * n / dt)
    med = {k: statistics.median(v) for k, v in rates.items()}
    return {
        "env": env_id,
        "num_envs": n,
        "num_steps": t,
        "collector": med["collector"],
        "loop": med["loop"],
        "ratio": med["collector"] / med["loop"],
        "collector_kind": collector.kind,
    }


def main(argv: list[str] | None = None) -> list[dict[str, Any]]:
    """Measure each env and print one line per env."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--envs", default="CartPole-v1,MinAtar-Breakout-v1")
    p.add_argument("--num-envs", type=int, default=4096)
    p.add_argument("--num-steps", type=int, default=32)
    p.add_argument("--blocks", type=int, default=7)
    p.add_argument("--seconds", type=float, default=0.3)
    p.add_argument("--competitor", type=int, default=0, help="busy processes while timing")
    p.add_argument("--json", dest="json_path")
    args = p.parse_args(argv)
    results = []
    head = (
        f"# {torch.backends.cpu.get_cpu_capability()}, {torch.get_num_threads()} torch threads, "
        f"{args.competitor} busy competitor(s), load {os.getloadavg()[0]:.2f}"
    )
    print(head)
    for name in args.envs.split(","):
        env_id = name if "/" in name else f"gpuvec/{name}"
        with busy_processes(args.competitor):
            r = measure(env_id, args.num_envs, args.num_steps, args.blocks, args.seconds)
        r.update(competitor=args.competitor, load=os.getloadavg()[0])
        results.append(r)
        print(
            f"{env_id} N={r['num_envs']} T={r['num_steps']}: collector "
            f"{r['collector'] / 1e6:.2f} M ({r['collector_kind']}) vs loop {r['loop'] / 1e6:.2f} M "
            f"env-steps/s: {r['ratio']:.2f}x (load {r['load']:.2f})"
        )
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump({"header": head, "results": results}, f, indent=1)
    return results


if __name__ == "__main__":
    main()
