"""Batched MiniGrid DoorKey (``gpuvec/MiniGrid-DoorKey-*-v0``).

Mirrors ``minigrid/envs/doorkey.py`` (minigrid 3.2.0, ``DoorKeyEnv``): a wall at a random
column ``split`` in ``[2, size - 2)`` splits the room; the agent and a yellow key start at
random cells left of it, a locked yellow door sits at a random row ``[1, size - 2)`` of the
wall and the goal in the bottom-right corner. ``max_steps`` defaults to ``10 * size**2``.
Mission: "use the key to open the door and then get to the goal".

Random draws (reset only, in the reference's order): ``split`` (1), the agent's cell
(``K``), its direction (1), the door's row (1), the key's cell (``K``). ``K`` bounds the
failure probability by 1e-9 for the worst case ``split = 2``, where a fraction
``(size - 3) / (2 size)`` of the candidates is acceptable: K = 93 for 5x5, 73 for 6x6,
56 for 8x8, 40 for 16x16.
"""

from __future__ import annotations

import dataclasses

import torch

from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.minigrid._grid import (
    GOAL,
    I32,
    WALL,
    GridState,
    MiniGridEnv,
    MiniGridParams,
    as_col,
    base_layout,
    code,
    constant_cells,
    place,
    rand_int,
    set_cell,
    tries_for,
)

DOOR = code("door", "yellow", "locked")
KEY = code("key", "yellow")


@dataclasses.dataclass(frozen=True)
class DoorKeyParams(MiniGridParams):
    """``DoorKeyEnv``'s options."""

    size: int = 8


class DoorKey(MiniGridEnv):
    """MiniGrid DoorKey: pick up the key, unlock the door, reach the goal."""

    params_type = DoorKeyParams
    mission = "use the key to open the door and then get to the goal"

    def max_steps(self, params: DoorKeyParams) -> int:
        """``params.max_steps`` or ``10 * size**2``."""
        return params.max_steps if params.max_steps is not None else 10 * params.size**2

    def placement_tries(self, params: DoorKeyParams) -> int:
        """Candidates K of each placement."""
        return tries_for((params.size - 3) / (2 * params.size))

    def gen_grid(self, params: DoorKeyParams, rng: Rng) -> GridState:
        """Walls, goal, splitting wall, agent, locked door, key."""
        w = h = params.size
        n, dev = rng.num_envs, rng.device
        layout = base_layout(w, h)
        layout[(h - 2) * w + w - 2] = GOAL
        cells = constant_cells(layout, rng)
        split = rand_int(rng, 2, w - 2)
        column = torch.arange(w * h, dtype=I32, device=dev) % w
        cells = torch.where(column == split[:, None], WALL, cells)
        k = self.placement_tries(params)

        def free(cx: torch.Tensor, cy: torch.Tensor) -> torch.Tensor:
            """Empty cells left of the wall (the door and goal lie right of it)."""
            return (cx > 0) & (cx < as_col(split)) & (cy > 0) & (cy < h - 1)

        x, y = place(rng, cells, w, k, (0, split), (0, h), free=free)
        direction = rand_int(rng, 0, 4)
        door = rand_int(rng, 1, h - 2)
        cells = set_cell(cells, door * w + split, DOOR)
        kx, ky = place(rng, cells, w, k, (0, split), (0, h), avoid=y * w + x, free=free)
        cells = set_cell(cells, ky * w + kx, KEY)
        zero = torch.zeros(n, dtype=I32, device=dev)
        return GridState(cells, x, y, direction, zero, zero)
