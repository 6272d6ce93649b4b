"""craftax (JAX) as a benchmark peer of ``gpuvec/Craftax-Classic-Symbolic-v1``.

:func:`open_craftax_step` times craftax 1.6.1's ``jit(vmap(env.step))`` on N envs per call
(pre-drawn random actions and keys, cycled, as for every other peer), either
``CraftaxClassicSymbolicEnvNoAutoReset`` (no world generation in the step: craftax's most
favourable path) or ``CraftaxClassicSymbolicEnv``, whose step generates a new world for
every env at every step and selects it where the episode ended.

Install with ``pip install -c constraints.txt -e ".[craftax]"`` followed by
``pip install --no-deps craftax==1.6.1``. Without them :func:`craftax_missing` returns the
reason and the report notes it.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from gpuvec_envs.bench.measure import Opened, Result

_POOL = 8  # pre-drawn action and key batches, cycled
#: gpuvec ID -> craftax's classes (without and with its autoreset).
CRAFTAX_IDS = {
    "gpuvec/Craftax-Classic-Symbolic-v1": (
        "CraftaxClassicSymbolicEnvNoAutoReset",
        "CraftaxClassicSymbolicEnv",
    ),
}


def craftax_missing() -> str | None:
    """Why the craftax peer cannot run here (``None`` when jax and craftax import)."""
    try:
        import craftax.craftax_classic.envs.craftax_symbolic_env  # noqa: F401
        import jax  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any import failure means "no peer"
        return f"craftax peer skipped: {type(exc).__name__}: {exc}"
    return None


def versions() -> dict[str, Any]:
    """The jax and craftax versions (``{}`` when not installed)."""
    if craftax_missing() is not None:
        return {}
    import importlib.metadata as md

    return {"jax": md.version("jax"), "craftax": md.version("craftax")}


def open_craftax_step(
    env_id: str, num_envs: int, *, autoreset: bool = False, seed: int = 0
) -> Opened:
    """Time craftax's ``jit(vmap(env.step))`` on N envs (one call = N env-steps).

    ``setup_s`` holds the reset (jit and one batch of worlds) and the first two step calls
    (the step is traced twice: the second call's state types differ from the reset's);
    ``first_step_s`` those two step calls alone.
    """
    import jax
    from craftax.craftax_classic.envs import craftax_symbolic_env as mod

    if env_id not in CRAFTAX_IDS:
        raise ValueError(f"craftax has no counterpart of {env_id!r}; it has {sorted(CRAFTAX_IDS)}")
    env = getattr(mod, CRAFTAX_IDS[env_id][int(autoreset)])()
    params = env.default_params
    t0 = time.perf_counter()
    key = jax.random.PRNGKey(seed)
    key, k_reset = jax.random.split(key)
    reset = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))
    step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))
    _obs, state = reset(jax.random.split(k_reset, num_envs), params)
    jax.block_until_ready(state)
    rng = np.random.default_rng(seed)
    actions = [
        jax.numpy.asarray(rng.integers(0, 17, num_envs).astype(np.int32)) for _ in range(_POOL)
    ]
    keys = [jax.random.split(k, num_envs) for k in jax.random.split(key, _POOL)]
    carry = {"state": state, "out": None}

    def call(i: int) -> None:
        out = step(keys[i % _POOL], carry["state"], actions[i % _POOL], params)
        carry["state"], carry["out"] = out[1], out

    t1 = time.perf_counter()
    for i in range(2):
        call(i)
        jax.block_until_ready(carry["out"])
    t2 = time.perf_counter()

    def sync() -> None:
        jax.block_until_ready(carry["out"])

    impl = "craftax-autoreset" if autoreset else "craftax-step"
    note = "jit(vmap(step)), " + ("autoreset" if autoreset else "no autoreset")
    result = Result(env_id, impl, num_envs, 0.0, 0.0, t2 - t0, [], 1, note, first_step_s=t2 - t1)
    return Opened(result, call, lambda: None, sync)
