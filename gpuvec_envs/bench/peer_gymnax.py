"""gymnax (JAX) as a benchmark peer: ``jit(vmap(step))`` per call and a ``lax.scan`` rollout.

gymnax implements the five classic-control envs and the five MinAtar games. For a gpuvec ID
whose reference gymnax has, :func:`open_gymnax_step` times one jitted, vmapped step of N
envs per call (pre-drawn random actions and keys, cycled, as for every other peer), and
:func:`open_gymnax_rollout` times one jitted ``lax.scan`` of T steps of N envs under
:func:`linear_policy_jax`, the counterpart of :class:`gpuvec_envs.bench.suites.LinearPolicy`
used with :class:`gpuvec_envs.rollout.RolloutCollector`. gymnax's step autoresets in the
same step, computing a reset for every env as gpuvec does.

Install with ``pip install -c constraints.txt -e ".[peers]"`` followed by
``pip install --no-deps gymnax==1.0.1`` (gymnax 1.0.1 declares ``gymnasium<1.4`` but runs
with 1.4). Without them :func:`gymnax_missing` returns the reason and the report notes it.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from gpuvec_envs.bench.measure import Opened, Result, policy_weights

_POOL = 8  # pre-drawn action and key batches, cycled

#: gpuvec ID -> gymnax ID. gymnax's MinAtar games use the minimal action sets (our ``-v1``).
GYMNAX_IDS = {
    "gpuvec/CartPole-v1": "CartPole-v1",
    "gpuvec/Pendulum-v1": "Pendulum-v1",
    "gpuvec/MountainCar-v0": "MountainCar-v0",
    "gpuvec/MountainCarContinuous-v0": "MountainCarContinuous-v0",
    "gpuvec/Acrobot-v1": "Acrobot-v1",
    "gpuvec/MinAtar-Asterix-v1": "Asterix-MinAtar",
    "gpuvec/MinAtar-Breakout-v1": "Breakout-MinAtar",
    "gpuvec/MinAtar-Freeway-v1": "Freeway-MinAtar",
    "gpuvec/MinAtar-Seaquest-v1": "Seaquest-MinAtar",
    "gpuvec/MinAtar-SpaceInvaders-v1": "SpaceInvaders-MinAtar",
}


def gymnax_missing() -> str | None:
    """Why the gymnax peer cannot run here (``None`` when jax and gymnax import)."""
    try:
        import gymnax  # noqa: F401
        import jax  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any import failure means "no peer"
        return f"gymnax peer skipped: {type(exc).__name__}: {exc}"
    return None


def versions() -> dict[str, Any]:
    """jax, jaxlib and gymnax versions and jax's devices (``{}`` when not installed)."""
    if gymnax_missing() is not None:
        return {}
    import importlib.metadata as md

    import jax

    return {
        "jax": jax.__version__,
        "jaxlib": md.version("jaxlib"),
        "gymnax": md.version("gymnax"),
        "jax_devices": [str(d) for d in jax.devices()],
    }


def _make(env_id: str) -> tuple[Any, Any]:
    import gymnax

    if env_id not in GYMNAX_IDS:
        raise ValueError(f"gymnax has no counterpart of {env_id!r}; it has {sorted(GYMNAX_IDS)}")
    return gymnax.make(GYMNAX_IDS[env_id])


def _random_actions(space: Any, num_envs: int, rng: np.random.Generator) -> list:
    """``_POOL`` batches of uniform random actions, shape (N, *action_shape)."""
    import jax.numpy as jnp

    out = []
    for _ in range(_POOL):
        if hasattr(space, "n"):
            a = rng.integers(0, int(space.n), size=num_envs).astype(np.int32)
        else:
            low, high = np.asarray(space.low), np.asarray(space.high)
            u = rng.random((num_envs, *space.shape))
            a = (low + (high - low) * u).astype(np.float32)
        out.append(jnp.asarray(a))
    return out


