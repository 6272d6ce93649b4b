"""Pick ``num_envs`` and backend by measuring them on this machine (the Spreeze idea).

:func:`autotune` runs a short sweep of batch sizes and backends for one env ID, skips
configurations whose estimated memory exceeds the budget, and returns the one with the most
env-steps/s. Also available as ``gpuvec-bench --autotune``. It times steps itself
(:func:`measure`), so that importing it does not import the benchmark CLI.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import torch

from gpuvec_envs.registry import entry

DEFAULT_NUM_ENVS = (64, 1024, 4096, 16384, 65536)


def bytes_per_env(env_id: str, device: str | torch.device = "cpu", **kwargs: Any) -> int:
    """Estimated device bytes per env of a stepping env.

    Measured on a small batch: the shell state, the observation, reward and flags, times
    three (the state read, the state written, and the step's temporaries).
    """
    n = 8
    env = gym.make_vec(entry(env_id).id, num_envs=n, device=device, backend="eager", **kwargs)
    obs, _ = env.reset(seed=0)
    leaves = [
        t
        for t in torch.utils._pytree.tree_leaves(env.unwrapped.state)
        if isinstance(t, torch.Tensor)
    ]
    state_bytes = sum(t.numel() * t.element_size() for t in leaves)
    out_bytes = obs.numel() * obs.element_size() + n * (obs.element_size() + 2)
    env.close()
    return int(3 * (state_bytes + out_bytes) / n) + 1


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


def measure(
    env_id: str,
    num_envs: int,
    backend: str,
    *,
    device: str | torch.device = "cpu",
    frame_skip: int = 1,
    min_time: float = 0.5,
    repeats: int = 3,
) -> dict[str, float]:
    """Steps/s of one configuration (no validation): ``{"steps_per_s", "call_us", "setup_s"}``.

    ``setup_s`` is construction, compilation and the first step; then ``repeats`` blocks of
    about ``min_time / repeats`` seconds each are timed and the median block counts.
    """
    dev = torch.device(device)
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    t0 = time.perf_counter()
    env = gym.make_vec(
        env_id,
        num_envs=num_envs,
        device=dev,
        backend=backend,
        validate=False,
        frame_skip=frame_skip,
    )
    try:
        env.reset(seed=0)
        actions = _actions(env.single_action_space, num_envs, dev, 8)
        env.step(actions[0])
        sync()
        setup = time.perf_counter() - t0
        gc.collect()
        t0, n = time.perf_counter(), 0
        while n < 3 or time.perf_counter() - t0 < 0.02:
            env.step(actions[n % 8])
            n += 1
        sync()
        per_call = (time.perf_counter() - t0) / n
        calls = max(1, int(min_time / max(repeats, 1) / max(per_call, 1e-9)))
        dts = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for i in range(calls):
                env.step(actions[i % 8])
            sync()
            dts.append((time.perf_counter() - t0) / calls)
    finally:
        env.close()
    dt = statistics.median(dts)
    return {"steps_per_s": num_envs / dt, "call_us": dt * 1e6, "setup_s": setup}


def free_memory(device: str | torch.device) -> int:
    """Free bytes on ``device`` (CUDA: ``mem_get_info``; CPU: ``MemAvailable``)."""
    dev = torch.device(device)
    if dev.type == "cuda":
        return int(torch.cuda.mem_get_info(dev)[0])
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 4 << 30


def autotune(
    env_id: str,
    *,
    device: str | torch.device = "cpu",
    memory_budget: float | None = None,
    num_envs: Sequence[int] = DEFAULT_NUM_ENVS,
    backends: Sequence[str] = ("compile",),
    min_time: float = 0.5,
    repeats: int = 3,
    **kwargs: Any,
) -> dict[str, Any]:
    """Measure a short sweep and return the fastest configuration within the budget.

    Args:
        env_id: A gpuvec ID (``"gpuvec/CartPole-v1"`` or ``"CartPole-v1"``).
        device: Torch device to measure on.
        memory_budget: Bytes the env may use (default: a quarter of the free memory).
        num_envs: Batch sizes to try.
        backends: gpuvec backends to try (``"compile"``, ``"eager"``).
        min_time: Timed seconds per configuration.
        repeats: Timed blocks per configuration (the median counts).
        **kwargs: Passed to ``gymnasium.make_vec`` (e.g. ``frame_skip``).

    Returns:
        ``{"env_id", "device", "backend", "num_envs", "steps_per_s", "memory_budget",
        "bytes_per_env", "results"}``; ``results`` lists every measured configuration
        (``steps_per_s``, ``call_us``, ``setup_s``) and the skipped ones (``"skipped"``).

    Raises:
        ValueError: if no configuration fits the budget.
    """
    eid = entry(env_id).id
    dev = torch.device(device)
    budget = float(memory_budget) if memory_budget is not None else free_memory(dev) / 4
    per_env = bytes_per_env(eid, dev, **kwargs)
    results: list[dict[str, Any]] = []
    for backend in backends:
        for n in sorted(num_envs):
            row: dict[str, Any] = {"backend": backend, "num_envs": n}
            if n * per_env > budget:
                row["skipped"] = f"needs ~{n * per_env} bytes > budget {int(budget)}"
                results.append(row)
                continue
            row.update(
                measure(
                    eid,
                    n,
                    backend,
                    device=dev,
                    min_time=min_time,
                    repeats=repeats,
                    frame_skip=kwargs.get("frame_skip", 1),
                )
            )
            results.append(row)
    measured = [r for r in results if "steps_per_s" in r]
    if not measured:
        raise ValueError(f"no configuration of {eid} fits memory_budget={int(budget)} bytes")
    best = max(measured, key=lambda r: r["steps_per_s"])
    return {
        "env_id": eid,
        "device": str(dev),
        "backend": best["backend"],
        "num_envs": best["num_envs"],
        "steps_per_s": best["steps_per_s"],
        "memory_budget": int(budget),
        "bytes_per_env": per_env,
        "results": results,
    }
