"""Batched MinAtar Space Invaders.

Mirrors ``minatar/environments/space_invaders.py`` (minatar 1.0.15, ``Env``): a cannon on the
bottom row shoots upward at a 4x6 block of aliens that sweeps sideways, steps down (and turns)
at the walls and shoots back from the alien nearest the cannon; +1 per alien hit; a cleared
wave respawns and, with difficulty ramping, moves faster (move interval 12 down to 6). The
game ends when an alien or an enemy bullet reaches the cannon, or an alien steps down from the
bottom row. Channels: cannon, alien, alien_left, alien_right, friendly_bullet, enemy_bullet.
Minimal actions: ``n, l, r, f``. The game draws no random numbers.

Representation (for speed: every state field is an (N,) int64 vector, so the compiled step
is one loop over the batch, vectorised across envs):

* Each 10x10 map is two 50-bit words: ``*_lo`` holds rows 0-4, ``*_hi`` rows 5-9, cell
  (row r, column c) at bit ``10 * (r % 5) + c``. Row moves are 10-bit shifts between the
  words, column rolls are masked 1-bit shifts, counts are SWAR popcounts.
* The observation is assembled once per step: each row becomes a 60-bit word (bit
  ``6 c + ch``), whose bits are spread into bytes four at a time and written as int32 words
  that are reinterpreted as the bool output (no bool or uint8 arithmetic in the kernel).

Deliberate differences: as the reference, a finished game stays frozen (reward 0, terminal)
if stepped again; this is only reachable with autoreset ``DISABLED``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from gpuvec_envs.core.env import select
from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.minatar._common import COL0, COL9, ROW, WORD, MinAtarEnv, MinAtarParams

#: Observation channels, in minatar's order.
CHANNELS = ("cannon", "alien", "alien_left", "alien_right", "friendly_bullet", "enemy_bullet")
SHOT_COOL_DOWN = 5  # [steps] between the cannon's shots
ENEMY_MOVE_INTERVAL = 12  # [steps] initial alien move interval
ENEMY_SHOT_INTERVAL = 10  # [steps] between alien shots
MIN_MOVE_INTERVAL = 6  # ramping stops at this move interval
#: A fresh wave (rows 0-3, columns 2-7) as a ``lo`` word.
WAVE_LO = sum(0b0011111100 << (10 * k) for k in range(4))


class SpaceInvadersState(NamedTuple):
    """Batched Space Invaders state, all (N,) int64.

    Maps are two words each: ``*_lo`` = rows 0-4, ``*_hi`` = rows 5-9, bit ``10 (r % 5) + c``
    set where cell (row r, column c) is occupied.
    """

    pos: torch.Tensor  # [col] cannon, on row 9
    f_lo: torch.Tensor  # friendly bullets, rows 0-4
    f_hi: torch.Tensor  # friendly bullets, rows 5-9
    e_lo: torch.Tensor  # enemy bullets, rows 0-4
    e_hi: torch.Tensor  # enemy bullets, rows 5-9
    a_lo: torch.Tensor  # aliens, rows 0-4
    a_hi: torch.Tensor  # aliens, rows 5-9
    alien_dir: torch.Tensor  # -1 (left) or +1 (right)
    move_interval: torch.Tensor  # [steps] the wave's move interval (12..6)
    move_timer: torch.Tensor  # [steps] until the aliens move
    alien_shot_timer: torch.Tensor  # [steps] until an alien shoots
    ramp_index: torch.Tensor  # waves cleared while ramping
    shot_timer: torch.Tensor  # [steps] cannon cool-down
    terminal: torch.Tensor  # 1 = game over, else 0


def popcount(x: torch.Tensor) -> torch.Tensor:
    """Number of set bits of non-negative int64 values below ``2**56`` (SWAR, no multiply)."""
    x = x - ((x >> 1) & 0x5555555555555555)
    x = (x & 0x3333333333333333) + ((x >> 2) & 0x3333333333333333)
    x = (x + (x >> 4)) & 0x0F0F0F0F0F0F0F0F
    x = x + (x >> 8)
    x = x + (x >> 16)
    return (x + (x >> 32)) & 0xFF


def msb10(x: torch.Tensor) -> torch.Tensor:
    """Index of the highest set bit of values in ``1..1023`` (0 for 0), same shape."""
    out = torch.zeros_like(x)
    for k in range(1, 10):
        out = out + (x >= (1 << k)).long()
    return out


def reset(params: MinAtarParams, rng: Rng) -> SpaceInvadersState:
    """N new games: cannon at column 5, a full wave moving left, timers at their intervals."""
    z = torch.zeros(rng.num_envs, dtype=torch.int64, device=rng.device)
    return SpaceInvadersState(
        pos=z + 5, f_lo=z, f_hi=z, e_lo=z, e_hi=z, a_lo=z + WAVE_LO, a_hi=z,
        alien_dir=z - 1, move_interval=z + ENEMY_MOVE_INTERVAL,
        move_timer=z + ENEMY_MOVE_INTERVAL, alien_shot_timer=z + ENEMY_SHOT_INTERVAL,
        ramp_index=z, shot_timer=z, terminal=z,
    )  # fmt: skip


def shooter(a_lo: torch.Tensor, a_hi: torch.Tensor, pos: torch.Tensor):
    """The reference's ``_nearest_alien``: the bit of the alien that shoots, per word.

    Columns are searched by distance to ``pos``, ties to the lower column; in the first
    column holding an alien, the lowest alien (largest row) shoots. Returns ``(lo, hi)``
    (N,) int64 single-bit masks (at most one of them non-zero; both 0 without aliens).
    """
    both = a_lo | a_hi
    occ = (both | (both >> 10) | (both >> 20) | (both >> 30) | (both >> 40)) & ROW
    upto = (2 << pos) - 1  # columns 0..pos
    left = occ & upto
    right = occ & ~upto
    cl = msb10(left)
    cr = msb10(right & -right)
    use_left = (left != 0) & ((right == 0) | (pos - cl <= cr - pos))
    col = torch.where(use_left, cl, cr)
    hi_col = (a_hi >> col) & COL0
    lo_col = (a_lo >> col) & COL0
    in_hi = hi_col != 0
    v = torch.where(in_hi, hi_col, lo_col)
    k = (v >= (1 << 10)).long() + (v >= (1 << 20)).long() + (v >= (1 << 30)).long()
    k = k + (v >= (1 << 40)).long()
    bit = torch.where(occ != 0, 1 << (10 * k + col), 0)
    return torch.where(in_hi, 0, bit), torch.where(in_hi, bit, 0)


def step(
    params: MinAtarParams, s: SpaceInvadersState, action: torch.Tensor
) -> tuple[SpaceInvadersState, torch.Tensor, torch.Tensor]:
    """One step of the reference's ``act`` on full actions (N,) int64 0..5.

    Returns ``(state, reward (N,) int64, terminal (N,) bool)``; finished games are frozen.
    """
    # Player.
    fire = (action == 5) & (s.shot_timer == 0)
    f_hi = torch.where(fire, s.f_hi | (1 << (40 + s.pos)), s.f_hi)
    shot_timer = torch.where(fire, SHOT_COOL_DOWN, s.shot_timer)
    pos = torch.where(action == 1, (s.pos - 1).clamp(min=0), s.pos)
    pos = torch.where(action == 3, (pos + 1).clamp(max=9), pos)
    row9 = 1 << (40 + pos)  # the cannon's cell in a hi word

    # Bullets: friendly up one row (row 9 emptied), enemy down one row (row 0 emptied).
    f_lo = (s.f_lo >> 10) | ((f_hi & ROW) << 40)
    f_hi = f_hi >> 10
    e_hi = ((s.e_hi << 10) & WORD) | (s.e_lo >> 40)
    e_lo = (s.e_lo << 10) & WORD
    terminal = (e_hi & row9) != 0

    # Aliens.
    a_lo, a_hi = s.a_lo, s.a_hi
    terminal = terminal | ((a_hi & row9) != 0)
    move = s.move_timer == 0
    count = popcount(a_lo) + popcount(a_hi)
    move_timer = torch.where(move, torch.minimum(count, s.move_interval), s.move_timer)
    both = a_lo | a_hi
    edge = (((both & COL0) != 0) & (s.alien_dir < 0)) | (((both & COL9) != 0) & (s.alien_dir > 0))
    down = move & edge
    alien_dir = torch.where(down, -s.alien_dir, s.alien_dir)
    terminal = terminal | (down & ((a_hi >> 40) != 0))
    # np.roll(+1, axis=0): row 9 wraps to row 0.
    down_lo = ((a_lo << 10) & WORD) | (a_hi >> 40)
    down_hi = ((a_hi << 10) & WORD) | (a_lo >> 40)
    right = s.alien_dir > 0

    def roll(x: torch.Tensor) -> torch.Tensor:
        r = ((x << 1) & (WORD & ~COL0)) | ((x >> 9) & COL0)  # np.roll(+1, axis=1)
        le = ((x >> 1) & ~COL9) | ((x & COL0) << 9)  # np.roll(-1, axis=1)
        return torch.where(right, r, le)

    a_lo = torch.where(move, torch.where(edge, down_lo, roll(a_lo)), a_lo)
    a_hi = torch.where(move, torch.where(edge, down_hi, roll(a_hi)), a_hi)
    terminal = terminal | (move & ((a_hi & row9) != 0))

    # Alien shot from the alien nearest the cannon.
    shoot = s.alien_shot_timer == 0
    alien_shot_timer = torch.where(shoot, ENEMY_SHOT_INTERVAL, s.alien_shot_timer)
    b_lo, b_hi = shooter(a_lo, a_hi, pos)
    e_lo = torch.where(shoot, e_lo | b_lo, e_lo)
    e_hi = torch.where(shoot, e_hi | b_hi, e_hi)

    # Kills.
    k_lo, k_hi = a_lo & f_lo, a_hi & f_hi
    reward = popcount(k_lo) + popcount(k_hi)
    a_lo, a_hi = a_lo & ~k_lo, a_hi & ~k_hi
    f_lo, f_hi = f_lo & ~k_lo, f_hi & ~k_hi

    # Timers and a new wave.
    shot_timer = shot_timer - (shot_timer > 0).long()
    move_timer = move_timer - 1
    alien_shot_timer = alien_shot_timer - 1
    empty = (a_lo | a_hi) == 0
    ramp = empty & (s.move_interval > MIN_MOVE_INTERVAL) & params.difficulty_ramping
    move_interval = s.move_interval - ramp.long()
    ramp_index = s.ramp_index + ramp.long()
    a_lo = torch.where(empty, WAVE_LO, a_lo)

    nxt = SpaceInvadersState(
        pos, f_lo, f_hi, e_lo, e_hi, a_lo, a_hi, alien_dir, move_interval, move_timer,
        alien_shot_timer, ramp_index, shot_timer, terminal.long(),
    )  # fmt: skip
    done = s.terminal != 0
    nxt = select(done, s, nxt)
    reward = torch.where(done, 0, reward)
    return nxt, reward, nxt.terminal != 0


# -- observation ----------------------------------------------------------------------------
_SPREAD_MUL = sum(1 << (5 * k) for k in range(5))
_SPREAD_MASK = sum(1 << (6 * k) for k in range(5))


def spread6(x: torch.Tensor) -> torch.Tensor:
    """10-bit row masks -> bit ``c`` moved to bit ``6 c`` (two carry-free multiplies)."""
    lo = ((x & 31) * _SPREAD_MUL) & _SPREAD_MASK
    hi = (((x >> 5) & 31) * _SPREAD_MUL) & _SPREAD_MASK
    return lo | (hi << 30)


def bits_to_bytes(words: torch.Tensor, nbits: int) -> torch.Tensor:
    """(..., K) int64 words of ``nbits`` bits -> (..., K * nbits) uint8 0/1, bit j -> byte j.

    The bits are spread into bytes four (or two) at a time, stored as int32 (int16) words and
    reinterpreted as bytes: a zero-copy view in eager and compiled code (compiled uint8
    stores are written byte by byte).
    """
    if nbits % 4 == 0:
        shifts = torch.arange(0, nbits, 4, device=words.device)
        out = ((((words[..., None] >> shifts) & 15) * 0x204081) & 0x01010101).to(torch.int32)
    else:
        assert nbits % 2 == 0
        shifts = torch.arange(0, nbits, 2, device=words.device)
        b = words[..., None] >> shifts
        out = ((b & 1) | ((b & 2) << 7)).to(torch.int16)
    # View the words' bytes (no flatten first: a merged index is not vectorised).
    return out.view(torch.uint8).view(*words.shape[:-1], -1)


def observation(params: MinAtarParams, s: SpaceInvadersState) -> torch.Tensor:
    """(N, 10, 10, 6) uint8 0/1 observation, channels as :data:`CHANNELS`."""
    left = s.alien_dir < 0
    rows = []
    for r in range(10):
        a, f, e = ((lo if r < 5 else hi) >> (10 * (r % 5)) & ROW for lo, hi in (
            (s.a_lo, s.a_hi), (s.f_lo, s.f_hi), (s.e_lo, s.e_hi)))  # fmt: skip
        a = spread6(a)
        m = (a << 1) | (torch.where(left, a, 0) << 2) | (torch.where(left, 0, a) << 3)
        m = m | (spread6(f) << 4) | (spread6(e) << 5)
        if r == 9:
            m = m | (1 << (6 * s.pos))
        rows.append(m)
    cells = bits_to_bytes(torch.stack(rows, dim=1), 60)  # (N, 10 rows, 60)
    return cells.view(-1, 10, 10, len(CHANNELS))


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
        """(N, 10, 10, 6) uint8 0/1 (bool to users)."""
        return observation(params, state)
