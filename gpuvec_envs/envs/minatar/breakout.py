"""Batched MinAtar Breakout.

Mirrors ``minatar/environments/breakout.py`` (minatar 1.0.15, ``Env``): a paddle on the bottom
row bounces a diagonally moving ball into three rows of bricks (+1 per brick); the rows are
refilled when all are broken and the ball reaches the bottom row; the game ends when the ball
reaches the bottom row past the paddle. Channels: paddle, ball, trail, brick. Minimal
actions: ``n, l, r``. The game draws one random number at reset (the ball's start side,
``randint(2)`` as :meth:`Rng.randint`) and none while stepping; difficulty does not ramp.

Deliberate differences:

* The bricks are stored as a 30-bit mask per env (bit ``10 * (row - 1) + col`` for rows
  1-3, the only rows bricks can occupy) instead of a 10x10 float map; every field,
  flags included, is int32 (the fastest dtype in compiled CPU kernels).
* As the reference, a finished game stays frozen (reward 0, terminal) if stepped again; this
  is only reachable with autoreset ``DISABLED``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from gpuvec_envs.core.constants import table
from gpuvec_envs.core.env import select
from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.minatar._common import MinAtarEnv, MinAtarParams

#: Bit mask of a full wall: rows 1-3, 10 columns each.
FULL_WALL = (1 << 30) - 1
#: Observation channels, in minatar's order.
CHANNELS = ("paddle", "ball", "trail", "brick")

I32 = torch.int32


class BreakoutState(NamedTuple):
    """Batched Breakout state, each field shape (N,) int32; positions are grid cells 0..9.

    int32 throughout, flags included: compiled CPU kernels vectorise int32 selects, while
    bool/uint8 masks and int64 halve the vector width or are converted slowly.
    """

    ball_x: torch.Tensor  # [col]
    ball_y: torch.Tensor  # [row], 0 = top
    ball_dir: torch.Tensor  # 0: up-left, 1: up-right, 2: down-right, 3: down-left
    pos: torch.Tensor  # [col] paddle, on row 9
    last_x: torch.Tensor  # [col] ball's previous cell (trail)
    last_y: torch.Tensor  # [row]
    bricks: torch.Tensor  # bit mask, bit 10 * (row - 1) + col for rows 1..3
    strike: torch.Tensor  # 0/1: the ball hit a brick on the previous step
    terminal: torch.Tensor  # 0/1: game over


def reset(params: MinAtarParams, rng: Rng) -> BreakoutState:
    """N new games: ball on row 3 at column 0 (moving down-right) or 9 (down-left)."""
    side = rng.randint(2).to(I32)  # (N,) 0 or 1, the reference's randint(2)
    ball_x = side * 9
    ball_y = torch.full_like(side, 3)
    zero = torch.zeros_like(side)
    return BreakoutState(
        ball_x=ball_x,
        ball_y=ball_y,
        ball_dir=side + 2,
        pos=torch.full_like(side, 4),
        last_x=ball_x,
        last_y=ball_y,
        bricks=torch.full_like(side, FULL_WALL),
        strike=zero,
        terminal=zero,
    )


def step(
    params: MinAtarParams, s: BreakoutState, action: torch.Tensor
) -> tuple[BreakoutState, torch.Tensor, torch.Tensor]:
    """Move the paddle, then the ball; ``action`` (N,) int64 full action index 0..5.

    Returns:
        ``(state, reward, terminal)``: reward (N,) float32 (1 per broken brick), terminal
        (N,) bool.
    """
    pos = torch.where(action == 1, (s.pos - 1).clamp(min=0), s.pos)
    pos = torch.where(action == 3, (pos + 1).clamp(max=9), pos)

    d = s.ball_dir
    right = (d == 1) | (d == 2)
    new_x = torch.where(right, s.ball_x + 1, s.ball_x - 1)
    new_y = torch.where(d < 2, s.ball_y - 1, s.ball_y + 1)

    # Side walls: clamp and mirror horizontally (0<->1, 2<->3).
    side = (new_x < 0) | (new_x > 9)
    new_x = new_x.clamp(0, 9)
    d = torch.where(side, d ^ 1, d)

    # Top wall, else a brick, else the bottom row (the three branches are exclusive).
    top = new_y < 0
    in_wall = (new_y >= 1) & (new_y <= 3)
    bit = ((new_y - 1) * 10 + new_x).clamp(0, 29)
    brick = in_wall & (((s.bricks >> bit) & 1) != 0)
    breaks = brick & (s.strike == 0)
    bottom = new_y == 9

    bricks = torch.where(breaks, s.bricks & ~(1 << bit), s.bricks)
    bricks = torch.where(bottom & (bricks == 0), FULL_WALL, bricks)
    straight_back = bottom & (s.ball_x == pos)  # paddle under the ball: reverse vertically
    corner = bottom & ~straight_back & (new_x == pos)  # paddle's edge: reverse both ways
    missed = bottom & ~straight_back & ~corner

    d = torch.where(top | breaks | straight_back, 3 - d, d)
    d = torch.where(corner, d ^ 2, d)
    new_y = torch.where(top, 0, new_y)
    new_y = torch.where(breaks | straight_back | corner, s.ball_y, new_y)

    nxt = BreakoutState(
        ball_x=new_x,
        ball_y=new_y,
        ball_dir=d,
        pos=pos,
        last_x=s.ball_x,
        last_y=s.ball_y,
        bricks=bricks,
        strike=brick.to(I32),
        terminal=missed.to(I32),
    )
    done = s.terminal != 0
    nxt = select(done, s, nxt)
    reward = torch.where(breaks & ~done, 1.0, 0.0)
    return nxt, reward, nxt.terminal != 0


def _brick_bits() -> list[int]:
    """Each cell's bit in ``bricks`` (rows 1-3), 0 elsewhere."""
    return [0] * 10 + [1 << i for i in range(30)] + [0] * 60


