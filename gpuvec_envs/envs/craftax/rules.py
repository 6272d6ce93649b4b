"""Craftax-Classic's player rules, batched: crafting, interacting, placing, moving, intrinsics.

Mirrors the functions of ``craftax/craftax_classic/game_logic.py`` (craftax 1.6.1) that act
on the player and the map, one function here per function there, same names, same order of
updates (later updates read earlier ones exactly where craftax's do). Each takes the batched
:class:`~.state.CraftaxState` and ``action`` ``(N,)`` int64 and returns the new state;
nothing is modified in place.

craftax reads and writes cells at positions that can leave the map; jax's indexing rules
for those (wrap a negative index once, clamp reads, drop writes) are applied through
:mod:`._index`. Quirks kept on purpose because craftax has them: ``DO`` sets every zombie
and cow slot's mask to ``health > 0`` (activating idle slots that still have health); the
player may step onto a cell off the map when the clamped/wrapped cell it reads is lava;
eating a ripe plant that is not in the plant list resets the age of plant slot 0.

Not here yet: ``update_mobs``, ``spawn_mobs`` (mob movement, attacks, arrows, spawning).
"""

from __future__ import annotations

import torch

from gpuvec_envs.core.constants import table
from gpuvec_envs.envs.craftax import _threefry as tf
from gpuvec_envs.envs.craftax._index import get_cell, set_cell
from gpuvec_envs.envs.craftax.constants import (
    DIRECTIONS,
    SOLID_BLOCKS,
    Achievement,
    Action,
    BlockType,
)
from gpuvec_envs.envs.craftax.state import CraftaxState

# inventory columns (constants.INVENTORY order)
WOOD, STONE, COAL, IRON, DIAMOND, SAPLING = range(6)
WOOD_PICKAXE, STONE_PICKAXE, IRON_PICKAXE, WOOD_SWORD, STONE_SWORD, IRON_SWORD = range(6, 12)

#: The 8 cells around the player that count as "near" (craftax's ``CLOSE_BLOCKS``).
CLOSE_BLOCKS = ((0, -1), (0, 1), (-1, 0), (1, 0), (-1, -1), (-1, 1), (1, -1), (1, 1))


def _step_of(action: torch.Tensor) -> torch.Tensor:
    """``DIRECTIONS[action]``, ``(N, 2)``, read with jax's clamp.

    craftax's table has 16 rows, so action 16 reads row 15: a zero step.
    """
    table = torch.tensor(DIRECTIONS, dtype=torch.int64, device=action.device)
    return table[action.clamp(0, len(DIRECTIONS) - 1)]


def facing(state: CraftaxState) -> torch.Tensor:
    """The cell in front of each player, ``(N, 2)`` (may lie off the map)."""
    return state.player_position + _step_of(state.player_direction)


def in_bounds(pos: torch.Tensor, shape: tuple[int, int] = (64, 64)) -> torch.Tensor:
    """``(N,)`` bool: ``pos`` ``(N, 2)`` on the map."""
    return (pos[:, 0] >= 0) & (pos[:, 0] < shape[0]) & (pos[:, 1] >= 0) & (pos[:, 1] < shape[1])


def is_in_wall(state: CraftaxState, pos: torch.Tensor) -> torch.Tensor:
    """``(N,)`` bool: the (jax-read) block at ``pos`` is solid."""
    block = get_cell(state.map, pos)
    out = torch.zeros_like(block, dtype=torch.bool)
    for solid in SOLID_BLOCKS:
        out = out | (block == int(solid))
    return out


def is_in_mob(state: CraftaxState, pos: torch.Tensor) -> torch.Tensor:
    """``(N,)`` bool: a mob (``mob_map``, jax-read) or the player is at ``pos``."""
    return get_cell(state.mob_map, pos) | (state.player_position == pos).all(-1)


def _achieve(achievements: torch.Tensor, which: Achievement, done: torch.Tensor) -> torch.Tensor:
    """``achievements`` with column ``which`` or-ed with ``done`` ``(N,)``."""
    out = achievements.clone()
    out[:, int(which)] |= done
    return out


