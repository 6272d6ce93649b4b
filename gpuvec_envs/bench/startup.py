"""Start-up benchmark: time to the first step and to compiled speed, on a cold cache.

Each configuration runs in a fresh process with an empty ``TORCHINDUCTOR_CACHE_DIR``:

* ``compile``: ``make_vec`` + ``reset`` + the first ``step()`` (which compiles; its time is
  the cold compile time C), then the steady compiled rate R;
* ``auto`` (the default backend): ``make_vec`` + ``reset`` + the first ``step()``, then
  steps for ``--seconds`` while recording the rate of each ``--window``; reports when the
  rate first reaches 80 % of R, counted from the start of ``make_vec``.

Usage: ``python -m gpuvec_envs.bench.startup --env CartPole-v1 --num-envs 65536``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Any

_CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import gymnasium as gym, torch
import gpuvec_envs
env_id, n, backend = sys.argv[1], int(sys.argv[2]), sys.argv[3]
seconds, window = float(sys.argv[4]), float(sys.argv[5])
t_import = time.perf_counter() - t0
t0 = time.perf_counter()
env = gym.make_vec(env_id, num_envs=n, backend=backend, validate=False)
env.reset(seed=0)
space = env.single_action_space
g = torch.Generator().manual_seed(0)
acts = [torch.randint(0, int(space.n), (n,), generator=g) for _ in range(8)]
env.step(acts[0])
first = time.perf_counter() - t0
windows, i, start, calls = [], 1, time.perf_counter(), 0
end = start + seconds
while True:
    env.step(acts[i % 8]); i += 1; calls += 1
    now = time.perf_counter()
    if now - start >= window:
        windows.append((now - t0, calls * n / (now - start), env.unwrapped.backend))
        start, calls = now, 0
        if now >= end:
            break
report = env.unwrapped.compile_report
print(json.dumps({"import_s": t_import, "first_step_s": first, "windows": windows,
    "report": str(report) if report else None,
    "isa": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads()}))
"""


def run_one(env_id: str, n: int, backend: str, seconds: float, window: float) -> dict[str, Any]:
    """One configuration in a fresh process with an empty inductor cache."""
    with tempfile.TemporaryDirectory(prefix="gpuvec-startup-") as cache:
        env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=cache)
        args = [env_id, str(n), backend, str(seconds), str(window)]
        out = subprocess.run(
            [sys.executable, "-c", _CHILD, *args],
            capture_output=True,
            text=True,
            env=env,
            check=True,
        )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run ``compile`` then ``auto`` on cold caches and print the comparison."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--env", default="CartPole-v1")
    p.add_argument("--num-envs", type=int, default=65536)
    p.add_argument("--seconds", type=float, default=10.0, help="compiled steps timed after C")
    p.add_argument("--window", type=float, default=0.5)
    p.add_argument("--json", dest="json_path")
    args = p.parse_args(argv)
    env_id = args.env if "/" in args.env else f"gpuvec/{args.env}"
    load0 = os.getloadavg()[0]
    comp = run_one(env_id, args.num_envs, "compile", args.seconds, args.window)
    cold = comp["first_step_s"]
    rate = sorted(r for _, r, _ in comp["windows"])[len(comp["windows"]) // 2]
    auto = run_one(env_id, args.num_envs, "auto", cold + args.seconds + 10, args.window)
    reached = next((t for t, r, _ in auto["windows"] if r >= 0.8 * rate), None)
    switched = next((t for t, _, b in auto["windows"] if b == "compile"), None)
    eager = [r for _, r, b in auto["windows"] if b == "eager"]
    result = {
        "env": env_id,
        "num_envs": args.num_envs,
        "isa": comp["isa"],
        "threads": comp["threads"],
        "load_before": load0,
        "load_after": os.getloadavg()[0],
        "compile_first_step_s": cold,
        "compiled_rate": rate,
        "auto_first_step_s": auto["first_step_s"],
        "auto_eager_rate_median": sorted(eager)[len(eager) // 2] if eager else None,
        "auto_switched_at_s": switched,
        "auto_80pct_at_s": reached,
        "auto_report": auto["report"],
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
    }
    print(
        f"{env_id} N={args.num_envs} ({result['isa']}, {result['threads']} threads, load "
        f"{load0:.2f} -> {result['load_after']:.2f})\n"
        f"  compile: make + reset + first step {cold:.1f} s (the cold compile), then "
        f"{rate / 1e6:.1f} M env-steps/s\n"
        f"  auto:    make + reset + first step {auto['first_step_s']:.2f} s; eager "
        f"{(result['auto_eager_rate_median'] or 0) / 1e6:.2f} M env-steps/s; compiled from "
        f"{switched if switched is None else round(switched, 1)} s; 80 % of the compiled "
        f"rate at {reached if reached is None else round(reached, 1)} s "
        f"(target: cold compile + 5 s = {cold + 5:.1f} s)"
    )
    if args.json_path:
        with open(args.json_path, "w") as f:
            json.dump(result, f, indent=1)
    return result


if __name__ == "__main__":
    main()