def observation(params: MinAtarParams, s: BreakoutState) -> torch.Tensor:
    """(N, 10, 10, 4) uint8 0/1, channels :data:`CHANNELS`, indexed ``[row, col, channel]``.

    Built as one int32 word per cell (byte ``c`` = channel ``c``, little-endian) by
    comparing each env's positions with the cell index, then viewed as bytes: one
    vectorised pass over (N, 100) words, no scatter.
    """
    dev = s.pos.device
    cell = torch.arange(100, dtype=I32, device=dev)
    brick_bit = table(_brick_bits, dtype=I32, like=s.pos)  # cell's bit in ``bricks``
    one = torch.ones((), dtype=I32, device=dev)
    zero = torch.zeros((), dtype=I32, device=dev)
    paddle = torch.where(cell == (s.pos + 90)[:, None], one, zero)
    ball = torch.where(cell == (s.ball_y * 10 + s.ball_x)[:, None], one << 8, zero)
    trail = torch.where(cell == (s.last_y * 10 + s.last_x)[:, None], one << 16, zero)
    brick = torch.where((s.bricks[:, None] & brick_bit) != 0, one << 24, zero)
    words = paddle | ball | trail | brick  # (N, 100) int32
    return words.view(torch.uint8).view(-1, 10, 10, 4)


class Breakout(MinAtarEnv):
    """MinAtar Breakout (``gpuvec/MinAtar-Breakout-v0``, ``-v1`` with the minimal actions)."""

    n_channels = 4
    minimal_actions = (0, 1, 3)

    def game_reset(self, params: MinAtarParams, rng: Rng) -> BreakoutState:
        """N new games."""
        return reset(params, rng)

    def game_step(
        self, params: MinAtarParams, state: BreakoutState, action: torch.Tensor, rng: Rng
    ) -> tuple[BreakoutState, torch.Tensor, torch.Tensor]:
        """One step (no random draws)."""
        return step(params, state, action)

    def game_observation(self, params: MinAtarParams, state: BreakoutState) -> torch.Tensor:
        """(N, 10, 10, 4) uint8 0/1 (bool to users)."""
        return observation(params, state)
