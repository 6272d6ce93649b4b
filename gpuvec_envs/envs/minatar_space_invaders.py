"""Batched MinAtar Space Invaders.

Mirrors ``minatar/environments/space_invaders.py`` (minatar 1.0.15, ``Env``): a cannon on the
bottom row shoots upward at a 4x6 block of aliens that sweeps sideways, steps down (and turns)
at the walls and shoots back from the alien nearest the cannon; +1 per alien hit; a cleared
wave respawns and, with difficulty ramping, moves faster (move interval 12 down to 6). The
game ends when an alien or an enemy bullet reaches the cannon, or an alien steps down from the
bottom row. Channels: cannon, alien, alien_left, alien_right, friendly_bullet, enemy_bullet.
Minimal actions: ``n, l, r, f``. The game draws no random numbers.

Deliberate differences:

* The three 10x10 float maps are stored as one 10-bit mask per row (bit ``c`` = column
  ``c``), so rolls are shifts, counts are popcounts and the observation is one bit expansion.
* As the reference, a finished game stays frozen (reward 0, terminal) if stepped again; this
  is only reachable with autoreset ``DISABLED``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from gpuvec_envs.core.env import select
from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs._minatar import MinAtarEnv, MinAtarParams

#: Observation channels, in minatar's order.
CHANNELS = ("cannon", "alien", "alien_left", "alien_right", "friendly_bullet", "enemy_bullet")
SHOT_COOL_DOWN = 5  # [steps] between the cannon's shots
ENEMY_MOVE_INTERVAL = 12  # [steps] initial alien move interval
ENEMY_SHOT_INTERVAL = 10  # [steps] between alien shots
MIN_MOVE_INTERVAL = 6  # ramping stops at this move interval
#: A fresh wave: rows 0-3, columns 2-7.
WAVE_ROW = 0b0011111100
FULL_ROW = (1 << 10) - 1


class SpaceInvadersState(NamedTuple):
    """Batched Space Invaders state; maps are (N, 10) int64 row bit masks (bit c = column c)."""

    pos: torch.Tensor  # (N,) int64 [col] cannon, on row 9
    f_bullets: torch.Tensor  # (N, 10) int64 row masks of friendly bullets
    e_bullets: torch.Tensor  # (N, 10) int64 row masks of enemy bullets
    aliens: torch.Tensor  # (N, 10) int64 row masks of aliens
    alien_dir: torch.Tensor  # (N,) int64 -1 (left) or +1 (right)
    move_interval: torch.Tensor  # (N,) int64 [steps] the wave's move interval (12..6)
    move_timer: torch.Tensor  # (N,) int64 [steps] until the aliens move
    alien_shot_timer: torch.Tensor  # (N,) int64 [steps] until an alien shoots
    ramp_index: torch.Tensor  # (N,) int64 waves cleared while ramping
    shot_timer: torch.Tensor  # (N,) int64 [steps] cannon cool-down
    terminal: torch.Tensor  # (N,) bool game over


def popcount10(x: torch.Tensor) -> torch.Tensor:
    """Number of set bits of int64 values below ``2**10`` (SWAR), same shape."""
    x = x - ((x >> 1) & 0x155)
    x = (x & 0x333) + ((x >> 2) & 0x333)
    return (x + (x >> 4) + (x >> 8)) & 0xF


def reset(params: MinAtarParams, rng: Rng) -> SpaceInvadersState:
    """N new games: cannon at column 5, a full wave moving left, timers at their intervals."""
    n, dev = rng.num_envs, rng.device
    zeros = torch.zeros(n, dtype=torch.int64, device=dev)
    rows = torch.zeros(n, 10, dtype=torch.int64, device=dev)
    wave = rows.clone()
    wave[:, :4] = WAVE_ROW
    return SpaceInvadersState(
        pos=zeros + 5,
        f_bullets=rows,
        e_bullets=rows.clone(),
        aliens=wave,
        alien_dir=zeros - 1,
        move_interval=zeros + ENEMY_MOVE_INTERVAL,
        move_timer=zeros + ENEMY_MOVE_INTERVAL,
        alien_shot_timer=zeros + ENEMY_SHOT_INTERVAL,
        ramp_index=zeros.clone(),
        shot_timer=zeros.clone(),
        terminal=torch.zeros(n, dtype=torch.bool, device=dev),
    )


def nearest_alien(aliens: torch.Tensor, pos: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The reference's ``_nearest_alien``: (row, col) of the shooter, each (N,) int64.

    Columns are searched by distance to ``pos``, ties to the lower column (a stable sort of
    ``0..9``); in the first column holding an alien, the lowest alien (largest row) shoots.
    Without aliens (never the case when called) the column is 10 and the row -1.
    """
    ids = torch.arange(10, device=pos.device)
    cells = ((aliens[:, :, None] >> ids) & 1) == 1  # (N, 10 rows, 10 cols)
    occupied = cells.any(dim=1)  # (N, 10 cols)
    # Search rank of each column: distance first, then the lower column.
    rank = (ids - pos[:, None]).abs() * 10 + ids
    best = torch.where(occupied, rank, 1000).amin(dim=1)
    col = torch.where(best < 1000, best % 10, 10)
    in_col = cells & (ids[None, None, :] == col[:, None, None])
    row = torch.where(in_col.any(dim=2), ids, -1).amax(dim=1)
    return row, col


