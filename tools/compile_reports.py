"""Print the compile report of every registered ID (compiled, CPU) on this torch.

Usage: ``python tools/compile_reports.py [--num-envs N] [--json PATH]``. Each env is built
with ``gymnasium.make_vec(id, backend="compile")``, reset and stepped once (which compiles),
and its ``env.unwrapped.compile_report`` printed: the strategy that runs, each pass's status
with its detail, fallbacks and compile seconds. Exits 1 if any env is off the fast path.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import gymnasium as gym
import torch

import gpuvec_envs  # noqa: F401 - registers the IDs
from gpuvec_envs.registry import REGISTRY


def main() -> int:
    """Compile every registered ID and print its report."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--json", default=None, help="also write the reports here")
    args = parser.parse_args()
    print(
        f"torch {torch.__version__}, {torch.backends.cpu.get_cpu_capability()}, "
        f"{torch.get_num_threads()} threads, N={args.num_envs}",
        flush=True,
    )
    rows, slow = [], []
    start = time.perf_counter()
    for entry in REGISTRY:
        env = gym.make_vec(entry.id, num_envs=args.num_envs, backend="compile").unwrapped
        env.reset(seed=0)
        env.step(torch.as_tensor(env.action_space.sample()))
        report = env.compile_report
        print(f"{entry.id}: {report}", flush=True)
        rows.append(
            {
                "id": entry.id,
                "strategy": report.strategy,
                "passes": {p.name: [p.status, p.detail] for p in report.passes},
                "fallbacks": [str(f) for f in report.fallbacks],
                "compile_seconds": round(report.compile_seconds, 2),
            }
        )
        if not report.fast_path:
            slow.append(entry.id)
    print(f"{len(rows)} IDs in {time.perf_counter() - start:.0f} s; off the fast path: {slow}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "reports": rows}, f, indent=1)
    return 1 if slow else 0


if __name__ == "__main__":
    sys.exit(main())
