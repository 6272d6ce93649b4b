"""What exact ``sin``/``cos`` cost: a classic env's step at a git ref against this tree's.

Loads the env module of ``--base`` (default ``main``; ``git show REF:path``) beside this
tree's, compiles both (``backend="compile"``, ``validate=False``; the base with
``eager_math=False``, i.e. inductor's own SLEEF ``sin``/``cos``) and times them
interleaved in one process. Prints one Markdown row per env, N and thread count: median
wall and process CPU time per step [µs], and base/this ratios (above 1: this tree faster).
On a busy machine, trust the CPU-time ratio at 1 thread (docs/performance.md).

    PYTHONPATH=$PWD python tools/trig_cost.py --envs CartPole,Pendulum --n 4096,65536
"""

from __future__ import annotations

import argparse
import importlib
import os
import statistics
import subprocess
import sys
import time
import types

import torch
from gymnasium.vector import AutoresetMode

from gpuvec_envs.core.vector import GpuVecEnv

MODULES = {
    "CartPole": ("cartpole", "CartPole"),
    "Acrobot": ("acrobot", "Acrobot"),
    "Pendulum": ("pendulum", "Pendulum"),
    "MountainCar": ("mountain_car", "MountainCar"),
    "MountainCarContinuous": ("continuous_mountain_car", "ContinuousMountainCar"),
}


def base_module(ref: str, mod: str) -> types.ModuleType:
    """``gpuvec_envs/envs/classic/{mod}.py`` as of ``ref``, as a fresh module."""
    path = f"gpuvec_envs/envs/classic/{mod}.py"
    src = subprocess.check_output(["git", "show", f"{ref}:{path}"], text=True)
    module = types.ModuleType(f"base_{mod}")
    module.__file__ = f"{ref}:{path}"
    sys.modules[module.__name__] = module
    exec(compile(src, module.__file__, "exec"), module.__dict__)  # noqa: S102
    return module


def make(env_def, n: int, threads: int, dtype: torch.dtype, options) -> tuple:
    """A reset, compiled env of ``n`` copies and one fixed batch of random actions."""
    env = GpuVecEnv(
        env_def,
        n,
        backend="compile",
        validate=False,
        num_threads=threads,
        dtype=dtype,
        autoreset_mode=AutoresetMode.SAME_STEP,
        compiler_options=options,
    )
    env.reset(seed=0)
    gen = torch.Generator().manual_seed(0)
    space = env.single_action_space
    if hasattr(space, "n"):
        return env, torch.randint(0, int(space.n), (n,), generator=gen)
    low, high = float(space.low.min()), float(space.high.max())
    return env, torch.rand((n, *space.shape), generator=gen) * (high - low) + low


def row(name: str, ref: str, n: int, threads: int, dtype: torch.dtype, blocks: int) -> str:
    """Time ``name``'s step at ``ref`` and in this tree; one Markdown table row."""
    mod, cls = MODULES[name]
    defs = {
        "base": getattr(base_module(ref, mod), cls)(),
        "this": getattr(importlib.import_module(f"gpuvec_envs.envs.classic.{mod}"), cls)(),
    }
    torch.set_num_threads(threads)
    envs = {
        "base": make(defs["base"], n, threads, dtype, {"eager_math": False}),
        "this": make(defs["this"], n, threads, dtype, None),
    }
    calls = 100 if n <= 4096 else 10
    for env, action in envs.values():
        for _ in range(30):
            env.step(action)
    wall = {k: [] for k in envs}
    cpu = {k: [] for k in envs}
    load = os.getloadavg()[0]
    for b in range(blocks):
        for k in list(envs) if b % 2 == 0 else list(envs)[::-1]:
            env, action = envs[k]
            t, c = time.perf_counter(), time.process_time()
            for _ in range(calls):
                env.step(action)
            cpu[k].append((time.process_time() - c) / calls * 1e6)
            wall[k].append((time.perf_counter() - t) / calls * 1e6)
    w = {k: statistics.median(v) for k, v in wall.items()}
    c = {k: statistics.median(v) for k, v in cpu.items()}
    return (
        f"| {name} | {n} | {threads} | {w['base']:.0f} / {c['base']:.0f} "
        f"| {w['this']:.0f} / {c['this']:.0f} | {w['base'] / w['this']:.2f}x "
        f"| {c['base'] / c['this']:.2f}x | {load:.1f} |"
    )


def main() -> None:
    """Parse the arguments; print the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", default="main", help="git ref of the env modules to compare")
    parser.add_argument("--envs", default=",".join(MODULES))
    parser.add_argument("--n", default="4096,65536")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--blocks", type=int, default=41)
    args = parser.parse_args()
    dtype = getattr(torch, args.dtype)
    isa = torch.backends.cpu.get_cpu_capability()
    print(f"# {isa}, torch {torch.__version__}, {args.dtype}, base {args.base}")
    print("| env | N | threads | base µs wall / cpu | this µs wall / cpu | wall ratio ", end="")
    print("| cpu ratio | load |\n|---|---|---|---|---|---|---|---|")
    for name in args.envs.split(","):
        for n in (int(x) for x in args.n.split(",")):
            for threads in (int(x) for x in args.threads.split(",")):
                print(row(name, args.base, n, threads, dtype, args.blocks), flush=True)


if __name__ == "__main__":
    main()
