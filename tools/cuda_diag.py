"""Find where a compiled CUDA step goes wrong: one env and path per process, kernels synchronous.

Usage (on a machine with a GPU; ``tools/gpu_check.sh`` runs it)::

    python tools/cuda_diag.py ENV_ID [ENV_ID ...] [--steps 40]

Each ID runs in the configuration of ``tests/test_cuda.py`` (N=64, float64, ``SameStep``,
``max_episode_steps=12``, ``validate=False``) along three paths, each in a child process with
``CUDA_LAUNCH_BLOCKING=1`` (a device-side error is sticky, and is raised at the launch of
the kernel that caused it): ``eager`` (the eager CUDA step), ``flat`` (compiled, no CUDA
graph: the state written in place) and ``graph`` (compiled, replayed from a CUDA graph).
Every step is compared with the CPU's eager step from the same seed and actions (exactly:
meant for the integer envs, MinAtar and MiniGrid). One JSON
line per ID and path: ``ok``, or the first step that differs or raised, with the error and
the last frames of its traceback (the generated wrapper's line names the failing kernel).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import traceback

PATHS = ("eager", "flat", "graph")


def _child(env_id: str, path: str, steps: int) -> dict:
    import gymnasium as gym
    import torch

    import gpuvec_envs  # noqa: F401 - registers the IDs

    def make(device: str, backend: str, **kwargs: object):  # noqa: ANN202
        return gym.make_vec(
            env_id,
            num_envs=64,
            device=device,
            backend=backend,
            validate=False,
            dtype=torch.float64,
            autoreset_mode="SameStep",
            max_episode_steps=12,
            **kwargs,
        ).unwrapped

    options = {"cuda_graph": path == "graph"}
    cpu = make("cpu", "eager")
    gpu = (
        make("cuda", "eager")
        if path == "eager"
        else make("cuda", "compile", compiler_options=options)
    )
    cpu.reset(seed=1)
    gpu.reset(seed=1)
    cpu.action_space.seed(0)
    step = -1
    try:
        for step in range(steps):
            a = torch.as_tensor(cpu.action_space.sample())
            want = cpu.step(a)
            got = gpu.step(a.cuda())
            torch.cuda.synchronize()
            names = ("obs", "reward", "terminated", "truncated")
            for name, x, y in zip(names, got[:4], want[:4], strict=True):
                if not torch.equal(x.cpu().double(), y.double()):
                    bad = (x.cpu().double() != y.double()).flatten(1).any(1).nonzero().flatten()
                    return dict(status="differs", step=step, output=name, envs=bad.tolist()[:8])
    except Exception as exc:  # noqa: BLE001 - the failure is what this reports
        frames = traceback.format_exception(exc)[-8:]
        return dict(status="raised", step=step, error=str(exc)[:1500], traceback="".join(frames))
    report = gpu.compile_report if path != "eager" else None
    return dict(status="ok", steps=steps, strategy=getattr(report, "strategy", "eager"))


def main(argv: list[str] | None = None) -> int:
    """Run every ID and path in its own child process; print one JSON line each."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("env_ids", nargs="+")
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--child", choices=PATHS, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps(_child(args.env_ids[0], args.child, args.steps)), flush=True)
        return 0
    env = dict(os.environ, CUDA_LAUNCH_BLOCKING="1")
    failed = 0
    for env_id in args.env_ids:
        for path in PATHS:
            cmd = [sys.executable, __file__, env_id, "--child", path, "--steps", str(args.steps)]
            run = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
            lines = run.stdout.strip().splitlines()
            try:
                out = json.loads(lines[-1])
            except (IndexError, json.JSONDecodeError):
                out = dict(status="crashed", returncode=run.returncode, stderr=run.stderr[-3000:])
            failed += out["status"] != "ok"
            print(json.dumps(dict(env=env_id, path=path, **out)), flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
