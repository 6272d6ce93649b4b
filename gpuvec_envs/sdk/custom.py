"""Registering an env defined outside the package with gymnasium.

:func:`register` makes an :class:`~gpuvec_envs.core.env.EnvDef` available as
``gymnasium.make_vec(env_id, num_envs=N)`` (a :class:`~gpuvec_envs.core.vector.GpuVecEnv`),
``gymnasium.make(env_id)`` (a single numpy :class:`~gpuvec_envs.core.single.GpuEnv`),
:func:`~gpuvec_envs.adapters.sb3.make_sb3_vec_env` and
:class:`~gpuvec_envs.rollout.RolloutCollector`, exactly as the built-in IDs are.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
from typing import Any

import gymnasium as gym
from gymnasium.envs.registration import EnvSpec

from gpuvec_envs.core.env import EnvDef, params_from_kwargs
from gpuvec_envs.core.vector import GpuVecEnv
from gpuvec_envs.registry import gym_register

#: ``GpuVecEnv`` keywords that a registration may give defaults for.
SHELL_KWARGS = frozenset(
    name
    for name, p in inspect.signature(GpuVecEnv.__init__).parameters.items()
    if p.kind is inspect.Parameter.KEYWORD_ONLY
) - {"max_episode_steps", "autoreset_mode"}

# gymnasium's ID grammar: [namespace/]name[-v<version>]
_ID = re.compile(r"^(?:[\w:.-]+/)?[\w:.-]+?(?:-v\d+)?$")
_REF = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


def register(
    env_id: str,
    env_def: type[EnvDef] | EnvDef | str,
    *,
    max_episode_steps: int | None = None,
    replace: bool = False,
    **default_kwargs: Any,
) -> EnvSpec:
    """Register an env with gymnasium, for ``make_vec``, ``make``, SB3 and the collector.

    Example::

        gpuvec_envs.register("mylab/Catch-v0", Catch, max_episode_steps=200)
        envs = gymnasium.make_vec("mylab/Catch-v0", num_envs=1024, device="cuda")

    Args:
        env_id: A gymnasium ID, ``[namespace/]Name[-v<k>]``.
        env_def: An :class:`EnvDef` subclass (instantiated without arguments), an instance,
            or ``"module:Class"`` (imported now).
        max_episode_steps: Time limit in steps (truncation), or ``None`` for none.
        replace: Replace an existing registration of ``env_id`` instead of raising.
        **default_kwargs: Defaults of every ``make``/``make_vec`` call: env parameters
            (fields of ``params_type``), ``params`` or shell options (``device``, ``dtype``,
            ``backend``, ``validate``, ``frame_skip``, ``render_mode``).

    Returns:
        The gymnasium spec of the new registration.

    Raises:
        TypeError: ``env_id`` is not a string, ``env_def`` is not an ``EnvDef``, or a
            keyword is neither an env parameter nor a shell option.
        ValueError: a malformed ID or ``"module:Class"``, an ID already registered (without
            ``replace``), a bad ``max_episode_steps``, or defaults the shell rejects.
    """
    if not isinstance(env_id, str):
        raise TypeError(f"env_id must be a str, got {type(env_id).__name__}")
    if not _ID.match(env_id):
        raise ValueError(
            f"env_id {env_id!r} is not a gymnasium ID: expected '[namespace/]Name[-v<k>]' "
            "with letters, digits, '_', '-', '.' or ':'"
        )
    if env_id in gym.registry and not replace:
        raise ValueError(f"{env_id!r} is already registered; pass replace=True to replace it")
    instance = env_def_instance(env_def)
    if max_episode_steps is not None and (
        isinstance(max_episode_steps, bool)
        or not isinstance(max_episode_steps, int)
        or not 1 <= max_episode_steps < 2**31
    ):
        raise ValueError(
            f"max_episode_steps must be an int in [1, 2**31) or None, got {max_episode_steps!r}"
        )
    _check_kwargs(instance, default_kwargs)
    if env_id in gym.registry:
        del gym.registry[env_id]
    return gym_register(env_id, instance, max_episode_steps, default_kwargs)


def env_def_instance(env_def: Any) -> EnvDef:
    """The :class:`EnvDef` instance that ``env_def`` names (see :func:`register`).

    Raises:
        TypeError: ``env_def`` is not an ``EnvDef`` subclass, instance or string.
        ValueError: a malformed or unimportable ``"module:Class"``.
    """
    if isinstance(env_def, str):
        if not _REF.match(env_def):
            raise ValueError(f"env_def string must be 'module:Class', got {env_def!r}")
        module, _, name = env_def.partition(":")
        try:
            env_def = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"cannot import {env_def!r}: {exc}") from exc
    if isinstance(env_def, type):
        if not issubclass(env_def, EnvDef):
            raise TypeError(f"env_def must be an EnvDef subclass, got class {env_def.__name__}")
        env_def = env_def()
    if not isinstance(env_def, EnvDef):
        raise TypeError(
            f"env_def must be an EnvDef subclass, instance or 'module:Class', got "
            f"{type(env_def).__name__}"
        )
    return env_def


def _check_kwargs(env_def: EnvDef, kwargs: dict[str, Any]) -> None:
    """Raise if ``kwargs`` are not defaults that :class:`GpuVecEnv` accepts."""
    if "autoreset_mode" in kwargs:
        raise TypeError("autoreset_mode is chosen per make_vec call, not at registration")
    if "num_envs" in kwargs:
        raise TypeError("num_envs is chosen per make_vec call, not at registration")
    fields = {f.name for f in dataclasses.fields(env_def.params_type)}
    unknown = sorted(set(kwargs) - fields - SHELL_KWARGS)
    if unknown:
        raise TypeError(
            f"unknown keyword argument(s) {unknown} for {type(env_def).__name__}: env "
            f"parameters are {sorted(fields)}, shell options {sorted(SHELL_KWARGS)}"
        )
    params_from_kwargs(
        env_def.params_type, kwargs.get("params"), {k: v for k, v in kwargs.items() if k in fields}
    )
    try:
        GpuVecEnv(env_def, 1, **{**kwargs, "backend": "eager"})
    except (TypeError, ValueError) as exc:
        raise ValueError(f"invalid defaults for {type(env_def).__name__}: {exc}") from exc
