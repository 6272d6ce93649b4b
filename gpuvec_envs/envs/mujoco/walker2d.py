"""Walker2d-v5: a planar biped rewarded for walking forward while healthy.

Mirrors ``gymnasium/envs/mujoco/walker2d_v5.py`` (gymnasium 1.4, ``Walker2dEnv``; model
``walker2d_v5.xml``): healthy while z lies in ``healthy_z_range`` and the torso angle in
``healthy_angle_range`` (strict); terminates when unhealthy (if
``terminate_when_unhealthy``).
"""

from __future__ import annotations

import dataclasses

import torch

from gpuvec_envs.envs.mujoco._base import MujocoParams, Sim
from gpuvec_envs.envs.mujoco.hopper import Hopper, between


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


class Walker2d(Hopper):
    """Walker2d-v5. Observation: qpos (without x) and qvel clipped to ±10, 17 numbers.

    Hopper's rewards, observation and reset; only the health check differs.
    """

    params_type = Walker2dParams
    camera = (
        ("trackbodyid", 2),
        ("distance", 4.0),
        ("lookat", (0.0, 0.0, 1.15)),
        ("elevation", -20.0),
    )

    def is_healthy(self, params: Walker2dParams, sim: Sim) -> torch.Tensor:
        """(N,) bool: height and torso angle inside their ranges."""
        z, angle = sim.qpos[:, 1], sim.qpos[:, 2]
        return between(z, params.healthy_z_range) & between(angle, params.healthy_angle_range)
