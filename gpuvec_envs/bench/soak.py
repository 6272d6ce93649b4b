"""Soak benchmark: a long run with random resets, checkpoint round trips and set_params.

It reports peak RSS, the compiled-graph count and the step time at the start and the end.

``python -m gpuvec_envs.bench.soak --env gpuvec/CartPole-v1 --num-envs 65536 --steps 1e8``

Every ``--reset-every`` steps a random half of the envs is reset (``reset_mask``); every
``--checkpoint-every`` steps the env's :meth:`~GpuVecEnv.state_dict` is pickled to bytes
and loaded back into the same env; every ``--params-every`` steps a parameter toggles
between two values (:meth:`~GpuVecEnv.set_params`; the second value compiles one more
graph, later toggles reuse both). Step times are medians of the timed steps of the first
and last 10 % of the run (steps without an extra operation), in µs per ``env.step`` call.
"""

from __future__ import annotations

import argparse
import json
import pickle
import resource
import statistics
import sys
import time
from dataclasses import dataclass, fields
from typing import Any

import gymnasium as gym
import torch

import gpuvec_envs  # noqa: F401 - registers the IDs
from gpuvec_envs.compiler import flat
from gpuvec_envs.core.vector import GpuVecEnv


@dataclass(frozen=True)
class SoakResult:
    """Figures of one soak run (times in µs per ``env.step`` call, memory in MiB)."""

    env_id: str
    num_envs: int
    env_steps: int
    calls: int
    backend: str
    threads: int
    isa: str
    graphs_after_warmup: int
    graphs_at_end: int
    rss_after_warmup_mib: float
    rss_at_end_mib: float
    peak_rss_mib: float
    step_us_start: float
    step_us_end: float
    resets: int
    checkpoints: int
    param_changes: int
    wall_s: float


def compiled_graphs() -> int:
    """Graphs compiled in this process: guard-free fused graphs plus torch.compile graphs."""
    dynamo = sys.modules.get("torch._dynamo.utils")  # not imported: no dynamo graph yet
    unique = int(dynamo.counters["stats"]["unique_graphs"]) if dynamo is not None else 0
    return flat.compiled_graphs + unique


def rss_mib() -> float:
    """Current resident set size [MiB] (Linux ``/proc``; peak RSS elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * resource.getpagesize() / 2**20
    except OSError:
        return peak_rss_mib()


def peak_rss_mib() -> float:
    """Peak resident set size of this process [MiB]."""
    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 2**20


def _toggle(env: GpuVecEnv) -> dict[str, Any]:
    """A float parameter of ``env`` and a second value for it (+10 %)."""
    for f in fields(env.params):
        value = getattr(env.params, f.name)
        if type(value) is float and value > 0:
            return {f.name: (value, value * 1.1)}
    raise ValueError(f"{type(env.params).__name__} has no positive float parameter to toggle")


def soak(
    env_id: str,
    num_envs: int,
    env_steps: int,
    *,
    backend: str = "compile",
    reset_every: int = 50,
    checkpoint_every: int = 200,
    params_every: int = 300,
    seed: int = 0,
    **env_kwargs: Any,
) -> SoakResult:
    """Run ``env_steps`` env-steps (``env_steps // num_envs`` calls) and measure.

    Args:
        env_id: A registered gpuvec ID.
        num_envs: Batch size N.
        env_steps: Total env-steps; rounded down to whole calls (at least 20).
        backend: The env's backend.
        reset_every: Calls between random partial resets.
        checkpoint_every: Calls between state-dict round trips (pickled to bytes).
        params_every: Calls between parameter toggles.
        seed: Seed of the env and of the random actions and masks.
        **env_kwargs: Further :class:`GpuVecEnv` keywords.
    """
    t_start = time.perf_counter()
    calls = max(env_steps // num_envs, 20)
    env = gym.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode="vector_entry_point",
        backend=backend,
        validate=False,
        **env_kwargs,
    )
    ((name, (v0, v1)),) = _toggle(env).items()
    gen = torch.Generator().manual_seed(seed)
    space = env.single_action_space
    discrete = isinstance(space, gym.spaces.Discrete)

    def action() -> torch.Tensor:
        if discrete:
            return torch.randint(0, int(space.n), (num_envs,), generator=gen)
        low = torch.as_tensor(space.low, dtype=env.dtype)
        high = torch.as_tensor(space.high, dtype=env.dtype)
        u = torch.rand((num_envs, *space.shape), generator=gen, dtype=env.dtype)
        return low + (high - low) * u

    env.reset(seed=seed)
    pool = [action() for _ in range(16)]  # drawing actions is not what is measured
    # warm-up: compile both parameter values' graphs and one of each extra operation
    for value in (v1, v0):
        env.set_params(**{name: value})
        for a in pool[:3]:
            env.step(a)
    graphs0, rss0 = compiled_graphs(), rss_mib()
    times: list[float] = []
    counts = {"resets": 0, "checkpoints": 0, "param_changes": 0}
    toggled = False
    for i in range(calls):
        extra = False
        if i % reset_every == reset_every - 1:
            mask = torch.rand(num_envs, generator=gen) < 0.5
            env.reset(options={"reset_mask": mask})
            counts["resets"] += 1
            extra = True
        if i % checkpoint_every == checkpoint_every - 1:
            env.load_state_dict(pickle.loads(pickle.dumps(env.state_dict())))
            counts["checkpoints"] += 1
            extra = True
        if i % params_every == params_every - 1:
            toggled = not toggled
            env.set_params(**{name: v1 if toggled else v0})
            counts["param_changes"] += 1
            extra = True
        a = pool[i % len(pool)]
        t0 = time.perf_counter()
        env.step(a)
        dt = time.perf_counter() - t0
        if not extra:
            times.append(dt)
    tenth = max(len(times) // 10, 1)
    return SoakResult(
        env_id=env_id,
        num_envs=num_envs,
        env_steps=calls * num_envs,
        calls=calls,
        backend=env.backend,
        threads=torch.get_num_threads(),
        isa=torch.backends.cpu.get_cpu_capability(),
        graphs_after_warmup=graphs0,
        graphs_at_end=compiled_graphs(),
        rss_after_warmup_mib=round(rss0, 1),
        rss_at_end_mib=round(rss_mib(), 1),
        peak_rss_mib=round(peak_rss_mib(), 1),
        step_us_start=round(statistics.median(times[:tenth]) * 1e6, 1),
        step_us_end=round(statistics.median(times[-tenth:]) * 1e6, 1),
        wall_s=round(time.perf_counter() - t_start, 1),
        **counts,
    )


def main(argv: list[str] | None = None) -> None:
    """Command line: run one soak and print its figures as one JSON line."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--env", default="gpuvec/CartPole-v1")
    p.add_argument("--num-envs", type=int, default=65536)
    p.add_argument("--steps", type=float, default=1e8, help="total env-steps")
    p.add_argument("--backend", default="compile", choices=["eager", "compile"])
    p.add_argument("--reset-every", type=int, default=50)
    p.add_argument("--checkpoint-every", type=int, default=200)
    p.add_argument("--params-every", type=int, default=300)
    args = p.parse_args(argv)
    result = soak(
        args.env,
        args.num_envs,
        int(args.steps),
        backend=args.backend,
        reset_every=args.reset_every,
        checkpoint_every=args.checkpoint_every,
        params_every=args.params_every,
    )
    print(json.dumps(result.__dict__), flush=True)


if __name__ == "__main__":
    main()
