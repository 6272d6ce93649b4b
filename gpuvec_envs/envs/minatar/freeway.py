"""Batched MinAtar Freeway.

Mirrors ``minatar/environments/freeway.py`` (minatar 1.0.15, ``Env``): a chicken in column 4
crosses eight lanes of wrapping cars, moving up or down at most once every 3 frames; +1 and
back to the bottom row on reaching the top, when all car speeds are redrawn; back to the
bottom row when hit. The game ends after 2500 frames (the reference's own time limit, a
termination). Channels: chicken, car, speed1..speed5 (the trail cell behind each car, in
the channel of its period). Minimal actions: ``n, u, d``. Difficulty does not ramp.

Randomness: every reset and every step draws two 32-bit words (after the sticky-action
draw): the first gives the reference's ``randint(1, 6, 8)`` as the 8 base-5 digits of
``(word * 5**8) >> 32``, plus 1; bit ``i`` of the second is car ``i``'s ``rand() < 0.5``
(moving left). A step uses them only when the chicken scores. (Two words instead of
sixteen: cheaper to hash, and each drawn column costs seconds of compile time.)

Deliberate differences:

* The 8 periods come from one word (uniform up to a relative bias of 2**-13) and the 8
  directions from the bits of another; the reference draws 16 numbers. Its
  ``sign(u - 0.5)`` also gives a car of speed 0 for ``u == 0.5`` exactly, which then
  crashes its ``state()``; here a direction is always -1 or +1.
* The 8 cars are packed into int32 words (4 bits per car for column, timer and period, a
  bit mask for the direction) instead of an (N, 8, 4) list.
* As the reference, a finished game stays frozen (reward 0, terminal) if stepped again; this
  is only reachable with autoreset ``DISABLED``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from gpuvec_envs.core.env import select
from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.minatar._common import MinAtarEnv, MinAtarParams

#: Frames between two moves of the chicken.
PLAYER_SPEED = 3
#: Frames until the game ends.
TIME_LIMIT = 2500
#: Observation channels, in minatar's order.
CHANNELS = ("chicken", "car", "speed1", "speed2", "speed3", "speed4", "speed5")


I32 = torch.int32
MASK32 = 0xFFFFFFFF


def _nibble(packed: torch.Tensor, i: int | torch.Tensor) -> torch.Tensor:
    """Field of car ``i`` (bits ``4i..4i+3``) of a packed int32 word, int32 0..15."""
    return (packed >> (4 * i)) & 15


class FreewayState(NamedTuple):
    """Batched Freeway state, each field (N,) int32; car ``i`` drives in row ``i + 1``.

    The 8 cars are packed per env: bits ``4i..4i+3`` of ``car_x``, ``car_timer`` and
    ``car_period`` and bit ``i`` of ``car_left`` belong to car ``i``. Everything is an int32
    column so that the compiled step is one vectorised loop over envs.
    """

    car_x: torch.Tensor  # 8 packed 4-bit [col] (bit 31 = car 7's top bit)
    car_timer: torch.Tensor  # 8 packed 4-bit [frames] until the car's next move
    car_period: torch.Tensor  # 8 packed 4-bit [frames/move] 1..5, the reference's |speed|
    car_left: torch.Tensor  # bit mask: the car moves left (the reference's speed < 0)
    pos: torch.Tensor  # [row] of the chicken (column 4)
    move_timer: torch.Tensor  # [frames] until the chicken may move
    time_left: torch.Tensor  # [frames], the reference's terminate_timer
    terminal: torch.Tensor  # 0/1: game over


def car_draws(rng: Rng) -> tuple[torch.Tensor, torch.Tensor]:
    """Packed car periods ``randint(1, 6, 8)`` and the left mask, each (N,) int32.

    The periods are the 8 base-5 digits of ``code = (word * 5**8) >> 32``, car ``i`` taking
    the digit of place ``5**i``; they are peeled off most significant first as the leading
    base-5 digits of ``word / 2**32`` (multiply by 5, take the integer part), which needs
    no division.
    """
    frac, left = rng.columns(2)
    period = torch.zeros_like(frac)
    for i in reversed(range(8)):
        frac = frac * 5
        period = period | (((frac >> 32) + 1) << (4 * i))
        frac = frac & MASK32
    return period.to(I32), (left & 255).to(I32)


def reset(params: MinAtarParams, rng: Rng) -> FreewayState:
    """N new games: cars in column 0 with random periods, chicken on row 9."""
    period, left = car_draws(rng)
    zero = torch.zeros_like(period)
    return FreewayState(
        car_x=zero,
        car_timer=period,
        car_period=period,
        car_left=left,
        pos=zero + 9,
        move_timer=zero + PLAYER_SPEED,
        time_left=zero + TIME_LIMIT,
        terminal=zero,
    )


def step(
    params: MinAtarParams, s: FreewayState, action: torch.Tensor, rng: Rng
) -> tuple[FreewayState, torch.Tensor, torch.Tensor]:
    """Move the chicken, score, move the cars; ``action`` (N,) int64 full index 0..5.

    Returns:
        ``(state, reward, terminal)``: reward (N,) float32, terminal (N,) bool.
    """
    new_period, new_left = car_draws(rng)
    can_move = s.move_timer == 0
    up = can_move & (action == 2)
    down = can_move & (action == 4)
    pos = torch.where(up, (s.pos - 1).clamp(min=0), s.pos)
    pos = torch.where(down, (pos + 1).clamp(max=9), pos)
    move_timer = torch.where(up | down, PLAYER_SPEED, s.move_timer)

    scored = pos == 0
    pos = torch.where(scored, 9, pos)
    period = torch.where(scored, new_period, s.car_period)
    left = torch.where(scored, new_left, s.car_left)
    timer = torch.where(scored, new_period, s.car_timer)

    # Cars: a car in the chicken's row hits it before or after its move (one car per row,
    # so the reference's sequential loop and this per-car form agree).
    car_x = torch.zeros_like(timer)
    car_timer = torch.zeros_like(timer)
    hit = torch.zeros_like(scored)
    for i in range(8):
        x, t = _nibble(s.car_x, i), _nibble(timer, i)
        moves = t == 0
        to_left = torch.where(x == 0, 9, x - 1)
        to_right = torch.where(x == 9, 0, x + 1)
        nx = torch.where(moves, torch.where(((left >> i) & 1) != 0, to_left, to_right), x)
        hit = hit | ((pos == i + 1) & ((x == 4) | (moves & (nx == 4))))
        car_x = car_x | (nx << (4 * i))
        car_timer = car_timer | (torch.where(moves, _nibble(period, i), t - 1) << (4 * i))
    pos = torch.where(hit, 9, pos)

    move_timer = (move_timer - 1).clamp(min=0)
    time_left = s.time_left - 1
    nxt = FreewayState(
        car_x, car_timer, period, left, pos, move_timer, time_left, (time_left < 0).to(I32)
    )
    done = s.terminal != 0
    nxt = select(done, s, nxt)
    reward = torch.where(scored & ~done, 1.0, 0.0)
    return nxt, reward, nxt.terminal != 0


def observation(params: MinAtarParams, s: FreewayState) -> torch.Tensor:
    """(N, 10, 10, 7) uint8 0/1, channels :data:`CHANNELS`, indexed ``[row, col, channel]``.

    Built by one scatter of ones into zeros, as uint8 viewed as bool: 17 flat indices per
    env (8 cars, 8 trails, the chicken) from one broadcast expression over per-index tables
    (not a concatenation of columns). Only 17 of 700 bytes are set, so a sparse write beats
    computing every byte, and one scatter writes the output buffer in place (a second one
    would copy the whole buffer first).
    """
    dev = s.pos.device
    j = torch.arange(17, dtype=I32, device=dev)
    car = j % 8  # index j < 16: car j % 8; j = 16: the chicken
    is_trail = j >= 8  # j < 8: the car, else its trail
    x = (s.car_x[:, None] >> (4 * car)) & 15  # (N, 17)
    left = ((s.car_left[:, None] >> car) & 1) != 0
    back = torch.where(left, torch.where(x == 9, 0, x + 1), torch.where(x == 0, 9, x - 1))
    period = (s.car_period[:, None] >> (4 * car)) & 15
    row = car + 1
    index = torch.where(is_trail, (row * 10 + back) * 7 + 1 + period, (row * 10 + x) * 7 + 1)
    index = torch.where(j == 16, ((s.pos * 10 + 4) * 7)[:, None], index)
    n = s.pos.shape[0]
    obs = torch.zeros(n, 700, dtype=torch.uint8, device=dev)
    obs = obs.scatter(1, index.to(torch.int64), torch.ones_like(obs[:, :17]))
    return obs.view(n, 10, 10, 7)


class Freeway(MinAtarEnv):
    """MinAtar Freeway (``gpuvec/MinAtar-Freeway-v0``, ``-v1`` with the minimal actions)."""

    n_channels = 7
    minimal_actions = (0, 2, 4)

    def game_reset(self, params: MinAtarParams, rng: Rng) -> FreewayState:
        """N new games."""
        return reset(params, rng)

    def game_step(
        self, params: MinAtarParams, state: FreewayState, action: torch.Tensor, rng: Rng
    ) -> tuple[FreewayState, torch.Tensor, torch.Tensor]:
        """One step (2 draws, used on scoring)."""
        return step(params, state, action, rng)

    def game_observation(self, params: MinAtarParams, state: FreewayState) -> torch.Tensor:
        """(N, 10, 10, 7) uint8 0/1 (bool to users)."""
        return observation(params, state)
