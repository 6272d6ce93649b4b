"""What the MiniGrid families share: cell encoding, actions, the agent's view, placement.

Mirrors ``minigrid`` 3.2.0 (``minigrid_env.py``, ``core/grid.py``, ``core/world_object.py``,
``core/constants.py``, ``wrappers.py``). A family module subclasses :class:`MiniGridEnv` and
implements :meth:`MiniGridEnv.gen_grid` (minigrid's ``_gen_grid``) with the helpers here.

**Cells.** A grid is an (N, H * W) int32 tensor, row-major (cell ``(x, y)`` at
``y * W + x``), one packed code per cell: ``type | color << 4 | state << 8`` with
minigrid's :data:`OBJECT_TO_IDX`, :data:`COLOR_TO_IDX` and :data:`STATE_TO_IDX` (an empty
cell, minigrid's ``None``, is ``(empty, red, 0)`` = 1, as ``Grid.encode`` writes it). The
carried object is a code too (0: nothing). A box's contents are not modelled (no
registered family here puts anything in a box): toggling a box empties its cell.

**Actions** (minigrid's ``Actions``): 0 left, 1 right, 2 forward, 3 pickup, 4 drop,
5 toggle, 6 done, with ``MiniGridEnv.step``'s rules; reaching the goal pays
``1 - 0.9 * step_count / max_steps`` (``step_count`` counted from 1 at the first step).

**Observation** (``obs_mode``): ``"image"`` (default) is minigrid's ``obs["image"]``,
(V, V, 3) uint8 indexed ``[x, y, channel]`` in the agent's frame (the agent at
``(V // 2, V - 1)`` looking up), with ``process_vis`` occlusion unless
``see_through_walls`` and the carried object drawn in the agent's cell; ``"full"`` is
``FullyObsWrapper``'s ``obs["image"]``, (W, H, 3) uint8 indexed ``[x, y, channel]`` with
the agent as ``(agent, red, direction)``; ``"dict"`` is minigrid's whole observation dict
``{"image", "direction", "mission"}`` with the mission as an index into
:meth:`MiniGridEnv.missions`. The shell's observation is one tensor per step
(``final_obs``, validation and checkpoints rely on it), so ``"dict"`` packs each env's row
as ``image.flatten() | direction | mission`` ((V * V * 3 + 2,) uint8) and
:meth:`MiniGridEnv.observation_view` splits it; ``make_vec`` and ``make`` return the dict.

**Random draws.** An ``integers(lo, hi)`` of the reference is one stream of the step's or
reset's :class:`~gpuvec_envs.core.rng.Rng`, ``lo + (word * (hi - lo)) >> 32``
(:func:`rand_int`), in the reference's order.

**Placement.** minigrid's ``place_obj`` draws ``(x, y)`` uniformly in a rectangle until the
cell is empty and not the agent's. Here each placement draws ``K`` candidates at once, one
stream each (``x = lo + (high16 * (hi - lo)) >> 16`` from the word's high 16 bits, ``y``
likewise from its low 16 bits: half the hashing of a stream per coordinate), and takes the
first acceptable one: the same cell the reference takes whenever it succeeds within ``K``
tries. If all ``K`` fail (probability ``(1 - p) ** K`` for a fraction ``p`` of acceptable
cells; each family bounds it by 1e-9, see :func:`tries_for`), the first acceptable cell in
row-major order is taken instead.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from gpuvec_envs.core.constants import table
from gpuvec_envs.core.env import EnvDef, ObservationView
from gpuvec_envs.core.rng import Rng

#: minigrid's ``OBJECT_TO_IDX``.
OBJECT_TO_IDX = {
    "unseen": 0,
    "empty": 1,
    "wall": 2,
    "floor": 3,
    "door": 4,
    "key": 5,
    "ball": 6,
    "box": 7,
    "goal": 8,
    "lava": 9,
    "agent": 10,
}
#: minigrid's ``COLOR_TO_IDX``.
COLOR_TO_IDX = {"red": 0, "green": 1, "blue": 2, "purple": 3, "yellow": 4, "grey": 5}
#: minigrid's ``COLOR_NAMES``: the colours in sorted order, as its random colour draws index them.
COLOR_NAMES = tuple(sorted(COLOR_TO_IDX))
#: minigrid's ``STATE_TO_IDX`` (doors).
STATE_TO_IDX = {"open": 0, "closed": 1, "locked": 2}
#: minigrid's ``COLORS`` (RGB), by colour index.
COLORS = ((255, 0, 0), (0, 255, 0), (0, 0, 255), (112, 39, 195), (255, 255, 0), (100, 100, 100))

I32 = torch.int32
#: Observation modes (``MiniGridParams.obs_mode``).
OBS_MODES = ("image", "full", "dict")
#: The actions, as minigrid's ``Actions``.
LEFT, RIGHT, FORWARD, PICKUP, DROP, TOGGLE, DONE = range(7)


def code(obj: str, color: str = "red", state: str | int = 0) -> int:
    """Packed cell code of an object: ``type | color << 4 | state << 8``."""
    s = STATE_TO_IDX[state] if isinstance(state, str) else state
    return OBJECT_TO_IDX[obj] | COLOR_TO_IDX[color] << 4 | s << 8


EMPTY = code("empty")
WALL = code("wall", "grey")
GOAL = code("goal", "green")
LAVA = code("lava", "red")
T_WALL, T_DOOR, T_KEY, T_BALL, T_BOX, T_GOAL, T_LAVA = (
    OBJECT_TO_IDX[k] for k in ("wall", "door", "key", "ball", "box", "goal", "lava")
)
T_FLOOR = OBJECT_TO_IDX["floor"]


def can_overlap(cell: torch.Tensor) -> torch.Tensor:
    """Bool: the agent may stand on the cell (empty, floor, goal, lava, open door)."""
    t = cell & 15
    door_open = (t == T_DOOR) & ((cell >> 8) == 0)
    return (cell == EMPTY) | (t == T_FLOOR) | (t == T_GOAL) | (t == T_LAVA) | door_open


def see_behind(cell: torch.Tensor) -> torch.Tensor:
    """Bool: the cell does not occlude (everything but walls and closed or locked doors)."""
    t = cell & 15
    return (t != T_WALL) & ~((t == T_DOOR) & ((cell >> 8) != 0))


def dir_vec(direction: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Direction vectors (``DIR_TO_VEC``): 0 right (+x), 1 down (+y), 2 left, 3 up; (N,) each."""
    dx = torch.where(direction == 0, 1, torch.where(direction == 2, -1, 0)).to(I32)
    dy = torch.where(direction == 1, 1, torch.where(direction == 3, -1, 0)).to(I32)
    return dx, dy


