"""InvertedPendulum-v5: keep a pole upright on a cart.

Mirrors ``gymnasium/envs/mujoco/inverted_pendulum_v5.py`` (gymnasium 1.4,
``InvertedPendulumEnv``): reward 1 per step while the observation is finite and the pole
angle is within 0.2 rad; terminates otherwise.
"""

from __future__ import annotations

import dataclasses

import torch

from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.mujoco import bridge
from gpuvec_envs.envs.mujoco._base import MujocoEnv, MujocoParams, Sim, reset_noise


@dataclasses.dataclass(frozen=True)
class InvertedPendulumParams(MujocoParams):
    """gymnasium's ``InvertedPendulumEnv`` keyword arguments and defaults."""

    xml_file: str = "inverted_pendulum.xml"
    frame_skip: int = 2
    reset_noise_scale: float = 1e-2


class InvertedPendulum(MujocoEnv):
    """InvertedPendulum-v5. Observation: ``[qpos, qvel]``, 4 numbers."""

    params_type = InvertedPendulumParams
    camera = (("trackbodyid", 0), ("distance", 2.04))
    terms = ("reward_survive",)

    def obs_size(self, params: InvertedPendulumParams, model: bridge.ModelInfo) -> int:
        """``nq + nv``."""
        return model.nq + model.nv

    def reset_model(
        self, params: InvertedPendulumParams, model: bridge.ModelInfo, rng: Rng
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Initial qpos + U(±scale), qvel = U(±scale)."""
        return reset_noise(model, rng, params.reset_noise_scale, qvel_normal=False)

    def transition(
        self, params: InvertedPendulumParams, before: Sim, after: Sim, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """1 while the pole is up (and the observation finite), else 0 and terminated."""
        observation = self.get_obs(params, after)
        finite = torch.isfinite(observation).all(dim=1)
        terminated = ~finite | (observation[:, 1].abs() > 0.2)
        reward = torch.where(terminated, 0.0, 1.0).to(torch.float64)
        return reward, terminated, {"reward_survive": reward}

    def get_obs(self, params: InvertedPendulumParams, sim: Sim) -> torch.Tensor:
        """(N, 4) ``[qpos, qvel]``."""
        return torch.cat([sim.qpos, sim.qvel], dim=1)
