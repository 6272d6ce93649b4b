"""Batched MinAtar Asterix.

Mirrors ``minatar/environments/asterix.py`` (minatar 1.0.15, ``Env``): the player moves in
four directions on rows 1-8; enemies and gold spawn at a side of a random free row (one
entity per row) and cross the screen horizontally; +1 for touching gold, game over for
touching an enemy. With ``difficulty_ramping`` the spawn and move periods shrink every 100
frames. Channels: player, enemy, trail, gold. Minimal actions: ``n, l, u, r, d``.

Randomness: every step draws, after the sticky-action draw, the reference's
``rand() < 1/2`` (side: from the left, moving right), ``rand() < 1/3`` (gold) and
``randint(k)`` over the ``k`` free rows (as :meth:`Rng.randint` with a per-env ``k``), 3
streams, used only when an entity spawns; resets draw nothing.

Deliberate differences:

* Entities live in 8 fixed slots (slot ``i`` = row ``i + 1``, as the reference's list),
  packed into two int32 words of 4-bit fields (enemy / gold column plus one, 0 = none)
  and a direction bit mask, whose bits are stale in empty slots.
* As the reference, a finished game stays frozen (reward 0, terminal) if stepped again; this
  is only reachable with autoreset ``DISABLED``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from gpuvec_envs.core.env import select
from gpuvec_envs.core.rng import Rng, below, scale
from gpuvec_envs.envs.minatar._common import MinAtarEnv, MinAtarParams

#: Frames between two difficulty steps.
RAMP_INTERVAL = 100
#: Initial frames between spawns.
INIT_SPAWN_SPEED = 10
#: Initial frames between entity moves.
INIT_MOVE_INTERVAL = 5
#: Observation channels, in minatar's order.
CHANNELS = ("player", "enemy", "trail", "gold")


I32 = torch.int32


def _bit(mask: torch.Tensor, i: int | torch.Tensor) -> torch.Tensor:
    """Bit ``i`` of an int32 mask as int32 0/1."""
    return (mask >> i) & 1


def _nibble(packed: torch.Tensor, i: int | torch.Tensor) -> torch.Tensor:
    """Slot ``i``'s 4-bit field (bits ``4i..4i+3``) of a packed int32 word, int32 0..15."""
    return (packed >> (4 * i)) & 15


class AsterixState(NamedTuple):
    """Batched Asterix state, each field (N,) int32; slot ``i`` is row ``i + 1``.

    The 8 entity slots are packed per env: bits ``4i..4i+3`` of ``enemy`` and ``gold`` hold
    slot ``i``'s column plus one (0: no such entity; at most one of the two is nonzero) and
    bit ``i`` of ``right`` its direction. Everything is an int32 column so that the
    compiled step is one vectorised loop over envs (no (N, 8) intermediates), and the
    observation reads each cell's row straight from the packed words.
    """

    player_x: torch.Tensor  # [col]
    player_y: torch.Tensor  # [row] 1..8
    enemy: torch.Tensor  # 8 packed 4-bit [col + 1] of enemies, 0: none (bit 31 = slot 7's top)
    gold: torch.Tensor  # 8 packed 4-bit [col + 1] of gold, 0: none
    right: torch.Tensor  # bit mask: moves right (spawned on the left); stale in empty slots
    spawn_speed: torch.Tensor  # [frames] between spawns
    spawn_timer: torch.Tensor  # [frames] until the next spawn
    move_speed: torch.Tensor  # [frames] between entity moves
    move_timer: torch.Tensor  # [frames] until the next move
    ramp_timer: torch.Tensor  # [frames] until the next difficulty step
    ramp_index: torch.Tensor  # number of difficulty steps so far
    terminal: torch.Tensor  # 0/1: game over


def reset(params: MinAtarParams, rng: Rng) -> AsterixState:
    """N new games: player at (5, 5), no entities (no random draws)."""
    zero = torch.zeros(rng.num_envs, dtype=I32, device=rng.device)
    return AsterixState(
        player_x=zero + 5,
        player_y=zero + 5,
        enemy=zero,
        gold=zero,
        right=zero,
        spawn_speed=zero + INIT_SPAWN_SPEED,
        spawn_timer=zero + INIT_SPAWN_SPEED,
        move_speed=zero + INIT_MOVE_INTERVAL,
        move_timer=zero + INIT_MOVE_INTERVAL,
        ramp_timer=zero + RAMP_INTERVAL,
        ramp_index=zero,
        terminal=zero,
    )


