"""Measuring env-steps/s side by side: opened configurations, interleaved timing, tables.

What every benchmark shares (the ``gpuvec-bench`` sweep, the suites, the peers' openers,
the report): configurations set up first and timed in turn (:func:`time_interleaved`),
busy competitor processes, machine facts, ratio tables and plots.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import platform
import statistics
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector.utils import batch_space

import gpuvec_envs
from gpuvec_envs.registry import entry

PEERS = ("sync", "async", "numpy", "envpool")
_POOL = 8  # pre-drawn action batches, cycled
_CALIBRATION_CALLS = 12  # untimed calls of each configuration before its blocks


@dataclasses.dataclass
class Result:
    """One measured configuration."""

    env: str  # gpuvec ID
    impl: str  # "gpuvec-compile", "gpuvec-eager", "gym-sync", "gym-async", "gym-numpy", ...
    num_envs: int
    steps_per_s: float  # env-steps per second (num_envs x calls / s), median over repeats
    call_us: float  # one step call (all envs), median, microseconds
    setup_s: float  # construction + compile + first step, seconds
    repeats: list[float]  # steps/s of each repeat
    frame_skip: int = 1
    note: str = ""
    first_step_s: float = 0.0  # the first step() call alone (compiles), seconds
    num_threads: str = ""  # gpuvec: the env's num_threads ("auto" or a count)


# -- timing ------------------------------------------------------------------------------
@dataclasses.dataclass
class Opened:
    """A configuration set up for timing: ``step(i)`` runs call ``i``.

    :func:`time_interleaved` sets ``result``'s ``steps_per_s``, ``call_us`` and ``repeats``.
    """

    result: Result
    step: Callable[[int], Any]
    close: Callable[[], None]
    sync: Callable[[], None] = lambda: None


# -- the rollout rows' policy, shared with the gymnax peer --------------------------------
def policy_weights(obs_dim: int, out_dim: int, seed: int = 0) -> np.ndarray:
    """The shared (obs_dim, out_dim) float32 weights of both linear policies."""
    return np.random.default_rng(seed).standard_normal((obs_dim, out_dim)).astype(np.float32)


class LinearPolicy(torch.nn.Module):
    """A fixed linear policy on flattened float observations (the rollout rows' policy).

    Discrete(A): ``argmax(x @ W)``; a Box of k dims: ``tanh(x @ W)`` scaled to the bounds.
    ``W`` (obs_dim, A or k) float32 is :func:`policy_weights`, shared with the
    gymnax rollout so that both sides run the same policy.

    Args:
        obs_space: One env's observation space.
        action_space: One env's action space (Discrete or Box).
    """

    def __init__(self, obs_space: gym.Space, action_space: gym.Space) -> None:
        super().__init__()
        obs_dim = int(np.prod(obs_space.shape))
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        out = int(action_space.n) if self.discrete else int(np.prod(action_space.shape))
        self.register_buffer("weight", torch.from_numpy(policy_weights(obs_dim, out)))
        if not self.discrete:
            self.register_buffer("low", torch.as_tensor(action_space.low, dtype=torch.float32))
            self.register_buffer("high", torch.as_tensor(action_space.high, dtype=torch.float32))

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Actions for observations (N, *obs_shape): (N,) int64 or (N, k) float32."""
        x = obs.reshape(obs.shape[0], -1).to(torch.float32) @ self.weight
        if self.discrete:
            return x.argmax(dim=-1)
        return self.low + (self.high - self.low) * (torch.tanh(x) + 1.0) * 0.5


def time_interleaved(opened: Sequence[Opened], *, min_time: float, repeats: int) -> None:
    """Time every configuration of ``opened``: ``repeats`` rounds of one block each.

    A block runs enough calls for at least about ``min_time / repeats`` seconds (sized by
    the fastest call of a short run of each configuration first, of at least
    ``_CALIBRATION_CALLS`` calls, during which an adaptive thread count settles). Taking the blocks
    in turn keeps the configurations compared in one report seconds apart: on a shared
    machine whose speed drifts, timing one configuration after another would compare
    different conditions.
    Garbage is collected first, so that a full collection owed by the setup (compiling
    leaves ~0.5M tracked objects: ~0.3 s) does not land in a timed block; the collector
    stays on, so a peer's own garbage is still paid for. Sets each result's median steps/s
    and call time and its per-block steps/s.
    """
    gc.collect()
    calls, counts = [], []
    for o in opened:
        o.sync()
        t0 = time.perf_counter()
        n, dts = 0, []
        while n < _CALIBRATION_CALLS or time.perf_counter() - t0 < 0.02:
            t1 = time.perf_counter()
            o.step(n)
            o.sync()
            dts.append(time.perf_counter() - t1)
            n += 1
        # the fastest call: the stalls of an adaptive thread count settling under load
        # would otherwise size blocks of a few calls, in which one later probe dominates
        per_call = min(dts)
        calls.append(max(1, int(min_time / max(repeats, 1) / max(per_call, 1e-9))))
        counts.append(n)
    times: list[list[float]] = [[] for _ in opened]
    for _ in range(repeats):
        for j, o in enumerate(opened):
            o.sync()
            t0 = time.perf_counter()
            for i in range(counts[j], counts[j] + calls[j]):
                o.step(i)
            o.sync()
            times[j].append((time.perf_counter() - t0) / calls[j])
            counts[j] += calls[j]
    for o, dts in zip(opened, times, strict=True):
        r = o.result
        r.repeats = [r.num_envs / dt for dt in dts]
        r.steps_per_s = statistics.median(r.repeats)
        r.call_us = statistics.median(dts) * 1e6


def _torch_actions(space: gym.Space, n: int, device: torch.device, gen: torch.Generator) -> list:
    out = []
    for _ in range(_POOL):
        if isinstance(space, gym.spaces.Discrete):
            a = torch.randint(int(space.start), int(space.start + space.n), (n,), generator=gen)
        else:
            low = torch.as_tensor(space.low, dtype=torch.float64)
            high = torch.as_tensor(space.high, dtype=torch.float64)
            u = torch.rand((n, *space.shape), generator=gen, dtype=torch.float64)
            a = (low + (high - low) * u).to(torch.float32)
        out.append(a.to(device))
    return out


def _numpy_actions(space: gym.Space, seed: int) -> list:
    space.seed(seed)
    return [space.sample() for _ in range(_POOL)]


# -- implementations ---------------------------------------------------------------------
def open_gpuvec(
    env_id: str,
    num_envs: int,
    backend: str,
    *,
    device: str = "cpu",
    frame_skip: int = 1,
    num_threads: int | str = "auto",
    validate: bool = False,
    compiler_options: dict[str, Any] | None = None,
) -> Opened:
    """``gymnasium.make_vec(env_id)`` on the gpuvec engine, set up to time.

    Without input checks unless ``validate`` (the env's default). The impl is
    ``gpuvec-<backend>``, with ``-<k>t`` for a fixed ``num_threads=k`` and ``-validate``
    with the checks.
    """
    dev = torch.device(device)
    t0 = time.perf_counter()
    # frame_skip=1 is the shell's default; an env whose params take frame_skip (MuJoCo's
    # physics substeps) keeps its own default unless another value is asked for
    skip = {} if frame_skip == 1 else {"frame_skip": frame_skip}
    env = gym.make_vec(
        env_id,
        num_envs=num_envs,
        device=dev,
        backend=backend,
        validate=validate,
        num_threads=num_threads,
        compiler_options=compiler_options,
        **skip,
    )
    env.reset(seed=0)
    actions = _torch_actions(
        env.single_action_space, num_envs, dev, torch.Generator().manual_seed(0)
    )
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    t1 = time.perf_counter()
    env.step(actions[0])
    sync()
    t2 = time.perf_counter()
    kind = getattr(env.unwrapped._step, "kind", backend)
    impl = f"gpuvec-{backend}" + ("" if num_threads == "auto" else f"-{num_threads}t")
    impl += "-validate" if validate else ""
    result = Result(env_id, impl, num_envs, 0.0, 0.0, t2 - t0, [], frame_skip, kind)
    result.first_step_s, result.num_threads = t2 - t1, str(num_threads)
    return Opened(result, lambda i: env.step(actions[i % _POOL]), env.close, sync)


@contextlib.contextmanager
def busy_processes(count: int) -> Iterator[list[subprocess.Popen]]:
    """Run ``count`` CPU-bound processes (``while True: pass``) for the duration."""
    procs = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(count)]
    try:
        time.sleep(0.2 if procs else 0.0)  # let them be scheduled
        yield procs
    finally:
        for p in procs:
            p.kill()
        for p in procs:
            p.wait()


