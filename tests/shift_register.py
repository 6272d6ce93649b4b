"""A test env whose state is a 40-field shift register (for the C++ pass's alias safety).

Every new field is computed from *other* fields' old values only, so a compiled step that
stored a field before a later load of the same field read a new value where the step
means the old one.
"""

from __future__ import annotations

import dataclasses
from typing import NamedTuple

import gymnasium as gym
import numpy as np
import torch

from gpuvec_envs.core.env import EnvDef
from gpuvec_envs.core.rng import Rng

FIELDS = 40


class Register(NamedTuple):
    """40 int32 (N,) words; the observation is every tenth word."""

    words: tuple[torch.Tensor, ...]


@dataclasses.dataclass(frozen=True)
class RegisterParams:
    """No parameters."""


class ShiftRegister(EnvDef):
    """``w[i] <- w[i-1] ^ (w[(i+7) % F] >> 1)``, ``w[0] <- w[F-1] + action``."""

    params_type = RegisterParams

    def observation_space(self, params: RegisterParams, dtype: torch.dtype) -> gym.Space:
        return gym.spaces.Box(-(2.0**31), 2.0**31, (4,), np.dtype(str(dtype)[6:]))

    def action_space(self, params: RegisterParams, dtype: torch.dtype) -> gym.Space:
        return gym.spaces.Discrete(3)

    def reset(self, params, rng: Rng, dtype, options) -> Register:
        base = (rng.bits() & 0xFFFF).to(torch.int32)  # (N,) one draw, spread over the words
        return Register(tuple((base >> (i % 16)) ^ i for i in range(FIELDS)))

    def step(self, params, state: Register, action: torch.Tensor, rng: Rng):
        w = state.words
        new = [w[FIELDS - 1] + action.to(torch.int32)]
        new += [w[i - 1] ^ (w[(i + 7) % FIELDS] >> 1) for i in range(1, FIELDS)]
        reward = (w[3] & 1).to(torch.float32)
        terminated = (w[5] & 1023) == 7
        return Register(tuple(new)), reward, terminated

    def observation(self, params, state: Register) -> torch.Tensor:
        return torch.stack(state.words[::10], 1).to(torch.float32)  # (N, 4)