def step(
    params: MinAtarParams, s: AsterixState, action: torch.Tensor, rng: Rng
) -> tuple[AsterixState, torch.Tensor, torch.Tensor]:
    """Spawn, move the player, collide, move entities, ramp; ``action`` (N,) int64 0..5.

    Returns:
        ``(state, reward, terminal)``: reward (N,) float32 (gold picked up), terminal
        (N,) bool.
    """
    draws = rng.columns(3, "bits32")
    from_left = below(draws[0], 1 / 2)
    is_gold = below(draws[1], 1 / 3)

    # Spawn into the j-th free slot, j = randint(number of free slots); none if all full.
    spawn = s.spawn_timer == 0
    occupied = s.enemy | s.gold
    free = torch.zeros_like(occupied)
    for i in range(8):
        free = free | ((_nibble(occupied, i) == 0).to(I32) << i)
    count = free - ((free >> 1) & 0x55)  # popcount of 8 bits
    count = (count & 0x33) + ((count >> 2) & 0x33)
    n_free = (count + (count >> 4)) & 15
    j = scale(draws[2], n_free)
    rank = torch.zeros_like(free)  # free slots before slot i
    slot = torch.full_like(free, -1)  # the chosen slot, -1: none
    for i in range(8):
        f = _bit(free, i)
        slot = torch.where((f != 0) & (rank == j), i, slot)
        rank = rank + f
    new = spawn & (slot >= 0)
    sh = 4 * slot.clamp(min=0)
    start = torch.where(from_left, 1, 10).to(I32) << sh  # column 0 or 9, plus one
    enemy = torch.where(new & ~is_gold, s.enemy | start, s.enemy)
    gold = torch.where(new & is_gold, s.gold | start, s.gold)
    bit = 1 << slot.clamp(min=0)
    right = torch.where(new, torch.where(from_left, s.right | bit, s.right & ~bit), s.right)
    spawn_timer = torch.where(spawn, s.spawn_speed, s.spawn_timer)

    px = torch.where(action == 1, (s.player_x - 1).clamp(min=0), s.player_x)
    px = torch.where(action == 3, (px + 1).clamp(max=9), px)
    py = torch.where(action == 2, (s.player_y - 1).clamp(min=1), s.player_y)
    py = torch.where(action == 4, (py + 1).clamp(max=8), py)
    lane = py - 1  # the only slot the player can touch
    lane_bits = ~(15 << (4 * lane))

    # Touch before the entities move: gold is picked up, an enemy ends the game.
    got = _nibble(gold, lane) == px + 1
    gold = torch.where(got, gold & lane_bits, gold)
    terminal = _nibble(enemy, lane) == px + 1
    reward = torch.where(got, 1.0, 0.0)

    # Entities move every move_speed frames and leave at the sides, then touch again.
    move = s.move_timer == 0
    moved_enemy = torch.zeros_like(enemy)
    moved_gold = torch.zeros_like(gold)
    for i in range(8):
        e, g = _nibble(enemy, i), _nibble(gold, i)
        v = e | g  # column plus one, 0: empty
        v = torch.where(move & (v != 0), torch.where(_bit(right, i) != 0, v + 1, v - 1), v)
        v = torch.where(v <= 10, v, 0)  # 0 or 11: left the screen
        moved_enemy = moved_enemy | (torch.where(e != 0, v, 0) << (4 * i))
        moved_gold = moved_gold | (torch.where(g != 0, v, 0) << (4 * i))
    enemy, gold = moved_enemy, moved_gold
    got = move & (_nibble(gold, lane) == px + 1)
    gold = torch.where(got, gold & lane_bits, gold)
    terminal = terminal | (move & (_nibble(enemy, lane) == px + 1))
    reward = reward + torch.where(got, 1.0, 0.0)
    move_timer = torch.where(move, s.move_speed, s.move_timer) - 1
    spawn_timer = spawn_timer - 1

    spawn_speed, move_speed = s.spawn_speed, s.move_speed
    ramp_timer, ramp_index = s.ramp_timer, s.ramp_index
    if params.difficulty_ramping:
        ramping = (spawn_speed > 1) | (move_speed > 1)
        tick = ramping & (ramp_timer >= 0)
        level_up = ramping & (ramp_timer < 0)
        move_speed = torch.where(
            level_up & (move_speed > 1) & (ramp_index % 2 == 1), move_speed - 1, move_speed
        )
        spawn_speed = torch.where(level_up & (spawn_speed > 1), spawn_speed - 1, spawn_speed)
        ramp_index = torch.where(level_up, ramp_index + 1, ramp_index)
        ramp_timer = torch.where(tick, ramp_timer - 1, ramp_timer)
        ramp_timer = torch.where(level_up, RAMP_INTERVAL, ramp_timer)

    nxt = AsterixState(
        px.to(I32),
        py.to(I32),
        enemy.to(I32),
        gold.to(I32),
        right.to(I32),
        spawn_speed,
        spawn_timer,
        move_speed,
        move_timer,
        ramp_timer,
        ramp_index,
        terminal.to(I32),
    )
    done = s.terminal != 0
    nxt = select(done, s, nxt)
    reward = torch.where(done, 0.0, reward)
    return nxt, reward, nxt.terminal != 0


