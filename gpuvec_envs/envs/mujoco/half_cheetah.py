"""HalfCheetah-v5: a planar cheetah rewarded for running forward.

Mirrors ``gymnasium/envs/mujoco/half_cheetah_v5.py`` (gymnasium 1.4, ``HalfCheetahEnv``):
same model, keyword arguments, observation, reward terms and ``info`` keys. Never
terminates; episodes end at the 1000-step time limit.
"""

from __future__ import annotations

import dataclasses

import torch

from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.mujoco import bridge
from gpuvec_envs.envs.mujoco._base import MujocoEnv, MujocoParams, Sim, reset_noise, square_sum


@dataclasses.dataclass(frozen=True)
class HalfCheetahParams(MujocoParams):
    """gymnasium's ``HalfCheetahEnv`` keyword arguments and defaults."""

    xml_file: str = "half_cheetah.xml"
    frame_skip: int = 5
    forward_reward_weight: float = 1.0
    ctrl_cost_weight: float = 0.1
    reset_noise_scale: float = 0.1
    exclude_current_positions_from_observation: bool = True


class HalfCheetah(MujocoEnv):
    """HalfCheetah-v5. Observation: qpos (without x) and qvel, 17 numbers."""

    params_type = HalfCheetahParams
    camera = (("distance", 4.0),)
    terms = ("x_velocity", "reward_forward", "reward_ctrl")

    def obs_size(self, params: HalfCheetahParams, model: bridge.ModelInfo) -> int:
        """``nq + nv`` less the x position if excluded."""
        return model.nq + model.nv - params.exclude_current_positions_from_observation

    def reset_model(
        self, params: HalfCheetahParams, model: bridge.ModelInfo, rng: Rng
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Initial qpos + U(±scale), qvel = scale * N(0, 1)."""
        return reset_noise(model, rng, params.reset_noise_scale, qvel_normal=True)

    def control_cost(self, params: HalfCheetahParams, action: torch.Tensor) -> torch.Tensor:
        """(N,) ``ctrl_cost_weight * sum(action^2)``."""
        return params.ctrl_cost_weight * square_sum(action)

    def transition(
        self, params: HalfCheetahParams, before: Sim, after: Sim, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Forward velocity of the root minus the control cost."""
        x_velocity = (after.qpos[:, 0] - before.qpos[:, 0]) / self.dt(params)
        forward_reward = params.forward_reward_weight * x_velocity
        ctrl_cost = self.control_cost(params, action)
        reward = forward_reward - ctrl_cost
        terms = {
            "x_velocity": x_velocity,
            "reward_forward": forward_reward,
            "reward_ctrl": -ctrl_cost,
        }
        return reward, torch.zeros_like(reward, dtype=torch.bool), terms

    def get_obs(self, params: HalfCheetahParams, sim: Sim) -> torch.Tensor:
        """(N, 17) ``[qpos[1:], qvel]``."""
        position = (
            sim.qpos[:, 1:] if params.exclude_current_positions_from_observation else sim.qpos
        )
        return torch.cat([position, sim.qvel], dim=1)

    def state_info(self, params: HalfCheetahParams, sim: Sim) -> dict[str, torch.Tensor]:
        """``x_position`` [m]."""
        return {"x_position": sim.qpos[:, 0]}
