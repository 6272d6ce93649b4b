"""A single :class:`gymnasium.Env` (numpy in, numpy out) over one env of the shell."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode

from gpuvec_envs.core.env import EnvDef
from gpuvec_envs.core.vector import GpuVecEnv


class GpuEnv(gym.Env):
    """One env for ``gymnasium.make``: a batch of one, eager, without autoreset.

    The time limit comes from gymnasium's ``TimeLimit`` wrapper that ``make`` adds. Keyword
    arguments are those of :class:`GpuVecEnv` (``device``, ``dtype``, env parameters...).
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
        self.observation_space = self._vec.single_observation_space
        self.action_space = self._vec.single_action_space
        self.metadata = {k: v for k, v in self._vec.metadata.items() if k != "autoreset_mode"}
        self.render_mode = render_mode

    @property
    def vector_env(self) -> GpuVecEnv:
        """The underlying batch of one."""
        return self._vec

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, Any]]:
        """Reset; ``seed`` seeds the env's counter-based RNG."""
        super().reset(seed=seed)
        obs, info = self._vec.reset(seed=seed, options=options)
        return obs[0].cpu().numpy(), info

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        """One step; ``action`` is an element of :attr:`action_space`."""
        if isinstance(action, torch.Tensor):
            batched = action.reshape(1, *action.shape)
        else:
            batched = np.asarray(action)[None]
        obs, reward, term, trunc, _ = self._vec.step(batched)
        return obs[0].cpu().numpy(), float(reward[0]), bool(term[0]), bool(trunc[0]), {}

    def render(self) -> np.ndarray | None:
        """RGB frame in ``rgb_array`` mode."""
        frames = self._vec.render()
        return None if frames is None else frames[0]

    def close(self) -> None:
        """Close the underlying batch (and its ``human`` window)."""
        self._vec.close()
