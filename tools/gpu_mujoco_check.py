"""MuJoCo Warp engine on a device: parity with MuJoCo C, then env-steps/s (and MJX beside it).

    python3 tools/gpu_mujoco_check.py                 # CUDA: parity at N=64, throughput sweep
    python3 tools/gpu_mujoco_check.py --parity-only   # builds every model's kernels (cache)
    python3 tools/gpu_mujoco_check.py --bench-only
    python3 tools/gpu_mujoco_check.py --device cpu --quick   # CPU-safe smoke (Warp CPU)

1. Parity: for each of gymnasium's eleven v5 models, one env step (frame_skip substeps +
   mj_rnePostConstraint) of ``WarpEngine`` at N=64 from float32 states of MuJoCo C rollouts,
   against MuJoCo C, with the fields each env reads; the largest differences per quantity
   and the tests' tolerances (tests/mujoco_warp_common.py). Humanoid and HumanoidStandup use
   PGS, which MuJoCo Warp lacks: they run with Newton on both sides.
2. Throughput: env-steps/s of ``WarpEngine.step`` (one env step = frame_skip substeps) for
   HalfCheetah, Hopper, Ant, Humanoid at N = 1024 ... 65536, as the engine runs by itself
   (its Warp graph replayed on torch's stream; torch copies around it) and, experimental,
   captured whole in a torch CUDA graph (``external_capture=True``; replays checked against
   eager steps); then whole registered envs (``gymnasium.make_vec(ID, engine="warp")``,
   random actions) where the MuJoCo family is installed; then MJX (``mujoco.mjx``, jit of
   vmap) when jax with CUDA and mujoco-mjx import. Each figure is the median of
   ``--repeats`` timed runs of at least ``--min-time`` s. The first engine of a model builds
   its kernels (``build_s``; cached in ~/.cache/warp).

Writes mujoco_warp.json and mujoco_warp.md to ``--out`` (default $OUT, else bench_out/).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import traceback
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
try:
    import mujoco_warp_common as common  # noqa: E402  (tests/: the MuJoCo C reference)
except ImportError as _e:  # no mujoco (or gymnasium) here: main() says so
    common, _COMMON_ERROR = None, _e

BENCH_ENVS = ("half_cheetah.xml", "hopper.xml", "ant.xml", "humanoid.xml")
PGS_MODELS = ("humanoid.xml", "humanoidstandup.xml")


def _solver(xml: str) -> str | None:
    return "newton" if xml in PGS_MODELS else None


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def parity(device: torch.device, n: int, xmls: list[str]) -> dict:
    """One env step at N=n per model against MuJoCo C; largest differences and verdicts."""
    from gpuvec_envs.envs.mujoco._warp import WarpEngine

    out = {}
    for xml in xmls:
        spec = common.BY_XML[xml]
        t0 = time.perf_counter()
        try:
            model = common.load_model(xml)
            engine = WarpEngine(model, spec.fields, True, device, solver=_solver(xml))
            build_s = time.perf_counter() - t0
            model = engine.mj_model
            steps = tuple(2 * i for i in range(n))
            rows, ctrl = common.reference_states(model, spec.frame_skip, steps)
            ref_rows, ref_derived, ref_warned = common.c_step(
                model, rows, ctrl, spec.frame_skip, spec.fields
            )
            got_rows, got_derived, warned = engine.step(
                torch.tensor(rows, dtype=torch.float32, device=device),
                torch.tensor(ctrl, dtype=torch.float32, device=device),
                spec.frame_skip,
            )
            _sync(device)
            diffs = common.max_diffs(
                model, spec.fields, got_rows, got_derived, ref_rows, ref_derived
            )
            failures = common.tolerance_failures(model, spec.fields, diffs, ref_rows, ref_derived)
            if bool((warned.cpu() != torch.tensor(ref_warned)).any()):
                failures.append(f"warned {warned.cpu().tolist()} vs C {ref_warned.tolist()}")
            # worlds with a steep plane-capsule contact (a known MuJoCo Warp / C difference)
            steep = np.array(
                [
                    common.steep_capsule_contact(model, r, u, spec.frame_skip)
                    for r, u in zip(rows, ctrl, strict=True)
                ]
            )
            rest = ~steep
            rest_diffs = common.max_diffs(
                model,
                spec.fields,
                got_rows.cpu()[torch.from_numpy(rest)],
                got_derived.cpu()[torch.from_numpy(rest)],
                ref_rows[rest],
                ref_derived[rest],
            )
            rest_failures = common.tolerance_failures(
                model, spec.fields, rest_diffs, ref_rows[rest], ref_derived[rest]
            )
            out[xml] = {
                "env": spec.env,
                "solver": _solver(xml) or "model's",
                "n": n,
                "build_s": round(build_s, 1),
                "max_abs_diff": {k: float(f"{v:.3g}") for k, v in diffs.items()},
                "ok": not failures,
                "failures": failures,
                "steep_capsule_worlds": int(steep.sum()),
                "max_abs_diff_other_worlds": {k: float(f"{v:.3g}") for k, v in rest_diffs.items()},
                "ok_other_worlds": not rest_failures,
            }
        except Exception as e:  # noqa: BLE001 - one model's failure must not end the check
            out[xml] = {"env": spec.env, "ok": False, "error": f"{type(e).__name__}: {e}"}
            traceback.print_exc()
        print(json.dumps({xml: out[xml]}), flush=True)
    return out


def _max_abs_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest |a - b|, inf where either is NaN."""
    return float(torch.nan_to_num((a - b).abs(), nan=float("inf")).max())


