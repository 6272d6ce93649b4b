"""Pick ``num_envs``, backend, ``frame_skip`` and the collector's T by measuring them.

:func:`autotune` runs a short sweep for one env ID on one device (``"cpu"`` or
``"cuda[:i]"``): batch sizes, backends and (opt-in) frame skips, timed as ``env.step``
calls; then (opt-in) :class:`~gpuvec_envs.rollout.RolloutCollector` lengths T at the chosen
configuration. Configurations whose estimated memory exceeds the budget, or that would run
past the time budget, are skipped and say why. Also available as ``gpuvec-bench
--autotune``. It times steps itself (:func:`measure`), so that importing it does not import
the benchmark CLI.
"""

from __future__ import annotations

import dataclasses
import gc
import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import torch

from gpuvec_envs.registry import entry

#: Default batch sizes on the CPU.
DEFAULT_NUM_ENVS = (64, 1024, 4096, 16384, 65536)
#: Default batch sizes on CUDA: 2^12 .. 2^24 in powers of 4 (capped by the memory budget).
DEFAULT_CUDA_NUM_ENVS = tuple(4**k for k in range(6, 13))
#: Default share of the free memory the env may use, by device type. On the CPU the OS,
#: other processes and the learner share it; on CUDA the free figure already excludes other
#: processes, and the rest is left to the learner (network, optimiser, rollout buffers).
DEFAULT_MEMORY_FRACTION = {"cpu": 0.25, "cuda": 0.5}
#: Backends :func:`autotune` can time.
BACKENDS = ("compile", "eager")
#: make_vec keywords that :func:`autotune` sets itself.
_OWN_KWARGS = ("num_envs", "device", "backend", "validate", "frame_skip")


@dataclasses.dataclass
class Candidate:
    """One configuration of the sweep: its figures, or why it was skipped.

    ``stage`` is ``"step"`` (``env.step`` calls with random actions) or ``"rollout"``
    (``RolloutCollector.collect()`` calls of ``rollout_steps`` steps). ``steps_per_s`` is
    env-steps/s (N per step call, N * T per rollout); ``score`` is simulation steps/s
    (``steps_per_s * frame_skip``), the figure compared. ``setup_s`` (construction,
    compilation, warm-up calls) is never part of the rate.
    """

    stage: str
    backend: str
    num_envs: int
    frame_skip: int
    rollout_steps: int | None = None
    steps_per_s: float | None = None
    score: float | None = None
    call_us: float | None = None
    setup_s: float | None = None
    path: str | None = None  # rollout stage: the collector's path (``collector.kind``)
    skipped: str | None = None


@dataclasses.dataclass
class AutotuneResult:
    """The chosen configuration, the conditions of the sweep and every candidate.

    ``num_envs``, ``backend`` and ``frame_skip`` are the best of the step stage (or the
    ``num_envs`` the best rollout ran at, where the rollout buffers did not fit at the
    step stage's); ``rollout_steps`` is the best T, None where T was not tuned or no
    rollout was measured. ``steps_per_s`` / ``score``: env-steps/s and simulation steps/s
    of the chosen configuration's last stage. Bytes are device bytes.
    """

    env_id: str
    device: str
    measured: str  # what was timed, and how
    memory_budget: int  # bytes
    memory_source: str  # where the budget came from
    bytes_per_env: int  # estimated bytes per env of a stepping env
    time_budget: float | None  # seconds
    elapsed_s: float
    backend: str
    num_envs: int
    frame_skip: int
    rollout_steps: int | None
    steps_per_s: float
    score: float
    candidates: list[Candidate]

    def make_vec_kwargs(self) -> dict[str, Any]:
        """``gym.make_vec(result.env_id, **result.make_vec_kwargs())`` builds the choice."""
        return {
            "num_envs": self.num_envs,
            "device": self.device,
            "backend": self.backend,
            "frame_skip": self.frame_skip,
        }


def _small_env(env_id: str, device: str | torch.device, kwargs: dict[str, Any]) -> Any:
    """An eager 8-env env of ``env_id``, reset with seed 0: ``(env, obs)``."""
    env = gym.make_vec(entry(env_id).id, num_envs=8, device=device, backend="eager", **kwargs)
    return env, env.reset(seed=0)[0]


def _nbytes(t: torch.Tensor) -> int:
    return t.numel() * t.element_size()


