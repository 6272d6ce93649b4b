"""``gpuvec-bench``: env-steps/s of gpuvec envs side by side with their peers, in one run.

For each env ID of the registry (``gpuvec/<Name>-v<k>``) and each ``num_envs`` and backend,
the gpuvec env is stepped with random actions (a pool of pre-drawn action batches, cycled,
so that drawing actions is not timed for anyone), and so are the peers of its reference ID:
gymnasium's ``SyncVectorEnv`` and ``AsyncVectorEnv``, gymnasium's own numpy vector env where
the reference has one (``vectorization_mode="vector_entry_point"``), and EnvPool with 2
threads when it is installed and has the task. Setup time (construction, compilation,
first step) is reported on its own and never mixed into steps/s; steps/s is the median over
repeats. All configurations of one env (gpuvec's and the peers') are set up first and then
timed in turn, one block each per repeat, so that a ratio compares blocks run seconds apart
under the same machine conditions. Peers are slow, so their sweep is capped
(``--peer-max-envs``, ``--async-max-envs``) and the ratio table compares against each peer's
best configuration.

``--competitor K`` keeps K busy processes (``while True: pass``) running while the blocks
are timed, as a user's machine that does other work; ``--num-threads`` times the gpuvec env
with each listed ``num_threads`` (``auto,1``: the adaptive count against one thread).
``first_step_s`` is the first ``step()`` call alone (where compilation happens); the ISA
the kernels were built for (``torch.backends.cpu.get_cpu_capability()``) is in the JSON.

Usage::

    gpuvec-bench --envs CartPole-v1 --num-envs 1,4096,65536 --json out.json --plot out.png
    gpuvec-bench --envs CartPole-v1 --num-envs 65536 --num-threads auto,1 --competitor 1
    python -m gpuvec_envs.bench --envs all --autotune
    gpuvec-bench --device cuda --autotune --autotune-frame-skips 1,2 --autotune-rollout-steps 16,32
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import sys
from collections.abc import Sequence
from typing import Any

import torch

from gpuvec_envs.bench.measure import (
    PEERS,
    Opened,
    Result,
    _fmt_rate,
    busy_processes,
    format_table,
    machine_info,
    open_gpuvec,
    open_peer,
    plot,
    ratios,
    time_interleaved,
)
from gpuvec_envs.bench.suites import main_suite
from gpuvec_envs.bench.tuning import autotune
from gpuvec_envs.registry import REGISTRY, entry


def resolve_envs(names: str) -> list[str]:
    """Comma-separated names (with or without ``gpuvec/``) or ``all`` -> gpuvec IDs."""
    if names == "all":
        return [e.id for e in REGISTRY]
    return [entry(n.strip()).id for n in names.split(",") if n.strip()]


def plan(args: argparse.Namespace) -> list[tuple[str, dict[str, Any]]]:
    """The list of measurements of a sweep: ``(kind, kwargs)``."""
    jobs: list[tuple[str, dict[str, Any]]] = []
    for env_id in resolve_envs(args.envs):
        for n in args.num_envs:
            for b in args.backends:
                for fs in args.frame_skip:
                    for nt in args.num_threads:
                        kw = dict(env_id=env_id, num_envs=n, backend=b, frame_skip=fs)
                        if getattr(args, "validate", False):
                            kw["validate"] = True
                        jobs.append(("gpuvec", {**kw, "num_threads": nt}))
        for peer in args.peers:
            cap = args.async_max_envs if peer == "async" else args.peer_max_envs
            if peer in ("numpy",):
                cap = max(args.num_envs)
            for n in sorted({min(n, cap) for n in args.num_envs}):
                jobs.append(("peer", dict(env_id=env_id, peer=peer, num_envs=n)))
    return jobs


def run_sweep(args: argparse.Namespace) -> list[Result]:
    """Measure every job of :func:`plan`, an env at a time (:func:`time_interleaved`).

    A configuration that fails to set up is reported on stderr and skipped. Shows a progress
    bar when tqdm is installed.
    """
    jobs = plan(args)
    bar = None
    if not args.no_progress:
        try:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(jobs), desc="gpuvec-bench", file=sys.stderr)
        except ImportError:
            bar = None
    results: list[Result] = []
    for env_id in dict.fromkeys(kw["env_id"] for _, kw in jobs):
        opened: list[Opened] = []
        try:
            for kind, kw in jobs:
                if kw["env_id"] != env_id:
                    continue
                if bar is not None:
                    bar.set_postfix_str(
                        f"{env_id} {kw.get('backend', kw.get('peer'))} N={kw['num_envs']}"
                    )
                try:
                    o = (
                        open_gpuvec(device=args.device, **kw)
                        if kind == "gpuvec"
                        else open_peer(**kw)
                    )
                except Exception as exc:  # noqa: BLE001 - a failing peer must not stop the sweep
                    print(f"skipped {kind} {kw}: {type(exc).__name__}: {exc}", file=sys.stderr)
                    o = None
                if o is not None:
                    opened.append(o)
                if bar is not None:
                    bar.update(1)
            if bar is not None:
                bar.set_postfix_str(f"{env_id}: timing {len(opened)} configurations")
            with busy_processes(args.competitor):
                time_interleaved(opened, min_time=args.min_time, repeats=args.repeats)
            results += [o.result for o in opened]
        except Exception as exc:  # noqa: BLE001 - one env's failure must not stop the sweep
            print(f"skipped timing {env_id}: {type(exc).__name__}: {exc}", file=sys.stderr)
        finally:
            for o in opened:
                o.close()
    if bar is not None:
        bar.close()
    return results


def _ints(text: str) -> list[int]:
    out = []
    for part in text.split(","):
        part = part.strip()
        if part.startswith("2^"):
            out.append(2 ** int(part[2:]))
        elif part:
            out.append(int(part))
    return out


def build_parser() -> argparse.ArgumentParser:
    """The CLI's arguments."""
    p = argparse.ArgumentParser(prog="gpuvec-bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--envs", default="CartPole-v1", help="comma-separated IDs or 'all'")
    p.add_argument(
        "--num-envs",
        type=_ints,
        default=_ints("1,64,4096,65536"),
        help="comma-separated batch sizes (2^k allowed)",
    )
    p.add_argument(
        "--backends",
        type=lambda s: s.split(","),
        default=["compile"],
        help="gpuvec backends: compile, eager",
    )
    p.add_argument("--frame-skip", type=_ints, default=[1], help="gpuvec frame_skip values")
    p.add_argument(
        "--peers",
        type=lambda s: [x for x in s.split(",") if x],
        default=list(PEERS),
        help=f"subset of {','.join(PEERS)} ('' for none)",
    )
    p.add_argument("--device", default="cpu")
    p.add_argument(
        "--peer-max-envs",
        type=int,
        default=256,
        help="largest num_envs for sync/envpool peers (they are slow)",
    )
    p.add_argument(
        "--async-max-envs",
        type=int,
        default=8,
        help="largest num_envs for AsyncVectorEnv (one process per env)",
    )
    p.add_argument("--min-time", type=float, default=1.0, help="timed seconds per config")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    p.add_argument(
        "--num-threads",
        type=lambda s: [x if x == "auto" else int(x) for x in s.split(",") if x],
        default=["auto"],
        help="gpuvec num_threads values, comma-separated ('auto' or counts)",
    )
    p.add_argument(
        "--validate",
        action="store_true",
        help="time gpuvec envs with their input checks on (the env's default)",
    )
    p.add_argument(
        "--competitor",
        type=int,
        default=0,
        help="busy processes (while True: pass) running while configurations are timed",
    )
    p.add_argument("--json", dest="json_path", default=None, help="write results as JSON")
    p.add_argument("--plot", dest="plot_path", default=None, help="write a log-log PNG")
    p.add_argument(
        "--autotune",
        action="store_true",
        help="also run gpuvec_envs.autotune for each env and print the best config",
    )
    p.add_argument(
        "--memory-budget",
        type=float,
        default=None,
        help="autotune: bytes the env may use (default: --memory-fraction of free memory)",
    )
    p.add_argument(
        "--memory-fraction",
        type=float,
        default=None,
        help="autotune: share of free memory for the budget (default 0.25 CPU, 0.5 CUDA)",
    )
    p.add_argument(
        "--autotune-num-envs",
        type=_ints,
        default=None,
        help="autotune: batch sizes (default: 64..65536 on CPU, 2^12..2^24 on CUDA)",
    )
    p.add_argument(
        "--autotune-frame-skips",
        type=_ints,
        default=[1],
        help="autotune: frame_skip values to try, e.g. 1,2,4,8 (>1 changes the MDP)",
    )
    p.add_argument(
        "--autotune-rollout-steps",
        type=_ints,
        default=[],
        help="autotune: RolloutCollector lengths T to try, e.g. 16,32,64 (default: none)",
    )
    p.add_argument(
        "--autotune-time-budget",
        type=float,
        default=300.0,
        help="autotune: seconds per env; candidates that would run past it are skipped",
    )
    p.add_argument("--no-progress", action="store_true")
    p.add_argument(
        "--suite",
        choices=["report", "gpu", "mujoco", "craftax"],
        default=None,
        help="run a named sweep",
    )
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``gpuvec-bench`` / ``python -m gpuvec_envs.bench``."""
    args = build_parser().parse_args(argv)
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    if args.suite is not None:
        return main_suite(args, argv)
    info = machine_info()
    info["command"] = "gpuvec-bench " + " ".join(sys.argv[1:] if argv is None else argv)
    info["competitor_processes"] = args.competitor
    results = run_sweep(args)
    print(
        f"# torch {info['torch']}, {info['torch_threads']} torch threads, "
        f"OMP_NUM_THREADS={info['OMP_NUM_THREADS']}, {info['cpu_count']} CPUs, "
        f"load {info.get('loadavg_1m', float('nan')):.2f}, device {args.device}, "
        f"ISA {info['cpu_capability']}, {args.competitor} busy competitor process(es)"
    )
    print(format_table(results))
    tuned = []
    if args.autotune:
        for env_id in resolve_envs(args.envs):
            best = autotune(
                env_id,
                device=args.device,
                memory_budget=args.memory_budget,
                memory_fraction=args.memory_fraction,
                num_envs=args.autotune_num_envs,
                backends=args.backends,
                frame_skips=args.autotune_frame_skips,
                rollout_steps=args.autotune_rollout_steps,
                time_budget=args.autotune_time_budget,
                min_time=args.min_time / 2,
            )
            tuned.append(dataclasses.asdict(best))
            print(
                f"autotune {env_id} on {best.device}: backend={best.backend} "
                f"num_envs={best.num_envs} frame_skip={best.frame_skip} "
                f"rollout_steps={best.rollout_steps} -> {_fmt_rate(best.steps_per_s)} "
                f"env-steps/s, {_fmt_rate(best.score)} simulation steps/s "
                f"(memory budget {best.memory_budget / 2**30:.2f} GiB: {best.memory_source}; "
                f"{best.elapsed_s:.0f} s)"
            )
            for c in best.candidates:
                if c.skipped is not None:
                    print(
                        f"  skipped {c.stage} N={c.num_envs} frame_skip={c.frame_skip} "
                        f"T={c.rollout_steps}: {c.skipped}"
                    )
    if args.json_path:
        payload = {
            "machine": info,
            "results": [dataclasses.asdict(r) for r in results],
            "ratios": ratios(results),
            "autotune": tuned,
        }
        with open(args.json_path, "w") as f:
            json.dump(
                payload,
                f,
                indent=1,
                default=lambda x: None if isinstance(x, float) and math.isnan(x) else str(x),
            )
    if args.plot_path and results:
        plot(results, args.plot_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
