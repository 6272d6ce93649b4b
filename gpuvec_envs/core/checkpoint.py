"""Exact checkpoints of a :class:`~gpuvec_envs.core.vector.GpuVecEnv`.

A checkpoint is a plain dict: tensors (the shell state, cloned) and plain values (format
version, env identity, params, batch size, dtype, device, step configuration). It pickles
and loads with ``torch.load(weights_only=True)``. Loading validates everything before it
changes anything, then hands the state to the shell as a new state, which the compiled
backends copy into their in-place buffers or CUDA-graph static buffers on the next call.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import torch

from gpuvec_envs.core.env import params_from_kwargs
from gpuvec_envs.core.rng import RESET, Rng
from gpuvec_envs.core.step import ShellState

if TYPE_CHECKING:
    from gpuvec_envs.core.vector import GpuVecEnv

#: Version of the checkpoint layout written by :func:`env_state_dict`.
FORMAT_VERSION = 1

_PLAIN = (bool, int, float, str, type(None))
_CONFIG = ("num_envs", "dtype", "autoreset_mode", "max_episode_steps", "frame_skip")
_KEYS = frozenset({"format_version", "env_def", "env_id", "device", "params", "state", *_CONFIG})
_SHELL_FIELDS = ("elapsed", "counter", "key0", "key1", "needs_reset")
#: Env modules by their earlier paths (before the family folders), so that checkpoints
#: written then still load: ``gpuvec_envs.envs.<old>`` -> ``gpuvec_envs.envs.<new>``.
_MOVED_ENV_MODULES = {
    f"gpuvec_envs.envs.{old}": f"gpuvec_envs.envs.{new}"
    for old, new in {
        "cartpole": "classic.cartpole",
        "acrobot": "classic.acrobot",
        "mountain_car": "classic.mountain_car",
        "continuous_mountain_car": "classic.continuous_mountain_car",
        "pendulum": "classic.pendulum",
        "minatar_asterix": "minatar.asterix",
        "minatar_breakout": "minatar.breakout",
        "minatar_freeway": "minatar.freeway",
        "minatar_seaquest": "minatar.seaquest",
        "minatar_space_invaders": "minatar.space_invaders",
        "minigrid_doorkey": "minigrid.doorkey",
        "minigrid_dynamic_obstacles": "minigrid.dynamic_obstacles",
        "minigrid_empty": "minigrid.empty",
        "minigrid_fourrooms": "minigrid.fourrooms",
        "minigrid_keycorridor": "minigrid.keycorridor",
        "minigrid_lava": "minigrid.lava",
        "minigrid_unlock": "minigrid.unlock",
    }.items()
}


def env_identity(env: GpuVecEnv) -> str:
    """``"module:QualName"`` of the env's :class:`EnvDef` class."""
    cls = type(env.env_def)
    return f"{cls.__module__}:{cls.__qualname__}"


def _plain(value: Any, where: str) -> Any:
    """``value`` if it is a plain (pickle-safe, ``weights_only``-loadable) value."""
    if isinstance(value, (tuple, list)):
        return type(value)(_plain(v, where) for v in value)
    if not isinstance(value, _PLAIN):
        raise TypeError(f"{where} is a {type(value).__name__}; checkpoints hold plain values")
    return value


def params_dict(params: Any) -> dict[str, Any]:
    """The fields of a params dataclass as a dict of plain values."""
    return {
        f.name: _plain(getattr(params, f.name), f"param {f.name!r}")
        for f in dataclasses.fields(params)
    }


def _tree_dict(tree: Any) -> Any:
    """A NamedTuple of tensors (nested) as a dict of cloned tensors by field name.

    Plain tuples inside become lists.
    """
    if isinstance(tree, torch.Tensor):
        return tree.detach().clone()
    if not hasattr(tree, "_fields"):
        return [_tree_dict(value) for value in tree]
    return {name: _tree_dict(value) for name, value in zip(tree._fields, tree, strict=True)}


def _config(env: GpuVecEnv) -> dict[str, Any]:
    return {
        "num_envs": env.num_envs,
        "dtype": str(env.dtype).removeprefix("torch."),
        "autoreset_mode": env.autoreset_mode.value,
        "max_episode_steps": env.cfg.max_episode_steps,
        "frame_skip": env.cfg.frame_skip,
    }


