"""Batched MiniGrid LavaGap and Crossing.

IDs: ``gpuvec/MiniGrid-LavaGapS*-v0``, ``gpuvec/MiniGrid-LavaCrossingS*N*-v0``,
``gpuvec/MiniGrid-SimpleCrossingS*N*-v0``.

Mirrors ``minigrid/envs/lavagap.py`` (``LavaGapEnv``) and ``minigrid/envs/crossing.py``
(``CrossingEnv``) of minigrid 3.2.0. The agent starts at ``(1, 1)`` facing right, the goal
is in the bottom-right corner, stepping into lava ends the episode without reward;
``max_steps`` defaults to ``4 * size**2``; walls occlude.

* LavaGap: a lava column at a random ``x`` in ``[2, size - 2)`` with one gap at a random
  ``y`` in ``[1, size - 1)``. Draws: ``x``, ``y``. Mission: "avoid the lava and get to the
  green goal square".
* Crossing: ``num_crossings`` rivers of lava (``obstacle="lava"``) or walls (``"wall"``)
  chosen among the even rows and columns, and one opening per river along a random
  monotone path to the goal. Draws: a shuffle of the ``2 * (size - 3) // 2`` candidate
  rivers (one draw per swap), a shuffle of the path's ``num_crossings`` moves, one opening
  per move. Missions: "avoid the lava and get to the green goal square" (lava), "find the
  opening and get to the green goal square" (wall).

The reference's ``np_random.shuffle`` and ``choice`` are replaced here by their
definitions on our draws: a Fisher-Yates shuffle (``i = n - 1 .. 1``: swap ``i`` with
``integers(0, i + 1)``) and ``seq[integers(0, len(seq))]``; the parity tests give the
reference the same definitions.
"""

from __future__ import annotations

import dataclasses

import torch

from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.minigrid._grid import (
    EMPTY,
    GOAL,
    I32,
    LAVA,
    WALL,
    GridState,
    MiniGridEnv,
    MiniGridParams,
    base_layout,
    constant_cells,
    rand_int,
    set_cell,
)

_OBSTACLES = {"lava": LAVA, "wall": WALL}


@dataclasses.dataclass(frozen=True)
class LavaParams(MiniGridParams):
    """Options of ``LavaGapEnv`` and ``CrossingEnv``."""

    size: int = 9
    num_crossings: int = 1  # Crossing only
    obstacle: str = "lava"  # "lava" or "wall"


#: minigrid's missions by obstacle.
_MISSIONS = {
    "lava": "avoid the lava and get to the green goal square",
    "wall": "find the opening and get to the green goal square",
}


def _start(params: LavaParams, rng: Rng) -> tuple[torch.Tensor, torch.Tensor]:
    """Walls and goal (N, H * W), and a zero (N,) int32."""
    w = h = params.size
    if params.obstacle not in _OBSTACLES:
        raise ValueError(f"obstacle must be 'lava' or 'wall', got {params.obstacle!r}")
    layout = base_layout(w, h)
    layout[(h - 2) * w + w - 2] = GOAL
    zero = torch.zeros(rng.num_envs, dtype=I32, device=rng.device)
    return constant_cells(layout, rng), zero


class _ObstacleEnv(MiniGridEnv):
    """What LavaGap and Crossing share: params and the obstacle's mission."""

    params_type = LavaParams

    def missions(self, params: LavaParams) -> tuple[str, ...]:
        """The mission of minigrid for the obstacle."""
        return (_MISSIONS[params.obstacle],)


class LavaGap(_ObstacleEnv):
    """MiniGrid LavaGap: cross a lava column through its gap to the goal."""

    def gen_grid(self, params: LavaParams, rng: Rng) -> GridState:
        """Walls, goal, the obstacle column and its gap; the agent at (1, 1) facing right."""
        w = h = params.size
        cells, zero = _start(params, rng)
        gap_x = rand_int(rng, 2, w - 2)
        gap_y = rand_int(rng, 1, h - 1)
        idx = torch.arange(w * h, dtype=I32, device=rng.device)
        x, y = idx % w, idx // w
        column = (x == gap_x[:, None]) & (y >= 1) & (y <= h - 2) & (y != gap_y[:, None])
        cells = torch.where(column, _OBSTACLES[params.obstacle], cells)
        return GridState(cells, zero + 1, zero + 1, zero, zero, zero)