def bench_gpuvec(
    env_id: str,
    num_envs: int,
    backend: str,
    *,
    device: str = "cpu",
    frame_skip: int = 1,
    min_time: float = 1.0,
    repeats: int = 5,
) -> Result:
    """Steps/s of ``gymnasium.make_vec(env_id)`` on the gpuvec engine (no validation)."""
    opened = open_gpuvec(env_id, num_envs, backend, device=device, frame_skip=frame_skip)
    try:
        time_interleaved([opened], min_time=min_time, repeats=repeats)
    finally:
        opened.close()
    return opened.result


def _make_reference(reference: str) -> Callable[[], gym.Env]:
    if reference.startswith("MinAtar/"):
        import minatar.gym  # noqa: F401 - registers MinAtar IDs

        minatar.gym.register_envs()
    if reference.startswith("MiniGrid-"):
        import minigrid  # noqa: F401 - registers MiniGrid IDs
        from minigrid.wrappers import ImgObsWrapper

        # the image alone, as the gpuvec env returns it (and as agents usually consume it)
        return lambda: ImgObsWrapper(gym.make(reference))
    return lambda: gym.make(reference)


def open_peer(env_id: str, peer: str, num_envs: int) -> Opened | None:
    """One peer of ``env_id``'s reference set up to time, or ``None`` if it does not exist."""
    reference = entry(env_id).reference
    if reference is None:
        return None
    t0 = time.perf_counter()
    if peer == "sync":
        env = gym.vector.SyncVectorEnv([_make_reference(reference)] * num_envs)
    elif peer == "async":
        env = gym.vector.AsyncVectorEnv([_make_reference(reference)] * num_envs)
    elif peer == "numpy":
        spec = gym.spec(reference) if reference in gym.registry else None
        if spec is None or spec.vector_entry_point is None:
            return None
        env = gym.make_vec(reference, num_envs=num_envs, vectorization_mode="vector_entry_point")
    elif peer == "envpool":
        try:
            import envpool
        except ImportError:
            return None
        if reference not in envpool.list_all_envs():
            return None
        env = envpool.make_gymnasium(reference, num_envs=num_envs, num_threads=2, seed=0)
    else:
        raise ValueError(f"unknown peer {peer!r}; peers are {PEERS}")
    try:
        env.reset(seed=0) if peer != "envpool" else env.reset()
        if peer == "envpool":  # envpool's action_space is one env's; it wants int32/(N, k)
            space = env.action_space
            dtype = np.int32 if isinstance(space, gym.spaces.Discrete) else np.float32
            batched = batch_space(space, num_envs)
            batched.seed(0)
            actions = [np.asarray(batched.sample()).astype(dtype) for _ in range(_POOL)]
        else:
            actions = _numpy_actions(env.action_space, 0)
        env.step(actions[0])
    except BaseException:
        env.close()
        raise
    names = {
        "sync": "gym-sync",
        "async": "gym-async",
        "numpy": "gym-numpy",
        "envpool": "envpool-2t",
    }
    setup = time.perf_counter() - t0
    result = Result(env_id, names[peer], num_envs, 0.0, 0.0, setup, [])
    return Opened(result, lambda i: env.step(actions[i % _POOL]), env.close)


