"""Reacher-v5: move a two-joint arm's fingertip to a random target.

Mirrors ``gymnasium/envs/mujoco/reacher_v5.py`` (gymnasium 1.4, ``ReacherEnv``): reward
``-|fingertip - target| * reward_dist_weight - sum(action^2) * reward_control_weight``
after the step; never terminates (50-step time limit). The target is drawn uniformly in
the disc of radius 0.2 by rejection from the square, as gymnasium (32 candidates per
reset instead of a loop).

Deliberate difference: the observation's ``cos``/``sin`` of the joint angles are torch's,
which may differ from numpy's in the last bit (float64).
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
    constant,
    first_accepted,
    np_norm,
    square_sum,
    uniform,
)

#: Rejection-sampling candidates per reset.
CANDIDATES = 32


@dataclasses.dataclass(frozen=True)
class ReacherParams(MujocoParams):
    """gymnasium's ``ReacherEnv`` keyword arguments and defaults."""

    xml_file: str = "reacher.xml"
    frame_skip: int = 2
    reward_dist_weight: float = 1.0
    reward_control_weight: float = 1.0


class Reacher(MujocoEnv):
    """Reacher-v5. Observation of 10 numbers."""

    params_type = ReacherParams
    camera = (("trackbodyid", 0),)
    terms = ("reward_dist", "reward_ctrl")

    def fields(self, params: ReacherParams) -> tuple[str, ...]:
        """Body positions."""
        return ("xpos",)

    def obs_size(self, params: ReacherParams, model: bridge.ModelInfo) -> int:
        """10."""
        return 10

    def reset_model(
        self, params: ReacherParams, model: bridge.ModelInfo, rng: Rng
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Arm angles + U(±0.1), target uniform in the disc of radius 0.2, qvel U(±0.005)."""
        noise = uniform(rng, model.nq, -0.1, 0.1)
        qpos = noise + constant(model.qpos0, noise)
        goals = uniform(rng, 2 * CANDIDATES, -0.2, 0.2).view(-1, CANDIDATES, 2)
        goal = first_accepted(goals, np_norm(goals) < 0.2)
        qpos = torch.cat([qpos[:, :-2], goal], dim=1)
        qvel = 0.0 + uniform(rng, model.nv, -0.005, 0.005)
        qvel = torch.cat([qvel[:, :-2], torch.zeros_like(qvel[:, -2:])], dim=1)
        return qpos, qvel

    def tip_to_target(self, params: ReacherParams, sim: Sim) -> torch.Tensor:
        """(N, 3) [m] fingertip minus target position."""
        model = self.model(params)
        return sim.body_xpos(model.body_id("fingertip")) - sim.body_xpos(model.body_id("target"))

    def transition(
        self, params: ReacherParams, before: Sim, after: Sim, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Distance and control penalties; never terminates."""
        reward_dist = -np_norm(self.tip_to_target(params, after)) * params.reward_dist_weight
        reward_ctrl = -square_sum(action) * params.reward_control_weight
        reward = reward_dist + reward_ctrl
        terms = {"reward_dist": reward_dist, "reward_ctrl": reward_ctrl}
        return reward, torch.zeros_like(reward, dtype=torch.bool), terms

    def get_obs(self, params: ReacherParams, sim: Sim) -> torch.Tensor:
        """(N, 10) ``[cos(theta), sin(theta), target qpos, arm qvel, (tip - target)[:2]]``."""
        theta = sim.qpos[:, :2]
        return torch.cat(
            [
                torch.cos(theta),
                torch.sin(theta),
                sim.qpos[:, 2:],
                sim.qvel[:, :2],
                self.tip_to_target(params, sim)[:, :2],
            ],
            dim=1,
        )