def env_state_dict(env: GpuVecEnv) -> dict[str, Any]:
    """Everything the env's future depends on, as tensors (on its device) and plain values.

    ``state`` is ``None`` before the first reset, else a dict with ``env`` (the env's state
    NamedTuple as a dict of (N, ...) tensors by field name, nested for nested tuples) and
    the shell's ``elapsed`` (N,) int32, ``counter``/``key0``/``key1`` (N,) int64 and
    ``needs_reset`` (N,) int32.
    """
    sd: dict[str, Any] = {
        "format_version": FORMAT_VERSION,
        "env_def": env_identity(env),
        "env_id": env.spec.id if env.spec is not None else None,
        "device": str(env.device),
        "params": params_dict(env.params),
        **_config(env),
        "state": None,
    }
    s = env._state
    if s is not None:
        sd["state"] = {"env": _tree_dict(s.env)}
        sd["state"].update({k: getattr(s, k).detach().clone() for k in _SHELL_FIELDS})
    return sd


def _check_keys(d: Mapping[str, Any], expected: set[str] | frozenset[str], where: str) -> None:
    missing = sorted(set(expected) - set(d))
    unexpected = sorted(set(d) - set(expected))
    if missing or unexpected:
        raise ValueError(f"{where}: missing keys {missing}, unexpected keys {unexpected}")


def _template(env: GpuVecEnv, params: Any) -> ShellState:
    """A shell state of the right structure, shapes and dtypes (the current one if any)."""
    if env._state is not None and params == env.params:
        return env._state
    n, dev = env.num_envs, env.device
    z64 = torch.zeros(n, dtype=torch.int64, device=dev)
    z32 = torch.zeros(n, dtype=torch.int32, device=dev)
    fresh = env.env_def.reset(params, Rng(z64, z64, z64, RESET), env.dtype, None)
    return ShellState(fresh, z32, z64, z64, z64, z32)


def _load_tree(template: Any, d: Any, where: str, device: torch.device) -> Any:
    """``d`` rebuilt in the template's structure, each leaf checked and moved to ``device``."""
    if isinstance(template, torch.Tensor):
        if not isinstance(d, torch.Tensor):
            raise TypeError(f"{where} must be a tensor, got {type(d).__name__}")
        if d.shape != template.shape or d.dtype != template.dtype:
            raise ValueError(
                f"{where}: expected {tuple(template.shape)} {template.dtype}, got "
                f"{tuple(d.shape)} {d.dtype}"
            )
        return d.detach().to(device, copy=True).contiguous()
    if not hasattr(template, "_fields"):  # a plain tuple, stored as a list
        if not isinstance(d, (list, tuple)) or len(d) != len(template):
            raise ValueError(f"{where} must be a list of {len(template)} entries, got {d!r:.80}")
        return tuple(
            _load_tree(t, v, f"{where}.{i}", device)
            for i, (t, v) in enumerate(zip(template, d, strict=True))
        )
    if not isinstance(d, Mapping):
        raise TypeError(f"{where} must be a dict, got {type(d).__name__}")
    _check_keys(d, set(template._fields), where)
    fields = zip(template._fields, template, strict=True)
    return type(template)(*(_load_tree(t, d[k], f"{where}.{k}", device) for k, t in fields))


def _check_shell_values(state: ShellState) -> None:
    """Raise ``ValueError`` on shell counters a run cannot have produced."""
    checks = (
        ("elapsed", state.elapsed < 0, "negative"),
        ("counter", state.counter < 0, "negative"),
        ("key0", (state.key0 < 0) | (state.key0 >= 2**32), "outside [0, 2**32)"),
        ("key1", (state.key1 < 0) | (state.key1 >= 2**32), "outside [0, 2**32)"),
        ("needs_reset", (state.needs_reset != 0) & (state.needs_reset != 1), "not 0 or 1"),
    )
    for name, bad, what in checks:
        if bool(bad.any()):
            i = int(bad.to(torch.uint8).argmax())
            raise ValueError(f"state.{name} of env {i} is {what}")