# -- sweep, table, plot ------------------------------------------------------------------
def ratios(results: Sequence[Result]) -> list[dict[str, Any]]:
    """Gpuvec steps/s over each peer's best configuration (and gym-numpy at the same N).

    Rows of an adaptive thread count also get the ratio to the same configuration with
    ``num_threads=1`` (``vs gpuvec 1t same N``) where that was measured.
    """
    out = []
    for r in results:
        if not r.impl.startswith("gpuvec"):
            continue
        row: dict[str, Any] = {
            "env": r.env,
            "impl": r.impl,
            "num_envs": r.num_envs,
            "frame_skip": r.frame_skip,
            "steps_per_s": r.steps_per_s,
        }
        for peer in ("gym-sync", "gym-async", "gym-numpy", "envpool-2t"):
            same_env = [p for p in results if p.env == r.env and p.impl == peer]
            if not same_env:
                continue
            best = max(same_env, key=lambda p: p.steps_per_s)
            row[f"vs {peer} best"] = r.steps_per_s / best.steps_per_s
            row[f"{peer} best N"] = best.num_envs
            same_n = [p for p in same_env if p.num_envs == r.num_envs]
            if peer == "gym-numpy" and same_n:
                row["vs gym-numpy same N"] = r.steps_per_s / same_n[0].steps_per_s
        one = [
            p
            for p in results
            if p.env == r.env
            and p.impl == f"{r.impl}-1t"
            and (p.num_envs, p.frame_skip) == (r.num_envs, r.frame_skip)
        ]
        if one:
            row["vs gpuvec 1t same N"] = r.steps_per_s / one[0].steps_per_s
        out.append(row)
    return out