def _time(fn, device: torch.device, min_time: float, repeats: int) -> float:
    """Median seconds per call of ``fn`` over ``repeats`` runs of >= min_time seconds."""
    fn()
    _sync(device)
    per_call = []
    for _ in range(repeats):
        calls, t0 = 0, time.perf_counter()
        while True:
            fn()
            calls += 1
            if calls % 4 == 0:
                _sync(device)
                if time.perf_counter() - t0 >= min_time:
                    break
        per_call.append((time.perf_counter() - t0) / calls)
    return statistics.median(per_call)


def bench_engine(
    xml: str, ns: list[int], device: torch.device, args, deterministic: bool = True
) -> list[dict]:
    """env-steps/s of WarpEngine.step, alone and (external_capture) inside a torch CUDA graph.

    The torch-graph rows also say how far three replays are from three eager steps
    (``replay_vs_eager_max_abs_diff``, including a tensor allocated after the step).
    """
    from gpuvec_envs.envs.mujoco._warp import WarpEngine

    spec = common.BY_XML[xml]
    model = common.load_model(xml)
    t0 = time.perf_counter()
    engine = WarpEngine(
        model, spec.fields, True, device, solver=_solver(xml), deterministic=deterministic
    )
    build_s = time.perf_counter() - t0
    nstep, out, engines = spec.frame_skip, [], {}
    gen = torch.Generator().manual_seed(0)
    for n in ns:
        rows0, _ = common.reference_states(engine.mj_model, nstep, (0,))
        rows = torch.tensor(rows0, dtype=torch.float32).repeat(n, 1)
        rows[:, 1 : 1 + engine.nq] += 0.01 * torch.randn(n, engine.nq, generator=gen)
        lo = torch.tensor(engine.mj_model.actuator_ctrlrange[:, 0], dtype=torch.float32)
        hi = torch.tensor(engine.mj_model.actuator_ctrlrange[:, 1], dtype=torch.float32)
        ctrl = (lo + (hi - lo) * torch.rand(n, engine.nu, generator=gen)).to(device)
        rows = rows.to(device)
        t0 = time.perf_counter()
        engine.prepare(n, nstep)
        _sync(device)
        prepare_s = time.perf_counter() - t0
        modes = ["engine"] + (
            ["torch_graph"] if device.type == "cuda" and not args.no_torch_graph else []
        )
        for mode in modes:
            state = {"rows": rows.clone()}
            try:
                if mode == "engine":

                    def fn(state=state, ctrl=ctrl):
                        state["rows"] = engine.step(state["rows"], ctrl, nstep)[0]

                else:  # experimental: the step inside one torch CUDA graph
                    ext = engines.get(n)
                    if ext is None:
                        ext = engines[n] = WarpEngine(
                            engine.mj_model,
                            spec.fields,
                            True,
                            device,
                            deterministic=deterministic,
                            external_capture=True,
                        )
                        ext.prepare(n, nstep)
                    static = state["rows"]
                    side = torch.cuda.Stream(device)
                    side.wait_stream(torch.cuda.current_stream(device))
                    with torch.cuda.stream(side):  # warm-up on the capture stream
                        ext.step(static, ctrl, nstep)
                    torch.cuda.current_stream(device).wait_stream(side)
                    graph = torch.cuda.CUDAGraph()
                    with torch.cuda.graph(graph):
                        new, derived, _ = ext.step(static, ctrl, nstep)
                        scratch = (new * 2.0 + 1.0).sum(1) + derived.sum(1)  # allocates after
                        static.copy_(new)
                        check = scratch.clone()
                    # replays vs eager steps of the same rows (bitwise with deterministic on)
                    eager = static.clone()
                    worst = 0.0
                    for _ in range(3):
                        graph.replay()
                        e_new, e_derived, _ = engine.step(eager, ctrl, nstep)
                        e_check = (e_new * 2.0 + 1.0).sum(1) + e_derived.sum(1)
                        worst = max(worst, _max_abs_diff(static, e_new))
                        worst = max(worst, _max_abs_diff(check, e_check))
                        eager = e_new
                    replay_diff = worst

                    def fn(graph=graph):
                        graph.replay()

                sec = _time(fn, device, args.min_time, args.repeats)
                row = dict(env=spec.env, engine="warp", mode=mode, n=n, nstep=nstep)
                row["deterministic"] = deterministic
                row.update(env_steps_per_s=n / sec, ms_per_step=1e3 * sec)
                row.update(build_s=round(build_s, 1), prepare_s=round(prepare_s, 2))
                if mode == "engine":
                    row["finite"] = bool(torch.isfinite(state["rows"]).all())
                else:
                    row["replay_vs_eager_max_abs_diff"] = replay_diff
            except Exception as e:  # noqa: BLE001
                traceback.print_exc()
                row = dict(env=spec.env, engine="warp", mode=mode, n=n, error=f"{e!r}")
            print(json.dumps(row), flush=True)
            out.append(row)
    return out