def _check_param_type(name: str, value: Any, current: Any) -> None:
    """Raise ``TypeError`` unless ``value`` has the type of the env's current value.

    An int may stand for a float (and vice versa, as JSON-like configs write them).
    """
    numbers = (int, float)
    same = type(value) is type(current) or (type(value) in numbers and type(current) in numbers)
    if not same:
        raise TypeError(
            f"param {name!r} must be a {type(current).__name__}, got {type(value).__name__}"
        )


def _check_spaces(env: GpuVecEnv, params: Any) -> None:
    """Raise ``ValueError`` if ``params`` change a space's type, shape or dtype."""
    pairs = (
        (env.single_observation_space, env.env_def.observation_space(params, env.dtype)),
        (env.single_action_space, env.env_def.action_space(params, env.dtype)),
    )
    for old, new in pairs:
        if type(old) is not type(new) or old.shape != new.shape or old.dtype != new.dtype:
            raise ValueError(f"checkpoint params change a space from {old} to {new}")


def prepare_load(env: GpuVecEnv, d: Mapping[str, Any], strict: bool = True) -> Callable[[], None]:
    """Validate a checkpoint against ``env`` and return the function that applies it.

    Nothing changes until the returned function is called, and that function cannot fail,
    so a wrapper can validate its own state and the env's before applying either.

    Args:
        env: The env to restore into.
        d: A dict from :func:`env_state_dict` (tensors on any device).
        strict: Require exactly the keys :func:`env_state_dict` writes and an equal
            registered ID. ``False`` ignores unknown keys, the ID, and a missing ``params``
            (the env's current parameters are kept).

    Raises:
        TypeError: ``d`` or a field of it has the wrong type.
        ValueError: another format version, env, batch size, dtype, autoreset mode, time
            limit or frame skip; missing or unexpected keys; a state tensor of the wrong
            shape or dtype; counters or keys out of range; params that change a space.
    """
    if not isinstance(d, Mapping):
        raise TypeError(f"a state dict must be a dict, got {type(d).__name__}")
    version = d.get("format_version")
    if version != FORMAT_VERSION:
        raise ValueError(
            f"unsupported checkpoint format_version {version!r} (this version reads "
            f"{FORMAT_VERSION})"
        )
    required = _KEYS if strict else {"format_version", "env_def", "state", *_CONFIG}
    if strict:
        _check_keys(d, _KEYS, "state dict")
    else:
        _check_keys({k: d[k] for k in d if k in required}, required, "state dict")
    module, _, qualname = str(d["env_def"]).partition(":")
    if f"{_MOVED_ENV_MODULES.get(module, module)}:{qualname}" != env_identity(env):
        raise ValueError(f"checkpoint of env {d['env_def']!r}, not {env_identity(env)!r}")
    env_id = env.spec.id if env.spec is not None else None
    if strict and d["env_id"] != env_id:
        raise ValueError(f"checkpoint of env ID {d['env_id']!r}, not {env_id!r}")
    for key, value in _config(env).items():
        if d[key] != value:
            raise ValueError(f"checkpoint has {key}={d[key]!r}, this env {key}={value!r}")

    params = env.params
    if "params" in d:
        if not isinstance(d["params"], Mapping):
            raise TypeError(f"params must be a dict, got {type(d['params']).__name__}")
        params = params_from_kwargs(env.env_def.params_type, None, dict(d["params"]))
        for name, value in d["params"].items():
            _check_param_type(name, value, getattr(env.params, name))
        if params != env.params:
            _check_spaces(env, params)

    state = None
    if d["state"] is not None:
        if not isinstance(d["state"], Mapping):
            raise TypeError(f"state must be a dict or None, got {type(d['state']).__name__}")
        template = _template(env, params)
        _check_keys(d["state"], {"env", *_SHELL_FIELDS}, "state")
        env_state = _load_tree(template.env, d["state"]["env"], "state.env", env.device)
        shell = {
            k: _load_tree(getattr(template, k), d["state"][k], f"state.{k}", env.device)
            for k in _SHELL_FIELDS
        }
        state = type(template)(env_state, **shell)
        _check_shell_values(state)

    def apply() -> None:
        if params != env.params:
            env.set_params(params)
        env._state = state

    return apply