def bytes_per_env(env_id: str, device: str | torch.device = "cpu", **kwargs: Any) -> int:
    """Estimated device bytes per env of a stepping env.

    Measured on a small batch: the shell state, the observation, reward and flags, times
    three (the state read, the state written, and the step's temporaries).
    """
    env, obs = _small_env(env_id, device, kwargs)
    n = obs.shape[0]
    leaves = torch.utils._pytree.tree_leaves(env.unwrapped.state)
    state_bytes = sum(_nbytes(t) for t in leaves if isinstance(t, torch.Tensor))
    out_bytes = _nbytes(obs) + n * (obs.element_size() + 2)
    env.close()
    return int(3 * (state_bytes + out_bytes) / n) + 1


def rollout_bytes_per_step(
    env_id: str,
    policy: Callable[[torch.Tensor], Any],
    device: str | torch.device = "cpu",
    **kwargs: Any,
) -> int:
    """Estimated device bytes per env and step of a ``RolloutCollector``'s buffers.

    The observation, the policy's action and other outputs, reward and two flags, times
    two (the buffers and the compiled scan's stacked outputs copied into them).
    """
    from gpuvec_envs.rollout import _split

    env, obs = _small_env(env_id, device, kwargs)
    with torch.no_grad():
        action, extras = _split(policy(obs))
    env.close()
    n = obs.shape[0]
    outs = _nbytes(obs) + _nbytes(action) + sum(_nbytes(v) for v in extras.values())
    return int(2 * (outs + n * (obs.element_size() + 2)) / n) + 1


def _actions(space: gym.Space, n: int, device: torch.device, count: int) -> list[torch.Tensor]:
    """``count`` batches of ``n`` random valid actions for ``space`` (seeded)."""
    gen = torch.Generator().manual_seed(0)
    if isinstance(space, gym.spaces.Discrete):
        draw = [torch.randint(int(space.n), (n,), generator=gen) + int(space.start)]
        draw += [torch.randint(int(space.n), (n,), generator=gen) + int(space.start)]
        return [draw[i % 2].to(device) for i in range(count)]
    low = torch.as_tensor(space.low, dtype=torch.float64)
    high = torch.as_tensor(space.high, dtype=torch.float64)
    dtype = torch.float64 if space.dtype == "float64" else torch.float32
    return [
        (low + (high - low) * torch.rand((n, *space.shape), generator=gen, dtype=torch.float64))
        .to(dtype)
        .to(device)
        for _ in range(count)
    ]


def _sync_fn(dev: torch.device) -> Callable[[], None]:
    """Waits for ``dev``'s queued work (CUDA), or does nothing (CPU)."""
    if dev.type == "cuda":
        return lambda: torch.cuda.synchronize(dev)
    return lambda: None


def _seconds_per_call(
    call: Callable[[int], Any], sync: Callable[[], None], min_time: float, repeats: int
) -> float:
    """Median seconds per ``call(i)`` over ``repeats`` blocks of ~``min_time / repeats`` s.

    A ~20 ms calibration run sizes the blocks; each block is synchronised at both ends.
    """
    gc.collect()
    sync()
    t0, n = time.perf_counter(), 0
    while n < 3 or time.perf_counter() - t0 < 0.02:
        call(n)
        n += 1
    sync()
    per_call = (time.perf_counter() - t0) / n
    calls = max(1, int(min_time / max(repeats, 1) / max(per_call, 1e-9)))
    dts = []
    for _ in range(max(repeats, 1)):
        sync()
        t0 = time.perf_counter()
        for i in range(calls):
            call(i)
        sync()
        dts.append((time.perf_counter() - t0) / calls)
    return statistics.median(dts)


def _open(
    env_id: str,
    num_envs: int,
    backend: str,
    dev: torch.device,
    frame_skip: int,
    kwargs: dict[str, Any],
) -> Any:
    """A candidate's env, without input checks, reset with seed 0."""
    env = gym.make_vec(
        env_id,
        num_envs=num_envs,
        device=dev,
        backend=backend,
        validate=False,
        frame_skip=frame_skip,
        **kwargs,
    )
    env.reset(seed=0)
    return env


def measure(
    env_id: str,
    num_envs: int,
    backend: str,
    *,
    device: str | torch.device = "cpu",
    frame_skip: int = 1,
    min_time: float = 0.5,
    repeats: int = 3,
    **kwargs: Any,
) -> dict[str, float]:
    """Env-steps/s of ``env.step`` (no validation): ``{"steps_per_s", "call_us", "setup_s"}``.

    ``setup_s`` is construction, compilation and the first step; then ``repeats`` blocks of
    about ``min_time / repeats`` seconds each are timed and the median block counts.
    ``kwargs`` go to ``gymnasium.make_vec``.
    """
    dev = torch.device(device)
    sync = _sync_fn(dev)
    t0 = time.perf_counter()
    env = _open(env_id, num_envs, backend, dev, frame_skip, kwargs)
    try:
        actions = _actions(env.single_action_space, num_envs, dev, 8)
        env.step(actions[0])
        sync()
        setup = time.perf_counter() - t0
        dt = _seconds_per_call(lambda i: env.step(actions[i % 8]), sync, min_time, repeats)
    finally:
        env.close()
    return {"steps_per_s": num_envs / dt, "call_us": dt * 1e6, "setup_s": setup}