def step(
    params: MinAtarParams, s: SpaceInvadersState, action: torch.Tensor
) -> tuple[SpaceInvadersState, torch.Tensor, torch.Tensor]:
    """One step of the reference's ``act`` on full actions (N,) int64 0..5.

    Returns ``(state, reward (N,) int64, terminal (N,) bool)``; finished games are frozen.
    """
    dev = action.device
    row_ids = torch.arange(10, device=dev)
    bit_pos = lambda p: torch.ones_like(p) << p  # noqa: E731 - (N,) 1 << col

    # Player.
    fire = (action == 5) & (s.shot_timer == 0)
    f = s.f_bullets.clone()
    f[:, 9] = torch.where(fire, f[:, 9] | bit_pos(s.pos), f[:, 9])
    shot_timer = torch.where(fire, SHOT_COOL_DOWN, s.shot_timer)
    pos = torch.where(action == 1, (s.pos - 1).clamp(min=0), s.pos)
    pos = torch.where(action == 3, (pos + 1).clamp(max=9), pos)
    pbit = bit_pos(pos)

    # Bullets: friendly up one row, enemy down one row.
    f = torch.cat((f[:, 1:], torch.zeros_like(f[:, :1])), dim=1)
    e = torch.cat((torch.zeros_like(s.e_bullets[:, :1]), s.e_bullets[:, :9]), dim=1)
    terminal = (e[:, 9] & pbit) != 0

    # Aliens.
    aliens = s.aliens
    terminal = terminal | ((aliens[:, 9] & pbit) != 0)
    move = s.move_timer == 0
    count = popcount10(aliens).sum(dim=1)
    move_timer = torch.where(move, torch.minimum(count, s.move_interval), s.move_timer)
    at_left = ((aliens & 1) != 0).any(dim=1)
    at_right = ((aliens & 512) != 0).any(dim=1)
    edge = (at_left & (s.alien_dir < 0)) | (at_right & (s.alien_dir > 0))
    down = move & edge
    alien_dir = torch.where(down, -s.alien_dir, s.alien_dir)
    terminal = terminal | (down & (aliens[:, 9] != 0))
    rolled_down = torch.cat((aliens[:, 9:], aliens[:, :9]), dim=1)  # np.roll(+1, axis=0)
    right = ((aliens << 1) & FULL_ROW) | (aliens >> 9)  # np.roll(+1, axis=1)
    left = (aliens >> 1) | ((aliens & 1) << 9)  # np.roll(-1, axis=1)
    sideways = torch.where((s.alien_dir > 0)[:, None], right, left)
    moved = torch.where(edge[:, None], rolled_down, sideways)
    aliens = torch.where(move[:, None], moved, aliens)
    terminal = terminal | (move & ((aliens[:, 9] & pbit) != 0))

    # Alien shot from the alien nearest the cannon.
    shoot = s.alien_shot_timer == 0
    alien_shot_timer = torch.where(shoot, ENEMY_SHOT_INTERVAL, s.alien_shot_timer)
    srow, scol = nearest_alien(aliens, pos)
    hit_row = shoot[:, None] & (row_ids == srow[:, None])
    e = torch.where(hit_row, e | (1 << scol)[:, None], e)

    # Kills.
    kill = aliens & f
    reward = popcount10(kill).sum(dim=1)
    aliens = aliens & ~kill
    f = f & ~kill

    # Timers and a new wave.
    shot_timer = shot_timer - (shot_timer > 0).long()
    move_timer = move_timer - 1
    alien_shot_timer = alien_shot_timer - 1
    empty = (aliens == 0).all(dim=1)
    ramp = empty & (s.move_interval > MIN_MOVE_INTERVAL) & params.difficulty_ramping
    move_interval = s.move_interval - ramp.long()
    ramp_index = s.ramp_index + ramp.long()
    wave = torch.where(row_ids < 4, WAVE_ROW, 0)
    aliens = torch.where(empty[:, None], wave, aliens)

    nxt = SpaceInvadersState(
        pos, f, e, aliens, alien_dir, move_interval, move_timer, alien_shot_timer,
        ramp_index, shot_timer, terminal,
    )  # fmt: skip
    done = s.terminal
    nxt = select(done, s, nxt)
    reward = torch.where(done, 0, reward)
    return nxt, reward, nxt.terminal


