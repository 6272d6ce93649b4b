"""Batched MiniGrid Unlock (``gpuvec/MiniGrid-Unlock-v0``).

Mirrors ``minigrid/envs/unlock.py`` and the parts of ``minigrid/core/roomgrid.py`` it uses
(minigrid 3.2.0, ``UnlockEnv``): two 6x6 rooms side by side (an 11x6 grid) joined by a
locked door of a random colour at a random row of their shared wall; a key of that colour
and the agent start at random cells of the left room. Opening the door (toggling with the
key) pays ``1 - 0.9 * step_count / max_steps`` and ends the episode; ``max_steps`` is 288.
Mission: "open the door".

Random draws (reset only, in the reference's order): the door's row (1), its colour (1,
an index into minigrid's sorted ``COLOR_NAMES``), the key's cell (``K``), then the agent:
``RoomGrid.place_agent`` repeats ``place_obj`` plus a direction until the agent does not
face an object, so the agent takes ``M`` attempts of ``K + 1`` draws and keeps the first
that faces an empty cell or a wall. K = 39 (at least 15 of the 36 candidate cells are
acceptable) and M = 11 (at most 8 of the 60 (cell, direction) pairs face the key or the
door) bound each failure probability by 1e-9.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.minigrid._grid import (
    COLOR_NAMES,
    EMPTY,
    I32,
    T_DOOR,
    TOGGLE,
    WALL,
    GridState,
    MiniGridEnv,
    MiniGridParams,
    as_col,
    code,
    constant_cells,
    grid_step,
    named_color,
    place,
    place_agent_clear,
    rand_int,
    set_cell,
    success_reward,
    tries_for,
)

#: Room side [cells] and grid size.
ROOM = 6
WIDTH, HEIGHT = 2 * ROOM - 1, ROOM
#: Attempts of ``RoomGrid.place_agent``.
AGENT_ATTEMPTS = tries_for(1 - 8 / 60)


@dataclasses.dataclass(frozen=True)
class UnlockParams(MiniGridParams):
    """``UnlockEnv``'s options (the grid is always two 6x6 rooms)."""

    size: int = ROOM
    max_steps: int | None = 8 * ROOM**2


class Unlock(MiniGridEnv):
    """MiniGrid Unlock: open the locked door with the key."""

    params_type = UnlockParams
    mission = "open the door"

    def dims(self, params: UnlockParams) -> tuple[int, int]:
        """Always 11x6."""
        return WIDTH, HEIGHT

    def max_steps(self, params: UnlockParams) -> int:
        """``params.max_steps`` or 288."""
        return params.max_steps if params.max_steps is not None else 8 * ROOM**2

    def placement_tries(self, params: UnlockParams) -> int:
        """Candidates K of each placement."""
        return tries_for(15 / ROOM**2)

    def gen_grid(self, params: UnlockParams, rng: Rng) -> GridState:
        """Rooms, locked door, key, agent."""
        w, h = WIDTH, HEIGHT
        n, dev = rng.num_envs, rng.device
        layout = [EMPTY] * (w * h)
        for y in range(h):
            for x in range(w):
                if x in (0, ROOM - 1, w - 1) or y in (0, h - 1):
                    layout[y * w + x] = WALL
        cells = constant_cells(layout, rng)
        door_y = rand_int(rng, 1, ROOM - 1)
        color = named_color(rand_int(rng, 0, len(COLOR_NAMES)))
        door = code("door", "red", "locked") | (color << 4)
        cells = set_cell(cells, door_y * w + ROOM - 1, door)
        k = self.placement_tries(params)
        room = ((0, ROOM), (0, ROOM))

        def inner(cx: torch.Tensor, cy: torch.Tensor) -> torch.Tensor:
            """Cells inside the left room's walls (all empty before the key)."""
            return (cx > 0) & (cx < ROOM - 1) & (cy > 0) & (cy < h - 1)

        kx, ky = place(rng, cells, w, k, *room, free=inner)  # never the agent's default (8, 3)
        cells = set_cell(cells, ky * w + kx, code("key", "red") | (color << 4))
        zero = torch.zeros(n, dtype=I32, device=dev)

        def key_or_door(cx: torch.Tensor, cy: torch.Tensor) -> torch.Tensor:
            """The cells holding an object."""
            key = (cx == as_col(kx)) & (cy == as_col(ky))
            return key | ((cx == ROOM - 1) & (cy == as_col(door_y)))

        def free(cx: torch.Tensor, cy: torch.Tensor) -> torch.Tensor:
            """The agent's cells: inside the room, no object."""
            return inner(cx, cy) & ~key_or_door(cx, cy)

        x, y, direction = place_agent_clear(
            rng, cells, w, k, AGENT_ATTEMPTS, *room, free=free, occupied=key_or_door
        )
        return GridState(cells, x, y, direction, zero, zero)

    def step(
        self, params: Any, state: GridState, action: torch.Tensor, rng: Rng
    ) -> tuple[GridState, torch.Tensor, torch.Tensor]:
        """A toggle that leaves the door open pays the success reward and ends the episode."""
        limit = self.max_steps(params)
        nxt, reward, terminated, _ = grid_step(WIDTH, limit, state, action)
        wall = nxt.cells.view(-1, HEIGHT, WIDTH)[:, :, ROOM - 1]  # (N, H) the shared wall
        is_open = (((wall & 15) == T_DOOR) & ((wall >> 8) == 0)).any(1)
        opened = (action == TOGGLE) & is_open
        reward = torch.where(opened, success_reward(nxt.step_count, limit), reward)
        return nxt, reward, terminated | opened
