"""Batched MinAtar Breakout.

Mirrors ``minatar/environments/breakout.py`` (minatar 1.0.15, ``Env``): a paddle on the bottom
row bounces a diagonally moving ball into three rows of bricks (+1 per brick); the rows are
refilled when all are broken and the ball reaches the bottom row; the game ends when the ball
reaches the bottom row past the paddle. Channels: paddle, ball, trail, brick. Minimal
actions: ``n, l, r``. The game draws one random number at reset (the ball's start side,
``randint(2)`` as :meth:`Rng.randint`) and none while stepping; difficulty does not ramp.

Deliberate differences:

* The bricks are stored as a 30-bit mask per env (bit ``10 * (row - 1) + col`` for rows
  1-3, the only rows bricks can occupy) instead of a 10x10 float map.
* As the reference, a finished game stays frozen (reward 0, terminal) if stepped again; this
  is only reachable with autoreset ``DISABLED``.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from gpuvec_envs.core.env import select
from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs._minatar import MinAtarEnv, MinAtarParams

#: Bit mask of a full wall: rows 1-3, 10 columns each.
FULL_WALL = (1 << 30) - 1
#: Observation channels, in minatar's order.
CHANNELS = ("paddle", "ball", "trail", "brick")


class BreakoutState(NamedTuple):
    """Batched Breakout state, each field shape (N,); positions are grid cells 0..9."""

    ball_x: torch.Tensor  # int64 [col]
    ball_y: torch.Tensor  # int64 [row], 0 = top
    ball_dir: torch.Tensor  # int64 0: up-left, 1: up-right, 2: down-right, 3: down-left
    pos: torch.Tensor  # int64 [col] paddle, on row 9
    last_x: torch.Tensor  # int64 [col] ball's previous cell (trail)
    last_y: torch.Tensor  # int64 [row]
    bricks: torch.Tensor  # int64 bit mask, bit 10 * (row - 1) + col for rows 1..3
    strike: torch.Tensor  # bool: the ball hit a brick on the previous step
    terminal: torch.Tensor  # bool: game over


def reset(params: MinAtarParams, rng: Rng) -> BreakoutState:
    """N new games: ball on row 3 at column 0 (moving down-right) or 9 (down-left)."""
    side = rng.randint(2)  # (N,) 0 or 1, the reference's randint(2)
    ball_x = side * 9
    ball_dir = side + 2
    ball_y = torch.full_like(side, 3)
    zero = torch.zeros_like(side)
    return BreakoutState(
        ball_x=ball_x,
        ball_y=ball_y,
        ball_dir=ball_dir,
        pos=torch.full_like(side, 4),
        last_x=ball_x,
        last_y=ball_y,
        bricks=torch.full_like(side, FULL_WALL),
        strike=zero.bool(),
        terminal=zero.bool(),
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
    new_x = s.ball_x + torch.where((d == 1) | (d == 2), 1, -1)
    new_y = s.ball_y + torch.where(d < 2, -1, 1)

    # Side walls: clamp and mirror horizontally (0<->1, 2<->3).
    side = (new_x < 0) | (new_x > 9)
    new_x = new_x.clamp(0, 9)
    d = torch.where(side, d ^ 1, d)

    # Top wall, else a brick, else the bottom row (the three branches are exclusive).
    top = new_y < 0
    in_wall = (new_y >= 1) & (new_y <= 3)
    bit = ((new_y - 1) * 10 + new_x).clamp(0, 29)
    brick = ~top & in_wall & (((s.bricks >> bit) & 1) == 1)
    breaks = brick & ~s.strike
    bottom = ~top & ~brick & (new_y == 9)

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
        strike=brick,
        terminal=missed,
    )
    done = s.terminal
    nxt = select(done, s, nxt)
    reward = torch.where(breaks & ~done, 1.0, 0.0)
    return nxt, reward, nxt.terminal


def observation(params: MinAtarParams, s: BreakoutState) -> torch.Tensor:
    """(N, 10, 10, 4) bool, channels :data:`CHANNELS`, indexed ``[row, col, channel]``.

    Built by scattering paddle, ball, trail (value 1) and the 30 brick cells (value 0/1)
    into zeros, as uint8 viewed as bool (bool kernels are slower on CPU). No two writes
    share a cell: each channel is written by one kind only.
    """
    n = s.pos.shape[0]
    dev = s.pos.device
    wall = torch.arange(10, 40, device=dev)  # cells of rows 1..3
    paddle = (90 + s.pos) * 4
    ball = (s.ball_y * 10 + s.ball_x) * 4 + 1
    trail = (s.last_y * 10 + s.last_x) * 4 + 2
    bricks = (s.bricks[:, None] >> (wall - 10)) & 1  # (N, 30)
    index = torch.cat((torch.stack((paddle, ball, trail), 1), (wall * 4 + 3).expand(n, 30)), 1)
    value = torch.cat((torch.ones(n, 3, dtype=torch.uint8, device=dev), bricks.to(torch.uint8)), 1)
    obs = torch.zeros(n, 400, dtype=torch.uint8, device=dev).scatter(1, index, value)
    return obs.view(torch.bool).view(n, 10, 10, 4)


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
        """(N, 10, 10, 4) bool."""
        return observation(params, state)
