"""Batched MiniGrid Dynamic-Obstacles (``gpuvec/MiniGrid-Dynamic-Obstacles-*-v0``).

Mirrors ``minigrid/envs/dynamicobstacles.py`` (minigrid 3.2.0, ``DynamicObstaclesEnv``):
Empty's room with ``n_obstacles`` blue balls (at most ``size // 2``, as the reference
reduces it) that each move, in order, to a random free cell of the 3x3 square around them
before the agent acts. Three actions (left, right, forward); walking forward into
anything but an empty cell or the goal (a wall or a ball, as seen before the balls move)
ends the episode with reward -1. ``max_steps`` defaults to ``4 * size**2``; the agent sees
through walls. Mission: "get to the green goal square".

Placement: the reference places each ball with ``place_obj(max_tries=100)``, i.e. at most
101 tries, and leaves a ball where it is if all fail (at reset it would raise). Here every
placement draws exactly K = 101 candidates, so moves are exact in every case; the agent's
random start (``Random`` IDs) fails with probability below 1e-16.

Random draws: reset: the agent's cell (``K``) and direction (1) with a random start,
then ``K`` per ball; step: ``K`` per ball.
"""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import torch

from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.minigrid._grid import (
    EMPTY,
    FORWARD,
    GOAL,
    I32,
    GridState,
    MiniGridEnv,
    MiniGridParams,
    as_col,
    base_layout,
    code,
    constant_cells,
    dir_vec,
    first_fit,
    get_cell,
    grid_step,
    place,
    rand_int,
    set_cell,
)

BALL = code("ball", "blue")
#: Candidates per placement: the reference's ``max_tries=100`` allows 101 tries.
TRIES = 101


@dataclasses.dataclass(frozen=True)
class DynamicObstaclesParams(MiniGridParams):
    """``DynamicObstaclesEnv``'s options (``agent_start_pos=None``: random start)."""

    size: int = 8
    see_through_walls: bool = True
    agent_start_pos: tuple[int, int] | None = (1, 1)
    agent_start_dir: int = 0
    n_obstacles: int = 4


class DynamicObstaclesState(NamedTuple):
    """The grid and the balls' cells, in the order they move."""

    grid: GridState
    obstacles: torch.Tensor  # (N, n) int32 flat cell index of each ball


def _free(
    width: int, balls: list[torch.Tensor], cx: torch.Tensor, cy: torch.Tensor
) -> torch.Tensor:
    """Empty cells (:data:`~gpuvec_envs.envs.minigrid._grid.FreeCells`): no wall, goal or ball.

    ``balls``: (N,) flat cells of the balls.
    """
    inside = (cx > 0) & (cx < width - 1) & (cy > 0) & (cy < width - 1)
    out = inside & ~((cx == width - 2) & (cy == width - 2))
    flat = cy * width + cx
    for ball in balls:
        out = out & (flat != as_col(ball))
    return out


class DynamicObstacles(MiniGridEnv):
    """MiniGrid Dynamic-Obstacles: reach the goal without touching a moving ball."""

    params_type = DynamicObstaclesParams
    mission = "get to the green goal square"

    def n_obstacles(self, params: DynamicObstaclesParams) -> int:
        """Balls: ``n_obstacles``, or ``size // 2`` if it exceeds ``size / 2 + 1``."""
        n = params.n_obstacles
        return int(n) if n <= params.size / 2 + 1 else int(params.size / 2)

    def n_actions(self, params: DynamicObstaclesParams) -> int:
        """Three: left, right, forward."""
        return 3

    def placement_tries(self, params: DynamicObstaclesParams) -> int:
        """Candidates K of each placement."""
        return TRIES

    def reset(
        self, params: Any, rng: Rng, dtype: torch.dtype, options: dict[str, Any] | None
    ) -> DynamicObstaclesState:
        """Walls, goal, agent, then the balls at random free cells."""
        w = h = params.size
        n, dev = rng.num_envs, rng.device
        layout = base_layout(w, h)
        layout[(h - 2) * w + w - 2] = GOAL
        cells = constant_cells(layout, rng)
        zero = torch.zeros(n, dtype=I32, device=dev)
        balls: list[torch.Tensor] = []

        def free(cx: torch.Tensor, cy: torch.Tensor) -> torch.Tensor:
            return _free(w, balls, cx, cy)

        if params.agent_start_pos is None:
            x, y = place(rng, cells, w, TRIES, (0, w), (0, h), free=free)
            direction = rand_int(rng, 0, 4)
        else:
            x = zero + params.agent_start_pos[0]
            y = zero + params.agent_start_pos[1]
            direction = zero + params.agent_start_dir
        for _ in range(self.n_obstacles(params)):
            bx, by = place(rng, cells, w, TRIES, (0, w), (0, h), avoid=y * w + x, free=free)
            cells = set_cell(cells, by * w + bx, BALL)
            balls.append(by * w + bx)
        obstacles = torch.stack(balls, 1) if balls else zero[:, None][:, :0]
        return DynamicObstaclesState(GridState(cells, x, y, direction, zero, zero), obstacles)

    def step(
        self, params: Any, state: DynamicObstaclesState, action: torch.Tensor, rng: Rng
    ) -> tuple[DynamicObstaclesState, torch.Tensor, torch.Tensor]:
        """Balls move, the agent acts, a blocked forward move costs -1 and ends the episode."""
        w = params.size
        s = state.grid
        dx, dy = dir_vec(s.agent_dir)
        front = get_cell(s.cells, (s.agent_y + dy) * w + s.agent_x + dx)
        not_clear = (front != EMPTY) & (front != GOAL)
        cells, agent = s.cells, s.agent_y * w + s.agent_x
        balls = list(state.obstacles.unbind(1))

        def free(cx: torch.Tensor, cy: torch.Tensor) -> torch.Tensor:
            return _free(w, balls, cx, cy)

        for i, old in enumerate(list(balls)):
            ox, oy = old % w, old // w
            near = (ox - 1, ox + 2), (oy - 1, oy + 2)
            new, found = first_fit(rng, cells, w, TRIES, *near, agent, free=free)
            new = torch.where(found, new, old)
            cells = set_cell(set_cell(cells, old, EMPTY), new, BALL)
            balls[i] = new
        obstacles = torch.stack(balls, 1) if balls else state.obstacles
        grid, reward, terminated, _ = grid_step(
            w, self.max_steps(params), s._replace(cells=cells), action
        )
        blocked = (action == FORWARD) & not_clear
        reward = torch.where(blocked, -1.0, reward)
        return DynamicObstaclesState(grid, obstacles), reward, terminated | blocked

    def grid_state(self, state: DynamicObstaclesState) -> GridState:
        """The grid part of the state."""
        return state.grid
