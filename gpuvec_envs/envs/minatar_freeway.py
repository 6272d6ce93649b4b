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
* As the reference, a finished game stays frozen (reward 0, terminal) if stepped again; this
  is only reachable with autoreset ``DISABLED``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from gpuvec_envs.core.env import select
from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs._minatar import MinAtarEnv, MinAtarParams

#: Frames between two moves of the chicken.
PLAYER_SPEED = 3
#: Frames until the game ends.
TIME_LIMIT = 2500
#: Observation channels, in minatar's order.
CHANNELS = ("chicken", "car", "speed1", "speed2", "speed3", "speed4", "speed5")


class FreewayState(NamedTuple):
    """Batched Freeway state; car ``i`` drives in row ``i + 1``."""

    car_x: torch.Tensor  # (N, 8) int64 [col]
    car_timer: torch.Tensor  # (N, 8) int64 [frames] until the car's next move
    car_speed: torch.Tensor  # (N, 8) int64 signed period [frames/move]; sign = direction
    pos: torch.Tensor  # (N,) int64 [row] of the chicken (column 4)
    move_timer: torch.Tensor  # (N,) int64 [frames] until the chicken may move
    time_left: torch.Tensor  # (N,) int64 [frames], the reference's terminate_timer
    terminal: torch.Tensor  # (N,) bool: game over


#: Place values of the 8 base-5 digits that encode the car periods.
_DIGITS = tuple(5**i for i in range(8))


def car_draws(rng: Rng) -> torch.Tensor:
    """(N, 8) int64 signed car periods: ``randint(1, 6, 8)`` times a random sign."""
    words = rng.bits(2)
    code = (words[:, :1] * 5**8) >> 32  # uniform in [0, 5**8) up to 2**-13
    place = torch.tensor(_DIGITS, device=words.device)
    period = (code // place) % 5 + 1
    left = ((words[:, 1:] >> torch.arange(8, device=words.device)) & 1) == 1
    return torch.where(left, -period, period)


def reset(params: MinAtarParams, rng: Rng) -> FreewayState:
    """N new games: cars in column 0 with random periods, chicken on row 9."""
    speed = car_draws(rng)
    n = speed.shape[0]
    zero = torch.zeros(n, dtype=torch.int64, device=speed.device)
    return FreewayState(
        car_x=torch.zeros_like(speed),
        car_timer=speed.abs(),
        car_speed=speed,
        pos=zero + 9,
        move_timer=zero + PLAYER_SPEED,
        time_left=zero + TIME_LIMIT,
        terminal=zero.bool(),
    )


def step(
    params: MinAtarParams, s: FreewayState, action: torch.Tensor, rng: Rng
) -> tuple[FreewayState, torch.Tensor, torch.Tensor]:
    """Move the chicken, score, move the cars; ``action`` (N,) int64 full index 0..5.

    Returns:
        ``(state, reward, terminal)``: reward (N,) float32, terminal (N,) bool.
    """
    new_speed = car_draws(rng)
    can_move = s.move_timer == 0
    up = can_move & (action == 2)
    down = can_move & (action == 4)
    pos = torch.where(up, (s.pos - 1).clamp(min=0), s.pos)
    pos = torch.where(down, (pos + 1).clamp(max=9), pos)
    move_timer = torch.where(up | down, PLAYER_SPEED, s.move_timer)

    scored = pos == 0
    pos = torch.where(scored, 9, pos)
    speed = torch.where(scored[:, None], new_speed, s.car_speed)
    timer = torch.where(scored[:, None], new_speed.abs(), s.car_timer)

    # Cars: a car in the chicken's row hits it before or after its move (one car per row,
    # so the reference's sequential loop and this batched form agree).
    lane = torch.arange(1, 9, device=pos.device) == pos[:, None]  # (N, 8)
    moves = timer == 0
    x = torch.where(moves, (s.car_x + speed.sign()) % 10, s.car_x)
    hit = lane & ((s.car_x == 4) | (moves & (x == 4)))
    timer = torch.where(moves, speed.abs(), timer - 1)
    pos = torch.where(hit.any(dim=1), 9, pos)

    move_timer = (move_timer - 1).clamp(min=0)
    time_left = s.time_left - 1
    nxt = FreewayState(x, timer, speed, pos, move_timer, time_left, time_left < 0)
    done = s.terminal
    nxt = select(done, s, nxt)
    reward = torch.where(scored & ~done, 1.0, 0.0)
    return nxt, reward, nxt.terminal


def observation(params: MinAtarParams, s: FreewayState) -> torch.Tensor:
    """(N, 10, 10, 7) bool, channels :data:`CHANNELS`, indexed ``[row, col, channel]``.

    Built by scattering the 17 set cells (chicken, 8 cars, 8 trails) into zeros, as uint8
    viewed as bool (bool kernels are slower on CPU).
    """
    n = s.pos.shape[0]
    rows = torch.arange(1, 9, device=s.pos.device)
    chicken = (s.pos * 10 + 4) * 7
    car = (rows * 10 + s.car_x) * 7 + 1
    back_x = (s.car_x - s.car_speed.sign()) % 10
    trail = (rows * 10 + back_x) * 7 + 1 + s.car_speed.abs()  # channel speed1..speed5
    index = torch.cat((chicken[:, None], car, trail), dim=1)  # (N, 17)
    obs = torch.zeros(n, 700, dtype=torch.uint8, device=s.pos.device).scatter(1, index, 1)
    return obs.view(torch.bool).view(n, 10, 10, 7)


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
        """(N, 10, 10, 7) bool."""
        return observation(params, state)
