"""The one table of registered env IDs; registration and tests both iterate it.

An entry may carry compiler options for its env (:class:`~gpuvec_envs.compiler.
CompilerOptions` overrides, e.g. inductor settings); ``make_vec`` applies them below the
caller's ``compiler_options``. Envs built directly with ``GpuVecEnv(MyDef(), n)`` get the
defaults.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec
from gymnasium.vector import AutoresetMode

from gpuvec_envs.core.arguments import as_autoreset_mode
from gpuvec_envs.core.env import EnvDef
from gpuvec_envs.core.single import GpuEnv
from gpuvec_envs.core.vector import GpuVecEnv
from gpuvec_envs.core.wrapper import structured


@dataclasses.dataclass(frozen=True)
class EnvEntry:
    """One registered ID."""

    id: str  # "gpuvec/<Name>-v<k>"
    env_def: str  # "module:EnvDefClass", imported on first make
    max_episode_steps: int | None
    reference: str | None = None  # the gymnasium/minatar ID it mirrors
    kwargs: dict[str, Any] = dataclasses.field(default_factory=dict)
    compiler: dict[str, Any] = dataclasses.field(default_factory=dict)  # CompilerOptions names


#: Seaquest's step and observation compile to one loop over the batch (with the
#: ``wide_fusion`` default; with inductor's cap of 64 the main loop takes 10.7k instead of
#: 7.4k instructions per 16 envs) that reads each buffer where it is used.
_SEAQUEST = {
    "inductor": {
        "realize_reads_threshold": 1,
        "cpp.enable_tiling_heuristics": False,
    }
}
#: Breakout's per-cell observation loop is ~2x longer with the state written in place.
_BREAKOUT = {"in_place": False}
#: MiniGrid resets broadcast per-env draws into (N, H * W) grid kernels; with single
#: wrapping products the hash is cheap enough for inductor to inline it into the grid
#: loop, where it is recomputed per cell vector (FourRooms N=4096, 1 thread: 17.5 ms a
#: step against 6.4-9.4 ms with the 16-bit products).
_MINIGRID = {"wrapping_mul": False}


def _minigrid(name: str, cls: str, max_steps: int, **kwargs: Any) -> EnvEntry:
    """Entry of ``gpuvec/MiniGrid-<name>-v0``, mirroring ``MiniGrid-<name>-v0``."""
    return EnvEntry(
        f"gpuvec/MiniGrid-{name}-v0",
        f"gpuvec_envs.envs.minigrid.{cls}",
        max_steps,
        f"MiniGrid-{name}-v0",
        kwargs={"max_steps": max_steps, **kwargs},
        compiler=_MINIGRID,
    )


#: MuJoCo steps call the physics engine as torch custom ops, which the lean_wrapper pass
#: cannot rewrite (it would report that it did not apply). On CUDA the engine is MuJoCo
#: Warp, whose step cannot sit inside a torch CUDA graph capture (its conditional graph
#: nodes restart the capture; see envs/mujoco/_warp.py): no CUDA graph around the step.
_MUJOCO: dict[str, Any] = {"lean_wrapper": False, "cuda_graph": False}

_DYN = "dynamic_obstacles:DynamicObstacles"
#: minigrid 3.2.0's IDs: the reference's ``max_steps`` is both the reward's horizon and
#: the shell's time limit.
MINIGRID: tuple[EnvEntry, ...] = (
    *(_minigrid(f"Empty-{s}x{s}", "empty:Empty", 4 * s * s, size=s) for s in (5, 6, 8, 16)),
    *(
        _minigrid(f"Empty-Random-{s}x{s}", "empty:Empty", 4 * s * s, size=s, agent_start_pos=None)
        for s in (5, 6)
    ),
    *(_minigrid(f"DoorKey-{s}x{s}", "doorkey:DoorKey", 10 * s * s, size=s) for s in (5, 6, 8, 16)),
    _minigrid("FourRooms", "fourrooms:FourRooms", 100),
    *(_minigrid(f"LavaGapS{s}", "lava:LavaGap", 4 * s * s, size=s) for s in (5, 6, 7)),
    *(
        _minigrid(
            f"{name}S{s}N{n}", "lava:Crossing", 4 * s * s, size=s, num_crossings=n, obstacle=o
        )
        for name, o in (("LavaCrossing", "lava"), ("SimpleCrossing", "wall"))
        for s, n in ((9, 1), (9, 2), (9, 3), (11, 5))
    ),
    *(
        _minigrid(f"Dynamic-Obstacles-{s}x{s}", _DYN, 4 * s * s, size=s, n_obstacles=n)
        for s, n in ((5, 2), (6, 3), (8, 4), (16, 8))
    ),
    *(
        _minigrid(
            f"Dynamic-Obstacles-Random-{s}x{s}",
            _DYN,
            4 * s * s,
            size=s,
            n_obstacles=n,
            agent_start_pos=None,
        )
        for s, n in ((5, 2), (6, 3))
    ),
    _minigrid("Unlock", "unlock:Unlock", 288),
    *(
        _minigrid(
            f"KeyCorridorS{s}R{r}",
            "keycorridor:KeyCorridor",
            30 * s * s,
            room_size=s,
            num_rows=r,
        )
        for s, r in ((3, 1), (3, 2), (3, 3), (4, 3), (5, 3), (6, 3))
    ),
)


def _mujoco(name: str, module: str, cls: str, max_steps: int = 1000) -> EnvEntry:
    """Entry of ``gpuvec/<name>-v5``, mirroring gymnasium's ``<name>-v5``."""
    return EnvEntry(
        f"gpuvec/{name}-v5",
        f"gpuvec_envs.envs.mujoco.{module}:{cls}",
        max_steps,
        f"{name}-v5",
        compiler=_MUJOCO,
    )


