"""Humanoid-v5: a 3D humanoid rewarded for walking forward without falling.

Mirrors ``gymnasium/envs/mujoco/humanoid_v5.py`` (gymnasium 1.4, ``HumanoidEnv``): the
velocity of the mass centre (from ``xipos``, numpy's ``einsum`` order), the observation
with ``cinert``, ``cvel``, ``qfrc_actuator`` and ``cfrc_ext`` (each switchable), the
contact cost clipped to ``contact_cost_range``, healthy while ``qpos[2]`` lies strictly
inside ``healthy_z_range``.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch

from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.mujoco import bridge
from gpuvec_envs.envs.mujoco._base import (
    MujocoEnv,
    MujocoParams,
    Sim,
    reset_noise,
    square_sum,
)
from gpuvec_envs.envs.mujoco.hopper import between
from gpuvec_envs.envs.mujoco.swimmer import xy_info

#: The observed mjData fields and the include_*_in_observation flag of each.
OBSERVED = (
    ("cinert", "include_cinert_in_observation"),
    ("cvel", "include_cvel_in_observation"),
    ("qfrc_actuator", "include_qfrc_actuator_in_observation"),
    ("cfrc_ext", "include_cfrc_ext_in_observation"),
)


@dataclasses.dataclass(frozen=True)
class HumanoidParams(MujocoParams):
    """gymnasium's ``HumanoidEnv`` keyword arguments and defaults."""

    xml_file: str = "humanoid.xml"
    frame_skip: int = 5
    forward_reward_weight: float = 1.25
    ctrl_cost_weight: float = 0.1
    contact_cost_weight: float = 5e-7
    contact_cost_range: tuple[float, float] = (-float("inf"), 10.0)
    healthy_reward: float = 5.0
    terminate_when_unhealthy: bool = True
    healthy_z_range: tuple[float, float] = (1.0, 2.0)
    reset_noise_scale: float = 1e-2
    exclude_current_positions_from_observation: bool = True
    include_cinert_in_observation: bool = True
    include_cvel_in_observation: bool = True
    include_qfrc_actuator_in_observation: bool = True
    include_cfrc_ext_in_observation: bool = True


def mass_center(model: bridge.ModelInfo, sim: Sim) -> torch.Tensor:
    """(N, 2) [m] x, y of the mass centre, as gymnasium's ``mass_center`` (bitwise).

    ``np.einsum('b,bj->j', mass, xipos)`` adds the bodies one by one; the total mass is a
    numpy sum.
    """
    xipos = sim.field("xipos")
    num = torch.zeros_like(xipos[:, 0])
    for b, mass in enumerate(model.body_mass.tolist()):
        num = num + mass * xipos[:, b]
    return (num / float(np.sum(model.body_mass)))[:, 0:2]


def humanoid_obs(params: HumanoidParams, sim: Sim) -> torch.Tensor:
    """(N, obs) ``[qpos[2:], qvel, cinert[1:], cvel[1:], qfrc_actuator[6:], cfrc_ext[1:]]``."""
    position = sim.qpos[:, 2:] if params.exclude_current_positions_from_observation else sim.qpos
    parts = [position, sim.qvel]
    for name, flag in OBSERVED:
        if getattr(params, flag):
            x = sim.field(name)
            x = x[:, 6:] if name == "qfrc_actuator" else x[:, 1:]
            parts.append(x.reshape(x.shape[0], -1))
    return torch.cat(parts, dim=1)


def humanoid_obs_size(params: HumanoidParams, model: bridge.ModelInfo) -> int:
    """Length of :func:`humanoid_obs`."""
    size = model.nq + model.nv - 2 * params.exclude_current_positions_from_observation
    size += 10 * (model.nbody - 1) * params.include_cinert_in_observation
    size += 6 * (model.nbody - 1) * params.include_cvel_in_observation
    size += (model.nv - 6) * params.include_qfrc_actuator_in_observation
    return size + 6 * (model.nbody - 1) * params.include_cfrc_ext_in_observation


