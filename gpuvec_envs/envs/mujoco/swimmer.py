"""Swimmer-v5: a three-link swimmer in a viscous fluid, rewarded for moving forward.

Mirrors ``gymnasium/envs/mujoco/swimmer_v5.py`` (gymnasium 1.4, ``SwimmerEnv``). Never
terminates; episodes end at the 1000-step time limit.
"""

from __future__ import annotations

import dataclasses

import torch

from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.mujoco import bridge
from gpuvec_envs.envs.mujoco._base import (
    MujocoEnv,
    MujocoParams,
    Sim,
    np_norm,
    reset_noise,
    square_sum,
)


@dataclasses.dataclass(frozen=True)
class SwimmerParams(MujocoParams):
    """gymnasium's ``SwimmerEnv`` keyword arguments and defaults."""

    xml_file: str = "swimmer.xml"
    frame_skip: int = 4
    forward_reward_weight: float = 1.0
    ctrl_cost_weight: float = 1e-4
    reset_noise_scale: float = 0.1
    exclude_current_positions_from_observation: bool = True


def xy_info(qpos: torch.Tensor) -> dict[str, torch.Tensor]:
    """``x_position``, ``y_position``, ``distance_from_origin`` [m] of (N, nq) qpos."""
    return {
        "x_position": qpos[:, 0],
        "y_position": qpos[:, 1],
        "distance_from_origin": np_norm(qpos[:, 0:2]),
    }


class Swimmer(MujocoEnv):
    """Swimmer-v5. Observation: qpos (without x, y) and qvel, 8 numbers."""

    params_type = SwimmerParams
    terms = ("x_velocity", "y_velocity", "reward_forward", "reward_ctrl")

    def obs_size(self, params: SwimmerParams, model: bridge.ModelInfo) -> int:
        """``nq + nv`` less x, y if excluded."""
        return model.nq + model.nv - 2 * params.exclude_current_positions_from_observation

    def reset_model(
        self, params: SwimmerParams, model: bridge.ModelInfo, rng: Rng
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Initial qpos + U(±scale), qvel = U(±scale)."""
        return reset_noise(model, rng, params.reset_noise_scale, qvel_normal=False)

    def control_cost(self, params: SwimmerParams, action: torch.Tensor) -> torch.Tensor:
        """(N,) ``ctrl_cost_weight * sum(action^2)``."""
        return params.ctrl_cost_weight * square_sum(action)

    def transition(
        self, params: SwimmerParams, before: Sim, after: Sim, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Forward velocity of the front tip minus the control cost."""
        xy_velocity = (after.qpos[:, 0:2] - before.qpos[:, 0:2]) / self.dt(params)
        x_velocity, y_velocity = xy_velocity[:, 0], xy_velocity[:, 1]
        forward_reward = params.forward_reward_weight * x_velocity
        ctrl_cost = self.control_cost(params, action)
        reward = forward_reward - ctrl_cost
        terms = {
            "x_velocity": x_velocity,
            "y_velocity": y_velocity,
            "reward_forward": forward_reward,
            "reward_ctrl": -ctrl_cost,
        }
        return reward, torch.zeros_like(reward, dtype=torch.bool), terms

    def get_obs(self, params: SwimmerParams, sim: Sim) -> torch.Tensor:
        """(N, 8) ``[qpos[2:], qvel]``."""
        position = (
            sim.qpos[:, 2:] if params.exclude_current_positions_from_observation else sim.qpos
        )
        return torch.cat([position, sim.qvel], dim=1)

    def state_info(self, params: SwimmerParams, sim: Sim) -> dict[str, torch.Tensor]:
        """Position of the front tip."""
        return xy_info(sim.qpos)
