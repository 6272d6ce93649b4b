"""Batched MiniGrid KeyCorridor (``gpuvec/MiniGrid-KeyCorridorS{S}R{R}-v0``).

Mirrors ``minigrid/envs/keycorridor.py`` and the parts of ``minigrid/core/roomgrid.py`` it
uses (minigrid 3.2.0, ``KeyCorridorEnv`` with ``obj_type="ball"``): 3 columns of ``R``
rooms of side ``S`` (a ``(3 (S - 1) + 1) x (R (S - 1) + 1)`` grid); the middle column is a
corridor (its inner walls removed), a locked door of a random colour leads from it into a
random room of the right column holding a ball of a random colour, the key of the door's
colour lies in a random room of the left column, and ``connect_all`` adds closed doors of
random colours until every room is reachable from the agent's room. Picking up the ball
pays ``1 - 0.9 * step_count / max_steps`` and ends the episode; ``max_steps`` defaults to
``30 * S**2``. Mission: "pick up the <colour> ball", index = the ball's colour in
minigrid's sorted ``COLOR_NAMES`` (blue, green, grey, purple, red, yellow).

Random draws (reset only, in the reference's order):

1. the door positions of every room wall (``RoomGrid._gen_grid``: per room row ``j`` and
   column ``i``, the right wall's row then the bottom wall's column);
2. the locked room's row, the locked door's colour, the ball's colour, the ball's cell
   (``K``), the key room's row, the key's cell (``K``);
3. the agent: ``RoomGrid.place_agent`` repeats ``place_obj`` plus a direction until the
   agent does not face an object, so ``M`` attempts of ``K + 1`` draws, the first facing an
   empty cell or a wall kept;
4. ``connect_all``: each iteration draws a room ``(i, j)`` and a side ``k`` (3 draws) and,
   if that wall has no door yet and does not touch the locked room, adds a closed door
   there with a colour (1 more draw); it stops once every room is reachable. Here the
   iteration count is bounded by ``T`` (:func:`connect_iterations`): ``3 T + A + 1``
   words (``A`` the most doors it can add) are drawn at once, and the loop runs over the
   at most ``A`` additions rather than the iterations: the ``s``-th door comes from the
   first iteration ``t`` after the previous door whose pick (the words at ``3 t + s``,
   ``+ 1``, ``+ 2``) is a new allowed wall, its colour from the word at ``3 t + s + 3``.

Bounds (each failure probability <= 1e-9): ``K = tries_for((S - 2)**2 / S**2)`` (the ball
and key rooms' interiors among the ``S x S`` candidates: K = 176, 73, 47, 36 for S = 3..6);
``M`` from the chance ``1 / (4 c)`` that an attempt faces the locked door (``c`` free cells
of the agent's room); ``T`` = 114, 239, 375 iterations for R = 1, 2, 3, the exact tail of
``connect_all``'s Markov chain over the sets of added walls (:func:`connect_iterations`).
Past ``K`` a placement takes the first free cell of the room; past ``T`` a door goes into
the first wall still allowed (so every level stays connected).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, NamedTuple

import numpy as np
import torch

from gpuvec_envs.core.constants import table
from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs.minigrid._grid import (
    COLOR_NAMES,
    EMPTY,
    I32,
    PICKUP,
    T_BALL,
    WALL,
    FreeCells,
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

#: Columns of rooms (``RoomGrid``'s default).
COLS = 3


@dataclasses.dataclass(frozen=True)
class KeyCorridorParams(MiniGridParams):
    """``KeyCorridorEnv``'s options (``size`` is unused: the grid follows the rooms)."""

    room_size: int = 6  # S, side of a room including its walls [cells], >= 3
    num_rows: int = 3  # R, rows of rooms


class KeyCorridorState(NamedTuple):
    """The grid and the mission."""

    grid: GridState
    mission: torch.Tensor  # (N,) int32 index of the ball's colour in COLOR_NAMES


class Walls(NamedTuple):
    """The walls between rooms, as ``connect_all`` sees them (trace-time constants)."""

    rooms: tuple[tuple[tuple[int, int], tuple[int, int]], ...]  # the two rooms of each wall
    pick: tuple[int, ...]  # wall of the pick (i, j, k) at (i * R + j) * 4 + k; len(rooms): none
    initial: tuple[int, ...]  # bits of the walls with a door at the start, by locked row
    blocked: tuple[int, ...]  # bits of the walls that may not get a door, by locked row


