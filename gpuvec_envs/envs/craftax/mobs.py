"""Craftax-Classic's mobs, batched: zombies, cows, skeletons and arrows move, attack, spawn.

Mirrors ``update_mobs`` and ``spawn_mobs`` of ``craftax/craftax_classic/game_logic.py``
(craftax 1.6.1): the slots of each group are processed in slot order, each reading the state
the previous slot left (a Python loop over the few slots, never over envs), with the same key
splits and draws as craftax's ``lax.scan`` bodies. Every slot moves, active or not (craftax
moves idle slots too; only active ones attack, and only active ones mark ``mob_map``);
inactive arrows keep flying in their last direction.
"""

from __future__ import annotations

import torch

from gpuvec_envs.envs.craftax import _threefry as tf
from gpuvec_envs.envs.craftax._index import get_cell, set_cell
from gpuvec_envs.envs.craftax._libm import fma32, round32
from gpuvec_envs.envs.craftax.constants import DIRECTIONS, Achievement, BlockType
from gpuvec_envs.envs.craftax.rules import _achieve, _first_true, in_bounds, is_in_mob, is_in_wall
from gpuvec_envs.envs.craftax.state import CraftaxParams, CraftaxState


def can_move_to(state: CraftaxState, pos: torch.Tensor) -> torch.Tensor:
    """``is_position_in_bounds_not_in_wall_not_in_mob_not_in_lava`` ``(N,)`` bool."""
    lava = get_cell(state.map, pos) == int(BlockType.LAVA)
    return in_bounds(pos) & ~is_in_wall(state, pos) & ~is_in_mob(state, pos) & ~lava


def _distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """Manhattan distance ``(N,)`` of cells ``(N, 2)``."""
    return (a - b).abs().sum(-1)


def _random_step(key: torch.Tensor, choices: int) -> torch.Tensor:
    """``jax.random.choice(key, DIRECTIONS[1:1 + choices])``: ``(N, 2)`` steps."""
    table = torch.tensor(DIRECTIONS[1 : 1 + choices], dtype=torch.int64, device=key.device)
    return table[tf.choice(key, choices)]


def _chase_step(key: torch.Tensor, pos: torch.Tensor, player: torch.Tensor) -> torch.Tensor:
    """The one-axis step toward the player (craftax's ``player_move_direction``), ``(N, 2)``.

    The axis is drawn by ``choice`` with ``p`` = (axis distance is the largest) / (sum of
    both); on the player's cell ``p`` is NaN, jax's index is 2 and its write is dropped: no
    step.
    """
    gap = (player - pos).abs()
    p = (gap == gap.amax(-1, keepdim=True)).to(torch.float32) / gap.sum(-1, keepdim=True).to(
        torch.float32
    )
    axis = tf.choice(key, 2, p=p)  # (N,), 2 where p is NaN
    sign = torch.sign(player - pos)
    onehot = axis[:, None] == torch.arange(2, device=pos.device)
    return torch.where(onehot, sign, 0)


def _leave_and_enter(
    mob_map: torch.Tensor,
    old: torch.Tensor,
    new: torch.Tensor,
    mask: torch.Tensor,
    new_mask: torch.Tensor,
) -> torch.Tensor:
    """Clear the old cell of an active mob, then mark the new cell if it stays active."""
    mob_map = set_cell(mob_map, old, get_cell(mob_map, old) & ~mask)
    return set_cell(mob_map, new, get_cell(mob_map, new) | new_mask)


def _set_slot(x: torch.Tensor, slot: int, value: torch.Tensor) -> torch.Tensor:
    out = x.clone()
    out[:, slot] = value
    return out


