"""Batched MiniGrid Empty (``gpuvec/MiniGrid-Empty-*-v0``).

Mirrors ``minigrid/envs/empty.py`` (minigrid 3.2.0, ``EmptyEnv``): an empty room with a
green goal in the bottom-right corner; the agent starts at ``agent_start_pos`` facing
``agent_start_dir``, or (``agent_start_pos=None``, the ``Random`` IDs) at a random empty
cell facing a random direction. ``max_steps`` defaults to ``4 * size**2``; the agent sees
through walls (minigrid's default for this env). Mission: "get to the green goal square".

Random draws (reset only): with a random start, ``K`` for the position (see
:func:`~gpuvec_envs.envs.minigrid._grid.place`; ``K`` from a failure bound of 1e-9 for the
fraction ``((size - 2)**2 - 1) / size**2`` of acceptable cells: 54 for 5x5, 39 for 6x6),
then one for the direction.
"""

from __future__ import annotations

import dataclasses

import torch

from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.minigrid._grid import (
    GOAL,
    I32,
    GridState,
    MiniGridEnv,
    MiniGridParams,
    base_layout,
    constant_cells,
    place,
    rand_int,
    tries_for,
)


@dataclasses.dataclass(frozen=True)
class EmptyParams(MiniGridParams):
    """``EmptyEnv``'s options (``agent_start_pos=None``: random start)."""

    size: int = 8
    see_through_walls: bool = True
    agent_start_pos: tuple[int, int] | None = (1, 1)
    agent_start_dir: int = 0


class Empty(MiniGridEnv):
    """MiniGrid Empty: reach the goal in an empty room."""

    params_type = EmptyParams
    mission = "get to the green goal square"

    def placement_tries(self, params: EmptyParams) -> int:
        """Candidates K of the random start."""
        s = params.size
        return tries_for(((s - 2) ** 2 - 1) / s**2)

    def gen_grid(self, params: EmptyParams, rng: Rng) -> GridState:
        """Walls, the goal at ``(size - 2, size - 2)``, the agent."""
        w = h = params.size
        n, dev = rng.num_envs, rng.device
        layout = base_layout(w, h)
        layout[(h - 2) * w + w - 2] = GOAL
        cells = constant_cells(layout, rng)
        zero = torch.zeros(n, dtype=I32, device=dev)
        if params.agent_start_pos is None:
            x, y = place(rng, cells, w, self.placement_tries(params), (0, w), (0, h))
            direction = rand_int(rng, 0, 4)
        else:
            x = zero + params.agent_start_pos[0]
            y = zero + params.agent_start_pos[1]
            direction = zero + params.agent_start_dir
        return GridState(cells, x, y, direction, zero, zero)