@functools.cache
def walls(num_rows: int) -> Walls:
    """The walls between the rooms of ``num_rows`` rows.

    Right walls ``(i, j)-(i + 1, j)`` by row, then bottom walls ``(i, j)-(i, j + 1)`` by
    row; the corridor's walls and the locked door start open, the locked room's walls are
    never given a door.
    """
    r = num_rows
    rooms = [((i, j), (i + 1, j)) for j in range(r) for i in range(COLS - 1)]
    rooms += [((i, j), (i, j + 1)) for j in range(r - 1) for i in range(COLS)]
    index = {w: n for n, w in enumerate(rooms)}
    pick = []
    for i in range(COLS):
        for j in range(r):
            neighbours = ((i + 1, j), (i, j + 1), (i - 1, j), (i, j - 1))  # right, down, ...
            for k, other in enumerate(neighbours):
                wall = ((i, j), other) if k < 2 else (other, (i, j))
                pick.append(index.get(wall, len(rooms)))
    corridor = sum(1 << index[((1, j), (1, j + 1))] for j in range(r - 1))
    initial, blocked = [], []
    for locked in range(r):
        door = 1 << index[((1, locked), (2, locked))]
        touching = [w for w, pair in enumerate(rooms) if (2, locked) in pair]
        initial.append(corridor | door)
        blocked.append(corridor | sum(1 << w for w in touching))
    return Walls(tuple(rooms), tuple(pick), tuple(initial), tuple(blocked))