#: gymnasium 1.4's MuJoCo v5 tasks (need ``pip install "gpuvec_envs[mujoco]"``).
MUJOCO: tuple[EnvEntry, ...] = (
    _mujoco("Ant", "ant", "Ant"),
    _mujoco("HalfCheetah", "half_cheetah", "HalfCheetah"),
    _mujoco("Hopper", "hopper", "Hopper"),
    _mujoco("Humanoid", "humanoid", "Humanoid"),
    _mujoco("HumanoidStandup", "humanoid_standup", "HumanoidStandup"),
    _mujoco("InvertedDoublePendulum", "inverted_double_pendulum", "InvertedDoublePendulum"),
    _mujoco("InvertedPendulum", "inverted_pendulum", "InvertedPendulum"),
    _mujoco("Pusher", "pusher", "Pusher", 100),
    _mujoco("Reacher", "reacher", "Reacher", 50),
    _mujoco("Swimmer", "swimmer", "Swimmer"),
    _mujoco("Walker2d", "walker2d", "Walker2d"),
)

REGISTRY: tuple[EnvEntry, ...] = (
    EnvEntry(
        "gpuvec/CartPole-v0", "gpuvec_envs.envs.classic.cartpole:CartPole", 200, "CartPole-v0"
    ),
    EnvEntry(
        "gpuvec/CartPole-v1", "gpuvec_envs.envs.classic.cartpole:CartPole", 500, "CartPole-v1"
    ),
    # classic-control suite
    EnvEntry(
        "gpuvec/Pendulum-v1", "gpuvec_envs.envs.classic.pendulum:Pendulum", 200, "Pendulum-v1"
    ),
    EnvEntry(
        "gpuvec/MountainCar-v0",
        "gpuvec_envs.envs.classic.mountain_car:MountainCar",
        200,
        "MountainCar-v0",
    ),
    EnvEntry(
        "gpuvec/MountainCarContinuous-v0",
        "gpuvec_envs.envs.classic.continuous_mountain_car:ContinuousMountainCar",
        999,
        "MountainCarContinuous-v0",
    ),
    EnvEntry("gpuvec/Acrobot-v1", "gpuvec_envs.envs.classic.acrobot:Acrobot", 500, "Acrobot-v1"),
    # MinAtar
    EnvEntry(
        "gpuvec/MinAtar-Asterix-v0",
        "gpuvec_envs.envs.minatar.asterix:Asterix",
        None,
        "MinAtar/Asterix-v0",
    ),
    EnvEntry(
        "gpuvec/MinAtar-Asterix-v1",
        "gpuvec_envs.envs.minatar.asterix:Asterix",
        None,
        "MinAtar/Asterix-v1",
        kwargs={"minimal_action_set": True},
    ),
    EnvEntry(
        "gpuvec/MinAtar-Breakout-v0",
        "gpuvec_envs.envs.minatar.breakout:Breakout",
        None,
        "MinAtar/Breakout-v0",
        compiler=_BREAKOUT,
    ),
    EnvEntry(
        "gpuvec/MinAtar-Breakout-v1",
        "gpuvec_envs.envs.minatar.breakout:Breakout",
        None,
        "MinAtar/Breakout-v1",
        kwargs={"minimal_action_set": True},
        compiler=_BREAKOUT,
    ),
    EnvEntry(
        "gpuvec/MinAtar-Freeway-v0",
        "gpuvec_envs.envs.minatar.freeway:Freeway",
        None,
        "MinAtar/Freeway-v0",
    ),
    EnvEntry(
        "gpuvec/MinAtar-Freeway-v1",
        "gpuvec_envs.envs.minatar.freeway:Freeway",
        None,
        "MinAtar/Freeway-v1",
        kwargs={"minimal_action_set": True},
    ),
    EnvEntry(
        "gpuvec/MinAtar-SpaceInvaders-v0",
        "gpuvec_envs.envs.minatar.space_invaders:SpaceInvaders",
        None,
        "MinAtar/SpaceInvaders-v0",
    ),
    EnvEntry(
        "gpuvec/MinAtar-SpaceInvaders-v1",
        "gpuvec_envs.envs.minatar.space_invaders:SpaceInvaders",
        None,
        "MinAtar/SpaceInvaders-v1",
        kwargs={"minimal_action_set": True},
    ),
    EnvEntry(
        "gpuvec/MinAtar-Seaquest-v0",
        "gpuvec_envs.envs.minatar.seaquest:Seaquest",
        None,
        "MinAtar/Seaquest-v0",
        compiler=_SEAQUEST,
    ),
    EnvEntry(
        "gpuvec/MinAtar-Seaquest-v1",
        "gpuvec_envs.envs.minatar.seaquest:Seaquest",
        None,
        "MinAtar/Seaquest-v1",
        kwargs={"minimal_action_set": True},
        compiler=_SEAQUEST,
    ),
    *MINIGRID,
    *MUJOCO,
    # Craftax-Classic (craftax 1.6.1): the time limit is craftax's max_timesteps. Eager by
    # default: its compiled CPU step (~5 min to compile on 2 cores) runs slower than eager.
    EnvEntry(
        "gpuvec/Craftax-Classic-Symbolic-v1",
        "gpuvec_envs.envs.craftax.classic:CraftaxClassicSymbolic",
        10000,
        "Craftax-Classic-Symbolic-v1",
        kwargs={"backend": "eager"},
    ),
    EnvEntry(
        "gpuvec/Craftax-Classic-Pixels-v1",
        "gpuvec_envs.envs.craftax.classic:CraftaxClassicPixels",
        10000,
        "Craftax-Classic-Pixels-v1",
        kwargs={"backend": "eager"},
    ),
)


