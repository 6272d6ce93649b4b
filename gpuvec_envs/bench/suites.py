"""The benchmark report's sweep: every section of :data:`REPORT` measured into one JSON.

``python -m gpuvec_envs.bench --suite report --json docs/results/cpu.json`` runs it; then
``python -m gpuvec_envs.bench.report render docs/results/cpu.json`` writes BENCHMARKS.md
and its plots from that file. Each section is timed as ``gpuvec-bench`` times one env: all
of an env's configurations (gpuvec's per-call step, gpuvec's :class:`RolloutCollector`, and
the peers: gymnasium's ``SyncVectorEnv`` and numpy vector env, EnvPool, gymnax) are set up
first and then timed in turn, one block each per repeat
(:func:`gpuvec_envs.bench.measure.time_interleaved`). The JSON records the machine (CPU
model, ISA, threads, versions), the 1-minute load average before and after, the date and
the command, so that every figure carries its conditions.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import math
import os
import platform
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any

import gymnasium as gym
import torch

from gpuvec_envs.bench import measure, peer_craftax, peer_gymnax, peer_navix
from gpuvec_envs.bench.measure import LinearPolicy, Opened, Result

#: Note stored in every report about the conditions it was measured in.
LOAD_NOTE = (
    "Wall-clock medians on a shared machine: other processes may have run during the sweep "
    "(see the load averages). Read every figure as +-25 %."
)


@dataclasses.dataclass(frozen=True)
class Section:
    """One table of the report: envs measured at the same batch sizes.

    Attributes:
        name: Key of the section in the JSON.
        title: Heading in BENCHMARKS.md.
        envs: gpuvec IDs.
        num_envs: Batch sizes of gpuvec's per-call step (and of numpy/gymnax peers).
        peers: ``gpuvec-bench`` peers (``sync``, ``numpy``, ``envpool``), capped at
            ``peer_max_envs`` envs except ``numpy``, which runs at every ``num_envs``.
        gymnax: Also time gymnax's ``jit(vmap(step))`` at every ``num_envs``.
        rollout_num_envs: Batch size of the rollout rows (gpuvec's ``RolloutCollector`` and
            gymnax's ``lax.scan``); ``None`` for none.
        rollout_steps: T of the rollout rows.
        num_threads: ``num_threads`` values of gpuvec's per-call step rows.
        competitor: Busy processes (``while True: pass``) running while the section is
            timed (set up before they start), to measure speed on a contended CPU.
        physics_bound: Also time the env's MuJoCo engine alone at every ``num_envs``
            (:mod:`gpuvec_envs.bench.peer_mujoco`).
        navix: Also time navix's ``jit(vmap(step))`` at every ``num_envs`` (MiniGrid).
        craftax: Also time craftax's ``jit(vmap(step))`` without and with its autoreset at
            every ``num_envs`` (Craftax-Classic).
        backend: gpuvec's backend for this section (``None``: the report's).
    """

    name: str
    title: str
    envs: tuple[str, ...]
    num_envs: tuple[int, ...]
    peers: tuple[str, ...] = ("sync", "envpool")
    peer_max_envs: int = 256
    gymnax: bool = True
    rollout_num_envs: int | None = None
    rollout_steps: int = 32
    num_threads: tuple[int | str, ...] = ("auto",)
    competitor: int = 0
    navix: bool = False
    physics_bound: bool = False
    craftax: bool = False
    backend: str | None = None


CLASSIC = (
    "gpuvec/CartPole-v1",
    "gpuvec/Pendulum-v1",
    "gpuvec/MountainCar-v0",
    "gpuvec/MountainCarContinuous-v0",
    "gpuvec/Acrobot-v1",
)
MINATAR = tuple(
    f"gpuvec/MinAtar-{g}-v1"
    for g in ("Asterix", "Breakout", "Freeway", "Seaquest", "SpaceInvaders")
)
MINIGRID = tuple(f"gpuvec/MiniGrid-{name}-v0" for name in ("Empty-8x8", "DoorKey-8x8", "FourRooms"))

#: The report's sections, bounded so the whole sweep takes minutes on 2 cores.
REPORT = (
    Section(
        "scaling",
        "CartPole-v1: scaling with num_envs",
        ("gpuvec/CartPole-v1",),
        (1, 256, 4096, 65536),
        peers=("sync", "numpy", "envpool"),
        rollout_num_envs=65536,
    ),
    Section(
        "classic",
        "Classic control at N=65536",
        CLASSIC[1:],
        (65536,),
        rollout_num_envs=65536,
    ),
    Section("minatar", "MinAtar at N=4096", MINATAR, (4096,), rollout_num_envs=4096),
    Section("minigrid", "MiniGrid at N=4096", MINIGRID, (4096,), peers=("sync",), gymnax=False),
    Section(
        "contended",
        "CartPole-v1 at N=65536 with one busy competitor process",
        ("gpuvec/CartPole-v1",),
        (65536,),
        peers=("numpy",),
        gymnax=False,
        num_threads=("auto", 1),
        competitor=1,
    ),
    Section(
        "contended_minatar",
        "MinAtar Breakout at N=4096 with one busy competitor process",
        ("gpuvec/MinAtar-Breakout-v1",),
        (4096,),
        peers=("sync",),
        gymnax=False,
        num_threads=("auto", 1),
        competitor=1,
    ),
)


#: ``--suite mujoco``: gymnasium's MuJoCo tasks on the CPU (needs the ``mujoco`` extra)
#: against gymnasium's SyncVectorEnv, EnvPool's MuJoCo tasks (where installed) and the
#: engine's physics alone.
MUJOCO_REPORT = (
    Section(
        "mujoco",
        "MuJoCo v5 (CPU)",
        tuple(f"gpuvec/{name}-v5" for name in ("HalfCheetah", "Hopper", "Ant", "Humanoid")),
        (1, 64, 1024, 4096),
        peers=("sync", "envpool"),
        peer_max_envs=1024,
        gymnax=False,
        physics_bound=True,
    ),
)


#: The GPU report's sections (``--suite gpu``): gymnax's and navix's envs at large N.
#: ``--suite craftax``: Craftax-Classic beside craftax 1.6.1's ``jit(vmap(step))``.
CRAFTAX_REPORT = (
    Section(
        "craftax",
        "Craftax-Classic-Symbolic-v1 beside craftax 1.6.1 (jax, CPU)",
        ("gpuvec/Craftax-Classic-Symbolic-v1",),
        (64, 1024),
        peers=(),
        gymnax=False,
        craftax=True,
        backend="eager",
    ),
    Section(
        "craftax_compiled",
        "Craftax-Classic-Symbolic-v1, compiled step (backend='compile')",
        ("gpuvec/Craftax-Classic-Symbolic-v1",),
        (64, 1024),
        peers=(),
        gymnax=False,
        backend="compile",
    ),
)
GPU_REPORT = (
    Section(
        "gpu_cartpole",
        "GPU: CartPole-v1",
        ("gpuvec/CartPole-v1",),
        (1 << 16, 1 << 22, 1 << 24),
        peers=(),
        rollout_num_envs=1 << 20,
    ),
    Section(
        "gpu_classic",
        "GPU: classic control at N=2^22",
        ("gpuvec/Pendulum-v1", "gpuvec/Acrobot-v1"),
        (1 << 22,),
        peers=(),
    ),
    Section("gpu_minatar", "GPU: MinAtar at N=2^20", MINATAR, (1 << 20,), peers=()),
    Section(
        "gpu_breakout",
        "GPU: MinAtar Breakout at N=2^16, step and rollout",
        ("gpuvec/MinAtar-Breakout-v1",),
        (1 << 16,),
        peers=(),
        rollout_num_envs=1 << 16,
    ),
    Section(
        "gpu_minigrid",
        "GPU: MiniGrid at N=2^20",
        MINIGRID[1:],
        (1 << 20,),
        peers=(),
        gymnax=False,
        navix=True,
    ),
)
#: The extra rows of :func:`gpu_extras`: (env, N, frame_skip) of its timed steps.
GPU_EXTRA_STEPS = (
    ("gpuvec/CartPole-v1", 1 << 22, 8),
    ("gpuvec/MinAtar-Breakout-v1", 1 << 20, 8),
)
#: The new batch size whose compile :func:`gpu_extras` times (never prewarmed).
GPU_SECOND_N = 1 << 21
#: (env, first N, second N) of :func:`gpu_extras`'s ``dynamic_batch`` rows.
GPU_DYNAMIC = (
    ("gpuvec/CartPole-v1", 1 << 20, 3 << 18),
    ("gpuvec/MinAtar-Breakout-v1", 1 << 18, 3 << 16),
)
#: CartPole-v1 sizes whose bytes per env-step :func:`gpu_extras` counts.
GPU_BYTES_N = (1 << 22, 1 << 24)
#: Compiler options of those steps: inductor states each Triton kernel's bytes.
BYTES_OPTIONS = {"inductor": {"benchmark_kernel": True}}


def _bytes_env(num_envs: int) -> Any:
    """CartPole-v1 on CUDA, compiled with :data:`BYTES_OPTIONS` and stepped once."""
    env = gym.make_vec(
        "gpuvec/CartPole-v1",
        num_envs=num_envs,
        device="cuda",
        backend="compile",
        validate=False,
        compiler_options=BYTES_OPTIONS,
    )
    env.reset(seed=0)
    env.step(torch.zeros(num_envs, dtype=torch.int64, device="cuda"))
    return env


def _prewarm_job(job: tuple[str, str, dict[str, Any]]) -> str:
    """Build one gpuvec configuration (compiling it into inductor's cache) and drop it."""
    kind, env_id, kw = job
    try:
        if kind == "bytes":
            _bytes_env(kw["num_envs"]).close()
        else:
            _open(kind, env_id, kw, "cuda").close()
        return f"{kind} {env_id} {kw}: ok"
    except Exception as exc:  # noqa: BLE001 - the benchmark meets it again and reports it
        return f"{kind} {env_id} {kw}: {type(exc).__name__}: {exc}"[:300]


def prewarm_gpu(workers: int = 4) -> Iterator[str]:
    """Compile the GPU report's gpuvec configurations in ``workers`` processes at once.

    Fills inductor's caches so that the timed run (one process) builds each from them in
    seconds; for a device check that must fit a few minutes. Yields one line per job, in
    order, as they finish.
    """
    import concurrent.futures
    import multiprocessing

    jobs = [
        (kind, env_id, kw)
        for s in GPU_REPORT
        for env_id in s.envs
        for kind, kw in _jobs(s, "compile")
        if kind in ("gpuvec", "rollout")
    ]
    jobs += [("gpuvec", e, dict(num_envs=n, backend="compile", frame_skip=k)) for e, n, k in
             GPU_EXTRA_STEPS]  # fmt: skip
    jobs += [("bytes", "gpuvec/CartPole-v1", dict(num_envs=n)) for n in GPU_BYTES_N]
    ctx = multiprocessing.get_context("spawn")
    with concurrent.futures.ProcessPoolExecutor(workers, mp_context=ctx) as pool:
        yield from pool.map(_prewarm_job, jobs)


def open_rollout(
    env_id: str, num_envs: int, num_steps: int, *, backend: str = "compile", device: str = "cpu"
) -> Opened:
    """Gpuvec's :class:`RolloutCollector` of T steps under :class:`LinearPolicy`, to time.

    One call is ``num_steps * num_envs`` env-steps; its result's ``num_envs`` is N.
    """
    from gpuvec_envs.rollout import RolloutCollector

    t0 = time.perf_counter()
    env = gym.make_vec(env_id, num_envs=num_envs, device=device, backend=backend)
    env.reset(seed=0)
    policy = LinearPolicy(env.single_observation_space, env.single_action_space).to(device)
    collector = RolloutCollector(env, policy, num_steps, backend=backend)
    collector.collect()
    setup = time.perf_counter() - t0
    note = f"RolloutCollector T={num_steps} ({collector.kind}), linear policy"
    result = Result(env_id, f"gpuvec-rollout-{backend}", num_envs, 0.0, 0.0, setup, [], 1, note)
    return Opened(result, lambda _i: collector.collect(), env.close)


def _jobs(section: Section, backend: str) -> list[tuple[str, dict[str, Any]]]:
    """The configurations of one env of ``section``: ``(kind, kwargs)``."""
    jobs: list[tuple[str, dict[str, Any]]] = []
    for n in section.num_envs:
        for k in section.num_threads:
            jobs.append(("gpuvec", dict(num_envs=n, backend=backend, num_threads=k)))
    if section.rollout_num_envs is not None:
        kw = dict(num_envs=section.rollout_num_envs, num_steps=section.rollout_steps)
        jobs.append(("rollout", dict(kw, backend=backend)))
        if section.gymnax:
            jobs.append(("gymnax-scan", kw))
    if section.gymnax:
        jobs += [("gymnax-step", dict(num_envs=n)) for n in section.num_envs]
    if section.navix:
        jobs += [("navix-step", dict(num_envs=n)) for n in section.num_envs]
    if section.physics_bound:
        jobs += [("physics-bound", dict(num_envs=n)) for n in section.num_envs]
    if section.craftax:
        jobs += [("craftax-step", dict(num_envs=n)) for n in section.num_envs]
        # craftax's autoreset builds N worlds per call (~46 s at N=1024 on 2 cores): the
        # smallest N only, which the timing's 12 calibration calls can afford
        jobs.append(("craftax-step", dict(num_envs=min(section.num_envs), autoreset=True)))
    for peer in section.peers:
        if peer == "numpy":
            sizes = list(section.num_envs)
        else:
            sizes = sorted({min(n, section.peer_max_envs) for n in section.num_envs})
        jobs += [("peer", dict(peer=peer, num_envs=n)) for n in sizes]
    return jobs


def _open(kind: str, env_id: str, kw: dict[str, Any], device: str) -> Opened | None:
    if kind == "gpuvec":
        return measure.open_gpuvec(env_id, device=device, **kw)
    if kind == "rollout":
        return open_rollout(env_id, device=device, **kw)
    if kind == "gymnax-step":
        return peer_gymnax.open_gymnax_step(env_id, **kw)
    if kind == "gymnax-scan":
        return peer_gymnax.open_gymnax_rollout(env_id, **kw)
    if kind == "navix-step":
        return peer_navix.open_navix_step(env_id, **kw)
    if kind == "physics-bound":
        from gpuvec_envs.bench import peer_mujoco  # imports nothing of MuJoCo's itself

        return peer_mujoco.open_physics_bound(env_id, **kw)
    if kind == "craftax-step":
        return peer_craftax.open_craftax_step(env_id, **kw)
    return measure.open_peer(env_id, **kw)


def run_section(
    section: Section,
    *,
    min_time: float,
    repeats: int,
    backend: str = "compile",
    device: str = "cpu",
    log: Any = sys.stderr,
) -> tuple[list[Result], list[str]]:
    """Measure one section, an env at a time.

    Returns:
        The results (rollout rows with env-steps/s counted as T x N per call) and notes
        (configurations skipped and why).
    """
    notes: list[str] = []
    results: list[Result] = []
    gymnax_reason = peer_gymnax.gymnax_missing() if section.gymnax else None
    navix_reason = peer_navix.navix_missing() if section.navix else None
    craftax_reason = peer_craftax.craftax_missing() if section.craftax else None
    notes += [r for r in (gymnax_reason, navix_reason, craftax_reason) if r is not None]
    missing = {"gymnax": gymnax_reason, "navix": navix_reason, "craftax": craftax_reason}
    backend = section.backend or backend
    for env_id in section.envs:
        opened: list[Opened] = []
        scale: list[int] = []
        try:
            for kind, kw in _jobs(section, backend):
                if missing.get(kind.split("-")[0]) is not None:
                    continue
                print(f"[report] {section.name} {env_id} {kind} {kw}", file=log, flush=True)
                try:
                    o = _open(kind, env_id, kw, device)
                except Exception as exc:  # noqa: BLE001 - a failing config must not stop the sweep
                    notes.append(f"skipped {kind} {env_id} {kw}: {type(exc).__name__}: {exc}")
                    o = None
                if o is not None:
                    opened.append(o)
                    scale.append(kw.get("num_steps", 1))
                elif kind == "peer":
                    notes.append(
                        f"skipped peer {kw['peer']} for {env_id}: not installed or no such env"
                    )
            with measure.busy_processes(section.competitor):
                measure.time_interleaved(opened, min_time=min_time, repeats=repeats)
            for o, t in zip(opened, scale, strict=True):
                r = o.result
                r.steps_per_s *= t
                r.repeats = [x * t for x in r.repeats]
                results.append(r)
        finally:
            for o in opened:
                o.close()
    return results, list(dict.fromkeys(notes))


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _loadavg() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def machine() -> dict[str, Any]:
    """This machine and its software: CPU model, ISA, threads, versions, date."""
    info = measure.machine_info()
    info.pop("loadavg_1m", None)
    info.update(
        cpu_model=_cpu_model(),
        isa=torch.backends.cpu.get_cpu_capability(),
        platform=platform.platform(),
        date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    )
    info.update(peer_gymnax.versions())
    info.update(peer_navix.versions())
    if torch.cuda.is_available():
        props = torch.cuda.get_device_properties(0)
        info.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1))
        info.update(cuda=torch.version.cuda)
    return info