@functools.cache
def connected(num_rows: int) -> np.ndarray:
    """(2**W,) bool by wall mask: every room is reachable (``connect_all``'s test).

    Reachable from the agent's room ``(1, R // 2)`` through the walls in the mask.
    """
    w = walls(num_rows)
    masks = np.arange(1 << len(w.rooms), dtype=np.int64)
    bit = {(i, j): 1 << (j * COLS + i) for i in range(COLS) for j in range(num_rows)}
    reach = np.full_like(masks, bit[(1, num_rows // 2)])
    for _ in range(COLS * num_rows):
        for n, (a, b) in enumerate(w.rooms):
            has = (masks >> n) & 1 != 0
            in_a, in_b = reach & bit[a] != 0, reach & bit[b] != 0
            reach = reach | np.where(has & in_a, bit[b], 0) | np.where(has & in_b, bit[a], 0)
    return reach == (1 << (COLS * num_rows)) - 1


def _connected_list(num_rows: int) -> list[bool]:
    """:func:`connected` as a list (for a constant table)."""
    return connected(num_rows).tolist()


@functools.cache
def connect_iterations(num_rows: int, bound: float = 1e-9) -> int:
    """Iterations ``T`` after which ``connect_all`` runs on with probability <= ``bound``.

    For the worst locked room: the exact distribution over the sets of added walls,
    pushed through ``T`` uniform picks of ``(i, j, k)``.
    """
    w = walls(num_rows)
    n_walls, done = len(w.rooms), connected(num_rows)
    masks = np.arange(1 << n_walls, dtype=np.int64)
    worst = 0
    for locked in range(num_rows):
        blocked = masks | w.blocked[locked]
        nxt = np.stack(
            [
                masks if p == n_walls else np.where((blocked >> p) & 1 == 0, masks | 1 << p, masks)
                for p in w.pick
            ],
            1,
        )
        nxt[done] = masks[done, None]
        dist = np.zeros(len(masks))
        dist[w.initial[locked]] = 1.0
        t = 0
        while dist[~done].sum() > bound:
            weights = np.repeat(dist / len(w.pick), len(w.pick))
            dist = np.bincount(nxt.ravel(), weights, minlength=len(masks))
            t += 1
        worst = max(worst, t)
    return worst


def additions(num_rows: int) -> int:
    """The most doors ``connect_all`` can add (walls neither open nor blocked)."""
    w = walls(num_rows)
    full = (1 << len(w.rooms)) - 1
    return max(bin(full & ~(w.initial[r] | w.blocked[r])).count("1") for r in range(num_rows))


def _table(values: tuple[int, ...], index: torch.Tensor) -> torch.Tensor:
    """``values[index]`` for a trace-time tuple (a constant tensor gathered)."""
    return table(values, dtype=torch.int64, like=index)[index.long()]


class KeyCorridor(MiniGridEnv):
    """MiniGrid KeyCorridor: find the key, unlock the door, pick up the ball behind it."""

    params_type = KeyCorridorParams

    def dims(self, params: KeyCorridorParams) -> tuple[int, int]:
        """``(3 (S - 1) + 1, R (S - 1) + 1)``."""
        s = params.room_size
        if s < 3 or params.num_rows < 1:
            raise ValueError(f"need room_size >= 3 and num_rows >= 1, got {s}, {params.num_rows}")
        return COLS * (s - 1) + 1, params.num_rows * (s - 1) + 1

    def max_steps(self, params: KeyCorridorParams) -> int:
        """``params.max_steps`` or ``30 * room_size**2``."""
        return params.max_steps if params.max_steps is not None else 30 * params.room_size**2

    def missions(self, params: KeyCorridorParams) -> tuple[str, ...]:
        """The mission "pick up the <colour> ball" of each colour of ``COLOR_NAMES``."""
        return tuple(f"pick up the {c} ball" for c in COLOR_NAMES)

    def grid_state(self, state: KeyCorridorState) -> GridState:
        """The grid part of the state."""
        return state.grid

    def mission_index(self, params: Any, state: KeyCorridorState) -> torch.Tensor:
        """The ball's colour in ``COLOR_NAMES``."""
        return state.mission

    def placement_tries(self, params: KeyCorridorParams) -> int:
        """Candidates K of each placement."""
        s = params.room_size
        return tries_for((s - 2) ** 2 / s**2)

    def agent_attempts(self, params: KeyCorridorParams) -> int:
        """Attempts M of ``RoomGrid.place_agent``."""
        s, r = params.room_size, params.num_rows
        free = (s - 2) ** 2 + (s - 2) * ((r // 2 > 0) + (r // 2 < r - 1))
        return tries_for(1 - 1 / (4 * free))

    def connect_words(self, params: KeyCorridorParams) -> int:
        """Words of ``connect_all``: ``3 T + A + 1``."""
        r = params.num_rows
        return 3 * connect_iterations(r) + additions(r) + 1

    def reset(
        self, params: Any, rng: Rng, dtype: torch.dtype, options: dict[str, Any] | None
    ) -> KeyCorridorState:
        """Rooms, locked door, ball, key, agent, then ``connect_all``'s doors."""
        s, r = params.room_size, params.num_rows
        w, h = self.dims(params)
        n, dev = rng.num_envs, rng.device
        step = s - 1
        layout = [EMPTY] * (w * h)
        for y in range(h):
            for x in range(w):
                if x % step == 0 or y % step == 0:
                    layout[y * w + x] = WALL
        for j in range(1, r):  # the corridor: the middle column's inner walls removed
            for x in range(step + 1, 2 * step):
                layout[j * step * w + x] = EMPTY
        cells = constant_cells(layout, rng)

        # RoomGrid._gen_grid: door positions, right wall then bottom wall of each room
        right, bottom = {}, {}
        for j in range(r):
            for i in range(COLS):
                if i < COLS - 1:
                    right[i, j] = rand_int(rng, j * step + 1, j * step + step)
                if j < r - 1:
                    bottom[i, j] = rand_int(rng, i * step + 1, i * step + step)
        wl = walls(r)
        doors = [
            right[a] * w + b[0] * step if a[1] == b[1] else b[1] * step * w + bottom[a]
            for a, b in wl.rooms
        ]

        locked = rand_int(rng, 0, r)
        color = named_color(rand_int(rng, 0, len(COLOR_NAMES)))
        door_y = torch.stack([right[1, j] for j in range(r)], 1).gather(1, locked.long()[:, None])
        locked_door = code("door", "red", "locked") | (color << 4)
        cells = set_cell(cells, door_y[:, 0] * w + 2 * step, locked_door)
        k = self.placement_tries(params)
        mission = rand_int(rng, 0, len(COLOR_NAMES))
        top = locked * step

        def inside(x0: Any, y0: Any) -> FreeCells:
            """The cells inside the walls of the room with top-left corner ``(x0, y0)``."""

            def free(cx: torch.Tensor, cy: torch.Tensor) -> torch.Tensor:
                x, y = cx - as_col(x0), cy - as_col(y0)
                return (x > 0) & (x < step) & (y > 0) & (y < step)

            return free

        ball_room = inside(2 * step, top)
        bx, by = place(rng, cells, w, k, (2 * step, 2 * step + s), (top, top + s), free=ball_room)
        cells = set_cell(cells, by * w + bx, code("ball", "red") | (named_color(mission) << 4))
        top = rand_int(rng, 0, r) * step
        key_room = inside(0, top)
        kx, ky = place(rng, cells, w, k, (0, s), (top, top + s), free=key_room)
        cells = set_cell(cells, ky * w + kx, code("key", "red") | (color << 4))

        room = ((step, step + s), ((r // 2) * step, (r // 2) * step + s))
        attempts = self.agent_attempts(params)
        empty = table(tuple(c == EMPTY for c in layout), dtype=torch.bool, like=bx)

        def hallway(cx: torch.Tensor, cy: torch.Tensor) -> torch.Tensor:
            """Empty cells of the middle column (walls and the corridor as laid out)."""
            inner = (cx > step) & (cx < 2 * step) & (cy >= 0) & (cy < h)
            return inner & empty[torch.where(inner, cy * w + cx, 0).long()]

        def faces_locked(cx: torch.Tensor, cy: torch.Tensor) -> torch.Tensor:
            """The only object an agent in the middle column can face."""
            return (cx == 2 * step) & (cy == door_y)

        x, y, direction = place_agent_clear(
            rng, cells, w, k, attempts, *room, free=hallway, occupied=faces_locked
        )
        cells = self._connect_all(params, rng, cells, doors, locked)
        zero = torch.zeros(n, dtype=I32, device=dev)
        return KeyCorridorState(GridState(cells, x, y, direction, zero, zero), mission)

    def _connect_all(
        self,
        params: KeyCorridorParams,
        rng: Rng,
        cells: torch.Tensor,
        doors: list[torch.Tensor],
        locked: torch.Tensor,
    ) -> torch.Tensor:
        """``RoomGrid.connect_all``: closed doors of random colours until all is reachable.

        Args:
            params: The params.
            rng: Draws ``3 T + A + 1`` words.
            cells: (N, H * W) codes.
            doors: (N,) flat cell of each wall's door.
            locked: (N,) int32 row of the locked room.

        Returns:
            The cells with the added doors.
        """
        r = params.num_rows
        wl = walls(r)
        n_walls, t_max = len(wl.rooms), connect_iterations(r)
        dev = cells.device
        words = rng.bits(self.connect_words(params))  # (N, 3 T + A + 1) int64
        done_table = table(_connected_list, r, dtype=torch.bool, like=words)
        mask = _table(wl.initial, locked)  # (N,) int64 walls with a door
        blocked = _table(wl.blocked, locked)  # (N,) walls that may not get one
        start = torch.zeros_like(mask)  # first iteration after the last added door
        done = done_table[mask]
        iteration = torch.arange(t_max, device=dev)
        for s in range(additions(r)):
            i = (words[:, s : s + 3 * t_max : 3] * COLS) >> 32  # (N, T)
            j = (words[:, s + 1 : s + 1 + 3 * t_max : 3] * r) >> 32
            side = (words[:, s + 2 : s + 2 + 3 * t_max : 3] * 4) >> 32
            wall = _table(wl.pick, (i * r + j) * 4 + side)  # (N, T), n_walls: no wall
            closed = ((mask | blocked)[:, None] >> wall.clamp(max=n_walls - 1)) & 1 == 0
            new = (wall < n_walls) & closed & (iteration >= start[:, None])
            best = torch.where(new, t_max - iteration, 0).amax(1)  # (N,) 0: none within T
            found = best > 0
            t = (t_max - best).clamp(max=t_max - 1)
            chosen = wall.gather(1, t[:, None])[:, 0]
            fallback = torch.zeros_like(chosen)  # past T: the lowest wall still allowed
            for n in range(n_walls - 1, -1, -1):
                fallback = torch.where(((mask | blocked) >> n) & 1 == 0, n, fallback)
            chosen = torch.where(found, chosen, fallback)
            color_word = words.gather(1, (3 * t + s + 3)[:, None])[:, 0]
            color = named_color((color_word * len(COLOR_NAMES)) >> 32)
            add = ~done
            at = doors[0]  # a select per wall, not a gather from a stacked (N, W) tensor
            for n, cell in enumerate(doors[1:], 1):
                at = torch.where(chosen == n, cell, at)
            door = code("door", "red", "closed") | (color << 4)
            cells = set_cell(cells, torch.where(add, at, -1), door)  # -1: no cell
            mask = torch.where(add, mask | (1 << chosen), mask)
            start = torch.where(add, t + 1, start)
            done = done | done_table[mask]
        return cells

    def step(
        self, params: Any, state: KeyCorridorState, action: torch.Tensor, rng: Rng
    ) -> tuple[KeyCorridorState, torch.Tensor, torch.Tensor]:
        """A pickup that leaves the agent carrying the ball pays and ends the episode."""
        w, _ = self.dims(params)
        limit = self.max_steps(params)
        grid, reward, terminated, _ = grid_step(w, limit, state.grid, action)
        got = (action == PICKUP) & ((grid.carrying & 15) == T_BALL)
        reward = torch.where(got, success_reward(grid.step_count, limit), reward)
        return KeyCorridorState(grid, state.mission), reward, terminated | got