def _fmt_rate(x: float) -> str:
    for unit, scale in (("G", 1e9), ("M", 1e6), ("k", 1e3)):
        if x >= scale:
            return f"{x / scale:.3g}{unit}"
    return f"{x:.3g}"


def fmt_ratio(x: float) -> str:
    """A speed ratio as text: ``0.95x``, ``12.4x``, ``127x`` (two digits below 1)."""
    return f"{x:.0f}x" if x >= 100 else f"{x:.2g}x" if x < 1 else f"{x:.1f}x"


def format_table(results: Sequence[Result]) -> str:
    """Markdown tables: every measurement, then the ratios."""
    lines = [
        "| env | impl | frame_skip | num_envs | env-steps/s | call (us) | setup (s) "
        "| first step (s) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        lines.append(
            f"| {r.env} | {r.impl} | {r.frame_skip} | {r.num_envs} | {_fmt_rate(r.steps_per_s)} "
            f"| {r.call_us:.1f} | {r.setup_s:.2f} | {r.first_step_s:.2f} |"
        )
    rows = ratios(results)
    if rows:
        keys = [
            k
            for k in (
                "vs gym-numpy same N",
                "vs gym-numpy best",
                "vs gym-sync best",
                "vs gym-async best",
                "vs envpool-2t best",
                "vs gpuvec 1t same N",
            )
            if any(k in row for row in rows)
        ]
        lines += [
            "",
            "| env | impl | frame_skip | num_envs | " + " | ".join(keys) + " |",
            "|---|---|---|---|" + "---|" * len(keys),
        ]
        for row in rows:
            cells = [fmt_ratio(row[k]) if k in row else "-" for k in keys]
            lines.append(
                f"| {row['env']} | {row['impl']} | {row['frame_skip']} | {row['num_envs']} | "
                + " | ".join(cells)
                + " |"
            )
    return "\n".join(lines)


def plot(results: Sequence[Result], path: str) -> None:
    """Log-log scaling plot (env-steps/s vs num_envs), one panel per env."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    envs = list(dict.fromkeys(r.env for r in results))
    fig, axes = plt.subplots(
        1, max(len(envs), 1), figsize=(5.5 * max(len(envs), 1), 4.2), squeeze=False
    )
    for ax, env in zip(axes[0], envs, strict=False):
        series: dict[str, list[Result]] = {}
        for r in results:
            if r.env == env:
                label = r.impl + (f" fs={r.frame_skip}" if r.frame_skip != 1 else "")
                series.setdefault(label, []).append(r)
        for label, rs in series.items():
            rs = sorted(rs, key=lambda r: r.num_envs)
            ax.plot([r.num_envs for r in rs], [r.steps_per_s for r in rs], marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("num_envs")
        ax.set_ylabel("env-steps/s")
        ax.set_title(env)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def machine_info() -> dict[str, Any]:
    """Versions, threads and load of this machine (part of every report)."""
    if os.environ.get("ATEN_CPU_CAPABILITY") and not os.environ.get("TORCHINDUCTOR_CPP_MARCH"):
        # g++ then still targets this CPU (-march=native): on an AVX-512 CPU, AVX2 kernels
        # built so miscompiled (Seaquest) and may use AVX-512 instructions.
        warnings.warn(
            "ATEN_CPU_CAPABILITY is set without TORCHINDUCTOR_CPP_MARCH: inductor compiles "
            "with -march=native, so this is not the code an older CPU runs (for AVX2, set "
            "TORCHINDUCTOR_CPP_MARCH=x86-64-v3)",
            RuntimeWarning,
            stacklevel=2,
        )
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "gymnasium": gym.__version__,
        "numpy": np.__version__,
        "gpuvec_envs": gpuvec_envs.__version__,
        "torch_threads": torch.get_num_threads(),
        "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS"),
        "cpu_count": os.cpu_count(),
        "cpu": platform.processor() or platform.machine(),
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "ATEN_CPU_CAPABILITY": os.environ.get("ATEN_CPU_CAPABILITY"),
        "TORCHINDUCTOR_CPP_MARCH": os.environ.get("TORCHINDUCTOR_CPP_MARCH"),
        "cuda": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
    }
    try:
        info["loadavg_1m"] = os.getloadavg()[0]
    except OSError:
        pass
    try:
        import envpool

        info["envpool"] = envpool.__version__
    except ImportError:
        info["envpool"] = None
    return info