def run_report(
    sections: Sequence[Section] = REPORT,
    *,
    min_time: float = 1.0,
    repeats: int = 5,
    backend: str = "compile",
    device: str = "cpu",
    command: str = "",
    log: Any = sys.stderr,
    json_path: str | None = None,
) -> dict[str, Any]:
    """Run every section; return the report (the JSON's content).

    With ``json_path`` the report is also written there after every section, with
    ``"complete": False`` until the last one, so a long sweep that is stopped keeps what
    it measured.
    """
    t0 = time.perf_counter()
    report: dict[str, Any] = {
        "schema": 1,
        "command": command,
        "machine": machine(),
        "load": {"loadavg_1m_before": _loadavg(), "loadavg_1m_after": None},
        "note": LOAD_NOTE,
        "settings": {
            "min_time": min_time,
            "repeats": repeats,
            "backend": backend,
            "device": device,
        },
        "complete": False,
        "wall_s": 0.0,
        "sections": [],
    }
    for i, s in enumerate(sections):
        results, notes = run_section(
            s, min_time=min_time, repeats=repeats, backend=backend, device=device, log=log
        )
        report["sections"].append(
            {
                "name": s.name,
                "title": s.title,
                "num_envs": list(s.num_envs),
                "rollout_num_envs": s.rollout_num_envs,
                "rollout_steps": s.rollout_steps,
                "competitor": s.competitor,
                "results": [dataclasses.asdict(r) for r in results],
                "notes": notes,
            }
        )
        report["load"]["loadavg_1m_after"] = _loadavg()
        report["wall_s"] = time.perf_counter() - t0
        report["complete"] = i == len(sections) - 1
        if json_path:
            write_json(report, json_path)
    return report


