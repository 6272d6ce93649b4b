"""Craftax-Classic's step, batched: ``craftax_step`` and ``is_game_over``.

Mirrors ``craftax_step`` and ``is_game_over`` in ``craftax/craftax_classic/game_logic.py``
(craftax 1.6.1): the rules in craftax's order with craftax's key splits, the reward
(achievements unlocked this step plus 0.1 per health point gained or lost, summed as
XLA:CPU fuses it), the timestep, light level and ``state_rng`` updates.
"""

from __future__ import annotations

import torch

from gpuvec_envs.envs.craftax import _threefry as tf
from gpuvec_envs.envs.craftax._index import get_cell
from gpuvec_envs.envs.craftax._libm import fma32
from gpuvec_envs.envs.craftax.constants import Action, BlockType
from gpuvec_envs.envs.craftax.mobs import spawn_mobs, update_mobs
from gpuvec_envs.envs.craftax.rules import (
    cap_inventory,
    do_action,
    do_crafting,
    move_player,
    place_block,
    update_health,
    update_plants,
    update_player_intrinsics,
)
from gpuvec_envs.envs.craftax.state import CraftaxParams, CraftaxState
from gpuvec_envs.envs.craftax.worldgen import light_level

#: float32 0.1, the reward per health point.
_TENTH = float(torch.tensor(0.1, dtype=torch.float32))


def craftax_step(
    key: torch.Tensor, state: CraftaxState, action: torch.Tensor, params: CraftaxParams
) -> tuple[CraftaxState, torch.Tensor]:
    """One step of every env: ``craftax_step(key, state, action, params, static_params)``.

    Args:
        key: The jax keys of this step, int64 ``(N, 2)`` (craftax's ``step_env`` key).
        state: The batched state.
        action: ``(N,)`` int64 in ``[0, 17)``.
        params: The env's parameters.

    Returns:
        ``(state, reward)``: the new state and float32 ``(N,)`` rewards.
    """
    init_achievements = state.achievements
    init_health = state.player_health
    action = torch.where(state.is_sleeping, int(Action.NOOP), action)
    state = do_crafting(state, action)
    key, sub = tf.split2(key)
    state = do_action(sub, state, action)
    state = place_block(state, action)
    state = move_player(state, action)
    key, sub = tf.split2(key)
    state = update_mobs(sub, state, params)
    key, sub = tf.split2(key)
    state = spawn_mobs(state, sub, params)
    state = update_plants(state)
    state = update_player_intrinsics(state, action)
    state = cap_inventory(state)
    state = update_health(state)
    unlocked = state.achievements.to(torch.float32).sum(-1) - init_achievements.to(
        torch.float32
    ).sum(-1)
    gained = (state.player_health - init_health).to(torch.float32)
    reward = fma32(gained, _TENTH, unlocked)
    sub = tf.split2(key)[1]
    timestep = state.timestep + 1
    state = state._replace(
        timestep=timestep, light_level=light_level(timestep, params), state_rng=sub
    )
    return state, reward


def is_game_over(state: CraftaxState, params: CraftaxParams) -> torch.Tensor:
    """``(N,)`` bool: out of time, in lava, or dead (``is_game_over``)."""
    in_lava = get_cell(state.map, state.player_position) == int(BlockType.LAVA)
    return (state.timestep >= params.max_timesteps) | in_lava | (state.player_health <= 0)
