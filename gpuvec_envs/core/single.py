"""A single :class:`gymnasium.Env` (numpy in, numpy out) over one env of the shell."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from torch.utils import _pytree as pytree

from gpuvec_envs.core.env import EnvDef
from gpuvec_envs.core.vector import GpuVecEnv


class GpuEnv(gym.Env):
    """One env for ``gymnasium.make``: a batch of one, eager, without autoreset.

    The time limit comes from gymnasium's ``TimeLimit`` wrapper that ``make`` adds. Keyword
    arguments are those of :class:`GpuVecEnv` (``device``, ``dtype``, env parameters...).
    An env with an :meth:`~gpuvec_envs.core.env.EnvDef.observation_view` returns the view
    (e.g. a dict of numpy arrays; 0-dim entries as numpy scalars) and its space.
    """

    def __init__(
        self, env_def: EnvDef | str, render_mode: str | None = None, **kwargs: Any
    ) -> None:
        for key in ("num_envs", "autoreset_mode"):
            if key in kwargs:
                raise TypeError(f"{key!r} is not an argument of a single env")
        kwargs.setdefault("backend", "eager")
        self._vec = GpuVecEnv(
            env_def,
            1,
            autoreset_mode=AutoresetMode.DISABLED,
            render_mode=render_mode,
            **kwargs,
        )
        self._view = self._vec.env_def.observation_view(self._vec.params)
        if self._view is None:
            self.observation_space = self._vec.single_observation_space
        else:
            self.observation_space = self._view.space
        self.action_space = self._vec.single_action_space
        self.metadata = {k: v for k, v in self._vec.metadata.items() if k != "autoreset_mode"}
        self.render_mode = render_mode

    @property
    def vector_env(self) -> GpuVecEnv:
        """The underlying batch of one."""
        return self._vec

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset; ``seed`` seeds the env's counter-based RNG."""
        super().reset(seed=seed)
        obs, info = self._vec.reset(seed=seed, options=options)
        return self._row(obs), _info_row(info)

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict[str, Any]]:
        """One step; ``action`` is an element of :attr:`action_space`."""
        if isinstance(action, torch.Tensor):
            batched = action.reshape(1, *action.shape)
        else:
            batched = np.asarray(action)[None]
        obs, reward, term, trunc, info = self._vec.step(batched)
        episode = self._vec._episode_names or ()
        row = _info_row(info, episode)
        return self._row(obs), float(reward[0]), bool(term[0]), bool(trunc[0]), row

    def _row(self, obs: torch.Tensor) -> Any:
        """The one env's observation on the host (through the view, if any)."""
        if self._view is None:
            return obs[0].cpu().numpy()
        return pytree.tree_map(lambda t: t[0].cpu().numpy()[()], self._view.split(obs))

    def render(self) -> np.ndarray | None:
        """RGB frame in ``rgb_array`` mode."""
        frames = self._vec.render()
        return None if frames is None else frames[0]

    def close(self) -> None:
        """Close the underlying batch (and its ``human`` window)."""
        self._vec.close()


def _info_row(info: dict[str, Any], episode: tuple[str, ...] = ()) -> dict[str, Any]:
    """The one env's ``info`` terms (:meth:`EnvDef.info`) as host scalars and arrays.

    ``episode``: the :meth:`EnvDef.episode_info` names, kept only at an episode's end.
    """
    out: dict[str, Any] = {}
    for key, value in info.items():
        if key in episode and not bool(info["_" + key][0]):
            continue
        if isinstance(value, torch.Tensor) and not key.startswith("_"):
            row = value[0].cpu().numpy()
            out[key] = row[()] if row.ndim == 0 else row
    return out
