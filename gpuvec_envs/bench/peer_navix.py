"""navix (JAX MiniGrid) as a benchmark peer: ``jit(vmap(env.step))`` per call.

For the gpuvec MiniGrid IDs navix has, :func:`open_navix_step` times one jitted, vmapped
step of N envs per call (pre-drawn random actions, cycled, as for every other peer), with
navix's observation set to ours (the 7x7x3 symbolic first-person view; navix's default is
the whole grid) and navix's own autoreset.

navix 4.0.0 imports its agents (``rlax``, ``distrax``, ``tyro``, ``wandb``) from its package
``__init__``; the envs use none of them. Where they are not installed, :func:`load_navix`
enters empty placeholder modules for them, so that the envs import without them.
"""

from __future__ import annotations

import sys
import time
import types
from typing import Any

import numpy as np

from gpuvec_envs.bench.measure import Opened, Result

_POOL = 8  # pre-drawn action batches, cycled
#: gpuvec ID -> navix ID.
NAVIX_IDS = {
    "gpuvec/MiniGrid-Empty-8x8-v0": "Navix-Empty-8x8-v0",
    "gpuvec/MiniGrid-DoorKey-8x8-v0": "Navix-DoorKey-8x8-v0",
    "gpuvec/MiniGrid-FourRooms-v0": "Navix-FourRooms-v0",
}
_AGENT_ONLY = ("wandb", "wandb.util", "rlax", "distrax", "tyro")


class _Placeholder(types.ModuleType):
    """An absent agent-only dependency: every attribute is an inert class."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        cls = type(name, (), {"__init__": lambda self, *a, **k: None})
        setattr(self, name, cls)
        return cls


def load_navix() -> Any:
    """Import navix, with placeholders for its absent agent-only dependencies."""
    import importlib.util

    for name in _AGENT_ONLY:
        top = name.split(".")[0]
        if name in sys.modules:
            continue
        placeheld = isinstance(sys.modules.get(top), _Placeholder)
        if placeheld or (top not in sys.modules and importlib.util.find_spec(top) is None):
            module = _Placeholder(name)
            module.__path__ = []  # a package, for ``import wandb.util``
            sys.modules[name] = module
    import navix

    return navix


def navix_missing() -> str | None:
    """Why the navix peer cannot run here (``None`` when jax and navix import)."""
    try:
        load_navix()
        import jax  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any import failure means "no peer"
        return f"navix peer skipped: {type(exc).__name__}: {exc}"
    return None


def open_navix_step(env_id: str, num_envs: int, *, seed: int = 0) -> Opened:
    """Navix's ``jit(vmap(env.step))`` on N envs, set up to time (one call = N env-steps)."""
    import jax
    import jax.numpy as jnp

    nx = load_navix()
    if env_id not in NAVIX_IDS:
        raise ValueError(f"navix has no counterpart of {env_id!r}; it has {sorted(NAVIX_IDS)}")
    t0 = time.perf_counter()
    env = nx.make(NAVIX_IDS[env_id], observation_fn=nx.observations.symbolic_first_person)
    n_actions = int(env.action_space.maximum) + 1
    timestep = jax.jit(jax.vmap(env.reset))(jax.random.split(jax.random.PRNGKey(seed), num_envs))
    step = jax.jit(jax.vmap(env.step))
    rng = np.random.default_rng(seed)
    actions = [
        jnp.asarray(rng.integers(0, n_actions, size=num_envs).astype(np.int32))
        for _ in range(_POOL)
    ]
    carry = {"t": timestep}

    def call(i: int) -> None:
        carry["t"] = step(carry["t"], actions[i % _POOL])

    call(0)
    jax.block_until_ready(carry["t"])
    setup = time.perf_counter() - t0
    note = "jit(vmap(step)), first-person 7x7x3 observation"
    result = Result(env_id, "navix-step", num_envs, 0.0, 0.0, setup, [], 1, note)
    return Opened(result, call, lambda: None, lambda: jax.block_until_ready(carry["t"]))


def versions() -> dict[str, Any]:
    """Navix's version (``{}`` when not installed)."""
    if navix_missing() is not None:
        return {}
    import importlib.metadata as md

    return {"navix": md.version("navix")}
