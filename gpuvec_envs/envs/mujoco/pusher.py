"""Pusher-v5: a 7-joint arm pushes a cylinder to a goal.

Mirrors ``gymnasium/envs/mujoco/pusher_v5.py`` (gymnasium 1.4, ``PusherEnv``; model
``pusher_v5.xml``): reward ``reward_dist + reward_ctrl + reward_near`` after the step;
never terminates (100-step time limit). The cylinder starts uniformly in
``[-0.3, 0] x [-0.2, 0.2]`` at more than 0.17 from the goal, by rejection as gymnasium
(32 candidates per reset instead of a loop).
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
from gpuvec_envs.envs.mujoco.reacher import CANDIDATES


@dataclasses.dataclass(frozen=True)
class PusherParams(MujocoParams):
    """gymnasium's ``PusherEnv`` keyword arguments and defaults."""

    xml_file: str = "pusher_v5.xml"
    frame_skip: int = 5
    reward_near_weight: float = 0.5
    reward_dist_weight: float = 1.0
    reward_control_weight: float = 0.1


class Pusher(MujocoEnv):
    """Pusher-v5. Observation of 23 numbers."""

    params_type = PusherParams
    camera = (("trackbodyid", -1), ("distance", 4.0))
    terms = ("reward_dist", "reward_ctrl", "reward_near")

    def fields(self, params: PusherParams) -> tuple[str, ...]:
        """Body positions."""
        return ("xpos",)

    def obs_size(self, params: PusherParams, model: bridge.ModelInfo) -> int:
        """23."""
        return 23

    def reset_model(
        self, params: PusherParams, model: bridge.ModelInfo, rng: Rng
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The arm at ``init_qpos``, the cylinder drawn, the goal at 0, qvel U(±0.005)."""
        u = uniform(rng, 2 * CANDIDATES, 0.0, 1.0).view(-1, CANDIDATES, 2)
        cylinders = torch.stack([-0.3 + 0.3 * u[..., 0], -0.2 + 0.4 * u[..., 1]], dim=2)
        cylinder = first_accepted(cylinders, np_norm(cylinders - 0.0) > 0.17)
        qpos0 = constant(model.qpos0, u).expand(u.shape[0], -1)
        qpos = torch.cat([qpos0[:, :-4], cylinder, torch.zeros_like(cylinder)], dim=1)
        qvel = 0.0 + uniform(rng, model.nv, -0.005, 0.005)
        qvel = torch.cat([qvel[:, :-4], torch.zeros_like(qvel[:, -4:])], dim=1)
        return qpos, qvel

    def body(self, params: PusherParams, sim: Sim, name: str) -> torch.Tensor:
        """(N, 3) [m] position of body ``name``."""
        return sim.body_xpos(self.model(params).body_id(name))

    def transition(
        self, params: PusherParams, before: Sim, after: Sim, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Fingertip-to-object and object-to-goal distances and the control cost."""
        obj = self.body(params, after, "object")
        vec_1 = obj - self.body(params, after, "tips_arm")
        vec_2 = obj - self.body(params, after, "goal")
        reward_near = -np_norm(vec_1) * params.reward_near_weight
        reward_dist = -np_norm(vec_2) * params.reward_dist_weight
        reward_ctrl = -square_sum(action) * params.reward_control_weight
        reward = reward_dist + reward_ctrl + reward_near
        terms = {"reward_dist": reward_dist, "reward_ctrl": reward_ctrl, "reward_near": reward_near}
        return reward, torch.zeros_like(reward, dtype=torch.bool), terms

    def get_obs(self, params: PusherParams, sim: Sim) -> torch.Tensor:
        """(N, 23) ``[qpos[:7], qvel[:7], tips_arm, object, goal]``."""
        return torch.cat(
            [
                sim.qpos[:, :7],
                sim.qvel[:, :7],
                self.body(params, sim, "tips_arm"),
                self.body(params, sim, "object"),
                self.body(params, sim, "goal"),
            ],
            dim=1,
        )
