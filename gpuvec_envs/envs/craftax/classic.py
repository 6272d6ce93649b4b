"""Craftax-Classic (Symbolic and Pixels) as gpuvec envs: craftax 1.6.1's game behind the shell.

Mirrors ``craftax/craftax_classic/envs/craftax_symbolic_env.py`` and
``craftax_pixels_env.py`` (craftax 1.6.1, ``CraftaxClassic{Symbolic,Pixels}EnvNoAutoReset``):
``reset_env`` is ``generate_world(key)``, ``step_env`` is ``craftax_step`` then
``is_game_over``, the observation is ``render_craftax_symbolic`` or
``render_craftax_pixels`` at 7 px per block divided by 255. The shell adds seeding, the time
limit and autoreset. Both render ``rgb_array`` frames: craftax's pixel rendering at its
human block size (64 px, as its play script draws), (576, 576, 3) uint8.

Keys (craftax takes a jax key per call; here each env carries its own):

* ``reset(seed=s)`` builds env i's world from ``jax.random.PRNGKey(s_i)``
  (``(s_i >> 32, s_i mod 2**32)``; for ``s_i < 2**32`` exactly ``PRNGKey(s_i)``), with
  ``s_i = s + i`` or the i-th seed of a list, as every gpuvec env.
* Step ``t`` uses the state's own key, ``state.state_rng`` (set by ``generate_world`` and
  replaced by every ``craftax_step``): ``env.step_env(state.state_rng, state, action)``.
* A later episode of env i (autoreset, or ``reset()`` without a seed) that starts at the
  env's step counter ``c`` (the shell's draw counter, ``c >= 1``) gets the world of
  ``fold_in(fold_in(PRNGKey(s_i), 0x43524654), c)``.

Episode end: ``terminated`` is craftax's ``is_game_over`` without its time clause (dead or
in lava); the 10,000-step limit is the shell's ``truncated`` (``max_episode_steps``, the
registry's default, equal to craftax's ``max_timesteps``), so craftax's ``done`` is
``terminated | truncated``. ``params.max_timesteps`` is not read here.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch

from gpuvec_envs.core.env import EnvDef
from gpuvec_envs.core.rng import Rng, seeds_from_keys
from gpuvec_envs.envs.craftax import _threefry as tf
from gpuvec_envs.envs.craftax._index import get_cell
from gpuvec_envs.envs.craftax.constants import Achievement, BlockType
from gpuvec_envs.envs.craftax.obs import symbolic_obs
from gpuvec_envs.envs.craftax.pixels import (
    AGENT_BLOCK,
    HUMAN_BLOCK,
    frame_shape,
    render_pixels,
    textures,
)
from gpuvec_envs.envs.craftax.state import CraftaxParams, CraftaxState
from gpuvec_envs.envs.craftax.step import craftax_step
from gpuvec_envs.envs.craftax.worldgen import generate_world, light_level

#: ``fold_in`` tag of the keys of episodes after the seeded one ("CRFT").
EPISODE_TAG = 0x43524654
#: Length of the symbolic observation: 7 x 9 cells x (17 blocks + 4 mobs) + 22.
OBS_SIZE = 1345
#: Achievement names, in craftax's order (the columns of ``info["achievements"]``).
ACHIEVEMENTS: tuple[str, ...] = tuple(a.name.lower() for a in Achievement)
MASK32 = 0xFFFFFFFF
#: Envs drawn at a time by ``render`` (bounds its float temporaries).
RENDER_CHUNK = 16
#: float32's nearest value to 1 / 255: craftax's ``pixels / 255.0`` as XLA:CPU computes it.
_INV_255 = float(np.float32(1) / np.float32(255))


def seed_keys(seeds: torch.Tensor) -> torch.Tensor:
    """``jax.random.PRNGKey(seed)`` per int64 seed in ``[0, 2**63)``: int64 ``(..., 2)``."""
    return torch.stack((seeds >> 32, seeds & MASK32), dim=-1)


def episode_keys(rng: Rng) -> torch.Tensor:
    """The jax key of each new world of a reset, int64 ``(N, 2)`` (see the module doc)."""
    root = seed_keys(seeds_from_keys(rng.key0, rng.key1))
    later = tf.fold_in(tf.fold_in(root, EPISODE_TAG), rng.counter & MASK32)
    return torch.where((rng.counter == 0)[:, None], root, later)


def craftax_score(success_rates: Any) -> float:
    """The Craftax score of per-achievement success rates: craftax's geometric mean.

    ``exp(mean(log(1 + 100 r))) - 1`` over the 22 achievements, in percent (craftax's
    ``compute_score`` and the paper's score).

    Args:
        success_rates: 22 rates in ``[0, 1]`` (tensor, array or sequence), e.g. from
            :func:`success_rates`.
    """
    r = np.asarray(torch.as_tensor(success_rates).cpu(), dtype=np.float64).reshape(-1)
    if r.shape != (len(ACHIEVEMENTS),) or not ((r >= 0) & (r <= 1)).all():
        raise ValueError(f"need {len(ACHIEVEMENTS)} success rates in [0, 1], got {r.tolist()}")
    return float(np.exp(np.mean(np.log1p(100.0 * r))) - 1.0)


def success_rates(achievements: torch.Tensor) -> torch.Tensor:
    """Per-achievement success rates of finished episodes.

    Args:
        achievements: bool ``(E, 22)``, ``info["achievements"]`` rows of ``E`` finished
            episodes (where ``info["_achievements"]``).

    Returns:
        float64 ``(22,)``, the fraction of episodes that unlocked each achievement.
    """
    if achievements.dim() != 2 or achievements.shape[1] != len(ACHIEVEMENTS):
        raise ValueError(f"need (E, 22) achievements, got {tuple(achievements.shape)}")
    if achievements.shape[0] == 0:
        raise ValueError("need at least one finished episode")
    return achievements.to(torch.float64).mean(0)


class CraftaxClassicSymbolic(EnvDef[CraftaxState, CraftaxParams]):
    """Craftax-Classic with craftax's symbolic observation (``Craftax-Classic-Symbolic-v1``).

    Description:
        Crafter's rules on a 64 x 64 procedurally generated world: 22 achievements,
        health, food, drink and energy, day and night, zombies, skeletons, cows, crafting,
        placing, plants (craftax 1.6.1, ``craftax_classic``), bit for bit as craftax
        computes them on the CPU.

    Action Space:
        ``Discrete(17)``: craftax's ``Action`` (0 noop, 1-4 left/right/up/down, 5 do,
        6 sleep, 7-10 place stone/table/furnace/plant, 11-16 make pickaxes and swords).

    Observation Space:
        ``Box(0, 1, (1345,), float32)``: the 7 x 9 local view one-hot over 17 blocks and
        4 mobs (1323), inventory /10 (12), health, food, drink, energy /10, light level,
        sleeping, direction one-hot (4), in craftax's order.

    Rewards:
        1 per achievement unlocked plus 0.1 per health point gained (minus per point lost).

    Starting State:
        The world ``generate_world`` builds from the episode's key (module doc).

    Episode End:
        Terminated when the player dies or stands in lava; truncated at 10,000 steps.
        At the end, ``info["achievements"]`` ((N, 22) bool, mask
        ``info["_achievements"]``) holds the episode's unlocked achievements.

    Arguments:
        The fields of :class:`~gpuvec_envs.envs.craftax.state.CraftaxParams` (craftax's
        ``EnvParams``; only its 64 x 64 map).
    """

    params_type = CraftaxParams
    #: ``render_fps``: the default ``--fps`` of craftax's play script
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["rgb_array"], "render_fps": 60}
    costly_reset = True

    def observation_space(self, params: CraftaxParams, dtype: torch.dtype) -> gym.Space:
        """``Box(0, 1, (1345,), float32)`` whatever ``dtype`` (craftax's observation)."""
        return gym.spaces.Box(0.0, 1.0, (OBS_SIZE,), dtype=np.float32)

    def action_space(self, params: CraftaxParams, dtype: torch.dtype) -> gym.Space:
        """``Discrete(17)``."""
        return gym.spaces.Discrete(17)

    def reset(
        self,
        params: CraftaxParams,
        rng: Rng,
        dtype: torch.dtype,
        options: dict[str, Any] | None,
    ) -> CraftaxState:
        """The worlds of :func:`episode_keys` (``generate_world``).

        The start light level is computed as a step computes it: what craftax's
        ``env.reset`` (world and observation in one jit) returns, 1 ulp above
        ``generate_world`` jitted alone (XLA folds the constant there).
        """
        state = generate_world(episode_keys(rng), params)
        return state._replace(light_level=light_level(state.timestep, params))

    def step(
        self, params: CraftaxParams, state: CraftaxState, action: torch.Tensor, rng: Rng
    ) -> tuple[CraftaxState, torch.Tensor, torch.Tensor]:
        """``craftax_step(state.state_rng, state, action)``; terminated: dead or in lava."""
        state, reward = craftax_step(state.state_rng, state, action, params)
        # the new key is a column of a split: contiguous, so the state keeps its layout
        state = state._replace(state_rng=state.state_rng.contiguous())
        in_lava = get_cell(state.map, state.player_position) == int(BlockType.LAVA)
        return state, reward, in_lava | (state.player_health <= 0)

    def observation(self, params: CraftaxParams, state: CraftaxState) -> torch.Tensor:
        """float32 ``(N, 1345)``: ``render_craftax_symbolic``."""
        return symbolic_obs(state)

    def render(self, params: CraftaxParams, state: CraftaxState) -> torch.Tensor:
        """uint8 ``(N, 576, 576, 3)``: ``render_craftax_pixels`` at 64 px per block.

        craftax's float pixels (``BLOCK_PIXEL_SIZE_HUMAN``, what its play script shows)
        truncated to integers, as numpy's ``astype(uint8)`` does. Drawn
        :data:`RENDER_CHUNK` envs at a time: a 64 px frame's float temporaries take ~30 MB
        an env (not part of a step).
        """
        tex = textures(HUMAN_BLOCK, state.map)
        n = state.map.shape[0]
        out = torch.empty(
            (n, *frame_shape(HUMAN_BLOCK)), dtype=torch.uint8, device=state.map.device
        )
        for i in range(0, n, RENDER_CHUNK):
            part = type(state)(*(x[i : i + RENDER_CHUNK] for x in state))
            out[i : i + RENDER_CHUNK] = render_pixels(part, tex).to(torch.uint8)
        return out

    def episode_info(
        self, params: CraftaxParams, state: CraftaxState
    ) -> dict[str, torch.Tensor] | None:
        """``{"achievements": (N, 22) bool}``, craftax's achievement flags."""
        return {"achievements": state.achievements.clone()}  # not the state's own buffer


class CraftaxClassicPixels(CraftaxClassicSymbolic):
    """Craftax-Classic with craftax's pixel observation (``Craftax-Classic-Pixels-v1``).

    The game, actions, rewards, episode ends, keys and ``info`` of
    :class:`CraftaxClassicSymbolic`; only the observation differs.

    Observation Space:
        ``Box(0, 1, (63, 63, 3), float32)``: ``render_craftax_pixels`` at 7 px per block
        divided by 255, bit for bit: the 7 x 9 view (49 x 63 px) above two inventory rows
        (14 px); night noise from the state's key ``state.state_rng`` (read, not consumed).
        See :mod:`gpuvec_envs.envs.craftax.pixels`.
    """

    def observation_space(self, params: CraftaxParams, dtype: torch.dtype) -> gym.Space:
        """``Box(0, 1, (63, 63, 3), float32)`` whatever ``dtype`` (craftax's observation)."""
        return gym.spaces.Box(0.0, 1.0, frame_shape(AGENT_BLOCK), dtype=np.float32)

    def observation(self, params: CraftaxParams, state: CraftaxState) -> torch.Tensor:
        """float32 ``(N, 63, 63, 3)``: ``render_craftax_pixels(state) / 255``.

        XLA:CPU divides by the constant as a product with float32's ``1 / 255``; so here.
        """
        return render_pixels(state, textures(AGENT_BLOCK, state.map)) * _INV_255