def _select(cond: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``jax.lax.select`` of a per-env ``cond`` ``(N,)`` over tensors ``(N, ...)``."""
    return torch.where(cond.reshape(-1, *([1] * (a.dim() - 1))), a, b)


def is_near_block(state: CraftaxState, block: BlockType) -> torch.Tensor:
    """``(N,)`` bool: ``block`` on one of the 8 cells around the player."""
    out = torch.zeros(state.map.shape[0], dtype=torch.bool, device=state.map.device)
    for dr, dc in CLOSE_BLOCKS:
        pos = state.player_position + table((dr, dc), dtype=torch.int64, like=state.map)
        out = out | (in_bounds(pos) & (get_cell(state.map, pos) == int(block)))
    return out


def do_crafting(state: CraftaxState, action: torch.Tensor) -> CraftaxState:
    """Make pickaxes and swords (``do_crafting``): needs a table near, iron tools a furnace."""
    table = is_near_block(state, BlockType.CRAFTING_TABLE)
    furnace = is_near_block(state, BlockType.FURNACE)
    inv = list(state.inventory.unbind(-1))
    ach = state.achievements
    recipes = (
        (Action.MAKE_WOOD_PICKAXE, WOOD_PICKAXE, (WOOD,), False, Achievement.MAKE_WOOD_PICKAXE),
        (
            Action.MAKE_STONE_PICKAXE,
            STONE_PICKAXE,
            (STONE, WOOD),
            False,
            Achievement.MAKE_STONE_PICKAXE,
        ),
        (
            Action.MAKE_IRON_PICKAXE,
            IRON_PICKAXE,
            (IRON, WOOD, STONE, COAL),
            True,
            Achievement.MAKE_IRON_PICKAXE,
        ),
        (Action.MAKE_WOOD_SWORD, WOOD_SWORD, (WOOD,), False, Achievement.MAKE_WOOD_SWORD),
        (Action.MAKE_STONE_SWORD, STONE_SWORD, (WOOD, STONE), False, Achievement.MAKE_STONE_SWORD),
        (
            Action.MAKE_IRON_SWORD,
            IRON_SWORD,
            (WOOD, IRON, STONE, COAL),
            True,
            Achievement.MAKE_IRON_SWORD,
        ),
    )
    for act, tool, costs, needs_furnace, achievement in recipes:
        ok = (action == int(act)) & table
        if needs_furnace:
            ok = ok & furnace
        for item in costs:
            ok = ok & (inv[item] >= 1)
        for item in costs:
            inv[item] = inv[item] - ok.long()
        inv[tool] = inv[tool] + ok.long()
        ach = _achieve(ach, achievement, ok)
    return state._replace(inventory=torch.stack(inv, -1), achievements=ach)


def _attack_damage(state: CraftaxState) -> torch.Tensor:
    """``get_player_attack_damage``: max of 1, 2 x wood, 3 x stone, 5 x iron swords ``(N,)``."""
    inv = state.inventory
    return torch.stack(
        (
            torch.ones_like(inv[:, 0]),
            2 * inv[:, WOOD_SWORD],
            3 * inv[:, STONE_SWORD],
            5 * inv[:, IRON_SWORD],
        ),
        -1,
    ).amax(-1)


def _first_true(x: torch.Tensor) -> torch.Tensor:
    """``jnp.argmax`` of a bool ``(N, K)``: the first True column, 0 if none."""
    k = x.shape[1]
    idx = torch.arange(k, device=x.device).expand_as(x)
    return torch.where(x, idx, k).amin(-1).remainder(k)


def _hit(
    position: torch.Tensor,
    health: torch.Tensor,
    mask: torch.Tensor,
    target: torch.Tensor,
    damage: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """One mob group attacked at ``target`` (craftax's per-group block of ``do_action``).

    Returns ``(attacked, killed, health, mask)``: the new mask is ``health > 0`` for every slot.
    """
    at = (position == target[:, None, :]).all(-1) & mask  # (N, K)
    attacked = at.any(-1)
    index = _first_true(at)
    slot = torch.nn.functional.one_hot(index, health.shape[1]).bool()
    health = health - torch.where(slot, (damage * attacked.long())[:, None], 0)
    new_mask = health > 0
    old = mask.gather(1, index[:, None])[:, 0]
    killed = old & ~new_mask.gather(1, index[:, None])[:, 0]
    return attacked, killed, health, new_mask


def do_action(key: torch.Tensor, state: CraftaxState, action: torch.Tensor) -> CraftaxState:
    """The ``DO`` action (``do_action``): attack a mob, mine, collect, drink, eat.

    Args:
        key: The jax keys of this call, int64 ``(N, 2)`` (one draw: the sapling chance).
        state: The batched state.
        action: ``(N,)`` int64; envs not doing ``DO`` keep their state.

    Returns:
        The new state.
    """
    old = state
    target = facing(state)
    damage = _attack_damage(state)
    ach = state.achievements

    z_att, z_kill, z_health, z_mask = _hit(
        state.zombies_position, state.zombies_health, state.zombies_mask, target, damage
    )
    ach = _achieve(ach, Achievement.DEFEAT_ZOMBIE, z_kill)
    c_att, c_kill, c_health, c_mask = _hit(
        state.cows_position, state.cows_health, state.cows_mask, target, damage
    )
    ach = _achieve(ach, Achievement.EAT_COW, c_kill)
    food = torch.where(c_kill, (state.player_food + 6).clamp(max=9), state.player_food)
    hunger = torch.where(c_kill, torch.zeros_like(state.player_hunger), state.player_hunger)
    s_att, s_kill, s_health, s_mask = _hit(
        state.skeletons_position, state.skeletons_health, state.skeletons_mask, target, damage
    )
    ach = _achieve(ach, Achievement.DEFEAT_SKELETON, s_kill)
    attacked = z_att | c_att | s_att
    killed = z_kill | c_kill | s_kill
    mob_map = set_cell(state.mob_map, target, get_cell(state.mob_map, target) & ~killed)
    state = state._replace(
        zombies_health=z_health,
        zombies_mask=z_mask,
        cows_health=c_health,
        cows_mask=c_mask,
        skeletons_health=s_health,
        skeletons_mask=s_mask,
        achievements=ach,
        player_food=food,
        player_hunger=hunger,
        mob_map=mob_map,
    )

    # blocks: all read from the map before this action
    block = get_cell(state.map, target)
    inv = state.inventory
    new_inv = list(inv.unbind(-1))
    new_map = state.map
    mined = (
        (BlockType.TREE, None, BlockType.GRASS, WOOD, Achievement.COLLECT_WOOD),
        (BlockType.STONE, WOOD_PICKAXE, BlockType.PATH, STONE, Achievement.COLLECT_STONE),
        (BlockType.COAL, WOOD_PICKAXE, BlockType.PATH, COAL, Achievement.COLLECT_COAL),
        (BlockType.IRON, STONE_PICKAXE, BlockType.PATH, IRON, Achievement.COLLECT_IRON),
        (BlockType.DIAMOND, IRON_PICKAXE, BlockType.PATH, DIAMOND, Achievement.COLLECT_DIAMOND),
    )
    for kind, tool, left, item, achievement in mined:
        mining = block == int(kind)
        if tool is not None:
            mining = mining & (inv[:, tool] != 0)
        new_map = set_cell(new_map, target, torch.full_like(block, int(left)), mining)
        new_inv[item] = inv[:, item] + mining.long()
        ach = _achieve(ach, achievement, mining)

    sub = tf.split2(key)[1]
    sapling = (block == int(BlockType.GRASS)) & (tf.uniform(sub) < 0.1)
    new_inv[SAPLING] = inv[:, SAPLING] + sapling.long()
    ach = _achieve(ach, Achievement.COLLECT_SAPLING, sapling)

    drinking = block == int(BlockType.WATER)
    drink = torch.where(drinking, (state.player_drink + 1).clamp(max=9), state.player_drink)
    thirst = torch.where(drinking, torch.zeros_like(state.player_thirst), state.player_thirst)
    ach = _achieve(ach, Achievement.COLLECT_DRINK, drinking)

    eating = block == int(BlockType.RIPE_PLANT)
    new_map = set_cell(new_map, target, torch.full_like(block, int(BlockType.PLANT)), eating)
    food = torch.where(eating, (state.player_food + 4).clamp(max=9), state.player_food)
    hunger = torch.where(eating, torch.zeros_like(state.player_hunger), state.player_hunger)
    ach = _achieve(ach, Achievement.EAT_PLANT, eating)
    plant = _first_true((state.growing_plants_positions == target[:, None, :]).all(-1))
    plant_slot = torch.nn.functional.one_hot(plant, state.growing_plants_age.shape[1]).bool()
    eaten_age = torch.where(plant_slot, 0, state.growing_plants_age)

    ok = in_bounds(target) & ~attacked
    state = state._replace(
        map=_select(ok, new_map, state.map),
        inventory=_select(ok, torch.stack(new_inv, -1), state.inventory),
        player_drink=torch.where(ok, drink, state.player_drink),
        player_thirst=torch.where(ok, thirst, state.player_thirst),
        player_food=torch.where(ok, food, state.player_food),
        player_hunger=torch.where(ok, hunger, state.player_hunger),
        growing_plants_age=_select(ok & eating, eaten_age, state.growing_plants_age),
        achievements=_select(ok, ach, state.achievements),
    )
    doing = action == int(Action.DO)
    return CraftaxState(*(_select(doing, a, b) for a, b in zip(state, old, strict=True)))


def place_block(state: CraftaxState, action: torch.Tensor) -> CraftaxState:
    """Place a table, furnace, stone or sapling in front of the player (``place_block``)."""
    target = facing(state)
    wall = is_in_wall(state, target)
    block = get_cell(state.map, target)
    inv = list(state.inventory.unbind(-1))
    ach = state.achievements
    new_map = state.map

    table = (action == int(Action.PLACE_TABLE)) & ~wall & (inv[WOOD] >= 2)
    new_map = set_cell(
        new_map, target, torch.full_like(block, int(BlockType.CRAFTING_TABLE)), table
    )
    inv[WOOD] = inv[WOOD] - 2 * table.long()
    ach = _achieve(ach, Achievement.PLACE_TABLE, table)

    furnace = (action == int(Action.PLACE_FURNACE)) & ~wall & (inv[STONE] > 0)
    new_map = set_cell(new_map, target, torch.full_like(block, int(BlockType.FURNACE)), furnace)
    inv[STONE] = inv[STONE] - furnace.long()
    ach = _achieve(ach, Achievement.PLACE_FURNACE, furnace)

    valid = (block == int(BlockType.WATER)) | ~wall
    stone = (action == int(Action.PLACE_STONE)) & valid & (inv[STONE] > 0)
    new_map = set_cell(new_map, target, torch.full_like(block, int(BlockType.STONE)), stone)
    inv[STONE] = inv[STONE] - stone.long()
    ach = _achieve(ach, Achievement.PLACE_STONE, stone)

    grass = get_cell(new_map, target) == int(BlockType.GRASS)
    sapling = (action == int(Action.PLACE_PLANT)) & grass & (inv[SAPLING] > 0)
    new_map = set_cell(new_map, target, torch.full_like(block, int(BlockType.PLANT)), sapling)
    inv[SAPLING] = inv[SAPLING] - sapling.long()
    ach = _achieve(ach, Achievement.PLACE_PLANT, sapling)

    # add_new_growing_plant: the first free slot, if any
    empty = ~state.growing_plants_mask
    adding = empty.any(-1) & sapling
    slot = torch.nn.functional.one_hot(_first_true(empty), empty.shape[1]).bool()
    slot = slot & adding[:, None]
    positions = torch.where(slot[..., None], target[:, None, :], state.growing_plants_positions)
    age = torch.where(slot, 0, state.growing_plants_age)
    mask = state.growing_plants_mask | slot

    ok = in_bounds(target) & ~is_in_mob(state, target)
    return state._replace(
        map=_select(ok, new_map, state.map),
        inventory=_select(ok, torch.stack(inv, -1), state.inventory),
        achievements=_select(ok, ach, state.achievements),
        growing_plants_positions=_select(ok, positions, state.growing_plants_positions),
        growing_plants_age=_select(ok, age, state.growing_plants_age),
        growing_plants_mask=_select(ok, mask, state.growing_plants_mask),
    )


def move_player(state: CraftaxState, action: torch.Tensor) -> CraftaxState:
    """Move (or turn) for actions 1-4 (``move_player``); other actions keep the direction."""
    step = _step_of(action)
    proposed = state.player_position + step
    lava = get_cell(state.map, proposed) == int(BlockType.LAVA)
    valid = in_bounds(proposed) & ~is_in_wall(state, proposed) & ~is_in_mob(state, proposed)
    valid = (valid & ~lava) | lava
    turning = step.abs().sum(-1) != 0
    return state._replace(
        player_position=state.player_position + valid.long()[:, None] * step,
        player_direction=torch.where(turning, action, state.player_direction),
    )


def update_plants(state: CraftaxState) -> CraftaxState:
    """Age the saplings; at 600 steps their cell becomes a ripe plant (``update_plants``)."""
    age = (state.growing_plants_age + 1) * state.growing_plants_mask.long()
    ripe = age >= 600
    new_map = state.map
    value = torch.full_like(age[:, 0], int(BlockType.RIPE_PLANT))
    for slot in range(age.shape[1]):
        new_map = set_cell(new_map, state.growing_plants_positions[:, slot], value, ripe[:, slot])
    return state._replace(map=new_map, growing_plants_age=age)


def update_player_intrinsics(state: CraftaxState, action: torch.Tensor) -> CraftaxState:
    """Sleep, wake up, hunger, thirst, fatigue and recovery (``update_player_intrinsics``)."""
    zero = torch.zeros_like(state.player_hunger)
    sleeping = state.is_sleeping | ((action == int(Action.SLEEP)) & (state.player_energy < 9))
    waking = (state.player_energy >= 9) & sleeping
    sleeping = sleeping & ~waking
    ach = _achieve(state.achievements, Achievement.WAKE_UP, waking)

    rate = torch.where(sleeping, 0.5, 1.0).to(torch.float32)
    hunger = state.player_hunger + rate
    food = torch.where(hunger > 25, (state.player_food - 1).clamp(min=0), state.player_food)
    hunger = torch.where(hunger > 25, zero, hunger)
    thirst = state.player_thirst + rate
    drink = torch.where(thirst > 20, (state.player_drink - 1).clamp(min=0), state.player_drink)
    thirst = torch.where(thirst > 20, zero, thirst)

    fatigue = torch.where(
        sleeping, (state.player_fatigue - 1).clamp(max=0), state.player_fatigue + 1
    )
    energy = torch.where(fatigue > 30, (state.player_energy - 1).clamp(min=0), state.player_energy)
    fatigue = torch.where(fatigue > 30, zero, fatigue)
    energy = torch.where(fatigue < -10, (state.player_energy + 1).clamp(max=9), energy)
    fatigue = torch.where(fatigue < -10, zero, fatigue)

    needs_met = (food > 0) & (drink > 0) & ((energy > 0) | sleeping)
    gain = torch.where(sleeping, 2.0, 1.0).to(torch.float32)
    loss = torch.where(sleeping, -0.5, -1.0).to(torch.float32)
    recover = state.player_recover + torch.where(needs_met, gain, loss)
    health = torch.where(recover > 25, (state.player_health + 1).clamp(max=9), state.player_health)
    recover = torch.where(recover > 25, zero, recover)
    health = torch.where(recover < -15, state.player_health - 1, health)
    recover = torch.where(recover < -15, zero, recover)
    return state._replace(
        is_sleeping=sleeping,
        achievements=ach,
        player_hunger=hunger,
        player_food=food,
        player_thirst=thirst,
        player_drink=drink,
        player_fatigue=fatigue,
        player_energy=energy,
        player_recover=recover,
        player_health=health,
    )


def cap_inventory(state: CraftaxState) -> CraftaxState:
    """At most 9 of each item (``cap_inventory``)."""
    return state._replace(inventory=state.inventory.clamp(max=9))


def update_health(state: CraftaxState) -> CraftaxState:
    """Lava kills; health never below 0 (``update_health``)."""
    lava = get_cell(state.map, state.player_position) == int(BlockType.LAVA)
    health = torch.where(lava, 0, state.player_health).clamp(min=0)
    return state._replace(player_health=health)