def bench_env(env_id: str, ns: list[int], device: torch.device, args) -> list[dict]:
    """env-steps/s of the registered env on the Warp engine (gymnasium.make_vec), if it exists."""
    out = []
    try:
        import gymnasium

        import gpuvec_envs  # noqa: F401  (registers the IDs)

        for n in ns:
            env = gymnasium.make_vec(env_id, num_envs=n, device=str(device), engine="warp")
            env.reset(seed=0)
            low = torch.as_tensor(env.single_action_space.low, device=device)
            high = torch.as_tensor(env.single_action_space.high, device=device)
            action = low + (high - low) * torch.rand((n, *low.shape), device=device)
            t0 = time.perf_counter()
            env.step(action)
            _sync(device)
            first_s = time.perf_counter() - t0
            sec = _time(
                lambda env=env, action=action: env.step(action), device, args.min_time, args.repeats
            )
            row = dict(env=env_id, engine="warp", mode="make_vec", n=n)
            row.update(
                env_steps_per_s=n / sec, ms_per_step=1e3 * sec, first_step_s=round(first_s, 1)
            )
            print(json.dumps(row), flush=True)
            out.append(row)
            env.close()
    except Exception as e:  # noqa: BLE001 - the family may not be merged or may differ
        traceback.print_exc()
        out.append(dict(env=env_id, engine="warp", mode="make_vec", error=f"{e!r}"[:300]))
    return out


