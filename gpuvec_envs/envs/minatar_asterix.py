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

* Entities live in 8 fixed slots (slot ``i`` = row ``i + 1``, as the reference's list);
  the fields of an empty slot hold stale values and are ignored.
* As the reference, a finished game stays frozen (reward 0, terminal) if stepped again; this
  is only reachable with autoreset ``DISABLED``.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import torch

from gpuvec_envs.core.env import select
from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs._minatar import MinAtarEnv, MinAtarParams

#: Frames between two difficulty steps.
RAMP_INTERVAL = 100
#: Initial frames between spawns.
INIT_SPAWN_SPEED = 10
#: Initial frames between entity moves.
INIT_MOVE_INTERVAL = 5
#: Observation channels, in minatar's order.
CHANNELS = ("player", "enemy", "trail", "gold")


def _below(bits: torch.Tensor, p: float) -> torch.Tensor:
    """``uniform < p`` for the 24-bit uniform ``(bits >> 8) / 2**24`` (exact integer test)."""
    return (bits >> 8) < math.ceil(p * (1 << 24))


class AsterixState(NamedTuple):
    """Batched Asterix state; slot ``i`` of the (N, 8) fields is row ``i + 1``."""

    player_x: torch.Tensor  # (N,) int64 [col]
    player_y: torch.Tensor  # (N,) int64 [row] 1..8
    alive: torch.Tensor  # (N, 8) bool: the slot holds an entity
    ent_x: torch.Tensor  # (N, 8) int64 [col]
    right: torch.Tensor  # (N, 8) bool: moves right (spawned on the left)
    gold: torch.Tensor  # (N, 8) bool: gold, else enemy
    spawn_speed: torch.Tensor  # (N,) int64 [frames] between spawns
    spawn_timer: torch.Tensor  # (N,) int64 [frames] until the next spawn
    move_speed: torch.Tensor  # (N,) int64 [frames] between entity moves
    move_timer: torch.Tensor  # (N,) int64 [frames] until the next move
    ramp_timer: torch.Tensor  # (N,) int64 [frames] until the next difficulty step
    ramp_index: torch.Tensor  # (N,) int64 number of difficulty steps so far
    terminal: torch.Tensor  # (N,) bool: game over


def reset(params: MinAtarParams, rng: Rng) -> AsterixState:
    """N new games: player at (5, 5), no entities (no random draws)."""
    zero = torch.zeros(rng.num_envs, dtype=torch.int64, device=rng.device)
    slots = torch.zeros(rng.num_envs, 8, dtype=torch.int64, device=rng.device)
    return AsterixState(
        player_x=zero + 5,
        player_y=zero + 5,
        alive=slots.bool(),
        ent_x=slots,
        right=slots.bool(),
        gold=slots.bool(),
        spawn_speed=zero + INIT_SPAWN_SPEED,
        spawn_timer=zero + INIT_SPAWN_SPEED,
        move_speed=zero + INIT_MOVE_INTERVAL,
        move_timer=zero + INIT_MOVE_INTERVAL,
        ramp_timer=zero + RAMP_INTERVAL,
        ramp_index=zero,
        terminal=zero.bool(),
    )


def step(
    params: MinAtarParams, s: AsterixState, action: torch.Tensor, rng: Rng
) -> tuple[AsterixState, torch.Tensor, torch.Tensor]:
    """Spawn, move the player, collide, move entities, ramp; ``action`` (N,) int64 0..5.

    Returns:
        ``(state, reward, terminal)``: reward (N,) float32 (gold picked up), terminal
        (N,) bool.
    """
    draws = rng.bits(3)
    from_left = _below(draws[:, 0], 1 / 2)
    is_gold = _below(draws[:, 1], 1 / 3)

    # Spawn into the j-th free slot, j = randint(number of free slots); none if all full.
    spawn = s.spawn_timer == 0
    free = ~s.alive
    n_free = free.sum(dim=1)
    j = (draws[:, 2] * n_free) >> 32
    rank = torch.cumsum(free.to(torch.int64), dim=1) - 1
    new = free & (rank == j[:, None]) & spawn[:, None]
    alive = s.alive | new
    ent_x = torch.where(new, torch.where(from_left, 0, 9)[:, None], s.ent_x)
    right = torch.where(new, from_left[:, None], s.right)
    gold = torch.where(new, is_gold[:, None], s.gold)
    spawn_timer = torch.where(spawn, s.spawn_speed, s.spawn_timer)

    px = torch.where(action == 1, (s.player_x - 1).clamp(min=0), s.player_x)
    px = torch.where(action == 3, (px + 1).clamp(max=9), px)
    py = torch.where(action == 2, (s.player_y - 1).clamp(min=1), s.player_y)
    py = torch.where(action == 4, (py + 1).clamp(max=8), py)
    lane = torch.arange(1, 9, device=px.device) == py[:, None]  # (N, 8)

    # Touch before the entities move: gold is picked up, an enemy ends the game.
    touch = alive & lane & (ent_x == px[:, None])
    got = touch & gold
    alive = alive & ~got
    terminal = (touch & ~gold).any(dim=1)
    reward = torch.where(got.any(dim=1), 1.0, 0.0)

    # Entities move every move_speed frames, leave at the sides, touch again.
    move = s.move_timer == 0
    moving = move[:, None] & alive
    ent_x = torch.where(moving, ent_x + torch.where(right, 1, -1), ent_x)
    alive = alive & ~(moving & ((ent_x < 0) | (ent_x > 9)))
    touch = moving & alive & lane & (ent_x == px[:, None])
    got = touch & gold
    alive = alive & ~got
    terminal = terminal | (touch & ~gold).any(dim=1)
    reward = reward + torch.where(got.any(dim=1), 1.0, 0.0)
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
        px,
        py,
        alive,
        ent_x,
        right,
        gold,
        spawn_speed,
        spawn_timer,
        move_speed,
        move_timer,
        ramp_timer,
        ramp_index,
        terminal,
    )
    done = s.terminal
    nxt = select(done, s, nxt)
    reward = torch.where(done, 0.0, reward)
    return nxt, reward, nxt.terminal