def entry(env_id: str) -> EnvEntry:
    """The registry entry of ``env_id`` (with or without the ``gpuvec/`` namespace)."""
    for e in REGISTRY:
        if env_id in (e.id, e.id.removeprefix("gpuvec/")):
            return e
    raise KeyError(f"no gpuvec env {env_id!r}; known: {[e.id for e in REGISTRY]}")


def compiler_options_for(env_id: str, overrides: Any = None) -> Any:
    """``env_id``'s registered compiler options (a dict) with ``overrides`` on top.

    A :class:`~gpuvec_envs.compiler.CompilerOptions` (or any non-dict, which
    :class:`GpuVecEnv` then rejects) in ``overrides`` is returned as it is.
    """
    if overrides is None or isinstance(overrides, Mapping):
        return {**entry(env_id).compiler, **(overrides or {})}
    return overrides


def vector_env(env_def: EnvDef | str, *args: Any, **kwargs: Any) -> Any:
    """A :class:`GpuVecEnv` of ``env_def`` as ``make_vec`` returns it.

    In a :class:`~gpuvec_envs.core.wrapper.StructuredObservation` if the env has an
    observation view (MiniGrid's ``obs_mode="dict"``).
    """
    return structured(GpuVecEnv(env_def, *args, **kwargs))


