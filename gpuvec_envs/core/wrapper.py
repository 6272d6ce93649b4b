"""The base of every tensor vector wrapper, and the engine's own structured-observation view.

:class:`TensorWrapper` knows the wrapped env's device and autoreset mode and checkpoints
the whole wrapper stack (:meth:`~TensorWrapper.state_dict`); :class:`ObservationWrapper`
transforms reset/step observations and SAME_STEP's ``info["final_obs"]``. The CleanRL
wrappers (:mod:`gpuvec_envs.adapters.cleanrl`) build on both. :class:`StructuredObservation`
splits an env's packed one-tensor observation into the structure users expect (MiniGrid's
``obs_mode="dict"``); ``gymnasium.make_vec`` adds it for such envs (:func:`structured`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from gymnasium.vector.utils import batch_space

from gpuvec_envs.core.checkpoint import FORMAT_VERSION, prepare_load
from gpuvec_envs.core.env import ObservationView
from gpuvec_envs.core.vector import GpuVecEnv

#: ``(obs, rewards, terminations, truncations, infos)`` of a vector step.
Step = tuple[Any, Any, Any, Any, dict[str, Any]]


def autoreset_mode_of(env: VectorEnv) -> AutoresetMode:
    """The env's ``metadata["autoreset_mode"]`` (``NEXT_STEP`` if missing, as gymnasium)."""
    mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    if not isinstance(mode, AutoresetMode):
        raise TypeError(f"metadata['autoreset_mode'] must be an AutoresetMode, got {mode!r}")
    return mode


def reset_mask_of(options: dict[str, Any] | None, device: torch.device) -> torch.Tensor | None:
    """``options["reset_mask"]`` as a bool tensor on ``device``, or ``None``."""
    if not options or options.get("reset_mask") is None:
        return None
    return torch.as_tensor(options["reset_mask"], device=device).to(torch.bool)


def check_tensors(
    current: dict[str, torch.Tensor],
    d: Any,
    where: str,
    loose: dict[str, set[tuple[int, ...]]] | None = None,
) -> dict[str, torch.Tensor]:
    """Copies of the tensors of ``d`` on the device of ``current``, checked against it.

    Args:
        current: The tensors being replaced, by name.
        d: The loaded dict.
        where: Name for messages.
        loose: Names whose shape may be any of the given shapes.

    Raises:
        TypeError: ``d`` is not a dict or holds a non-tensor.
        ValueError: other keys, or a tensor of another shape or dtype.
    """
    if not isinstance(d, dict):
        raise TypeError(f"{where} must be a dict, got {type(d).__name__}")
    if set(d) != set(current):
        missing, unexpected = sorted(set(current) - set(d)), sorted(set(d) - set(current))
        raise ValueError(f"{where}: missing keys {missing}, unexpected keys {unexpected}")
    out = {}
    for name, cur in current.items():
        t = d[name]
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{where}.{name} must be a tensor, got {type(t).__name__}")
        shapes = (loose or {}).get(name, {tuple(cur.shape)})
        if tuple(t.shape) not in shapes or t.dtype != cur.dtype:
            raise ValueError(
                f"{where}.{name}: expected {tuple(cur.shape)} {cur.dtype}, got "
                f"{tuple(t.shape)} {t.dtype}"
            )
        out[name] = t.detach().to(cur.device, copy=True)
    return out


def device_of(env: VectorEnv) -> torch.device:
    """The device of a (wrapped) vector env: its ``device``, its base env's, or the CPU."""
    dev = getattr(env, "device", None)
    if dev is None:
        dev = getattr(env.unwrapped, "device", "cpu")
    return torch.device(dev)


