"""CPU cost per PPO iteration of ``cleanrl_ppo.py``: gpuvec (fused / step loop) vs gymnasium.

Runs ``cleanrl_ppo.main`` for each backend in turn, ``--reps`` times, alternated in ONE
process (so a loaded machine affects all alike), with the same flags, and prints the
median CPU time (``time.process_time``) per iteration of the rollout and update phases.
The first rollout of the gpuvec fused path (compilation), the first env step of the
gpuvec loop and the first update (compilation of the minibatch step) are excluded. Extra
flags are passed on to ``cleanrl_ppo.py`` (e.g. ``--no-compile-update``).

Run: ``python examples/cleanrl_ppo_bench.py --num-envs 4 --num-steps 128 --iters 20``
"""

from __future__ import annotations

import argparse
import importlib.util
import pathlib
import statistics
import sys


def load_ppo():
    path = pathlib.Path(__file__).resolve().parent / "cleanrl_ppo.py"
    spec = importlib.util.spec_from_file_location("cleanrl_ppo", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["cleanrl_ppo"] = module  # torch.compile looks the module up
    spec.loader.exec_module(module)
    return module


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--num-envs", type=int, default=4)
    p.add_argument("--num-steps", type=int, default=128)
    p.add_argument("--iters", type=int, default=20, help="PPO iterations per run")
    p.add_argument("--reps", type=int, default=3, help="runs of each backend")
    p.add_argument("--no-loop", action="store_true", help="skip the gpuvec step loop")
    args, extra = p.parse_known_args(argv)
    ppo = load_ppo()
    n, t, iters = args.num_envs, args.num_steps, args.iters
    configs = [("gpuvec", "fused"), ("gymnasium", "loop")]
    if not args.no_loop:
        configs.append(("gpuvec", "loop"))
    res: dict[tuple[str, str], list[tuple[float, float]]] = {c: [] for c in configs}
    for rep in range(args.reps):
        for backend, rollout in configs:
            r = ppo.main(
                [
                    *("--env-backend", backend, "--rollout", rollout, "--no-cuda", "--quiet"),
                    *("--num-envs", str(n), "--num-steps", str(t)),
                    *("--total-timesteps", str(n * t * iters), *extra),
                ]
            )
            first = r.get("first_step_cpu_s", 0.0) if backend == "gpuvec" else 0.0
            n_it = iters - 1 if rollout == "fused" else iters  # fused: first rollout excluded
            ro_ms = (r["rollout_cpu_s"] - first) / n_it * 1e3
            up_ms = (r["update_cpu_s"] - r["first_update_cpu_s"]) / (iters - 1) * 1e3
            res[(backend, rollout)].append((ro_ms, up_ms))
            print(
                f"rep {rep} {backend}/{rollout}: rollout {ro_ms:.1f} ms/it, "
                f"update {up_ms:.1f} ms/it, first {first:.1f} s",
                flush=True,
            )
    out = {}
    print(f"N={n} T={t}: median over {args.reps} runs, CPU ms per iteration")
    for (backend, rollout), v in res.items():
        ro = statistics.median(x[0] for x in v)
        up = statistics.median(x[1] for x in v)
        out[f"{backend}/{rollout}"] = (ro, up)
        print(
            f"  {backend:9s} {rollout:5s}: rollout {ro:7.1f}  update {up:7.1f}  "
            f"total {ro + up:7.1f}"
        )
    (gr, gu), (fr, fu) = out["gymnasium/loop"], out["gpuvec/fused"]
    print(f"  gymnasium / gpuvec fused: rollout {gr / fr:.2f}x, total {(gr + gu) / (fr + fu):.2f}x")
    return out


if __name__ == "__main__":
    main()