def write_json(report: dict[str, Any], path: str) -> None:
    """Write ``report`` as indented JSON (NaN as null)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)

    def clean(x: Any) -> Any:
        if isinstance(x, float) and not math.isfinite(x):
            return None
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        if isinstance(x, list | tuple):
            return [clean(v) for v in x]
        return x

    with open(path, "w") as f:
        json.dump(clean(report), f, indent=1)
        f.write("\n")


def copy_rate(device: str = "cuda", nbytes: int = 1 << 30) -> float:
    """The device's copy rate [bytes/s, read plus written]: the median of 10 timed copies."""
    x = torch.empty(nbytes, dtype=torch.uint8, device=device)
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    times = []
    for _ in range(10):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        y.copy_(x)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 1e3)
    return 2 * nbytes / sorted(times)[len(times) // 2]


def _timed_step(env_id: str, num_envs: int, *, min_time: float, **kw: Any) -> dict[str, Any]:
    """One gpuvec config timed alone: env-steps/s, first-step seconds and its report."""
    opened = measure.open_gpuvec(env_id, num_envs, "compile", device="cuda", **kw)
    measure.time_interleaved([opened], min_time=min_time, repeats=3)
    r = opened.result
    out = {"env": env_id, "num_envs": num_envs, "steps_per_s": r.steps_per_s}
    out.update(first_step_s=r.first_step_s, setup_s=r.setup_s, path=r.note, **kw)
    opened.close()
    return out


def gpu_extras(*, min_time: float, log: Any = sys.stderr) -> dict[str, Any]:
    """What the GPU report adds to the tables: copy rate, bytes moved, frame skip, new N.

    * ``copy_GBps``: a 1 GiB device-to-device copy, read plus written.
    * ``bytes``: CartPole-v1's compiled step at 2^22 and 2^24 with the bytes inductor
      states for each kernel (``benchmark_kernel``): achieved GB/s and its share of the
      copy rate.
    * ``frame_skip``: simulation steps/s at ``frame_skip`` 8 over 1
      (:data:`GPU_EXTRA_STEPS`).
    * ``second_n``: the first step of CartPole at :data:`GPU_SECOND_N` envs (compiled
      for it, after other sizes compiled in this process).
    * ``dynamic_batch``: per :data:`GPU_DYNAMIC` env, env-steps/s at the first N with a
      fixed size and with ``dynamic_batch``, then the second N's first step and rate with
      ``dynamic_batch`` (one compile serving both sizes).
    """
    out: dict[str, Any] = {"copy_GBps": copy_rate() / 1e9}
    print(f"[gpu] copy {out['copy_GBps']:.0f} GB/s", file=log, flush=True)
    rows = []
    for n in GPU_BYTES_N:
        env = _bytes_env(n)
        kernels = env.unwrapped.compile_report.kernels or ()
        env.close()
        sizes = [k.nbytes for k in kernels]
        per_env = sum(sizes) / n if sizes and None not in sizes else None
        timed = _timed_step("gpuvec/CartPole-v1", n, min_time=min_time)
        gbps = None if per_env is None else timed["steps_per_s"] * per_env / 1e9
        rows.append(
            dict(
                timed,
                kernels=len(kernels),
                bytes_per_env_step=per_env,
                achieved_GBps=gbps,
                share_of_copy=None if gbps is None else gbps / out["copy_GBps"],
            )
        )
        print(f"[gpu] bytes {rows[-1]}", file=log, flush=True)
    out["bytes"] = rows
    skips = []
    for env_id, n, k in GPU_EXTRA_STEPS:
        one = _timed_step(env_id, n, min_time=min_time)
        many = _timed_step(env_id, n, min_time=min_time, frame_skip=k)
        ratio = k * many["steps_per_s"] / one["steps_per_s"]
        skips.append(dict(env=env_id, num_envs=n, k1=one, k8=many, sim_steps_ratio=ratio))
        print(f"[gpu] frame_skip {env_id} {ratio:.2f}x", file=log, flush=True)
    out["frame_skip"] = skips
    t0 = time.perf_counter()
    second = _timed_step("gpuvec/CartPole-v1", GPU_SECOND_N, min_time=min_time)
    out["second_n"] = dict(second, wall_s=time.perf_counter() - t0)
    dynamic = {"dynamic_batch": True}
    rows = []
    for env_id, n, n2 in GPU_DYNAMIC:
        row = {"env": env_id, "num_envs": n, "second_num_envs": n2}
        row["fixed"] = _timed_step(env_id, n, min_time=min_time)
        row["dynamic"] = _timed_step(env_id, n, min_time=min_time, compiler_options=dynamic)
        row["second"] = _timed_step(env_id, n2, min_time=min_time, compiler_options=dynamic)
        rows.append(row)
        print(f"[gpu] dynamic_batch {row}", file=log, flush=True)
    out["dynamic_batch"] = rows
    return out


def main_suite(args: argparse.Namespace, argv: Sequence[str] | None = None) -> int:
    """``gpuvec-bench --suite report|gpu|mujoco|craftax``: run that suite's sections.

    :data:`REPORT`, :data:`GPU_REPORT`, :data:`MUJOCO_REPORT` or :data:`CRAFTAX_REPORT`.
    ``--min-time``, ``--repeats``, ``--device`` and ``--threads`` apply; the sweep's envs
    and sizes are the report's own. ``gpu`` runs on CUDA and adds :func:`gpu_extras`.
    """
    suites = {
        "report": REPORT,
        "gpu": GPU_REPORT,
        "mujoco": MUJOCO_REPORT,
        "craftax": CRAFTAX_REPORT,
    }
    if args.suite not in suites:
        raise ValueError(f"unknown suite {args.suite!r}; suites: {', '.join(suites)}")
    if not args.json_path:
        raise ValueError(f"--suite {args.suite} needs --json PATH")
    words = sys.argv[1:] if argv is None else list(argv)
    gpu = args.suite == "gpu"
    if gpu and not torch.cuda.is_available():
        raise ValueError("--suite gpu needs a CUDA device")
    report = run_report(
        suites[args.suite],
        min_time=args.min_time,
        repeats=args.repeats,
        device="cuda" if gpu else args.device,
        command="python -m gpuvec_envs.bench " + " ".join(words),
        json_path=args.json_path,
    )
    if gpu:
        report["gpu"] = gpu_extras(min_time=args.min_time)
        write_json(report, args.json_path)
    print(f"wrote {args.json_path} ({report['wall_s']:.0f} s)")
    return 0


if __name__ == "__main__":  # python -m gpuvec_envs.bench.suites prewarm [WORKERS]
    if sys.argv[1:2] != ["prewarm"]:
        raise SystemExit("usage: python -m gpuvec_envs.bench.suites prewarm [WORKERS]")
    for line in prewarm_gpu(int(sys.argv[2]) if len(sys.argv) > 2 else 4):
        print(f"[prewarm] {line}", flush=True)
