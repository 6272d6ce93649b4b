"""Batched MiniGrid FourRooms (``gpuvec/MiniGrid-FourRooms-v0``).

Mirrors ``minigrid/envs/fourrooms.py`` (minigrid 3.2.0, ``FourRoomsEnv`` without fixed
agent or goal positions): a 19x19 grid of four 8x8 rooms joined by one gap in each of the
four inner wall segments; agent and goal at random cells. ``max_steps`` is 100.
Mission: "reach the goal".

Random draws (reset only, in the reference's order): the four gaps (rows ``[1, 9)`` of
the upper vertical wall, columns ``[1, 9)`` and ``[10, 18)`` of the horizontal wall, rows
``[10, 18)`` of the lower vertical wall), the agent's cell (``K``), its direction, the
goal's cell (``K``). Of the 361 candidate cells at least 259 are acceptable, so K = 17
bounds the failure probability by 1e-9.
"""

from __future__ import annotations

import dataclasses

import torch

from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.minigrid._grid import (
    EMPTY,
    GOAL,
    I32,
    WALL,
    GridState,
    MiniGridEnv,
    MiniGridParams,
    as_col,
    base_layout,
    constant_cells,
    place,
    rand_int,
    set_cell,
    tries_for,
)

#: Grid side [cells] (fixed, as the reference).
SIZE = 19


@dataclasses.dataclass(frozen=True)
class FourRoomsParams(MiniGridParams):
    """``FourRoomsEnv``'s options (the grid is always 19x19)."""

    size: int = SIZE
    max_steps: int | None = 100


class FourRooms(MiniGridEnv):
    """MiniGrid FourRooms: reach the goal in one of four rooms."""

    params_type = FourRoomsParams
    mission = "reach the goal"

    def dims(self, params: FourRoomsParams) -> tuple[int, int]:
        """Always 19x19."""
        return SIZE, SIZE

    def max_steps(self, params: FourRoomsParams) -> int:
        """``params.max_steps`` or 100."""
        return params.max_steps if params.max_steps is not None else 100

    def placement_tries(self, params: FourRoomsParams) -> int:
        """Candidates K of each placement."""
        return tries_for(259 / SIZE**2)

    def gen_grid(self, params: FourRoomsParams, rng: Rng) -> GridState:
        """Walls with four random gaps, agent, goal."""
        w = h = SIZE
        mid = w // 2
        n, dev = rng.num_envs, rng.device
        layout = base_layout(w, h)
        for i in range(w):
            layout[mid * w + i] = WALL
            layout[i * w + mid] = WALL
        cells = constant_cells(layout, rng)
        upper = rand_int(rng, 1, mid)
        cells = set_cell(cells, upper * w + mid, EMPTY)
        left = rand_int(rng, 1, mid)
        cells = set_cell(cells, mid * w + left, EMPTY)
        right = rand_int(rng, mid + 1, w - 1)
        cells = set_cell(cells, mid * w + right, EMPTY)
        lower = rand_int(rng, mid + 1, h - 1)
        cells = set_cell(cells, lower * w + mid, EMPTY)

        def free(cx: torch.Tensor, cy: torch.Tensor) -> torch.Tensor:
            """Empty cells of this layout: inside the outer wall, off the inner walls or a gap."""
            inside = (cx > 0) & (cx < w - 1) & (cy > 0) & (cy < h - 1)
            col, row = cx == mid, cy == mid
            gap = (col & ((cy == as_col(upper)) | (cy == as_col(lower)))) | (
                row & ((cx == as_col(left)) | (cx == as_col(right)))
            )
            return inside & ~(col | row) | gap

        k = self.placement_tries(params)
        x, y = place(rng, cells, w, k, (0, w), (0, h), free=free)
        direction = rand_int(rng, 0, 4)
        gx, gy = place(rng, cells, w, k, (0, w), (0, h), avoid=y * w + x, free=free)
        cells = set_cell(cells, gy * w + gx, GOAL)
        zero = torch.zeros(n, dtype=I32, device=dev)
        return GridState(cells, x, y, direction, zero, zero)
