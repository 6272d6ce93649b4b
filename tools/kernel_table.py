"""The fusion claim as a number: Triton kernels and bytes of each env's CUDA step, no GPU.

Usage (with a CUDA build of torch, e.g. ``.venv-cuda`` of ``tools/cuda_lowering.sh``)::

    python tools/kernel_table.py [--all] [--num-envs N] [--mode NextStep|SameStep]
                                 [--frame-skip K] [--ids ID,ID,...]

For one registered ID per env class (``--all``: every ID), lowers the step for device
``"cuda"`` on fake tensors (:mod:`gpuvec_envs.compiler.fake_cuda`) and prints a Markdown
table: the number of Triton kernels of one step and the bytes they read and write per env
(inductor's own count, ``kernel_num_gb``, stated in the generated code; every buffer a
kernel touches, once). ``GPUVEC_COMPILER=wide_fusion=0`` gives inductor's own fusion cap.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings

import gymnasium as gym
import torch

import gpuvec_envs  # noqa: F401 - registers the IDs
from gpuvec_envs.compiler import fake_cuda
from gpuvec_envs.registry import REGISTRY


def main() -> int:
    """Print the table; exit 1 if an ID fails to lower."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--all", action="store_true", help="every registered ID")
    parser.add_argument("--num-envs", type=int, default=4096)
    parser.add_argument("--mode", default="NextStep", help="autoreset mode")
    parser.add_argument("--frame-skip", type=int, default=1, help="simulation steps per step")
    parser.add_argument("--ids", default="", help="comma-separated IDs (default: see --all)")
    args = parser.parse_args()
    warnings.filterwarnings("ignore", category=DeprecationWarning)  # the -v0 IDs' notice
    why = fake_cuda.unavailable()
    if why is not None:
        print(f"needs a CUDA build of torch with Triton: {why}", file=sys.stderr)
        return 2
    ids = [e.id for e in REGISTRY]
    if args.ids:
        ids = [i if i.startswith("gpuvec/") else f"gpuvec/{i}" for i in args.ids.split(",")]
    elif not args.all:
        ids = list({e.env_def: e.id for e in reversed(REGISTRY)}.values())[::-1]
    print(
        f"torch {torch.__version__}, N={args.num_envs}, autoreset {args.mode}, "
        f"frame_skip {args.frame_skip}, fake sm_90\n"
    )
    print("| env | Triton kernels | bytes per env-step |")
    print("|---|---|---|")
    failed = []
    start = time.perf_counter()
    for env_id in ids:
        env = gym.make_vec(
            env_id,
            num_envs=args.num_envs,
            backend="eager",
            validate=False,
            autoreset_mode=args.mode,
            frame_skip=args.frame_skip,
        ).unwrapped
        env.reset(seed=0)
        try:
            low = fake_cuda.lower_step(env)
        except Exception as exc:  # noqa: BLE001 - reported in the table
            failed.append(env_id)
            print(f"| {env_id} | failed: {type(exc).__name__}: {str(exc)[:80]} | |", flush=True)
            continue
        total = low.bytes_per_call()
        per_env = "-" if total is None else f"{total / args.num_envs:.0f}"
        name = env_id.removeprefix("gpuvec/")
        print(f"| {name} | {len(low.kernels)} | {per_env} |", flush=True)
    print(f"\n{len(ids)} IDs in {time.perf_counter() - start:.0f} s; failed: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
