"""Time the TorchRL adapter's step against the engine's own step and against TorchRL's GymEnv.

Usage::

    python tools/torchrl_overhead.py [--num-envs 4096,65536] [--repeats 7] [--calls 100]
                                     [--gym-max-envs 65536] [--pool 8] [--json PATH]

For each ``num_envs``, ``gpuvec/CartPole-v1`` is built with the compiled backend
(``backend="compile"``, so the compiled step is timed, not the eager warm-up) and
``validate=False`` everywhere, and these calls are timed with random actions from a pool of
``--pool`` pre-drawn batches, cycled (8, the default: each step reads its action from
memory, not from the cache; 1: the action is in the cache, as a policy's output just
written):

* ``engine SAME_STEP``: ``GpuVecEnv.step`` in the mode the adapter runs (the baseline of the
  ratios), and ``engine NEXT_STEP``: the default mode;
* ``adapter _step``: the adapter's own work per step (``TorchRLEnv._step``: the fused
  step and the output TensorDict), and ``adapter env.step``: TorchRL's ``EnvBase.step`` on
  :class:`TorchRLEnv` (categorical and one-hot actions), which adds TorchRL's bookkeeping,
  returns the transition and resets nothing;
* ``adapter step_and_maybe_reset``: what TorchRL's collectors and ``rollout`` call every
  step: the step, TorchRL's ``step_mdp``, and the ``_reset`` of the envs that ended with
  TorchRL's merge of their new observations into the batch;
* ``GymEnv step_and_maybe_reset``: the same call on TorchRL's ``GymWrapper`` over
  gymnasium's ``CartPole-v1`` in a ``SyncVectorEnv`` with ``autoreset_mode=DISABLED`` (what
  ``GymEnv(..., num_envs=N)`` builds, but in one process: ``GymEnv`` starts one subprocess
  per env, and gymnasium's numpy ``CartPoleVectorEnv`` only offers ``NEXT_STEP``, which
  TorchRL refuses).

Each configuration is timed in blocks of ``--calls`` calls, the blocks of all gpuvec
configurations interleaved, ``--repeats`` times; a figure is the median block's time per
call. The GymEnv peer is timed afterwards on its own, in shorter blocks. The ISA
(``torch.backends.cpu.get_cpu_capability()``), torch's thread count and the load average
before and after each ``num_envs`` are printed with the table.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import statistics
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import torch
from gymnasium.vector import AutoresetMode
from tensordict import TensorDict
from torchrl.envs import GymWrapper

import gpuvec_envs  # noqa: F401 - registers the IDs
from gpuvec_envs.adapters.torchrl import make_torchrl_env

ENV_ID = "gpuvec/CartPole-v1"


def _engine_step(num_envs: int, mode: AutoresetMode, pool: list[torch.Tensor]) -> Callable:
    env = gym.make_vec(
        ENV_ID,
        num_envs=num_envs,
        vectorization_mode="vector_entry_point",
        autoreset_mode=mode,
        backend="compile",
        validate=False,
    )
    env.reset(seed=0)
    calls = iter(range(1 << 62))

    def step() -> None:
        env.step(pool[next(calls) % len(pool)])

    return step


def _adapter_step(
    num_envs: int, pool: list[torch.Tensor], categorical: bool, inner: bool = False
) -> Callable:
    env = make_torchrl_env(
        ENV_ID, num_envs, backend="compile", categorical_action_encoding=categorical
    )
    env.reset()
    tds = [TensorDict({"action": _encode(a, categorical)}, [num_envs]) for a in pool]
    calls = iter(range(1 << 62))

    def step() -> None:
        td = tds[next(calls) % len(tds)]
        env.step(td)
        del td["next"]  # the next call starts from the action alone, as in a rollout

    def adapter_only() -> None:
        env._step(tds[next(calls) % len(tds)])

    return adapter_only if inner else step


def _loop_step(env: Any, pool: list[torch.Tensor], categorical: bool) -> Callable:
    actions = [_encode(a, categorical) for a in pool]
    state = {"td": env.reset()}
    calls = iter(range(1 << 62))

    def step() -> None:
        td = state["td"]
        td["action"] = actions[next(calls) % len(actions)]
        _, state["td"] = env.step_and_maybe_reset(td)

    return step


def _encode(action: torch.Tensor, categorical: bool) -> torch.Tensor:
    return action if categorical else torch.nn.functional.one_hot(action, 2)


def _gym_env(num_envs: int) -> Any:
    vec = gym.make_vec(
        "CartPole-v1",
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.DISABLED},
    )
    return GymWrapper(vec, categorical_action_encoding=True)


def _time(configs: dict[str, Callable[[], None]], repeats: int, calls: int) -> dict:
    """Median µs per call of each configuration, blocks of ``calls`` interleaved."""
    for step in configs.values():  # compiles the steps; fills caches and allocator pools
        for _ in range(20):
            step()
    gc.collect()
    times: dict[str, list[float]] = {name: [] for name in configs}
    for _ in range(repeats):
        for name, step in configs.items():
            start = time.perf_counter()
            for _ in range(calls):
                step()
            times[name].append((time.perf_counter() - start) / calls * 1e6)
    return {name: statistics.median(ts) for name, ts in times.items()}


def measure(
    num_envs: int, repeats: int, calls: int, gym_peer: bool, pool_size: int = 8
) -> dict[str, dict[str, float]]:
    """µs per call, ratio to the engine's SAME_STEP step and env-steps/s of each call.

    The GymEnv peer is timed on its own after the others (its N gymnasium envs would
    otherwise make every garbage collection of the gpuvec blocks walk them).
    """
    gen = torch.Generator().manual_seed(0)
    pool = [torch.randint(0, 2, (num_envs,), generator=gen) for _ in range(pool_size)]
    configs: dict[str, Callable[[], None]] = {
        "engine SAME_STEP": _engine_step(num_envs, AutoresetMode.SAME_STEP, pool),
        "engine NEXT_STEP": _engine_step(num_envs, AutoresetMode.NEXT_STEP, pool),
    }
    configs["adapter _step (categorical)"] = _adapter_step(num_envs, pool, True, inner=True)
    for categorical in (True, False):
        kind = "categorical" if categorical else "one-hot"
        configs[f"adapter env.step ({kind})"] = _adapter_step(num_envs, pool, categorical)
        env = make_torchrl_env(
            ENV_ID, num_envs, backend="compile", categorical_action_encoding=categorical
        )
        configs[f"adapter step_and_maybe_reset ({kind})"] = _loop_step(env, pool, categorical)
    us = _time(configs, repeats, calls)
    del configs, env
    if gym_peer:
        peer = {
            "GymEnv step_and_maybe_reset (categorical)": _loop_step(_gym_env(num_envs), pool, True)
        }
        us.update(_time(peer, max(3, repeats // 2), max(3, calls // 20)))
        del peer
    gc.collect()
    base = us["engine SAME_STEP"]
    return {
        name: {"us": t, "ratio": t / base, "steps_per_s": num_envs / t * 1e6}
        for name, t in us.items()
    }


def main() -> None:
    """Measure and print one table per ``num_envs``."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--num-envs", default="4096,65536")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=100, help="calls per timed block")
    parser.add_argument(
        "--gym-max-envs", type=int, default=65536, help="largest N for the GymEnv peer"
    )
    parser.add_argument("--pool", type=int, default=8, help="action batches, cycled")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    report: dict[str, Any] = {
        "isa": torch.backends.cpu.get_cpu_capability(),
        "threads": torch.get_num_threads(),
        "pool": args.pool,
        "torch": torch.__version__,
        "torchrl": __import__("torchrl").__version__,
        "results": {},
    }
    print(
        f"torch {report['torch']}, torchrl {report['torchrl']}, ISA {report['isa']}, "
        f"{report['threads']} threads, {args.pool} action batches cycled"
    )
    for num_envs in (int(x) for x in args.num_envs.split(",")):
        load_before = os.getloadavg()
        rows = measure(num_envs, args.repeats, args.calls, num_envs <= args.gym_max_envs, args.pool)
        load_after = os.getloadavg()
        report["results"][num_envs] = {
            "rows": rows,
            "load_before": load_before,
            "load_after": load_after,
        }
        print(
            f"\nN={num_envs}  load average before {load_before[0]:.2f}, "
            f"after {load_after[0]:.2f} (1 min)"
        )
        print("| call | µs per call | / engine SAME_STEP | env-steps/s |")
        print("|---|---|---|---|")
        for name, r in rows.items():
            print(
                f"| {name} | {r['us']:.0f} | {r['ratio']:.2f}x | {r['steps_per_s'] / 1e6:.2f} M |"
            )
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)


if __name__ == "__main__":
    main()