def observation(params: MinAtarParams, s: SpaceInvadersState) -> torch.Tensor:
    """(N, 10, 10, 6) bool observation, channels as :data:`CHANNELS`."""
    dev = s.pos.device
    row_ids = torch.arange(10, device=dev)
    cannon = torch.where(row_ids == 9, (1 << s.pos)[:, None], 0)
    left = (s.alien_dir < 0)[:, None]
    zero = torch.zeros_like(s.aliens)
    rows = torch.stack(
        (
            cannon,
            s.aliens,
            torch.where(left, s.aliens, zero),
            torch.where(left, zero, s.aliens),
            s.f_bullets,
            s.e_bullets,
        ),
        dim=2,
    )  # (N, 10 rows, 6 channels) bit masks
    return expand_rows(rows)


def expand_rows(rows: torch.Tensor) -> torch.Tensor:
    """(N, 10, C) 10-bit row masks -> (N, 10, 10, C) bool cells (bit c = column c).

    A (1024, 10) table lookup in uint8 (int64 shifts over the whole grid were the slowest
    part of an eager step).
    """
    ids = torch.arange(10, device=rows.device)
    table = ((torch.arange(1 << 10, device=rows.device)[:, None] >> ids) & 1).to(torch.uint8)
    cells = table[rows]  # (N, 10 rows, C, 10 cols)
    return cells.transpose(2, 3).contiguous().view(torch.bool)


class SpaceInvaders(MinAtarEnv):
    """MinAtar Space Invaders (``-v0``: all 6 actions, ``-v1``: ``n, l, r, f``)."""

    n_channels = len(CHANNELS)
    minimal_actions = (0, 1, 3, 5)

    def game_reset(self, params: MinAtarParams, rng: Rng) -> SpaceInvadersState:
        """N new games (no random draws)."""
        return reset(params, rng)

    def game_step(
        self, params: MinAtarParams, state: SpaceInvadersState, action: torch.Tensor, rng: Rng
    ) -> tuple[SpaceInvadersState, torch.Tensor, torch.Tensor]:
        """One step (no random draws beyond the sticky-action draw)."""
        return step(params, state, action)

    def game_observation(self, params: MinAtarParams, state: SpaceInvadersState) -> torch.Tensor:
        """(N, 10, 10, 6) bool."""
        return observation(params, state)
