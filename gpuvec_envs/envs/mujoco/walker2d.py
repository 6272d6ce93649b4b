"""Walker2d-v5: a planar biped rewarded for walking forward while healthy.

Mirrors ``gymnasium/envs/mujoco/walker2d_v5.py`` (gymnasium 1.4, ``Walker2dEnv``; model
``walker2d_v5.xml``): healthy while z lies in ``healthy_z_range`` and the torso angle in
``healthy_angle_range`` (strict); terminates when unhealthy (if
``terminate_when_unhealthy``).
"""

from __future__ import annotations

import dataclasses

import torch

from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.mujoco import bridge
from gpuvec_envs.envs.mujoco._base import MujocoEnv, MujocoParams, Sim, reset_noise, square_sum
from gpuvec_envs.envs.mujoco.hopper import between


@dataclasses.dataclass(frozen=True)
class Walker2dParams(MujocoParams):
    """gymnasium's ``Walker2dEnv`` keyword arguments and defaults."""

    xml_file: str = "walker2d_v5.xml"
    frame_skip: int = 4
    forward_reward_weight: float = 1.0
    ctrl_cost_weight: float = 1e-3
    healthy_reward: float = 1.0
    terminate_when_unhealthy: bool = True
    healthy_z_range: tuple[float, float] = (0.8, 2.0)
    healthy_angle_range: tuple[float, float] = (-1.0, 1.0)
    reset_noise_scale: float = 5e-3
    exclude_current_positions_from_observation: bool = True


class Walker2d(MujocoEnv):
    """Walker2d-v5. Observation: qpos (without x) and qvel clipped to ±10, 17 numbers."""

    params_type = Walker2dParams
    camera = (
        ("trackbodyid", 2),
        ("distance", 4.0),
        ("lookat", (0.0, 0.0, 1.15)),
        ("elevation", -20.0),
    )
    terms = ("x_velocity", "reward_forward", "reward_ctrl", "reward_survive")

    def obs_size(self, params: Walker2dParams, model: bridge.ModelInfo) -> int:
        """``nq + nv`` less the x position if excluded."""
        return model.nq + model.nv - params.exclude_current_positions_from_observation

    def reset_model(
        self, params: Walker2dParams, model: bridge.ModelInfo, rng: Rng
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Initial qpos + U(±scale), qvel = U(±scale)."""
        return reset_noise(model, rng, params.reset_noise_scale, qvel_normal=False)

    def control_cost(self, params: Walker2dParams, action: torch.Tensor) -> torch.Tensor:
        """(N,) ``ctrl_cost_weight * sum(action^2)``."""
        return params.ctrl_cost_weight * square_sum(action)

    def is_healthy(self, params: Walker2dParams, sim: Sim) -> torch.Tensor:
        """(N,) bool: height and torso angle inside their ranges."""
        z, angle = sim.qpos[:, 1], sim.qpos[:, 2]
        return between(z, params.healthy_z_range) & between(angle, params.healthy_angle_range)

    def healthy_reward(self, params: Walker2dParams, sim: Sim) -> torch.Tensor:
        """(N,) ``healthy_reward`` while healthy, else 0."""
        healthy = self.is_healthy(params, sim)
        return torch.where(healthy, params.healthy_reward, 0.0).to(torch.float64)

    def transition(
        self, params: Walker2dParams, before: Sim, after: Sim, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Forward velocity plus the healthy reward, minus the control cost."""
        x_velocity = (after.qpos[:, 0] - before.qpos[:, 0]) / self.dt(params)
        forward_reward = params.forward_reward_weight * x_velocity
        healthy_reward = self.healthy_reward(params, after)
        rewards = forward_reward + healthy_reward
        ctrl_cost = self.control_cost(params, action)
        reward = rewards - ctrl_cost
        terminated = ~self.is_healthy(params, after) & params.terminate_when_unhealthy
        terms = {
            "x_velocity": x_velocity,
            "reward_forward": forward_reward,
            "reward_ctrl": -ctrl_cost,
            "reward_survive": healthy_reward,
        }
        return reward, terminated, terms

    def get_obs(self, params: Walker2dParams, sim: Sim) -> torch.Tensor:
        """(N, 17) ``[qpos[1:], clip(qvel, -10, 10)]``."""
        position = (
            sim.qpos[:, 1:] if params.exclude_current_positions_from_observation else sim.qpos
        )
        return torch.cat([position, torch.clamp(sim.qvel, -10, 10)], dim=1)

    def state_info(self, params: Walker2dParams, sim: Sim) -> dict[str, torch.Tensor]:
        """``x_position`` and ``z_distance_from_origin`` (height over the initial one) [m]."""
        z0 = float(self.model(params).qpos0[1])
        return {"x_position": sim.qpos[:, 0], "z_distance_from_origin": sim.qpos[:, 1] - z0}