def update_mobs(key: torch.Tensor, state: CraftaxState, params: CraftaxParams) -> CraftaxState:
    """Move every mob slot and let zombies, skeletons and arrows attack (``update_mobs``).

    Args:
        key: The jax keys of this call, int64 ``(N, 2)``.
        state: The batched state.
        params: The env's parameters.

    Returns:
        The new state.
    """
    player = state.player_position
    rng = tf.split2(key)[0]

    # zombies: chase when near (75%), else wander; bite when adjacent
    for i in range(state.zombies_mask.shape[1]):
        pos = state.zombies_position[:, i]
        mask = state.zombies_mask[:, i]
        cooldown = state.zombies_attack_cooldown[:, i]
        rng, sub = tf.split2(rng)
        wander = pos + _random_step(sub, 4)
        rng, sub = tf.split2(rng)
        chase = pos + _chase_step(sub, pos, player)
        dist = _distance(pos, player)
        rng, sub = tf.split2(rng)
        close = (dist < 10) & (tf.uniform(sub) < 0.75)
        proposed = torch.where(close[:, None], chase, wander)
        attacking = (dist == 1) & (cooldown <= 0) & mask
        proposed = torch.where(attacking[:, None], pos, proposed)
        damage = torch.where(state.is_sleeping, 7, 2)
        state = state._replace(
            player_health=state.player_health - damage * attacking.long(),
            is_sleeping=state.is_sleeping & ~attacking,
            achievements=_achieve(
                state.achievements, Achievement.WAKE_UP, state.is_sleeping & attacking
            ),
        )
        position = torch.where(can_move_to(state, proposed)[:, None], proposed, pos)
        new_mask = mask & (dist < params.mob_despawn_distance)
        state = state._replace(
            zombies_position=_set_slot(state.zombies_position, i, position),
            zombies_attack_cooldown=_set_slot(
                state.zombies_attack_cooldown, i, torch.where(attacking, 5, cooldown - 1)
            ),
            zombies_mask=_set_slot(state.zombies_mask, i, new_mask),
            mob_map=_leave_and_enter(state.mob_map, pos, position, mask, new_mask),
        )
        rng = tf.split2(rng)[1]  # craftax carries the second key of this split

    # cows: wander (half of the 8 choices stay put)
    rng = tf.split2(rng)[0]
    for i in range(state.cows_mask.shape[1]):
        pos = state.cows_position[:, i]
        mask = state.cows_mask[:, i]
        rng, sub = tf.split2(rng)
        proposed = pos + _random_step(sub, 8)
        position = torch.where(can_move_to(state, proposed)[:, None], proposed, pos)
        new_mask = mask & (_distance(pos, player) < params.mob_despawn_distance)
        state = state._replace(
            cows_position=_set_slot(state.cows_position, i, position),
            cows_mask=_set_slot(state.cows_mask, i, new_mask),
            mob_map=_leave_and_enter(state.mob_map, pos, position, mask, new_mask),
        )

    # skeletons: approach from afar, flee when close, shoot arrows at 4-5 cells
    rng = tf.split2(rng)[0]
    for i in range(state.skeletons_mask.shape[1]):
        pos = state.skeletons_position[:, i]
        mask = state.skeletons_mask[:, i]
        cooldown = state.skeletons_attack_cooldown[:, i]
        rng, sub = tf.split2(rng)
        wander = pos + _random_step(sub, 4)
        rng, sub = tf.split2(rng)
        step = _chase_step(sub, pos, player)
        dist = _distance(pos, player)
        far, near = dist >= 10, dist <= 3
        proposed = torch.where(far[:, None], pos + step, wander)
        proposed = torch.where(near[:, None], pos - step, proposed)
        rng, sub = tf.split2(rng)
        proposed = torch.where((tf.uniform(sub) > 0.85)[:, None], proposed, wander)
        attacking = ((dist >= 4) & (dist <= 5)) | (near & ~can_move_to(state, proposed))
        attacking = attacking & (cooldown <= 0) & mask
        # shoot: the first free arrow slot (slot 0 when none is free, left unchanged)
        spawning = attacking & (state.arrows_mask.sum(-1) < state.arrows_mask.shape[1])
        slot = (
            torch.nn.functional.one_hot(
                _first_true(~state.arrows_mask), state.arrows_mask.shape[1]
            ).bool()
            & spawning[:, None]
        )
        state = state._replace(
            arrows_position=torch.where(slot[..., None], pos[:, None, :], state.arrows_position),
            arrows_mask=state.arrows_mask | slot,
            arrow_directions=torch.where(slot[..., None], step[:, None, :], state.arrow_directions),
        )
        proposed = torch.where(attacking[:, None], pos, proposed)
        position = torch.where(can_move_to(state, proposed)[:, None], proposed, pos)
        new_mask = mask & (dist < params.mob_despawn_distance)
        state = state._replace(
            skeletons_position=_set_slot(state.skeletons_position, i, position),
            skeletons_attack_cooldown=_set_slot(
                state.skeletons_attack_cooldown, i, torch.where(attacking, 4, cooldown - 1)
            ),
            skeletons_mask=_set_slot(state.skeletons_mask, i, new_mask),
            mob_map=_leave_and_enter(state.mob_map, pos, position, mask, new_mask),
        )

    # arrows: fly on (over water), stop at walls, mobs and the player; break tables/furnaces
    for i in range(state.arrows_mask.shape[1]):
        mask = state.arrows_mask[:, i]
        proposed = state.arrows_position[:, i] + state.arrow_directions[:, i]
        block = get_cell(state.map, proposed)
        wall = is_in_wall(state, proposed) & (block != int(BlockType.WATER))
        flying = in_bounds(proposed) & ~wall & ~is_in_mob(state, proposed)
        hit = (proposed == player).all(-1) & mask
        breaking = (
            (block == int(BlockType.FURNACE)) | (block == int(BlockType.CRAFTING_TABLE))
        ) & mask
        state = state._replace(
            arrows_position=_set_slot(state.arrows_position, i, proposed),
            arrows_mask=_set_slot(state.arrows_mask, i, flying & mask),
            player_health=state.player_health - 2 * hit.long(),
            is_sleeping=state.is_sleeping & ~hit,
            map=set_cell(
                state.map, proposed, torch.full_like(block, int(BlockType.PATH)), breaking
            ),
        )
    return state


