"""Time PPO on CartPole to a mean return of 475 on a GPU (``tools/gpu_check.sh`` runs it).

Usage (on a machine with a GPU, from the repository root)::

    python tools/gpu_ppo.py OUT_JSON [--budget-s 90] [--num-envs 1024] [--num-steps 16]

The default settings (1024 envs x 16 steps, 8 minibatches, 5M steps of annealing) reached
475 at 2.05M steps with seed 1 on a CPU; gymnasium's run at 1024 envs then fits the budget.

Runs ``examples/cleanrl_ppo.py`` in this process, all with the same settings and seed:

1. a warm-up of a few iterations with ``--overlap`` off and on (compiles the rollout's
   CUDA graph and the update; the timed runs then load them from this process and
   inductor's cache, as a user's second run would);
2. gpuvec to 475, ``--overlap`` off, then on (the overlap's gain is the ratio of the two);
3. gymnasium's ``SyncVectorEnv`` with the same PPO (``--env-backend gymnasium``: the CleanRL
   step loop, numpy envs on the CPU, the policy and the update on the GPU), capped in time:
   if it does not reach 475, the steps per second and the return reached say how far off.

Each run gets a share of ``--budget-s`` as its ``--max-seconds``; ``OUT_JSON`` is written
after each run, so a run stopped from outside keeps what finished. Wall times are the
script's own (from after the envs and agent are built, including what is left of compiling).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import pathlib
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]


def load_ppo():
    """``examples/cleanrl_ppo.py`` as a module (registered: torch.compile looks it up)."""
    spec = importlib.util.spec_from_file_location("cleanrl_ppo", ROOT / "examples/cleanrl_ppo.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["cleanrl_ppo"] = module
    spec.loader.exec_module(module)
    return module


def summarise(report: dict) -> None:
    """Add the overlap's gain and gymnasium's time over gpuvec's, from the runs so far."""
    runs = report["runs"]
    for r in runs.values():  # the training alone: without compiling or loading it
        if r.get("reached_at_s") and r.get("first_iteration_s"):
            r["reached_after_first_iteration_s"] = r["reached_at_s"] - r["first_iteration_s"]
    off, on, gym_run = (runs.get(k, {}) for k in ("gpuvec", "gpuvec_overlap", "gymnasium_sync"))
    if off.get("reached_at_s") and on.get("reached_at_s"):
        report["overlap_gain_to_475"] = off["reached_at_s"] / on["reached_at_s"]
    if off.get("wall_s") and on.get("wall_s"):  # steps per second, reached or not
        report["overlap_gain_sps"] = (on["global_step"] / on["wall_s"]) / (
            off["global_step"] / off["wall_s"]
        )
    for key in ("reached_at_s", "reached_after_first_iteration_s"):
        reached = [r[key] for r in (off, on) if r.get(key)]
        if not (gym_run.get("wall_s") and reached):
            continue
        if gym_run.get(key):
            report[f"gymnasium_over_gpuvec_{key}"] = gym_run[key] / min(reached)
        else:  # gymnasium did not reach 475: a lower bound
            report[f"gymnasium_over_gpuvec_{key}"] = f">{gym_run['wall_s'] / min(reached):.1f}"


def main() -> int:
    """Run the timings; write OUT_JSON."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out_json")
    p.add_argument("--budget-s", type=float, default=90.0, help="for all runs together")
    p.add_argument("--num-envs", type=int, default=1024)
    p.add_argument("--num-steps", type=int, default=16)
    p.add_argument("--num-minibatches", type=int, default=8)
    p.add_argument("--total-timesteps", type=int, default=5_000_000)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    deadline = time.monotonic() + a.budget_s
    out = pathlib.Path(a.out_json)
    report: dict = {"budget_s": a.budget_s, "settings": vars(a), "runs": {}}
    try:
        import torch

        ppo = load_ppo()
    except ImportError as exc:  # the image lacks gymnasium unless its wheels are carried
        report["error"] = f"{type(exc).__name__}: {exc} (carry .whl/: tools/gpu_check.sh wheels)"
        out.write_text(json.dumps(report, indent=1))
        print(json.dumps(report))
        return 1
    report.update(
        torch=torch.__version__,
        device=torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu",
    )
    common = (
        f"--seed {a.seed} --num-envs {a.num_envs} --num-steps {a.num_steps} "
        f"--num-minibatches {a.num_minibatches} --total-timesteps {a.total_timesteps} "
        "--target-return 475 --quiet"
    )
    iters = f"--total-timesteps {3 * a.num_envs * a.num_steps}"
    runs = [  # (name, flags, share of the time left)
        ("warmup_off", f"{common} {iters}", 0.3),
        ("warmup_overlap", f"{common} {iters} --overlap", 0.3),
        ("gpuvec", common, 0.3),
        ("gpuvec_overlap", f"{common} --overlap", 0.4),
        ("gymnasium_sync", f"{common} --env-backend gymnasium", 1.0),
    ]
    for name, flags, share in runs:
        left = deadline - time.monotonic()
        if left < 5:
            report["runs"][name] = {"skipped": f"{left:.0f} s of the budget left"}
            continue
        argv = f"{flags} --max-seconds {max(3.0, share * left - 3):.0f}".split()
        t0 = time.monotonic()
        try:
            res = ppo.main(argv)
        except Exception as exc:  # noqa: BLE001 - report it, go on with the next run
            res = {"error": f"{type(exc).__name__}: {exc}"}
        res = {k: v for k, v in res.items() if isinstance(v, int | float | str | bool | None)}
        res.update(argv=" ".join(argv), process_s=round(time.monotonic() - t0, 2))
        report["runs"][name] = res
        summarise(report)
        out.write_text(json.dumps(report, indent=1))
    print(json.dumps(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