class GridState(NamedTuple):
    """Batched MiniGrid state; positions are grid cells, ``x`` to the right, ``y`` down."""

    cells: torch.Tensor  # (N, H * W) int32 packed codes, cell (x, y) at y * W + x
    agent_x: torch.Tensor  # (N,) int32 [cell]
    agent_y: torch.Tensor  # (N,) int32 [cell]
    agent_dir: torch.Tensor  # (N,) int32, 0 right, 1 down, 2 left, 3 up
    carrying: torch.Tensor  # (N,) int32 packed code of the carried object, 0: nothing
    step_count: torch.Tensor  # (N,) int32, steps since the reset (minigrid's step_count)


@dataclasses.dataclass(frozen=True)
class MiniGridParams:
    """Options of every MiniGrid family (a family adds its own and sets the defaults).

    ``max_steps`` is minigrid's: the horizon of the goal reward. The registered IDs give
    the shell the same ``max_episode_steps``, which truncates the episode as minigrid does.
    """

    size: int = 8  # grid width and height [cells]
    max_steps: int | None = None  # None: the family's default for ``size``
    agent_view_size: int = 7  # odd, >= 3
    see_through_walls: bool = False
    obs_mode: str = "image"  # "image" (agent's view), "full" (FullyObsWrapper) or "dict"


def base_layout(width: int, height: int) -> list[int]:
    """Row-major codes of an empty grid with its outer wall (``wall_rect``)."""
    cells = [EMPTY] * (width * height)
    for y in range(height):
        for x in range(width):
            if x in (0, width - 1) or y in (0, height - 1):
                cells[y * width + x] = WALL
    return cells


def _bit_weights(k: int) -> list[int]:
    """``1 << b`` for ``b < k``."""
    return [1 << b for b in range(k)]


def _bit_reversals(view: int) -> list[int]:
    """Every ``view``-bit integer with its bits reversed, by value."""
    return [sum(((k >> i) & 1) << (view - 1 - i) for i in range(view)) for k in range(1 << view)]


def constant_cells(layout: list[int], rng: Rng) -> torch.Tensor:
    """(N, len(layout)) int32 copies of a trace-time layout, on the draws' device."""
    return rng.constant(tuple(layout), dtype=I32).expand(rng.num_envs, len(layout)).clone()


def set_cell(cells: torch.Tensor, index: torch.Tensor, value: Any) -> torch.Tensor:
    """``cells`` with cell ``index`` (N,) set to ``value`` (int or (N,)); others unchanged.

    A compare against the cell index and a select: vectorises, unlike a scatter.
    """
    where = torch.arange(cells.shape[1], dtype=I32, device=cells.device) == index[:, None]
    if isinstance(value, torch.Tensor):
        value = value[:, None]
    return torch.where(where, value, cells)


def get_cell(cells: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """(N,) codes of cell ``index`` (N,) int."""
    return cells.gather(1, index.long()[:, None])[:, 0]


def rand_int(rng: Rng, low: int | torch.Tensor, high: int | torch.Tensor) -> torch.Tensor:
    """(N,) int32 ``integers(low, high)`` from one stream: ``low + (word * (high - low)) >> 32``."""
    word = rng.bits()
    return (low + ((word * (high - low)) >> 32)).to(I32)


#: ``free(x, y)``: bool, whether cells ``(x, y)`` are empty; ``x, y`` are (K,) or (N, K) int
#: tensors, to be broadcast against per-env values as (N, 1) (:func:`as_col`). Computed from
#: the layout's own draws instead of read from the grid: a placement that reads no grid
#: leaves the reset's grid a pure per-cell function, which inductor computes inside the
#: step's kernel instead of storing it and reading it back.
FreeCells = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]

#: Devices where :func:`first_fit` lays the candidates of a ``free`` placement along the
#: grid's cells on every grid (one kernel with the reset's other reductions, though it
#: hashes a draw per cell); elsewhere grids of more than 63 cells draw just K candidates
#: (on the CPU the per-cell draws cost more than the kernels they save: FourRooms'
#: step 1.6x slower at N=4096). The picks are the same.
LANE_DEVICES: tuple[str, ...] = ("cuda",)
#: On a grid of up to 63 cells, the most chunks of candidates along the cells
#: (``ceil(K / (H * W))``) a placement lays out; past it the placement draws its K
#: candidates directly (a ``free`` placement on :data:`LANE_DEVICES` keeps the cells'
#: layout whatever its size). Chunks chain into the reset's one loop over the cells:
#: KeyCorridorS3R1's 17 placements of 176 candidates over 21 cells (153 chunks) spent over
#: 15 min in inductor's C++ codegen, then failed to compile; drawn directly it compiles in
#: ~70 s. The picks are the same either way.
LANE_MAX_CHUNKS = 5