def bench_mjx(xml: str, ns: list[int], args) -> list[dict]:
    """env-steps/s of MJX (jax.vmap of frame_skip mjx.step under jit) at the same N."""
    try:
        import jax
        from mujoco import mjx

        if jax.default_backend() != "gpu":
            return [{"env": common.BY_XML[xml].env, "engine": "mjx", "skipped": "jax has no GPU"}]
    except Exception as e:  # noqa: BLE001
        return [
            {"env": common.BY_XML[xml].env, "engine": "mjx", "skipped": f"{type(e).__name__}: {e}"}
        ]
    import mujoco

    spec = common.BY_XML[xml]
    model = common.load_model(xml)
    if xml in PGS_MODELS:
        model.opt.solver = mujoco.mjtSolver.mjSOL_NEWTON
    out = []
    try:
        mx = mjx.put_model(model)
        nstep = spec.frame_skip

        def env_step(d, u):
            d = d.replace(ctrl=u)
            return jax.lax.fori_loop(0, nstep, lambda _, d: mjx.step(mx, d), d)

        step = jax.jit(jax.vmap(env_step))
        for n in ns:
            key = jax.random.PRNGKey(0)
            qpos = mx.qpos0 + 0.01 * jax.random.normal(key, (n, model.nq))
            d = jax.vmap(lambda q: mjx.make_data(mx).replace(qpos=q))(qpos)
            u = jax.numpy.zeros((n, model.nu))
            t0 = time.perf_counter()
            d = step(d, u)
            jax.block_until_ready(d)
            compile_s = time.perf_counter() - t0
            state = {"d": d}

            def fn(state=state, u=u):
                state["d"] = step(state["d"], u)

            per_call = []
            for _ in range(args.repeats):
                calls, t0 = 0, time.perf_counter()
                while True:
                    fn()
                    calls += 1
                    if calls % 4 == 0:
                        jax.block_until_ready(state["d"])
                        if time.perf_counter() - t0 >= args.min_time:
                            break
                per_call.append((time.perf_counter() - t0) / calls)
            sec = statistics.median(per_call)
            row = dict(env=spec.env, engine="mjx", mode="jit(vmap)", n=n, nstep=nstep)
            row.update(env_steps_per_s=n / sec, ms_per_step=1e3 * sec)
            row["compile_s"] = round(compile_s, 1)
            print(json.dumps(row), flush=True)
            out.append(row)
    except Exception as e:  # noqa: BLE001
        traceback.print_exc()
        out.append({"env": spec.env, "engine": "mjx", "error": f"{type(e).__name__}: {e}"})
    return out


def markdown(result: dict) -> str:
    """The parity and throughput tables."""
    lines = [f"# MuJoCo Warp engine on {result['device_name']}", ""]
    if result.get("parity"):
        lines += [
            "| model | ok | build s | largest abs differences (Warp - C) | steep-capsule worlds "
            "| ok without them | largest differences without them |",
            "|---|---|---|---|---|---|---|",
        ]
        for xml, r in result["parity"].items():
            diffs = ", ".join(f"{k} {v:.2g}" for k, v in r.get("max_abs_diff", {}).items())
            other = r.get("max_abs_diff_other_worlds", {})
            rest = ", ".join(f"{k} {v:.2g}" for k, v in other.items())
            lines.append(
                f"| {xml} | {r['ok']} | {r.get('build_s', '')} | {diffs or r.get('error', '')} "
                f"| {r.get('steep_capsule_worlds', '')} | {r.get('ok_other_worlds', '')} | {rest} |"
            )
        lines.append("")
    if result.get("bench"):
        lines += [
            "| env | engine | mode | N | env-steps/s | ms/step |",
            "|---|---|---|---|---|---|",
        ]
        for r in result["bench"]:
            if "env_steps_per_s" in r:
                lines.append(
                    f"| {r['env']} | {r['engine']} | {r['mode']}"
                    f"{'' if r.get('deterministic', True) else ' (nondeterministic)'} | {r['n']} | "
                    f"{r['env_steps_per_s']:.3g} | {r['ms_per_step']:.3g} |"
                    + (
                        f" replay vs eager {r['replay_vs_eager_max_abs_diff']:.2g} |"
                        if "replay_vs_eager_max_abs_diff" in r
                        else ""
                    )
                )
            else:
                what = r.get("error") or r.get("skipped")
                lines.append(
                    f"| {r['env']} | {r['engine']} | {r.get('mode', '')} | {r.get('n', '')} "
                    f"| {what} | |"
                )
    return "\n".join(lines) + "\n"