def linear_policy_jax(weights: Any, obs: Any, space: Any) -> Any:
    """A fixed linear policy on flattened float observations, as ``LinearPolicy`` in torch.

    Args:
        weights: (obs_dim, A) float32 for Discrete(A) (argmax), (obs_dim, k) for a Box of
            k dims (``tanh`` scaled to the bounds).
        obs: (N, *obs_shape), any dtype.
        space: The env's single action space (a gymnax space).

    Returns:
        Actions, (N,) int32 or (N, k) float32.
    """
    import jax.numpy as jnp

    x = obs.reshape(obs.shape[0], -1).astype(jnp.float32) @ weights
    if hasattr(space, "n"):
        return jnp.argmax(x, axis=-1).astype(jnp.int32)
    low, high = jnp.asarray(space.low), jnp.asarray(space.high)
    return low + (high - low) * (jnp.tanh(x) + 1.0) * 0.5


def _action_dim(space: Any) -> int:
    return int(space.n) if hasattr(space, "n") else int(np.prod(space.shape))


def open_gymnax_step(env_id: str, num_envs: int, *, seed: int = 0) -> Opened:
    """Gymnax's ``jit(vmap(env.step))`` on N envs, set up to time (one call = N env-steps)."""
    import jax

    env, params = _make(env_id)
    t0 = time.perf_counter()
    key = jax.random.PRNGKey(seed)
    key, k_reset = jax.random.split(key)
    reset = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))
    step = jax.jit(jax.vmap(env.step, in_axes=(0, 0, 0, None)))
    _obs, state = reset(jax.random.split(k_reset, num_envs), params)
    actions = _random_actions(env.action_space(params), num_envs, np.random.default_rng(seed))
    keys = [jax.random.split(k, num_envs) for k in jax.random.split(key, _POOL)]
    carry = {"state": state, "out": None}

    def call(i: int) -> None:
        out = step(keys[i % _POOL], carry["state"], actions[i % _POOL], params)
        carry["state"], carry["out"] = out[1], out

    call(0)
    jax.block_until_ready(carry["out"])
    setup = time.perf_counter() - t0

    def sync() -> None:
        jax.block_until_ready(carry["out"])

    result = Result(env_id, "gymnax-step", num_envs, 0.0, 0.0, setup, [], 1, "jit(vmap(step))")
    return Opened(result, call, lambda: None, sync)


def open_gymnax_rollout(env_id: str, num_envs: int, num_steps: int, *, seed: int = 0) -> Opened:
    """A jitted ``lax.scan`` of ``num_steps`` steps of N envs under the linear policy.

    One call is ``num_steps * num_envs`` env-steps; its result's ``num_envs`` is N (the
    caller scales rates by ``num_steps``). The rollout returns stacked (T, N, ...)
    observations, actions, rewards and both flags, as :class:`RolloutCollector` fills its buffers.
    """
    import jax
    import jax.numpy as jnp

    env, params = _make(env_id)
    t0 = time.perf_counter()
    space = env.action_space(params)
    obs_dim = int(np.prod(env.observation_space(params).shape))
    weights = jnp.asarray(policy_weights(obs_dim, _action_dim(space), seed))
    vstep = jax.vmap(env.step, in_axes=(0, 0, 0, None))

    def rollout(key: Any, state: Any, obs: Any) -> Any:
        def body(carry: Any, _: Any) -> Any:
            key, state, obs = carry
            key, k_step = jax.random.split(key)
            action = linear_policy_jax(weights, obs, space)
            next_obs, state, reward, terminated, truncated, _info = vstep(
                jax.random.split(k_step, num_envs), state, action, params
            )
            return (key, state, next_obs), (obs, action, reward, terminated, truncated)

        carry, traj = jax.lax.scan(body, (key, state, obs), None, length=num_steps)
        return carry, traj

    run = jax.jit(rollout)
    key = jax.random.PRNGKey(seed)
    key, k_reset = jax.random.split(key)
    obs, state = jax.jit(jax.vmap(env.reset, in_axes=(0, None)))(
        jax.random.split(k_reset, num_envs), params
    )
    carry = {"c": (key, state, obs), "traj": None}

    def call(_i: int) -> None:
        carry["c"], carry["traj"] = run(*carry["c"])

    call(0)
    jax.block_until_ready(carry["traj"])
    setup = time.perf_counter() - t0

    def sync() -> None:
        jax.block_until_ready(carry["traj"])

    note = f"lax.scan T={num_steps}, linear policy"
    result = Result(env_id, "gymnax-scan", num_envs, 0.0, 0.0, setup, [], 1, note)
    return Opened(result, call, lambda: None, sync)