def _vector_env(env_id: str, *args: Any, compiler_options: Any = None, **kwargs: Any) -> Any:
    """``make_vec``'s entry point: :func:`vector_env` with the entry's compiler options."""
    options = compiler_options_for(env_id, compiler_options)
    return vector_env(entry(env_id).env_def, *args, compiler_options=options, **kwargs)


def gym_register(
    env_id: str,
    env_def: Any,
    max_episode_steps: int | None,
    kwargs: dict[str, Any],
    vector_entry_point: Any = None,
) -> EnvSpec:
    """Register one ID with gymnasium: a single-env ``entry_point`` and a vector one.

    Args:
        env_id: The gymnasium ID.
        env_def: An :class:`~gpuvec_envs.core.env.EnvDef` instance or ``"module:Class"``.
        max_episode_steps: The time limit (``TimeLimit`` for ``make``, the shell's own for
            ``make_vec``), or ``None``.
        kwargs: Default keyword arguments of every ``make``/``make_vec`` call.
        vector_entry_point: ``make_vec``'s entry point (default: :func:`vector_env` of
            ``env_def``).

    Returns:
        The new spec.
    """
    gym.register(
        id=env_id,
        entry_point=functools.partial(GpuEnv, env_def),
        vector_entry_point=vector_entry_point or functools.partial(vector_env, env_def),
        max_episode_steps=max_episode_steps,
        kwargs=dict(kwargs),
    )
    return gym.spec(env_id)


def gym_id(env_id: str) -> str:
    """The gymnasium ID of a built-in env (``gpuvec/`` namespace optional) or a registered one.

    Raises:
        KeyError: if ``env_id`` is neither.
    """
    try:
        return entry(env_id).id
    except KeyError:
        if env_id in gym.registry:
            return env_id
        raise


def make_same_step(
    env_id: str, num_envs: int, device: Any, adapter: str, **kwargs: Any
) -> gym.vector.VectorEnv:
    """``gymnasium.make_vec`` of a gpuvec ID in SAME_STEP autoreset, as the adapters run it.

    Raises:
        ValueError: ``kwargs`` ask for another ``autoreset_mode`` (naming ``adapter``).
    """
    mode = as_autoreset_mode(kwargs.pop("autoreset_mode", AutoresetMode.SAME_STEP))
    if mode is not AutoresetMode.SAME_STEP:
        raise ValueError(
            f"{adapter} runs the env in SAME_STEP mode (autoreset_mode='same_step'), got {mode}"
        )
    return gym.make_vec(
        gym_id(env_id),
        num_envs=num_envs,
        vectorization_mode="vector_entry_point",
        device=device,
        autoreset_mode=AutoresetMode.SAME_STEP,
        **kwargs,
    )


def register_all() -> None:
    """Register every entry with gymnasium (``make`` and ``make_vec``); idempotent."""
    for e in REGISTRY:
        if e.id not in gym.registry:
            vector = functools.partial(_vector_env, e.id)
            gym_register(e.id, e.env_def, e.max_episode_steps, e.kwargs, vector)