def measure_rollout(
    env_id: str,
    num_envs: int,
    num_steps: int,
    backend: str,
    policy: Callable[[torch.Tensor], Any],
    *,
    device: str | torch.device = "cpu",
    frame_skip: int = 1,
    min_time: float = 0.5,
    repeats: int = 3,
    **kwargs: Any,
) -> dict[str, Any]:
    """Env-steps/s (N * T per call) of ``RolloutCollector(env, policy, T).collect()``.

    Returns ``{"steps_per_s", "call_us", "setup_s", "path"}``. The collector is built with
    the env's backend (``"eager"``: the loop, nothing compiled; ``"compile"``: the scan or,
    on CUDA, the CUDA graph) and warmed up (compiles, capture, ``scan="auto"``'s trials)
    before it is timed, so ``setup_s`` holds all compile time.
    """
    from gpuvec_envs.rollout import RolloutCollector

    dev = torch.device(device)
    sync = _sync_fn(dev)
    t0 = time.perf_counter()
    env = _open(env_id, num_envs, backend, dev, frame_skip, kwargs)
    try:
        eager = backend == "eager"
        collector = RolloutCollector(
            env, policy, num_steps, backend="eager" if eager else "compile"
        )
        collector.wait_compiled()
        for _ in range(1 if eager else 2 * (RolloutCollector.TRIALS + 1) + 1):
            collector.collect()
        sync()
        setup = time.perf_counter() - t0
        dt = _seconds_per_call(lambda i: collector.collect(), sync, min_time, repeats)
        path = collector.kind
    finally:
        env.close()
    return {
        "steps_per_s": num_envs * num_steps / dt,
        "call_us": dt * 1e6,
        "setup_s": setup,
        "path": path,
    }


def free_memory(device: str | torch.device) -> int:
    """Free bytes on ``device``.

    CUDA: ``torch.cuda.mem_get_info``'s free bytes plus what PyTorch's caching allocator
    holds unused; CPU: ``MemAvailable`` of ``/proc/meminfo`` (4 GiB where unreadable).
    """
    dev = torch.device(device)
    if dev.type == "cuda":
        cached = torch.cuda.memory_reserved(dev) - torch.cuda.memory_allocated(dev)
        return int(torch.cuda.mem_get_info(dev)[0]) + int(cached)
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 4 << 30


def _device_budget(dev: torch.device, fraction: float) -> tuple[int, str]:
    """``fraction`` of ``dev``'s free memory: ``(bytes, how it was found)``."""
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device={str(dev)!r}: CUDA is not available in this torch build")
    free = free_memory(dev)
    query = "torch.cuda.mem_get_info" if dev.type == "cuda" else "MemAvailable"
    return int(free * fraction), f"{fraction:g} x {free / 2**30:.2f} GiB free ({query})"


def _check_ints(name: str, values: Sequence[int]) -> tuple[int, ...]:
    """``values`` as a tuple of positive ints, or a ValueError naming ``name``."""
    out = tuple(values)
    if not out or not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in out):
        raise ValueError(f"{name} must be a non-empty sequence of positive ints, got {values!r}")
    return out


def _check_device(device: str | torch.device) -> torch.device:
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as exc:
        raise ValueError(f"device must be 'cpu' or 'cuda[:i]', got {device!r}") from exc
    if dev.type not in ("cpu", "cuda"):
        raise ValueError(f"device must be 'cpu' or 'cuda[:i]', got {device!r}")
    return dev


class _Clock:
    """The sweep's time budget: whether a candidate costing about its predecessor fits."""

    def __init__(self, budget: float | None) -> None:
        self.budget, self.start, self.last = budget, time.perf_counter(), 0.0

    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def refuse(self) -> str | None:
        """None if the next candidate fits the budget, else why it is skipped."""
        spent = self.elapsed()
        if self.budget is None or spent + self.last <= self.budget:
            return None
        return f"time budget: {spent:.1f} s spent + ~{self.last:.1f} s > {self.budget:g} s"

    def run(self, fn: Callable[[], dict[str, Any]]) -> dict[str, Any]:
        """``fn()``, remembering its cost as the next candidate's estimate."""
        t0 = time.perf_counter()
        out = fn()
        self.last = time.perf_counter() - t0
        return out


