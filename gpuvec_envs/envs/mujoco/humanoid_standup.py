"""HumanoidStandup-v5: a humanoid lying on the ground, rewarded for standing up.

Mirrors ``gymnasium/envs/mujoco/humanoidstandup_v5.py`` (gymnasium 1.4,
``HumanoidStandupEnv``): reward ``qpos[2] / timestep`` minus the control cost and the
clipped impact cost, plus 1; never terminates.
"""

from __future__ import annotations

import dataclasses

import torch

from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.mujoco import bridge
from gpuvec_envs.envs.mujoco._base import MujocoEnv, MujocoParams, Sim, reset_noise, square_sum
from gpuvec_envs.envs.mujoco.humanoid import (
    HUMANOID_FIELDS,
    humanoid_obs,
    humanoid_obs_size,
    tendon_info,
)


@dataclasses.dataclass(frozen=True)
class HumanoidStandupParams(MujocoParams):
    """gymnasium's ``HumanoidStandupEnv`` keyword arguments and defaults."""

    xml_file: str = "humanoidstandup.xml"
    frame_skip: int = 5
    uph_cost_weight: float = 1.0
    ctrl_cost_weight: float = 0.1
    impact_cost_weight: float = 0.5e-6
    impact_cost_range: tuple[float, float] = (-float("inf"), 10.0)
    reset_noise_scale: float = 1e-2
    exclude_current_positions_from_observation: bool = True
    include_cinert_in_observation: bool = True
    include_cvel_in_observation: bool = True
    include_qfrc_actuator_in_observation: bool = True
    include_cfrc_ext_in_observation: bool = True


class HumanoidStandup(MujocoEnv):
    """HumanoidStandup-v5. Observation of 348 numbers by default (as Humanoid's)."""

    params_type = HumanoidStandupParams
    camera = (
        ("trackbodyid", 1),
        ("distance", 4.0),
        ("lookat", (0.0, 0.0, 0.8925)),
        ("elevation", -20.0),
    )
    terms = ("reward_linup", "reward_quadctrl", "reward_impact")
    needs_derived_info = True

    def fields(self, params: HumanoidStandupParams) -> tuple[str, ...]:
        """As Humanoid's."""
        return HUMANOID_FIELDS

    def obs_size(self, params: HumanoidStandupParams, model: bridge.ModelInfo) -> int:
        """As Humanoid's."""
        return humanoid_obs_size(params, model)

    def reset_model(
        self, params: HumanoidStandupParams, model: bridge.ModelInfo, rng: Rng
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Initial qpos + U(±scale), qvel = U(±scale)."""
        return reset_noise(model, rng, params.reset_noise_scale, qvel_normal=False)

    def transition(
        self, params: HumanoidStandupParams, before: Sim, after: Sim, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """``uph_cost - quad_ctrl_cost - quad_impact_cost + 1``; never terminates.

        As gymnasium's, ``uph_cost_weight`` is accepted and not used.
        """
        uph_cost = (after.qpos[:, 2] - 0) / self.model(params).timestep
        quad_ctrl_cost = params.ctrl_cost_weight * square_sum(action)
        quad_impact_cost = params.impact_cost_weight * square_sum(after.field("cfrc_ext"))
        low, high = params.impact_cost_range
        quad_impact_cost = torch.clamp(quad_impact_cost, low, high)
        reward = uph_cost - quad_ctrl_cost - quad_impact_cost + 1
        terms = {
            "reward_linup": uph_cost,
            "reward_quadctrl": -quad_ctrl_cost,
            "reward_impact": -quad_impact_cost,
        }
        return reward, torch.zeros_like(reward, dtype=torch.bool), terms

    def get_obs(self, params: HumanoidStandupParams, sim: Sim) -> torch.Tensor:
        """As Humanoid's."""
        return humanoid_obs(params, sim)

    def state_info(self, params: HumanoidStandupParams, sim: Sim) -> dict[str, torch.Tensor]:
        """Torso position (height over the initial one) and tendon state."""
        z0 = float(self.model(params).qpos0[2])
        return {
            "x_position": sim.qpos[:, 0],
            "y_position": sim.qpos[:, 1],
            "z_distance_from_origin": sim.qpos[:, 2] - z0,
            **tendon_info(sim),
        }