def observation(params: MinAtarParams, s: AsterixState) -> torch.Tensor:
    """(N, 10, 10, 4) bool, channels :data:`CHANNELS`, indexed ``[row, col, channel]``.

    Built by scattering 17 values into zeros (player; per slot its entity and its trail),
    as uint8 viewed as bool (bool kernels are slower on CPU). Slot ``i`` alone writes
    channels 1-3 of row ``i + 1``, so an empty slot or an off-screen trail writes a 0 to a
    cell of its own row that nothing else writes.
    """
    n = s.player_x.shape[0]
    dev = s.player_x.device
    rows = torch.arange(1, 9, device=dev)
    player = (s.player_y * 10 + s.player_x) * 4
    entity = (rows * 10 + s.ent_x.clamp(0, 9)) * 4 + torch.where(s.gold, 3, 1)
    back = torch.where(s.right, s.ent_x - 1, s.ent_x + 1)
    shown = s.alive & (back >= 0) & (back <= 9)
    trail = (rows * 10 + back.clamp(0, 9)) * 4 + 2
    index = torch.cat((player[:, None], entity, trail), dim=1)  # (N, 17)
    one = torch.ones(n, 1, dtype=torch.uint8, device=dev)
    value = torch.cat((one, s.alive.to(torch.uint8), shown.to(torch.uint8)), dim=1)
    obs = torch.zeros(n, 400, dtype=torch.uint8, device=dev).scatter(1, index, value)
    return obs.view(torch.bool).view(n, 10, 10, 4)


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
        """(N, 10, 10, 4) bool."""
        return observation(params, state)