def first_fit(
    rng: Rng,
    cells: torch.Tensor,
    width: int,
    tries: int,
    x_range: tuple[Any, Any],
    y_range: tuple[Any, Any],
    avoid: torch.Tensor | None = None,
    free: FreeCells | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The first of K candidate cells that ``place_obj`` would accept.

    Args:
        rng: Draws ``tries`` streams, one per candidate: x from its high and y from its
            low 16 bits.
        cells: (N, H * W) codes.
        width: Grid width W.
        tries: Candidates K.
        x_range: ``[low, high)`` of x (ints or (N,) tensors), already clipped to the
            grid as ``place_obj`` does.
        y_range: The same for y.
        avoid: (N,) flat index the object may not take (the agent's cell), or None.
        free: Whether cells are empty, as a function of their coordinates (see
            :data:`FreeCells`); None reads ``cells``.

    Returns:
        ``(index, found)``: (N,) int32 flat index of the first acceptable candidate (0 if
        none is), (N,) bool whether one is.

    Grids of up to 63 cells (and placements of at most :data:`LANE_MAX_CHUNKS` chunks)
    pack their free cells into one int64 per env (a sum over the cells), so that testing
    a candidate is a shift instead of a gather from the grid; the candidates lie along
    the cells, ``ceil(K / (H * W))`` per cell, so that every
    reduction of a placement runs over the cells: a reset's placements chain in one
    loop over the cells (one kernel) with the grid they edit. With ``free``, a candidate
    is tested without the grid, and the candidates lie along the cells on any grid where
    the device is in :data:`LANE_DEVICES`. The first acceptable candidate is found by one
    max over ``rank << 16 | index``.
    """
    (xl, xh), (yl, yh) = x_range, y_range
    dev = cells.device
    n_cells = cells.shape[1]
    few = n_cells <= 63 and tries <= LANE_MAX_CHUNKS * n_cells
    lanes = few if free is None else dev.type in LANE_DEVICES or few
    if not lanes:
        words = rng.bits(tries)
        xs = as_col(xl) + (((words >> 16) * as_col(xh - xl)) >> 16)
        ys = as_col(yl) + (((words & 0xFFFF) * as_col(yh - yl)) >> 16)
        flat = ys * width + xs  # (N, K) int64
        ok = cells.gather(1, flat) == EMPTY if free is None else free(xs, ys)
        if avoid is not None:
            ok = ok & (flat != avoid[:, None])
        rank = torch.arange(tries, 0, -1, dtype=torch.int64, device=dev)  # the first ranks K
        best = torch.where(ok, (rank << 16) | flat, 0).amax(1)  # (N,), 0 if none
        return (best & 0xFFFF).to(I32), best > 0
    lane = torch.arange(n_cells, device=dev)
    mask = None
    if free is None:
        empty = cells == EMPTY
        if avoid is not None:
            empty = empty & (lane != avoid[:, None])
        mask = torch.where(empty, 1 << lane, 0).sum(1, keepdim=True)  # (N, 1) int64
    best = None
    for first in range(0, tries, n_cells):  # candidates first + lane, drawn chunk by chunk
        count = min(n_cells, tries - first)
        word = rng.bits_padded(count, n_cells)  # the next streams, as one rng.bits(tries)
        xs = as_col(xl) + (((word >> 16) * as_col(xh - xl)) >> 16)
        ys = as_col(yl) + (((word & 0xFFFF) * as_col(yh - yl)) >> 16)
        flat = ys * width + xs  # (N, H * W)
        if mask is not None:
            ok = ((mask >> flat) & 1) != 0
        else:
            ok = free(xs, ys)
            if avoid is not None:
                ok = ok & (flat != avoid[:, None])
        if count < n_cells:
            ok = ok & (lane < count)
        key = torch.where(ok, ((tries - first - lane) << 16) | flat, 0)
        best = key if best is None else torch.maximum(best, key)
    best = best.amax(1)  # (N,), 0 if none
    return (best & 0xFFFF).to(I32), best > 0


def place(
    rng: Rng,
    cells: torch.Tensor,
    width: int,
    tries: int,
    x_range: tuple[Any, Any],
    y_range: tuple[Any, Any],
    avoid: torch.Tensor | None = None,
    free: FreeCells | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Position of ``place_obj``: an empty cell in a rectangle, not ``avoid``.

    :func:`first_fit` (same arguments), or where no candidate fits, the first acceptable
    cell of the rectangle in row-major order.

    Returns:
        ``(x, y)``, (N,) int32 each.
    """
    chosen, found = first_fit(rng, cells, width, tries, x_range, y_range, avoid, free)
    (xl, xh), (yl, yh) = x_range, y_range
    n_cells = cells.shape[1]
    idx = torch.arange(n_cells, dtype=I32, device=cells.device)
    cx, cy = idx % width, idx // width
    inside = (as_col(xl) <= cx) & (cx < as_col(xh)) & (as_col(yl) <= cy) & (cy < as_col(yh))
    good = inside & (cells == EMPTY if free is None else free(cx, cy).expand_as(cells))
    if avoid is not None:
        good = good & (idx != avoid[:, None])
    first = n_cells - torch.where(good, n_cells - idx, 0).amax(1)
    chosen = torch.where(found, chosen, first.clamp(max=n_cells - 1))
    return chosen % width, chosen // width


def as_col(v: Any) -> Any:
    """(N, 1) view of an (N,) tensor (for broadcasting against candidates); ints as they are."""
    return v[:, None] if isinstance(v, torch.Tensor) else v


def tries_for(p: float, bound: float = 1e-9) -> int:
    """Candidates K with ``(1 - p) ** K <= bound``, for a fraction ``p`` of acceptable cells."""
    return max(1, math.ceil(math.log(bound) / math.log1p(-p)))


def named_color(pick: torch.Tensor) -> torch.Tensor:
    """(N,) int32 ``COLOR_TO_IDX`` of ``COLOR_NAMES[pick]``, ``pick`` (N,) int in [0, 6)."""
    out = torch.zeros_like(pick, dtype=I32)
    for i, name in enumerate(COLOR_NAMES):
        out = torch.where(pick == i, COLOR_TO_IDX[name], out)
    return out


def place_agent_clear(
    rng: Rng,
    cells: torch.Tensor,
    width: int,
    tries: int,
    attempts: int,
    x_range: tuple[Any, Any],
    y_range: tuple[Any, Any],
    free: FreeCells | None = None,
    occupied: FreeCells | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``RoomGrid.place_agent``: a :func:`place` and a direction until the agent faces no object.

    The reference repeats until the cell in front is empty or a wall; here ``attempts``
    attempts of ``tries + 1`` draws each, and the first good one is kept (the last if none
    is: the caller bounds that probability). ``free`` and ``occupied`` (whether cells hold
    an object: neither empty nor a wall), both given or neither, replace reads of ``cells``.

    Returns:
        ``(x, y, direction)``, (N,) int32 each.
    """
    x = y = direction = ok = None
    for _ in range(attempts):
        ax, ay = place(rng, cells, width, tries, x_range, y_range, free=free)
        ad = rand_int(rng, 0, 4)
        dx, dy = dir_vec(ad)
        if occupied is None:
            front = get_cell(cells, (ay + dy) * width + ax + dx)
            good = (front == EMPTY) | ((front & 15) == T_WALL)
        else:
            good = ~occupied((ax + dx)[:, None], (ay + dy)[:, None])[:, 0]
        if x is None:
            x, y, direction, ok = ax, ay, ad, good
        else:
            take = ~ok
            x, y = torch.where(take, ax, x), torch.where(take, ay, y)
            direction = torch.where(take, ad, direction)
            ok = ok | good
    return x, y, direction


def success_reward(step_count: torch.Tensor, max_steps: int) -> torch.Tensor:
    """``MiniGridEnv._reward``: ``1 - 0.9 * step_count / max_steps``, (N,) float64."""
    return 1.0 - 0.9 * (step_count.to(torch.float64) / max_steps)


# -- the step ---------------------------------------------------------------------------
def grid_step(
    width: int, max_steps: int, s: GridState, action: torch.Tensor
) -> tuple[GridState, torch.Tensor, torch.Tensor, torch.Tensor]:
    """``MiniGridEnv.step`` for N envs (without the time limit, which is the shell's).

    Args:
        width: Grid width W.
        max_steps: minigrid's ``max_steps`` (the reward's horizon).
        s: The state.
        action: (N,) int64 in 0..6.

    Returns:
        ``(state, reward, terminated, front_cell)``: reward (N,) float64 (goal reward or 0),
        terminated (N,) bool (goal or lava reached), front_cell (N,) int32 code of the cell
        in front of the agent before the step.
    """
    step_count = s.step_count + 1
    dx, dy = dir_vec(s.agent_dir)
    fx, fy = s.agent_x + dx, s.agent_y + dy
    fidx = (fy * width + fx).clamp(0, s.cells.shape[1] - 1)
    front = get_cell(s.cells, fidx)
    ftype = front & 15
    a = action

    direction = torch.where(a == LEFT, (s.agent_dir + 3) & 3, s.agent_dir)
    direction = torch.where(a == RIGHT, (s.agent_dir + 1) & 3, direction)

    fwd = a == FORWARD
    move = fwd & can_overlap(front)
    x = torch.where(move, fx, s.agent_x)
    y = torch.where(move, fy, s.agent_y)
    goal = fwd & (ftype == T_GOAL)
    lava = fwd & (ftype == T_LAVA)

    pickable = (ftype == T_KEY) | (ftype == T_BALL) | (ftype == T_BOX)
    pick = (a == PICKUP) & pickable & (s.carrying == 0)
    drop = (a == DROP) & (front == EMPTY) & (s.carrying != 0)
    toggle = a == TOGGLE
    door = toggle & (ftype == T_DOOR)
    state = front >> 8
    key_fits = ((s.carrying & 15) == T_KEY) & (((s.carrying >> 4) & 15) == ((front >> 4) & 15))
    unlocked = torch.where(key_fits, 0, 2).to(I32)
    door_state = torch.where(state == 2, unlocked, 1 - state)
    new_front = torch.where(door, (front & 0xFF) | (door_state << 8), front)
    new_front = torch.where(toggle & (ftype == T_BOX), EMPTY, new_front)
    new_front = torch.where(pick, EMPTY, new_front)
    new_front = torch.where(drop, s.carrying, new_front)
    carrying = torch.where(pick, front, torch.where(drop, 0, s.carrying))
    cells = set_cell(s.cells, fidx, new_front)

    reward = torch.where(goal, success_reward(step_count, max_steps), 0.0)
    nxt = GridState(cells, x, y, direction, carrying, step_count)
    return nxt, reward, goal | lava, front


# -- observations -----------------------------------------------------------------------
def view_cells(
    width: int, height: int, view: int, s: GridState
) -> tuple[torch.Tensor, torch.Tensor]:
    """Codes of the agent's (V, V) view, as ``gen_obs_grid``'s ``slice`` and rotations.

    Returns:
        ``(codes (N, V, V) int32 indexed [vx, vy], world (N, V, V) int64 flat index or -1
        outside the grid)``; cells outside the grid are walls.
    """
    dev = s.cells.device
    dx, dy = dir_vec(s.agent_dir)
    rx, ry = -dy, dx
    half = view // 2
    tx = s.agent_x + dx * (view - 1) - rx * half
    ty = s.agent_y + dy * (view - 1) - ry * half
    vx = torch.arange(view, dtype=I32, device=dev)[:, None]
    vy = torch.arange(view, dtype=I32, device=dev)[None, :]

    def col(t: torch.Tensor) -> torch.Tensor:
        return t[:, None, None]

    wx = col(tx) + vx * col(rx) - vy * col(dx)  # (N, V, V)
    wy = col(ty) + vx * col(ry) - vy * col(dy)
    inside = (wx >= 0) & (wx < width) & (wy >= 0) & (wy < height)
    flat = torch.where(inside, wy * width + wx, 0).long()
    codes = s.cells.gather(1, flat.view(flat.shape[0], -1)).view(flat.shape)
    codes = torch.where(inside, codes, WALL)
    return codes, torch.where(inside, flat, -1)


def visibility(codes: torch.Tensor) -> torch.Tensor:
    """``Grid.process_vis`` of (N, V, V) view codes from the agent at ``(V // 2, V - 1)``.

    Each view row is a V-bit integer (bit ``x``), processed from the agent's row up. The
    left-to-right sweep makes visible every cell reached from a visible see-through cell
    through see-through cells: the carries of ``seeds + clear`` (``seeds`` the visible
    see-through cells), i.e. ``(seeds + clear) ^ clear ^ seeds``. The right-to-left sweep is
    the same on the bit-reversed row (a lookup in a 2**V-entry table, V <= 11; shifts for
    larger views). Every visible see-through cell also reveals its neighbours in the row
    above, as in minigrid.

    Views of up to 63 cells pack the see-through cells into one int64 per env (bit
    ``vy * V + vx``) with one sum over the whole view, and unpack the visible cells from
    one such word: the view's gather, sum and sweeps stay one loop (one kernel).

    Returns:
        (N, V, V) bool mask indexed [vx, vy].
    """
    n, view = codes.shape[0], codes.shape[1]
    dev = codes.device
    full = (1 << view) - 1
    packed = view * view <= 63
    if packed:
        vx = torch.arange(view, device=dev)[:, None]
        vy = torch.arange(view, device=dev)[None, :]
        bit = vy * view + vx  # (V, V) int64
        words = torch.where(see_behind(codes), 1 << bit, 0).sum((1, 2))  # (N,) int64
        clear = [((words >> (j * view)) & full).to(I32) for j in range(view)]
    else:
        weights = table(_bit_weights, view, dtype=I32, like=codes)
        rowbits = (see_behind(codes).to(I32) * weights[None, :, None]).sum(1)  # (N, V)
        clear = [rowbits[:, j] for j in range(view)]
    rev = None
    if view <= 11:
        rev = table(_bit_reversals, view, dtype=I32, like=codes)
    rows: list[torch.Tensor] = [torch.zeros(n, dtype=I32, device=dev)] * view
    rows[view - 1] = torch.full((n,), 1 << (view // 2), dtype=I32, device=dev)
    for j in range(view - 1, -1, -1):
        row, t = rows[j], clear[j]
        seeds = row & t
        row = row | (((seeds + t) ^ t ^ seeds) & full)
        fwd_src = row & t & (full >> 1)
        if rev is not None:
            r, tr = rev[row.long()], rev[t.long()]
            seeds = r & tr
            row = rev[(r | (((seeds + tr) ^ tr ^ seeds) & full)).long()]
        else:
            for _ in range(view - 1):
                row = row | ((row & t) >> 1)
        back_src = row & t & (full & ~1)
        rows[j] = row
        if j > 0:
            up = (fwd_src | (fwd_src << 1) | back_src | (back_src >> 1)) & full
            rows[j - 1] = rows[j - 1] | up
    if packed:
        seen = rows[0].long()
        for j in range(1, view):
            seen = seen | (rows[j].long() << (j * view))
        return ((seen[:, None, None] >> bit) & 1) != 0
    bits = torch.stack(rows, dim=1)  # (N, V) indexed [vy]
    shifts = torch.arange(view, dtype=I32, device=dev)[None, :, None]
    return ((bits[:, None, :] >> shifts) & 1) != 0


def unpack(codes: torch.Tensor) -> torch.Tensor:
    """(..., 3) uint8 ``(type, color, state)`` of packed codes."""
    parts = (codes & 15, (codes >> 4) & 15, codes >> 8)
    return torch.stack(parts, dim=-1).to(torch.uint8)


def agent_view(
    width: int, height: int, view: int, see_through_walls: bool, s: GridState
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Visible codes of the agent's view (0 where unseen), as ``gen_obs``'s grid.

    Returns:
        ``(codes (N, V, V) int32, visible (N, V, V) bool, world (N, V, V) int64)``.
    """
    codes, world = view_cells(width, height, view, s)
    if see_through_walls:
        visible = torch.ones_like(codes, dtype=torch.bool)
    else:
        visible = visibility(codes)
    vx = torch.arange(view, device=codes.device)[:, None]
    vy = torch.arange(view, device=codes.device)[None, :]
    at_agent = (vx == view // 2) & (vy == view - 1)
    held = torch.where(s.carrying != 0, s.carrying, EMPTY)[:, None, None]
    codes = torch.where(at_agent, held, codes)
    return torch.where(visible, codes, 0), visible, world


def split_dict_obs(view: int, packed: torch.Tensor) -> dict[str, torch.Tensor]:
    """The observation dict of minigrid from packed (N, V * V * 3 + 2) uint8 rows.

    Returns:
        ``{"image": (N, V, V, 3) uint8, "direction": (N,) int64, "mission": (N,) int64}``.
    """
    k = view * view * 3
    image = packed[:, :k].reshape(-1, view, view, 3).contiguous()
    return {"image": image, "direction": packed[:, k].long(), "mission": packed[:, k + 1].long()}


def full_view(width: int, height: int, s: GridState) -> torch.Tensor:
    """``FullyObsWrapper``'s image: (N, W, H, 3) uint8 indexed [x, y, channel]."""
    agent = (s.agent_y * width + s.agent_x)[:, None]
    idx = torch.arange(s.cells.shape[1], dtype=I32, device=s.cells.device)
    me = OBJECT_TO_IDX["agent"] | COLOR_TO_IDX["red"] << 4 | s.agent_dir[:, None] << 8
    cells = torch.where(idx == agent, me, s.cells)
    return unpack(cells.view(-1, height, width).transpose(1, 2))


# -- the env base -----------------------------------------------------------------------
class MiniGridEnv(EnvDef[GridState, MiniGridParams]):
    """Base of the MiniGrid families: a family sets ``params_type`` and :meth:`gen_grid`."""

    params_type: ClassVar[type] = MiniGridParams
    #: minigrid's mission string (a family with several overrides :meth:`missions`).
    mission: ClassVar[str] = ""
    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["human", "rgb_array"], "render_fps": 10}

    # -- family-specific -----------------------------------------------------------------
    def dims(self, params: Any) -> tuple[int, int]:
        """Grid ``(width, height)``."""
        return params.size, params.size

    def max_steps(self, params: Any) -> int:
        """The reference's ``max_steps`` (``params.max_steps`` or the family's default)."""
        return params.max_steps if params.max_steps is not None else 4 * params.size**2

    def gen_grid(self, params: Any, rng: Rng) -> GridState:
        """N new grids with agent (minigrid's ``_gen_grid``); ``step_count`` and carrying 0."""
        raise NotImplementedError

    def n_actions(self, params: Any) -> int:
        """Size of the action space (7, as minigrid)."""
        return 7

    # -- EnvDef -------------------------------------------------------------------------
    def observation_space(self, params: Any, dtype: torch.dtype) -> gym.Space:
        """Box(0, 255, (V, V, 3), uint8), or (W, H, 3) or (V * V * 3 + 2,) by ``obs_mode``.

        ``"full"``: (W, H, 3); ``"dict"``: the packed row (see :meth:`observation_view`).
        """
        if params.obs_mode not in OBS_MODES:
            raise ValueError(f"obs_mode must be one of {OBS_MODES}, got {params.obs_mode!r}")
        if params.obs_mode == "full":
            width, height = self.dims(params)
            return gym.spaces.Box(0, 255, shape=(width, height, 3), dtype=np.uint8)
        v = params.agent_view_size
        if v % 2 != 1 or v < 3:
            raise ValueError(f"agent_view_size must be odd and >= 3, got {v}")
        shape = (v, v, 3) if params.obs_mode == "image" else (v * v * 3 + 2,)
        return gym.spaces.Box(0, 255, shape=shape, dtype=np.uint8)

    def observation_view(self, params: Any) -> ObservationView | None:
        """With ``obs_mode="dict"``: minigrid's ``Dict`` observation, split from the row.

        The space is ``Dict(image=Box(0, 255, (V, V, 3), uint8), direction=Discrete(4),
        mission=Discrete(len(missions)))``; a batch splits into ``{"image": (N, V, V, 3)
        uint8, "direction": (N,) int64, "mission": (N,) int64}``.
        """
        if params.obs_mode != "dict":
            return None
        v = params.agent_view_size
        space = gym.spaces.Dict(
            {
                "image": gym.spaces.Box(0, 255, shape=(v, v, 3), dtype=np.uint8),
                "direction": gym.spaces.Discrete(4),
                "mission": gym.spaces.Discrete(len(self.missions(params))),
            }
        )
        return ObservationView(space, functools.partial(split_dict_obs, v))

    def missions(self, params: Any) -> tuple[str, ...]:
        """The mission strings of minigrid, indexed by ``obs["mission"]`` (``"dict"`` mode)."""
        return (self.mission,)

    def mission_index(self, params: Any, state: Any) -> torch.Tensor:
        """(N,) int32 index of each env's mission in :meth:`missions` (one mission: 0)."""
        return torch.zeros_like(self.grid_state(state).agent_dir)

    def grid_state(self, state: Any) -> GridState:
        """The :class:`GridState` of a family's state (the state itself by default)."""
        return state

    def action_space(self, params: Any, dtype: torch.dtype) -> gym.Space:
        """Discrete(7): left, right, forward, pickup, drop, toggle, done."""
        return gym.spaces.Discrete(self.n_actions(params))

    def reset(
        self, params: Any, rng: Rng, dtype: torch.dtype, options: dict[str, Any] | None
    ) -> GridState:
        """N new episodes from :meth:`gen_grid`."""
        return self.gen_grid(params, rng)

    def step(
        self, params: Any, state: GridState, action: torch.Tensor, rng: Rng
    ) -> tuple[GridState, torch.Tensor, torch.Tensor]:
        """One ``MiniGridEnv.step`` (no random draws)."""
        width, _ = self.dims(params)
        nxt, reward, terminated, _ = grid_step(width, self.max_steps(params), state, action)
        return nxt, reward, terminated

    def observation(self, params: Any, state: Any) -> torch.Tensor:
        """(N, V, V, 3) uint8 agent view, or the rows of :meth:`observation_space`.

        ``"full"``: (N, W, H, 3); ``"dict"``: the packed (N, V * V * 3 + 2) rows.
        """
        width, height = self.dims(params)
        grid = self.grid_state(state)
        if params.obs_mode == "full":
            return full_view(width, height, grid)
        codes, _, _ = agent_view(
            width, height, params.agent_view_size, params.see_through_walls, grid
        )
        image = unpack(codes)
        if params.obs_mode != "dict":
            return image
        # pad and select rather than cat: inductor keeps this in the step's loop kernel
        k = 3 * params.agent_view_size**2
        packed = torch.nn.functional.pad(image.flatten(1), (0, 2))
        col = torch.arange(k + 2, device=packed.device)
        mission = self.mission_index(params, state).to(torch.uint8)[:, None]
        packed = torch.where(col == k, grid.agent_dir.to(torch.uint8)[:, None], packed)
        return torch.where(col == k + 1, mission, packed)

    def render(self, params: Any, state: Any) -> torch.Tensor:
        """(N, H * 32, W * 32, 3) uint8 frames in minigrid's look (``highlight=True``)."""
        width, height = self.dims(params)
        state = self.grid_state(state)
        n, dev = state.cells.shape[0], state.cells.device
        _, visible, world = agent_view(
            width, height, params.agent_view_size, params.see_through_walls, state
        )
        hw = width * height
        lit = torch.zeros(n, hw + 1, dtype=torch.int64, device=dev)
        target = torch.where(visible & (world >= 0), world, hw).view(n, -1)
        lit = lit.scatter(1, target, 1)[:, :hw]
        agent = (state.agent_y * width + state.agent_x)[:, None]
        idx = torch.arange(hw, device=dev)
        overlay = torch.where(idx == agent, state.agent_dir[:, None].long() + 1, 0)
        key = (_cell_slot(state.cells.long()) * 5 + overlay) * 2 + lit
        table = tile_table(dev)
        px = TILE_PIXELS
        tiles = table[key].view(n, height, width, px, px, 3)
        return tiles.permute(0, 1, 3, 2, 4, 5).reshape(n, height * px, width * px, 3)


# -- rendering --------------------------------------------------------------------------
#: Tile size of rendered frames [px] (minigrid's ``TILE_PIXELS``).
TILE_PIXELS = 32
_SUBDIVS = 3


def _cell_slot(codes: torch.Tensor) -> torch.Tensor:
    """Dense index ``type + 11 * (color + 6 * state)`` of packed codes (for the tile table)."""
    return (codes & 15) + 11 * (((codes >> 4) & 15) + 6 * (codes >> 8))


def _tile(obj: tuple[int, int, int], agent_dir: int | None, highlight: bool) -> np.ndarray:
    """One tile as minigrid's ``Grid.render_tile`` draws it, (32, 32, 3) uint8."""
    size = TILE_PIXELS * _SUBDIVS
    img = np.zeros((size, size, 3), dtype=np.uint8)
    coords = (np.arange(size) + 0.5) / size
    xf, yf = coords[None, :], coords[:, None]

    def fill(mask: np.ndarray, color: Any) -> None:
        img[np.broadcast_to(mask, (size, size))] = np.asarray(color)

    def rect(x0: float, x1: float, y0: float, y1: float) -> np.ndarray:
        return (xf >= x0) & (xf <= x1) & (yf >= y0) & (yf <= y1)

    def circle(cx: float, cy: float, r: float) -> np.ndarray:
        return (xf - cx) * (xf - cx) + (yf - cy) * (yf - cy) <= r * r

    def line(x0: float, y0: float, x1: float, y1: float, r: float) -> np.ndarray:
        p0 = np.array([x0, y0], dtype=np.float32)
        p1 = np.array([x1, y1], dtype=np.float32)
        d = p1 - p0
        dist = np.linalg.norm(d)
        d = d / dist
        box = rect(min(x0, x1) - r, max(x0, x1) + r, min(y0, y1) - r, max(y0, y1) + r)
        qx, qy = np.broadcast_to(xf, (size, size)), np.broadcast_to(yf, (size, size))
        a = np.clip((qx - p0[0]) * d[0] + (qy - p0[1]) * d[1], 0, dist)
        px, py = p0[0] + a * d[0], p0[1] + a * d[1]
        return box & (np.sqrt((qx - px) ** 2 + (qy - py) ** 2) <= r)

    fill(rect(0, 0.031, 0, 1), (100, 100, 100))
    fill(rect(0, 1, 0, 0.031), (100, 100, 100))
    t, color, state = obj
    c = np.array(COLORS[color])
    if t in (T_WALL, T_GOAL):
        fill(rect(0, 1, 0, 1), c)
    elif t == T_FLOOR:
        fill(rect(0.031, 1, 0.031, 1), c / 2)
    elif t == T_LAVA:
        fill(rect(0, 1, 0, 1), (255, 128, 0))
        for i in range(3):
            lo, hi = 0.3 + 0.2 * i, 0.4 + 0.2 * i
            fill(line(0.1, lo, 0.3, hi, r=0.03), (0, 0, 0))
            fill(line(0.3, hi, 0.5, lo, r=0.03), (0, 0, 0))
            fill(line(0.5, lo, 0.7, hi, r=0.03), (0, 0, 0))
            fill(line(0.7, hi, 0.9, lo, r=0.03), (0, 0, 0))
    elif t == T_DOOR:
        if state == 0:
            fill(rect(0.88, 1.00, 0.00, 1.00), c)
            fill(rect(0.92, 0.96, 0.04, 0.96), (0, 0, 0))
        elif state == 2:
            fill(rect(0.00, 1.00, 0.00, 1.00), c)
            fill(rect(0.06, 0.94, 0.06, 0.94), 0.45 * c)
            fill(rect(0.52, 0.75, 0.50, 0.56), c)
        else:
            fill(rect(0.00, 1.00, 0.00, 1.00), c)
            fill(rect(0.04, 0.96, 0.04, 0.96), (0, 0, 0))
            fill(rect(0.08, 0.92, 0.08, 0.92), c)
            fill(rect(0.12, 0.88, 0.12, 0.88), (0, 0, 0))
            fill(circle(0.75, 0.50, 0.08), c)
    elif t == T_KEY:
        fill(rect(0.50, 0.63, 0.31, 0.88), c)
        fill(rect(0.38, 0.50, 0.59, 0.66), c)
        fill(rect(0.38, 0.50, 0.81, 0.88), c)
        fill(circle(0.56, 0.28, 0.190), c)
        fill(circle(0.56, 0.28, 0.064), (0, 0, 0))
    elif t == T_BALL:
        fill(circle(0.5, 0.5, 0.31), c)
    elif t == T_BOX:
        fill(rect(0.12, 0.88, 0.12, 0.88), c)
        fill(rect(0.18, 0.82, 0.18, 0.82), (0, 0, 0))
        fill(rect(0.16, 0.84, 0.47, 0.53), c)
    if agent_dir is not None:
        a = np.array((0.12, 0.19), dtype=np.float32)
        b = np.array((0.87, 0.50), dtype=np.float32)
        cc = np.array((0.12, 0.81), dtype=np.float32)
        theta = 0.5 * math.pi * agent_dir
        x, y = xf - 0.5, yf - 0.5
        x2 = 0.5 + x * math.cos(-theta) - y * math.sin(-theta)
        y2 = 0.5 + y * math.cos(-theta) + x * math.sin(-theta)
        v0, v1 = cc - a, b - a
        v2x, v2y = x2 - a[0], y2 - a[1]
        dot00, dot01, dot11 = np.dot(v0, v0), np.dot(v0, v1), np.dot(v1, v1)
        dot02 = v0[0] * v2x + v0[1] * v2y
        dot12 = v1[0] * v2x + v1[1] * v2y
        inv = 1 / (dot00 * dot11 - dot01 * dot01)
        u = (dot11 * dot02 - dot01 * dot12) * inv
        v = (dot00 * dot12 - dot01 * dot02) * inv
        fill((u >= 0) & (v >= 0) & (u + v < 1), (255, 0, 0))
    if highlight:
        blend = img + 0.30 * (np.array((255, 255, 255), dtype=np.uint8) - img)
        img[:] = blend.clip(0, 255).astype(np.uint8)
    small = img.reshape(TILE_PIXELS, _SUBDIVS, TILE_PIXELS, _SUBDIVS, 3).mean(3).mean(1)
    return small.astype(np.uint8)  # truncated, as minigrid's uint8 frame assignment


@functools.cache
def _tile_table_host() -> torch.Tensor:
    """Every tile, (11 * 6 * 3 * 10, 32, 32, 3) uint8.

    Indexed ``(_cell_slot * 5 + overlay) * 2 + highlight``, overlay 0 without the agent,
    ``1 + d`` with the agent facing ``d``.
    """
    drawn: dict[tuple[Any, ...], np.ndarray] = {}
    tiles = []
    for state in range(3):
        for color in range(6):
            for t in range(11):
                if t in (0, 1, 10):  # unseen, empty, agent: nothing drawn
                    cell = (1, 0, 0)
                else:  # only doors have a state; lava has one look
                    cell = (t, 0 if t == T_LAVA else color, state if t == T_DOOR else 0)
                for overlay in range(5):
                    agent_dir = None if overlay == 0 else overlay - 1
                    for highlight in (False, True):
                        key = (cell, agent_dir, highlight)
                        if key not in drawn:
                            drawn[key] = _tile(cell, agent_dir, highlight)
                        tiles.append(drawn[key])
    return torch.from_numpy(np.stack(tiles))


def tile_table(device: torch.device) -> torch.Tensor:
    """:func:`_tile_table_host` on ``device`` (built once per process, on first render)."""
    return _tile_table_host().to(device)