def _shuffle(rng: Rng, items: list[torch.Tensor]) -> list[torch.Tensor]:
    """Fisher-Yates shuffle of a list of (N,) tensors, one draw per swap (from the end)."""
    items = list(items)
    for i in range(len(items) - 1, 0, -1):
        j = rand_int(rng, 0, i + 1)
        picked = items[0]
        for k in range(1, i + 1):
            picked = torch.where(j == k, items[k], picked)
        old = items[i]
        for k in range(i):
            items[k] = torch.where(j == k, old, items[k])
        items[i] = picked
    return items


class Crossing(_ObstacleEnv):
    """MiniGrid Crossing: find the openings in rivers of lava or walls."""

    def gen_grid(self, params: LavaParams, rng: Rng) -> GridState:
        """Walls, goal, ``num_crossings`` rivers and their openings; the agent at (1, 1)."""
        w = h = params.size
        if w % 2 != 1:
            raise ValueError(f"Crossing needs an odd size, got {w}")
        cells, zero = _start(params, rng)
        dev = rng.device
        cols = list(range(2, h - 2, 2))  # vertical rivers (columns x)
        rows = list(range(2, w - 2, 2))  # horizontal rivers (rows y)
        candidates = [("v", p) for p in cols] + [("h", p) for p in rows]
        nc = params.num_crossings
        if not 1 <= nc <= len(candidates):
            raise ValueError(f"num_crossings must be in [1, {len(candidates)}], got {nc}")
        order = _shuffle(rng, [zero + r for r in range(len(candidates))])
        chosen = [
            torch.stack([order[p] == r for p in range(nc)]).any(0) for r in range(len(candidates))
        ]
        idx = torch.arange(w * h, dtype=I32, device=dev)
        x, y = idx % w, idx // w
        obstacle = _OBSTACLES[params.obstacle]
        for r, (kind, pos) in enumerate(candidates):
            if kind == "v":
                mask = (x == pos) & (y >= 1) & (y <= h - 2)
            else:
                mask = (y == pos) & (x >= 1) & (x <= w - 2)
            cells = torch.where(chosen[r][:, None] & mask, obstacle, cells)
        sel_v, sel_h = chosen[: len(cols)], chosen[len(cols) :]
        n_v = sum(s.to(I32) for s in sel_v) if sel_v else zero

        def limit(
            selected: list[torch.Tensor], positions: list[int], r: torch.Tensor
        ) -> torch.Tensor:
            """``([0] + sorted selected positions + [size - 1])[r]``, r (N,) int."""
            count = zero
            out = torch.where(r == 0, 0, zero).to(I32)
            for s, p in zip(selected, positions, strict=True):
                count = count + s.to(I32)
                out = torch.where(s & (count == r), p, out)
            return torch.where(r == count + 1, h - 1, out)

        # the path: n_v horizontal moves (through vertical rivers), then the rest, shuffled
        path = _shuffle(rng, [n_v > k for k in range(nc)])
        room_i, room_j = zero, zero
        for k in range(nc):
            through_v = path[k]  # True: cross a vertical river (reference's ``h`` move)
            vi0, vi1 = limit(sel_v, cols, room_i), limit(sel_v, cols, room_i + 1)
            hj0, hj1 = limit(sel_h, rows, room_j), limit(sel_h, rows, room_j + 1)
            lo = torch.where(through_v, hj0, vi0) + 1
            hi = torch.where(through_v, hj1, vi1)
            pick = rand_int(rng, lo, hi)
            ox = torch.where(through_v, vi1, pick)
            oy = torch.where(through_v, pick, hj1)
            cells = set_cell(cells, oy * w + ox, EMPTY)
            room_i = room_i + through_v.to(I32)
            room_j = room_j + (~through_v).to(I32)
        return GridState(cells, zero + 1, zero + 1, zero, zero, zero)