def _run(
    candidates: list[Candidate],
    clock: _Clock,
    dev: torch.device,
    fn: Callable[[Candidate], dict[str, Any]],
    *,
    first_runs: bool = False,
) -> None:
    """Fill in each candidate not skipped yet with ``fn``'s figures, unless time is up.

    With ``first_runs``, the first candidate that fits the memory runs whatever the time.
    """
    for c in candidates:
        if c.skipped is None and not (first_runs and _best(candidates) is None):
            c.skipped = clock.refuse()
        if c.skipped is not None:
            continue
        for k, v in clock.run(lambda c=c: fn(c)).items():
            setattr(c, k, v)
        c.score = c.steps_per_s * c.frame_skip
        gc.collect()
        if dev.type == "cuda":
            torch.cuda.empty_cache()  # the next candidate's memory


def _best(candidates: list[Candidate]) -> Candidate | None:
    measured = [c for c in candidates if c.score is not None]
    return max(measured, key=lambda c: c.score) if measured else None


def autotune(
    env_id: str,
    *,
    device: str | torch.device = "cpu",
    memory_budget: float | None = None,
    memory_fraction: float | None = None,
    num_envs: Sequence[int] | None = None,
    backends: Sequence[str] = ("compile",),
    frame_skips: Sequence[int] = (1,),
    rollout_steps: Sequence[int] = (),
    policy: Callable[[torch.Tensor], Any] | None = None,
    time_budget: float | None = 300.0,
    min_time: float = 0.5,
    repeats: int = 3,
    **kwargs: Any,
) -> AutotuneResult:
    """Measure a short sweep and return the fastest configuration within the budgets.

    Stage 1 times ``env.step`` for every backend x ``num_envs`` x ``frame_skips`` that
    fits the memory budget and keeps the most simulation steps/s (env-steps/s x
    frame_skip). Stage 2 (only with ``rollout_steps``) times ``RolloutCollector.collect()``
    of ``policy`` for each T at stage 1's choice (at the largest measured N whose env and
    rollout buffers fit, where stage 1's does not) and keeps the fastest. Candidates run
    smallest N first; one that would end past ``time_budget`` (estimated by the cost of
    the candidate before it) is skipped. Compile time is never timed; on CUDA each timed
    block is synchronised at both ends.

    Args:
        env_id: A gpuvec ID (``"gpuvec/CartPole-v1"`` or ``"CartPole-v1"``).
        device: ``"cpu"`` or ``"cuda[:i]"``.
        memory_budget: Bytes the env (and the rollout buffers) may use; default
            ``memory_fraction`` of the free memory (CUDA: ``torch.cuda.mem_get_info``).
        memory_fraction: Share of the free memory for the default budget (default 0.25 on
            the CPU, 0.5 on CUDA).
        num_envs: Batch sizes to try (default :data:`DEFAULT_NUM_ENVS` on the CPU,
            :data:`DEFAULT_CUDA_NUM_ENVS` on CUDA).
        backends: gpuvec backends to try (``"compile"``, ``"eager"``).
        frame_skips: ``frame_skip`` values to try. Default ``(1,)``: a frame skip > 1
            changes the MDP (the agent acts every k simulation steps), so it is tried only
            where the caller lists it.
        rollout_steps: Collector lengths T to try; default ``()``: T is not tuned (each T
            compiles a rollout).
        policy: The collector's policy, ``policy(obs) -> action`` on ``device`` (default:
            a fixed linear policy of the flattened observation).
        time_budget: Seconds the sweep may take (None: no limit). The first step
            candidate that fits the memory always runs; T is not tuned if no time is left.
        min_time: Timed seconds per candidate.
        repeats: Timed blocks per candidate (the median counts).
        **kwargs: Passed to ``gymnasium.make_vec`` (env params, ``max_episode_steps``, ...).

    Returns:
        The choice, the budgets, what was measured and every candidate's figures or why it
        was skipped (:class:`AutotuneResult`).

    Raises:
        ValueError: on a bad argument, or if no configuration fits the budget.
    """
    dev = _check_device(device)
    eid = entry(env_id).id
    sizes = _check_ints("num_envs", num_envs if num_envs is not None else _default_num_envs(dev))
    skips = _check_ints("frame_skips", frame_skips)
    steps = _check_ints("rollout_steps", rollout_steps) if len(rollout_steps) else ()
    if not backends or any(b not in BACKENDS for b in backends):
        raise ValueError(f"backends must be a non-empty subset of {BACKENDS}, got {backends!r}")
    own = sorted(set(kwargs) & set(_OWN_KWARGS))
    if own:
        raise ValueError(
            f"autotune sets {own} itself (use num_envs=, backends=, frame_skips=, device=)"
        )
    if time_budget is not None and not time_budget > 0:
        raise ValueError(f"time_budget must be positive seconds or None, got {time_budget!r}")
    if not (min_time > 0 and isinstance(repeats, int) and repeats >= 1):
        raise ValueError(f"need min_time > 0 and repeats >= 1, got {min_time!r}, {repeats!r}")
    if memory_budget is not None and memory_fraction is not None:
        raise ValueError("pass memory_budget or memory_fraction, not both")
    fraction = DEFAULT_MEMORY_FRACTION[dev.type] if memory_fraction is None else memory_fraction
    if not 0 < fraction <= 1:
        raise ValueError(f"memory_fraction must be in (0, 1], got {memory_fraction!r}")

    clock = _Clock(time_budget)
    if memory_budget is None:
        budget, source = _device_budget(dev, fraction)
    else:
        budget, source = int(memory_budget), "memory_budget argument"
    per_env = bytes_per_env(eid, dev, **kwargs)
    timing = {"device": dev, "min_time": min_time, "repeats": repeats, **kwargs}

    def fits(n: int, extra_per_env: int = 0) -> str | None:
        need = n * (per_env + extra_per_env)
        return None if need <= budget else f"memory: needs ~{need} bytes > budget {budget}"

    stage1 = [
        Candidate("step", b, n, fs, skipped=fits(n))
        for b in backends
        for n in sorted(sizes)
        for fs in skips
    ]
    _run(
        stage1,
        clock,
        dev,
        lambda c: measure(eid, c.num_envs, c.backend, frame_skip=c.frame_skip, **timing),
        first_runs=True,
    )
    best = _best(stage1)
    if best is None:
        raise ValueError(f"no configuration of {eid} fits memory_budget={budget} bytes")

    stage2: list[Candidate] = []
    if steps:
        if policy is None:
            policy = _default_policy(eid, dev, kwargs)
        per_step = rollout_bytes_per_step(eid, policy, dev, **kwargs)
        ns = sorted(
            {c.num_envs for c in stage1 if c.score is not None and c.num_envs <= best.num_envs},
            reverse=True,
        )
        for t in steps:
            n = next((n for n in ns if fits(n, t * per_step) is None), ns[-1])
            stage2.append(
                Candidate(
                    "rollout", best.backend, n, best.frame_skip, t, skipped=fits(n, t * per_step)
                )
            )
        _run(
            stage2,
            clock,
            dev,
            lambda c: measure_rollout(
                eid,
                c.num_envs,
                c.rollout_steps,
                c.backend,
                policy,
                frame_skip=c.frame_skip,
                **timing,
            ),
        )
    chosen = _best(stage2) or best
    return AutotuneResult(
        env_id=eid,
        device=str(dev),
        measured=_describe(min_time, repeats, bool(steps), policy),
        memory_budget=budget,
        memory_source=source,
        bytes_per_env=per_env,
        time_budget=time_budget,
        elapsed_s=clock.elapsed(),
        backend=chosen.backend,
        num_envs=chosen.num_envs,
        frame_skip=chosen.frame_skip,
        rollout_steps=chosen.rollout_steps,
        steps_per_s=chosen.steps_per_s,
        score=chosen.score,
        candidates=stage1 + stage2,
    )


def _default_num_envs(dev: torch.device) -> tuple[int, ...]:
    return DEFAULT_CUDA_NUM_ENVS if dev.type == "cuda" else DEFAULT_NUM_ENVS


def _default_policy(eid: str, dev: torch.device, kwargs: dict[str, Any]) -> torch.nn.Module:
    """The benchmarks' fixed linear policy for ``eid``'s spaces, on ``dev``."""
    from gpuvec_envs.bench.measure import LinearPolicy

    env, _ = _small_env(eid, dev, kwargs)
    policy = LinearPolicy(env.single_observation_space, env.single_action_space).to(dev)
    env.close()
    return policy


def _describe(min_time: float, repeats: int, rollouts: bool, policy: Any) -> str:
    text = (
        "score = simulation steps/s = env-steps/s x frame_skip; step stage: env.step with "
        f"random actions (validate=False); median of {repeats} blocks of ~{min_time / repeats:.3g}"
        " s after construction, compilation and a first call (setup_s)"
    )
    if rollouts:
        name = getattr(policy, "__qualname__", type(policy).__name__)
        text += f"; rollout stage: RolloutCollector.collect() of T steps with {name}"
    return text