def main() -> int:
    """Runs the check; exit 1 if a model errored or (Ant aside) left the tolerance."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="cuda")
    p.add_argument("--quick", action="store_true", help="two models, N=4 parity, N=64 bench")
    p.add_argument("--parity-only", action="store_true")
    p.add_argument("--bench-only", action="store_true")
    p.add_argument("--no-torch-graph", action="store_true")
    p.add_argument(
        "--deterministic", choices=("on", "off", "both"), default="on", help="engine's mode"
    )
    p.add_argument("--no-mjx", action="store_true")
    p.add_argument("--n", type=int, nargs="*", default=[1024, 4096, 16384, 65536])
    p.add_argument(
        "--env-ids",
        nargs="*",
        default=["gpuvec/HalfCheetah-v5", "gpuvec/Ant-v5"],
        help="registered envs to time on the Warp engine (make_vec(..., engine='warp'))",
    )
    p.add_argument("--env-n", type=int, nargs="*", default=[4096, 65536])
    p.add_argument("--mjx-n", type=int, nargs="*", default=[4096, 65536], help="MJX's N")
    p.add_argument("--envs", nargs="*", default=list(BENCH_ENVS), help="XML names to benchmark")
    p.add_argument("--parity-n", type=int, default=64)
    p.add_argument("--min-time", type=float, default=0.5)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--out", default=os.environ.get("OUT") or "bench_out")
    args = p.parse_args()
    if common is None:
        print(f"gpu_mujoco_check: MuJoCo Warp is not importable ({_COMMON_ERROR!r})")
        return 2
    device = torch.device(args.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        print("gpu_mujoco_check: no CUDA device (use --device cpu --quick for the CPU smoke)")
        return 2
    xmls = [g.xml for g in common.GYM_V5]
    if args.quick:
        xmls, args.parity_n, args.n = ["half_cheetah.xml", "ant.xml"], 4, [64]
        args.envs, args.min_time, args.repeats = ["half_cheetah.xml"], 0.2, 1
        args.env_ids, args.env_n = ["gpuvec/HalfCheetah-v5"], [64]
    result = {
        "device_name": "cpu (Warp)" if device.type == "cpu" else torch.cuda.get_device_name(device),
        "torch": torch.__version__,
        "argv": sys.argv[1:],
    }
    try:
        import mujoco_warp
        import warp

        result["mujoco_warp"], result["warp"] = mujoco_warp.__version__, warp.config.version
    except Exception as e:  # noqa: BLE001
        print(f"gpu_mujoco_check: MuJoCo Warp is not importable ({type(e).__name__}: {e})")
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    suffix = "_parity" if args.parity_only else "_bench" if args.bench_only else ""

    def save() -> None:  # after every model: a timeout keeps what was measured
        (out / f"mujoco_warp{suffix}.json").write_text(json.dumps(result, indent=1))
        (out / f"mujoco_warp{suffix}.md").write_text(markdown(result))

    failed = False
    if not args.bench_only:
        result["parity"] = {}
        for xml in xmls:
            result["parity"].update(parity(device, args.parity_n, [xml]))
            save()
        # judged: every model but Ant (its contacts differ, see docs) within tolerance in the
        # worlds without a steep plane-capsule contact; any error fails
        failed = not all(
            r.get("ok_other_worlds", False) or (xml == "ant.xml" and "error" not in r)
            for xml, r in result["parity"].items()
        )
    if not args.parity_only:
        result["bench"] = []
        for xml in args.envs:  # ours first, then MJX (its jit per N is the slow part)
            for det in {"on": (True,), "off": (False,), "both": (True, False)}[args.deterministic]:
                result["bench"] += bench_engine(xml, args.n, device, args, det)
                save()
        for env_id in args.env_ids:
            result["bench"] += bench_env(env_id, args.env_n, device, args)
            save()
        for xml in args.envs if device.type == "cuda" and not args.no_mjx else ():
            result["bench"] += bench_mjx(xml, args.mjx_n, args)
            save()
    save()
    print(markdown(result))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