class TensorWrapper(VectorWrapper):
    """Base of the tensor wrappers: knows the env's device and autoreset mode."""

    def __init__(self, env: VectorEnv) -> None:
        super().__init__(env)
        self.device = device_of(env)
        self.autoreset_mode = autoreset_mode_of(env)

    def state_dict(self) -> dict[str, Any]:
        """This wrapper's running statistics and the wrapped env's state dict.

        ``"stats"`` holds the wrapper's own tensors, ``"env"`` the wrapped env's
        :meth:`state_dict` (``None`` if it has none), so the outermost wrapper's dict
        checkpoints the whole stack.
        """
        inner = getattr(self.env, "state_dict", None)
        return {
            "format_version": FORMAT_VERSION,
            "wrapper": type(self).__name__,
            "stats": self._stats(),
            "env": inner() if callable(inner) else None,
        }

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> None:
        """Restore a :meth:`state_dict` into this wrapper and the envs it wraps.

        Every level is validated before any is changed.

        Raises:
            TypeError, ValueError: another wrapper stack, env or shape; nothing changes.
        """
        self._prepare_load(state_dict, strict)()

    def _stats(self) -> dict[str, Any]:
        """The wrapper's own state (none by default)."""
        return {}

    def _prepare_stats(self, stats: Any) -> Callable[[], None]:
        """Validate :meth:`_stats` output and return the function that applies it."""
        check_tensors({}, stats, f"{type(self).__name__} stats")
        return lambda: None

    def _prepare_load(self, d: Any, strict: bool) -> Callable[[], None]:
        name = type(self).__name__
        if not isinstance(d, dict):
            raise TypeError(f"a state dict must be a dict, got {type(d).__name__}")
        keys = {"format_version", "wrapper", "stats", "env"}
        if set(d) != keys and (strict or not keys <= set(d)):
            missing, unexpected = sorted(keys - set(d)), sorted(set(d) - keys)
            raise ValueError(f"{name} state dict: missing keys {missing}, unexpected {unexpected}")
        if d["format_version"] != FORMAT_VERSION:
            raise ValueError(f"unsupported checkpoint format_version {d['format_version']!r}")
        if d["wrapper"] != name:
            raise ValueError(f"checkpoint of a {d['wrapper']} wrapper, not {name}")
        apply_stats = self._prepare_stats(d["stats"])
        inner = self.env
        if d["env"] is None:
            if callable(getattr(inner, "state_dict", None)):
                raise ValueError(f"{name} checkpoint has no state of the wrapped env")
            apply_inner: Callable[[], None] = lambda: None  # noqa: E731
        elif isinstance(inner, TensorWrapper):
            apply_inner = inner._prepare_load(d["env"], strict)
        elif isinstance(inner, GpuVecEnv):
            apply_inner = prepare_load(inner, d["env"], strict)
        else:
            raise ValueError(f"{name} wraps {type(inner).__name__}, which has no state dict")

        def apply() -> None:
            apply_inner()
            apply_stats()

        return apply


class ObservationWrapper(TensorWrapper):
    """Applies :meth:`observations` to reset/step observations and to ``final_obs``."""

    def reset(
        self, *, seed: Any = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset and transform the observation."""
        obs, info = self.env.reset(seed=seed, options=options)
        return self._on_reset(obs, reset_mask_of(options, self.device)), info

    def step(self, actions: Any) -> Step:
        """Step and transform the observation (and ``info["final_obs"]``)."""
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        final = infos.get("final_obs") if self.autoreset_mode is AutoresetMode.SAME_STEP else None
        if final is not None:
            obs, final = self._on_step_same(obs, final, infos["_final_obs"])
            infos = {**infos, "final_obs": final}
        else:
            obs = self.observations(obs)
        return obs, rewards, terminations, truncations, infos

    def _on_reset(self, obs: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        return self.observations(obs)

    def _on_step_same(
        self, obs: torch.Tensor, final: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        return self.observations(obs), self.observations(final)

    def observations(self, observations: torch.Tensor) -> torch.Tensor:
        """Transform a batch of observations (N, *obs_shape)."""
        raise NotImplementedError


class StructuredObservation(ObservationWrapper):
    """An env's structured observation (e.g. MiniGrid's dict) split from the shell's tensor.

    ``gymnasium.make_vec`` adds it when the env's :meth:`~gpuvec_envs.core.env.EnvDef.
    observation_view` is not ``None`` (MiniGrid's ``obs_mode="dict"``). Observations and
    SAME_STEP's ``info["final_obs"]`` become the view's structure (a dict of (N, ...)
    tensors); everything else, checkpoints included, is the wrapped env's.

    Args:
        env: A :class:`GpuVecEnv` (or a wrapper of one) whose observation is the packed
            tensor.
        view: How to split it; default: the env's own ``observation_view``.
    """

    def __init__(self, env: VectorEnv, view: ObservationView | None = None) -> None:
        super().__init__(env)
        if view is None:
            base = env.unwrapped
            view = base.env_def.observation_view(base.params)
            if view is None:
                raise ValueError(f"{type(base.env_def).__name__} has no observation view")
        self.view = view
        self.single_observation_space = view.space
        self.observation_space = batch_space(view.space, self.num_envs)

    def observations(self, observations: torch.Tensor) -> Any:
        """The view of a batch (N, *packed_shape)."""
        return self.view.split(observations)


def structured(env: GpuVecEnv) -> VectorEnv:
    """``env`` in a :class:`StructuredObservation` if its env has a view, else ``env``."""
    view = env.env_def.observation_view(env.params)
    return env if view is None else StructuredObservation(env, view)