#: mjData fields of the humanoid tasks: observation, mass centre, tendon info.
HUMANOID_FIELDS = (
    "xipos",
    "cinert",
    "cvel",
    "qfrc_actuator",
    "cfrc_ext",
    "ten_length",
    "ten_velocity",
)


def tendon_info(sim: Sim) -> dict[str, torch.Tensor]:
    """``tendon_length`` and ``tendon_velocity``, (N, ntendon) each."""
    return {"tendon_length": sim.field("ten_length"), "tendon_velocity": sim.field("ten_velocity")}


class Humanoid(MujocoEnv):
    """Humanoid-v5. Observation of 348 numbers by default."""

    params_type = HumanoidParams
    camera = (
        ("trackbodyid", 1),
        ("distance", 4.0),
        ("lookat", (0.0, 0.0, 2.0)),
        ("elevation", -20.0),
    )
    terms = (
        "x_velocity",
        "y_velocity",
        "reward_survive",
        "reward_forward",
        "reward_ctrl",
        "reward_contact",
    )
    reads_before = True
    needs_derived_info = True

    def fields(self, params: HumanoidParams) -> tuple[str, ...]:
        """See :data:`HUMANOID_FIELDS`."""
        return HUMANOID_FIELDS

    def obs_size(self, params: HumanoidParams, model: bridge.ModelInfo) -> int:
        """See :func:`humanoid_obs_size`."""
        return humanoid_obs_size(params, model)

    def reset_model(
        self, params: HumanoidParams, model: bridge.ModelInfo, rng: Rng
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Initial qpos + U(±scale), qvel = U(±scale)."""
        return reset_noise(model, rng, params.reset_noise_scale, qvel_normal=False)

    def control_cost(self, params: HumanoidParams, action: torch.Tensor) -> torch.Tensor:
        """(N,) ``ctrl_cost_weight * sum(ctrl^2)``."""
        return params.ctrl_cost_weight * square_sum(action)

    def contact_cost(self, params: HumanoidParams, sim: Sim) -> torch.Tensor:
        """(N,) ``contact_cost_weight * sum(cfrc_ext^2)`` clipped to ``contact_cost_range``."""
        cost = params.contact_cost_weight * square_sum(sim.field("cfrc_ext"))
        low, high = params.contact_cost_range
        return torch.clamp(cost, low, high)

    def is_healthy(self, params: HumanoidParams, sim: Sim) -> torch.Tensor:
        """(N,) bool: ``low < qpos[2] < high``."""
        return between(sim.qpos[:, 2], params.healthy_z_range)

    def healthy_reward(self, params: HumanoidParams, sim: Sim) -> torch.Tensor:
        """(N,) ``healthy_reward`` while healthy, else 0."""
        healthy = self.is_healthy(params, sim)
        return torch.where(healthy, params.healthy_reward, 0.0).to(torch.float64)

    def transition(
        self, params: HumanoidParams, before: Sim, after: Sim, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Mass-centre velocity plus the healthy reward, minus control and contact costs."""
        model = self.model(params)
        xy_velocity = (mass_center(model, after) - mass_center(model, before)) / self.dt(params)
        x_velocity, y_velocity = xy_velocity[:, 0], xy_velocity[:, 1]
        forward_reward = params.forward_reward_weight * x_velocity
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
            "reward_survive": healthy_reward,
            "reward_forward": forward_reward,
            "reward_ctrl": -ctrl_cost,
            "reward_contact": -contact_cost,
        }
        return reward, terminated, terms

    def get_obs(self, params: HumanoidParams, sim: Sim) -> torch.Tensor:
        """See :func:`humanoid_obs`."""
        return humanoid_obs(params, sim)

    def state_info(self, params: HumanoidParams, sim: Sim) -> dict[str, torch.Tensor]:
        """Torso position in the plane and tendon lengths and velocities."""
        return {**xy_info(sim.qpos), **tendon_info(sim)}
