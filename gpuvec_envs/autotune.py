"""Pick ``num_envs`` and backend by measuring them on this machine (the Spreeze idea).

:func:`autotune` runs a short sweep of batch sizes and backends for one env ID, skips
configurations whose estimated memory exceeds the budget, and returns the one with the most
env-steps/s. Also available as ``gpuvec-bench --autotune``.
"""

from __future__ import annotations

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
    from gpuvec_envs.bench import bench_gpuvec

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
            r = bench_gpuvec(
                eid,
                n,
                backend,
                device=str(dev),
                min_time=min_time,
                repeats=repeats,
                frame_skip=kwargs.get("frame_skip", 1),
            )
            row.update(steps_per_s=r.steps_per_s, call_us=r.call_us, setup_s=r.setup_s)
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
