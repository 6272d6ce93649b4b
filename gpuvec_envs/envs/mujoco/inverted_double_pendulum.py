"""InvertedDoublePendulum-v5: balance two poles on a cart.

Mirrors ``gymnasium/envs/mujoco/inverted_double_pendulum_v5.py`` (gymnasium 1.4,
``InvertedDoublePendulumEnv``): terminates when the tip (``site_xpos[0]``) falls to
``y <= 1``; reward ``healthy_reward`` while up, minus distance and velocity penalties.

Deliberate difference: gymnasium squares numpy scalars with libm's ``pow`` and takes
``np.sin``/``np.cos``; torch squares by multiplying and uses its own sine and cosine, so
float64 rewards and the sin/cos entries of the observation may differ from gymnasium's in
the last bit (the physics and termination are exact).
"""

from __future__ import annotations

import dataclasses

import torch

from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.mujoco import bridge
from gpuvec_envs.envs.mujoco._base import MujocoEnv, MujocoParams, Sim, reset_noise


@dataclasses.dataclass(frozen=True)
class InvertedDoublePendulumParams(MujocoParams):
    """gymnasium's ``InvertedDoublePendulumEnv`` keyword arguments and defaults."""

    xml_file: str = "inverted_double_pendulum.xml"
    frame_skip: int = 5
    healthy_reward: float = 10.0
    reset_noise_scale: float = 0.1


class InvertedDoublePendulum(MujocoEnv):
    """InvertedDoublePendulum-v5. Observation of 9 numbers."""

    params_type = InvertedDoublePendulumParams
    terms = ("reward_survive", "distance_penalty", "velocity_penalty")

    def fields(self, params: InvertedDoublePendulumParams) -> tuple[str, ...]:
        """The tip site and constraint forces."""
        return ("site_xpos", "qfrc_constraint")

    def obs_size(self, params: InvertedDoublePendulumParams, model: bridge.ModelInfo) -> int:
        """9."""
        return 9

    def reset_model(
        self, params: InvertedDoublePendulumParams, model: bridge.ModelInfo, rng: Rng
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Initial qpos + U(±scale), qvel = scale * N(0, 1)."""
        return reset_noise(model, rng, params.reset_noise_scale, qvel_normal=True)

    def transition(
        self, params: InvertedDoublePendulumParams, before: Sim, after: Sim, action: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, dict[str, torch.Tensor]]:
        """Alive bonus minus the tip's distance and the joints' velocity penalties."""
        tip = after.field("site_xpos")[:, 0]
        x, y = tip[:, 0], tip[:, 2]
        terminated = y <= 1
        v1, v2 = after.qvel[:, 1], after.qvel[:, 2]
        dist_penalty = 0.01 * x**2 + (y - 2) ** 2
        vel_penalty = 1e-3 * v1**2 + 5e-3 * v2**2
        alive_bonus = torch.where(terminated, 0.0, params.healthy_reward).to(torch.float64)
        reward = alive_bonus - dist_penalty - vel_penalty
        terms = {
            "reward_survive": alive_bonus,
            "distance_penalty": -dist_penalty,
            "velocity_penalty": -vel_penalty,
        }
        return reward, terminated, terms

    def get_obs(self, params: InvertedDoublePendulumParams, sim: Sim) -> torch.Tensor:
        """(N, 9) ``[x, sin(angles), cos(angles), clip(qvel), clip(qfrc_constraint[0])]``."""
        q = sim.qpos
        return torch.cat(
            [
                q[:, :1],
                torch.sin(q[:, 1:]),
                torch.cos(q[:, 1:]),
                torch.clamp(sim.qvel, -10, 10),
                torch.clamp(sim.field("qfrc_constraint"), -10, 10)[:, :1],
            ],
            dim=1,
        )