def observation(params: MinAtarParams, s: AsterixState) -> torch.Tensor:
    """(N, 10, 10, 4) uint8 0/1, channels :data:`CHANNELS`, indexed ``[row, col, channel]``.

    Built by one scatter into zeros, as uint8 viewed as bool: 17 values per env (each
    slot's entity and trail, then the player, from one broadcast expression over per-index
    tables). Slot ``i`` alone writes channels 1-3 of row ``i + 1``, so an empty slot or an
    off-screen trail writes a 0 to a cell of its own row that nothing else writes; the
    player alone writes channel 0. At most 17 of 400 bytes are set, so this sparse write
    beats computing every byte, and one scatter writes the output buffer in place (a
    second one would copy the whole buffer first).
    """
    dev = s.player_x.device
    j = torch.arange(17, dtype=I32, device=dev)
    slot = j % 8  # index j < 16: slot j % 8; j = 16: the player
    is_trail = j >= 8  # j < 8: the entity, else its trail
    e = _nibble(s.enemy[:, None], slot)  # (N, 17) column plus one, 0: none
    g = _nibble(s.gold[:, None], slot)
    v = e | g
    back = torch.where(_bit(s.right[:, None], slot) != 0, v - 2, v)  # trail column
    base = (slot + 1) * 40
    entity = base + (v - 1).clamp(min=0) * 4 + torch.where(g != 0, 3, 1)
    trail = base + back.clamp(0, 9) * 4 + 2
    player = ((s.player_y * 10 + s.player_x) * 4)[:, None]
    index = torch.where(j == 16, player, torch.where(is_trail, trail, entity))
    shown = (j == 16) | ((v != 0) & (~is_trail | ((back >= 0) & (back <= 9))))
    n = s.player_x.shape[0]
    obs = torch.zeros(n, 400, dtype=torch.uint8, device=dev)
    obs = obs.scatter(1, index.to(torch.int64), shown.to(I32).to(torch.uint8))
    return obs.view(n, 10, 10, 4)


class Asterix(MinAtarEnv):
    """MinAtar Asterix (``gpuvec/MinAtar-Asterix-v0``, ``-v1`` with the minimal actions)."""

    n_channels = 4
    minimal_actions = (0, 1, 2, 3, 4)

    def game_reset(self, params: MinAtarParams, rng: Rng) -> AsterixState:
        """N new games."""
        return reset(params, rng)

    def game_step(
        self, params: MinAtarParams, state: AsterixState, action: torch.Tensor, rng: Rng
    ) -> tuple[AsterixState, torch.Tensor, torch.Tensor]:
        """One step (3 draws, used when an entity spawns)."""
        return step(params, state, action, rng)

    def game_observation(self, params: MinAtarParams, state: AsterixState) -> torch.Tensor:
        """(N, 10, 10, 4) uint8 0/1 (bool to users)."""
        return observation(params, state)
