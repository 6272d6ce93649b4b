"""Ant-v5: a four-legged 3D robot rewarded for moving forward while healthy.

Mirrors ``gymnasium/envs/mujoco/ant_v5.py`` (gymnasium 1.4, ``AntEnv``): the velocity of
``main_body`` from its ``xpos`` before and after the step, contact forces
(``cfrc_ext``, after ``mj_rnePostConstraint``) clipped to ``contact_force_range`` in the
observation and the contact cost, healthy while the state is finite and the torso
height lies in ``healthy_z_range`` (inclusive).
"""

from __future__ import annotations

import dataclasses

import torch

from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.mujoco import bridge
from gpuvec_envs.envs.mujoco._base import MujocoEnv, MujocoParams, Sim, reset_noise, square_sum
from gpuvec_envs.envs.mujoco.swimmer import xy_info


@dataclasses.dataclass(frozen=True)
class AntParams(MujocoParams):
    """gymnasium's ``AntEnv`` keyword arguments and defaults."""

    xml_file: str = "ant.xml"
    frame_skip: int = 5
    forward_reward_weight: float = 1.0
    ctrl_cost_weight: float = 0.5
    contact_cost_weight: float = 5e-4
    healthy_reward: float = 1.0
    main_body: int | str = 1
    terminate_when_unhealthy: bool = True
    healthy_z_range: tuple[float, float] = (0.2, 1.0)
    contact_force_range: tuple[float, float] = (-1.0, 1.0)
    reset_noise_scale: float = 0.1
    exclude_current_positions_from_observation: bool = True
    include_cfrc_ext_in_observation: bool = True


class Ant(MujocoEnv):
    """Ant-v5. Observation: qpos (without x, y), qvel and clipped ``cfrc_ext[1:]``, 105."""

    params_type = AntParams
    camera = (("distance", 4.0),)
    terms = (
        "x_velocity",
        "y_velocity",
        "reward_forward",
        "reward_ctrl",
        "reward_contact",
        "reward_survive",
    )
    reads_before = True

    def fields(self, params: AntParams) -> tuple[str, ...]:
        """Body positions and external contact forces."""
        return ("xpos", "cfrc_ext")

    def obs_size(self, params: AntParams, model: bridge.ModelInfo) -> int:
        """``nq + nv`` (less x, y) plus ``6 (nbody - 1)`` contact forces."""
        size = model.nq + model.nv - 2 * params.exclude_current_positions_from_observation
        return size + 6 * (model.nbody - 1) * params.include_cfrc_ext_in_observation

    def reset_model(
        self, params: AntParams, model: bridge.ModelInfo, rng: Rng
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Initial qpos + U(±scale), qvel = scale * N(0, 1)."""
        model.body_id(params.main_body)  # a bad main_body fails at the first reset
        return reset_noise(model, rng, params.reset_noise_scale, qvel_normal=True)

    def control_cost(self, params: AntParams, action: torch.Tensor) -> torch.Tensor:
        """(N,) ``ctrl_cost_weight * sum(action^2)``."""
        return params.ctrl_cost_weight * square_sum(action)

    def contact_forces(self, params: AntParams, sim: Sim) -> torch.Tensor:
        """(N, nbody, 6) ``cfrc_ext`` clipped to ``contact_force_range``."""
        low, high = params.contact_force_range
        return torch.clamp(sim.field("cfrc_ext"), low, high)

    def contact_cost(self, params: AntParams, sim: Sim) -> torch.Tensor:
        """(N,) ``contact_cost_weight * sum(contact_forces^2)``."""
        return params.contact_cost_weight * square_sum(self.contact_forces(params, sim))

    def is_healthy(self, params: AntParams, sim: Sim) -> torch.Tensor:
        """(N,) bool: finite state and ``low <= z <= high``."""
        low, high = params.healthy_z_range
        finite = torch.isfinite(torch.cat([sim.qpos, sim.qvel], dim=1)).all(dim=1)
        z = sim.qpos[:, 2]
        return finite & (low <= z) & (z <= high)

    def healthy_reward(self, params: AntParams, sim: Sim) -> torch.Tensor:
        """(N,) ``healthy_reward`` while healthy, else 0."""
        healthy = self.is_healthy(params, sim)
        return torch.where(healthy, params.healthy_reward, 0.0).to(torch.float64)

    def transition(
        self, params: AntParams, before: Sim, after: Sim, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Forward velocity plus the healthy reward, minus control and contact costs."""
        body = self.model(params).body_id(params.main_body)
        xy_before = before.body_xpos(body)[:, :2]
        xy_after = after.body_xpos(body)[:, :2]
        xy_velocity = (xy_after - xy_before) / self.dt(params)
        x_velocity, y_velocity = xy_velocity[:, 0], xy_velocity[:, 1]
        forward_reward = x_velocity * params.forward_reward_weight
        healthy_reward = self.healthy_reward(params, after)
        rewards = forward_reward + healthy_reward
        ctrl_cost = self.control_cost(params, action)
        contact_cost = self.contact_cost(params, after)
        costs = ctrl_cost + contact_cost
        reward = rewards - costs
        terminated = ~self.is_healthy(params, after) & params.terminate_when_unhealthy
        terms = {
            "x_velocity": x_velocity,
            "y_velocity": y_velocity,
            "reward_forward": forward_reward,
            "reward_ctrl": -ctrl_cost,
            "reward_contact": -contact_cost,
            "reward_survive": healthy_reward,
        }
        return reward, terminated, terms

    def get_obs(self, params: AntParams, sim: Sim) -> torch.Tensor:
        """(N, 105) ``[qpos[2:], qvel, clip(cfrc_ext[1:])]``."""
        position = (
            sim.qpos[:, 2:] if params.exclude_current_positions_from_observation else sim.qpos
        )
        parts = [position, sim.qvel]
        if params.include_cfrc_ext_in_observation:
            forces = self.contact_forces(params, sim)[:, 1:]
            parts.append(forces.reshape(forces.shape[0], -1))
        return torch.cat(parts, dim=1)

    def state_info(self, params: AntParams, sim: Sim) -> dict[str, torch.Tensor]:
        """Torso position in the plane."""
        return xy_info(sim.qpos)