def _spawn(
    key_chance: torch.Tensor,
    key_cell: torch.Tensor,
    chance: torch.Tensor | float,
    allowed: torch.Tensor,
    mask: torch.Tensor,
    position: torch.Tensor,
    health: torch.Tensor,
    new_health: int,
    mob_map: torch.Tensor,
) -> tuple[torch.Tensor, ...]:
    """Spawn one mob of a group into its first free slot (one block of ``spawn_mobs``).

    Args:
        key_chance: Keys of the spawn draw ``(N, 2)``.
        key_cell: Keys of the cell draw ``(N, 2)``.
        chance: Spawn probability, float or float32 ``(N,)``.
        allowed: ``(N, H, W)`` bool cells the mob may appear on.
        mask: The group's ``(N, K)`` slot mask.
        position: ``(N, K, 2)``.
        health: ``(N, K)``.
        new_health: Health of a new mob.
        mob_map: ``(N, H, W)`` bool.

    Returns:
        ``(mask, position, health, mob_map)``.
    """
    n, h, w = allowed.shape
    spawning = (mask.sum(-1) < mask.shape[1]) & (tf.uniform(key_chance) < chance)
    flat = allowed.reshape(n, -1)
    spawning = spawning & flat.any(-1)
    index = tf.choice_in_mask(key_cell, flat)  # choice(h * w, (1,), p=flat / flat.sum())
    cell = torch.stack((index // h, index % w), -1)
    slot = _first_true(~mask)
    onehot = torch.nn.functional.one_hot(slot, mask.shape[1]).bool()
    old_pos = position.gather(1, slot[:, None, None].expand(n, 1, 2))[:, 0]
    new_pos = torch.where(spawning[:, None], cell, old_pos)
    new_mask = spawning | mask.gather(1, slot[:, None])[:, 0]
    position = torch.where(onehot[..., None], new_pos[:, None, :], position)
    health = torch.where(onehot & spawning[:, None], new_health, health)
    mask = torch.where(onehot, new_mask[:, None], mask)
    mob_map = set_cell(mob_map, new_pos, get_cell(mob_map, new_pos) | new_mask)
    return mask, position, health, mob_map


def spawn_mobs(state: CraftaxState, key: torch.Tensor, params: CraftaxParams) -> CraftaxState:
    """Maybe spawn a cow, a zombie (likelier at night) and a skeleton (``spawn_mobs``).

    Args:
        state: The batched state.
        key: The jax keys of this call, int64 ``(N, 2)``.
        params: The env's parameters.

    Returns:
        The new state.
    """
    n, h, w = state.map.shape
    rows = torch.arange(h, device=key.device)[None, :, None]
    cols = torch.arange(w, device=key.device)[None, None, :]
    player = state.player_position
    dist = (rows - player[:, 0, None, None]).abs() + (cols - player[:, 1, None, None]).abs()
    far = dist < params.mob_despawn_distance
    keys = [tf.split2(key)]
    for _ in range(5):
        keys.append(tf.split2(keys[-1][0]))
    subs = [k[1] for k in keys]

    grass = state.map == int(BlockType.GRASS)
    path = state.map == int(BlockType.PATH)
    allowed = grass & (dist > 3) & far & ~state.mob_map
    mask, pos, health, mob_map = _spawn(
        subs[0],
        subs[1],
        params.spawn_cow_chance,
        allowed,
        state.cows_mask,
        state.cows_position,
        state.cows_health,
        params.cow_health,
        state.mob_map,
    )
    state = state._replace(cows_mask=mask, cows_position=pos, cows_health=health, mob_map=mob_map)

    dark = 1 - state.light_level
    chance = fma32(
        round32(params.spawn_zombie_night_chance),
        dark * dark,
        round32(params.spawn_zombie_base_chance),
    )
    allowed = (grass | path) & (dist > 9) & far & ~state.mob_map
    mask, pos, health, mob_map = _spawn(
        subs[2],
        subs[3],
        chance,
        allowed,
        state.zombies_mask,
        state.zombies_position,
        state.zombies_health,
        params.zombie_health,
        state.mob_map,
    )
    state = state._replace(
        zombies_mask=mask, zombies_position=pos, zombies_health=health, mob_map=mob_map
    )

    allowed = path & (dist > 9) & far & ~state.mob_map
    mask, pos, health, mob_map = _spawn(
        subs[4],
        subs[5],
        params.spawn_skeleton_chance,
        allowed,
        state.skeletons_mask,
        state.skeletons_position,
        state.skeletons_health,
        params.skeleton_health,
        state.mob_map,
    )
    return state._replace(
        skeletons_mask=mask, skeletons_position=pos, skeletons_health=health, mob_map=mob_map
    )
