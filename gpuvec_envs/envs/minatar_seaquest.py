"""Batched MinAtar Seaquest.

Mirrors ``minatar/environments/seaquest.py`` (minatar 1.0.15, ``Env``): a two-cell submarine
shoots enemy fish and subs (+1 each), picks up divers, loses oxygen under water and surfaces
to refill it (with at least one diver on board; surfacing with 6 gives ``oxygen * 10 // 200``
extra reward); each surfacing ramps the difficulty (faster enemy spawns and moves). The game
ends on contact with a fish, sub or enemy bullet, when the oxygen runs out, or on surfacing
without divers. Channels: sub_front, sub_back, friendly_bullet, trail, enemy_bullet,
enemy_fish, enemy_sub, oxygen_guage, diver_guage, diver. All 6 actions are minimal.

Representation (for speed). The state is (N,) tensors only (a NamedTuple with tuples of
(N,) words for the object lists), int32 but for the int64 bullet bitboards. The step stacks
the 32 enemy words into one (32, N) tensor, so every per-enemy operation is a single op
vectorised over the batch, and reduces over the slots with ``amax`` / ``amin`` or, for
bitwise OR, elementwise chains (:func:`_tree`); no sort, scatter, cumsum or gather.

* Every object is one packed int32 word, columns stored plus one (``X = x + 1``) so that a
  step off either edge gives ``X`` = 0 or 11 without borrowing from the next field; bits
  0-7 (``X | y << 4``) are the object's cell key, compared in one instruction.
* Enemies (the reference's ``e_subs`` and ``e_fish``) live in :data:`ENEMY_SLOTS` words:
  ``X`` (bits 0-3), row (4-7), direction (8, 1 = right), move timer (9-11), shot timer
  (12-15), age (16-22: steps since the spawn) and a fish flag (23; 0 = sub). A free slot
  holds :data:`DEAD`, whose cell key, timer and fish flag make it match nothing, never move
  and never shoot. Slots are not kept in list order (no compaction): each list's order is
  spawn order, and at most one enemy spawns per step, so the ages of live enemies are
  distinct and order them (older = earlier in the list). ``word >> 16`` =
  ``128 * fish + age`` is the priority key of both orderings the reference uses: a friendly
  bullet hits the *first* fish at its cell, else the first sub (the largest key); in the
  enemy loops, moved enemies take the first remaining friendly bullet at their new cell,
  subs (in reverse order) before fish (in reverse order), i.e. the smallest key first,
  computed with two masked minima. A new enemy takes the first free slot.
* Friendly bullets (``f_bullets``, capacity 2) and divers (``divers``, capacity 2) are two
  words each in list order (slot 0 first, a free slot is 0): ``X | y << 4 | dir << 8``, and
  for divers the move timer in bits 9-11. They are walked in reverse as the reference.
* ``e_bullets`` are never removed except off-screen and their order is never observed, so
  they are two 10x10 occupancy bitboards (moving left / right, ``*_lo`` rows 0-4 and
  ``*_hi`` rows 5-9, bit ``10 (y % 5) + x``); duplicates are equivalent.
* The observation is assembled as 64-bit words of the env's 1000-bit output (cell-major,
  bit ``100 y + 10 x + channel``) and spread into bytes four at a time as int32 words that
  are viewed as the bool output.

``list.remove`` removes the first *equal* element, not the element in hand. That differs only
if an earlier element equals it: (a) enemies and divers removed off-screen hold an off-screen
value no other element has; (b) an enemy hit in the bullet loop is the first one at that cell,
so no earlier one is equal; (c) an enemy hit after moving cannot equal an unprocessed earlier
enemy, since that one sits on a cell the bullet loop left without bullets; (d) divers all
share one timer phase (spawned every 30 steps, moving every 6), so they never coincide;
(e) a friendly bullet equal to an earlier one (fired 5 steps after it while the sub followed
it, one cell behind) swaps places with it when it hits: the list ends with the same values
in the same slots, as it was that earlier bullet's last step in the list anyway. So removal
by identity reproduces the reference.

Capacity bounds (why the reference never exceeds them):

* ``f_bullets`` <= 2: the cool-down makes shots >= 5 steps apart and a bullet leaves the
  screen within 9 steps of its shot (it moves one cell per step from the sub's column), so a
  third shot comes after the first bullet is gone.
* ``divers`` <= 2: one spawns every 30 steps and leaves after exactly 59 (first move 5
  steps after the spawn, then one cell every 6 steps, 10 cells).
* fish + subs <= 32 during a step: an enemy spawned while ``move_speed`` is 2 (ramp index
  >= 6; it never rises again) leaves exactly 29 steps after its spawn, so at most 30 of them
  (at most one spawn per step) are in the lists during a step. Enemies spawned with
  ``move_speed`` >= 3 (ramp index <= 5, spawn interval >= 15) live <= 59 steps (at most 10
  moves, at most 6 steps apart), so at most 4 are alive at once, and the first slow-spawned
  enemy after them comes >= 15 steps after the last of them: with m of them alive the fast
  ones fit in ``min(30, 60 - 15 m)`` steps, giving at most 1 + 30 = 31, 2 + 30 = 32,
  3 + 15 = 18 or 4 + 0 = 4 enemies. The same lifetimes bound the age field (< 64).

The observation's trail channel uses one direction per row: the reference never spawns an
enemy in a row holding an enemy that moves the other way, so all enemies of a row share a
direction (true of every state reachable from a reset).

Deliberate differences: ``terminal`` freezes the game as the reference (reward 0, state
unchanged) if stepped again, which is only reachable with autoreset ``DISABLED``; and the
sub's rear cell wraps modulo 10 (the reference would index column -1 or crash on 10, both
unreachable from a reset).

Randomness: after the sticky-action draw (stream 0), each step draws streams 1-5. An enemy
spawn uses streams 1-3 (``rand() < 1/2`` direction, ``rand() < 1/3`` sub, ``randint(1, 9)``
row) and a diver spawn the next two (direction, row): streams 4-5 after an enemy spawn,
streams 1-2 otherwise, the order in which the reference consumes its generator.
"""

from __future__ import annotations

from typing import NamedTuple

import torch

from gpuvec_envs.core.env import select
from gpuvec_envs.core.rng import Rng
from gpuvec_envs.envs._minatar import COL0, COL9, ROW, WORD, MinAtarEnv, MinAtarParams

#: Observation channels, in minatar's order ("guage" sic).
CHANNELS = (
    "sub_front", "sub_back", "friendly_bullet", "trail", "enemy_bullet",
    "enemy_fish", "enemy_sub", "oxygen_guage", "diver_guage", "diver",
)  # fmt: skip
RAMP_INTERVAL = 100  # unused by the reference's logic; kept for reference
MAX_OXYGEN = 200  # [steps] of oxygen
INIT_SPAWN_SPEED = 20  # [steps] initial enemy spawn interval
DIVER_SPAWN_SPEED = 30  # [steps] between diver spawns
INIT_MOVE_INTERVAL = 5  # [steps] initial enemy move timer
SHOT_COOL_DOWN = 5  # [steps] between the sub's shots
ENEMY_SHOT_INTERVAL = 10  # [steps] between an enemy sub's shots
DIVER_MOVE_INTERVAL = 5  # [steps] diver move timer
MAX_DIVERS = 6  # divers the sub can carry
#: Enemy slots (fish + subs; bound proved in the module docstring).
ENEMY_SLOTS = 32
#: Slots of the friendly-bullet and diver lists.
BULLET_SLOTS = 2
DIVER_SLOTS = 2

I32 = torch.int32
# Packed words (see the module docstring). Shifts of the fields:
DIR_SHIFT = 8
TIMER_SHIFT = 9
SHOT_SHIFT = 12
AGE_SHIFT = 16
CELL = 0xFF  # cell key ``X | y << 4``
TIMER = 7 << TIMER_SHIFT
SHOT = 15 << SHOT_SHIFT
FISH = 1 << 23
#: A free enemy slot: cell (X, y) = (15, 15), timer 7, a fish (never moves or shoots).
DEAD = CELL | TIMER | FISH
#: A cell key no object has (free bullet slots compare with it).
NOWHERE = 0xEE


class SeaquestState(NamedTuple):
    """Batched Seaquest state, all (N,) tensors. Positions are cells: x = column, y = row.

    Directions are 1 = right (the reference's ``True``), 0 = left. Packed words as in the
    module docstring.
    """

    oxygen: torch.Tensor  # int32 [steps] left (may end at -1 on the final step)
    diver_count: torch.Tensor  # int32 divers on board (-1 and below after a full surfacing)
    sub_x: torch.Tensor  # int32 [col]
    sub_y: torch.Tensor  # int32 [row] 0..8
    sub_or: torch.Tensor  # int32 facing 1 = right, 0 = left
    e_spawn_speed: torch.Tensor  # int32 [steps] enemy spawn interval
    e_spawn_timer: torch.Tensor  # int32 [steps] until an enemy spawns
    d_spawn_timer: torch.Tensor  # int32 [steps] until a diver spawns
    move_speed: torch.Tensor  # int32 [steps] enemy move timer reload
    ramp_index: torch.Tensor  # int32 difficulty ramps so far
    shot_timer: torch.Tensor  # int32 [steps] sub's cool-down
    surface: torch.Tensor  # int32 1 = the sub has surfaced and not dived since
    terminal: torch.Tensor  # int32 1 = game over
    fb: tuple[torch.Tensor, ...]  # 2 x int32 friendly bullets in list order, 0 = none
    dv: tuple[torch.Tensor, ...]  # 2 x int32 divers in list order, 0 = none
    en: tuple[torch.Tensor, ...]  # 32 x int32 fish and subs, DEAD = free
    eb_l_lo: torch.Tensor  # int64 enemy bullets moving left, rows 0-4
    eb_l_hi: torch.Tensor  # int64 enemy bullets moving left, rows 5-9
    eb_r_lo: torch.Tensor  # int64 enemy bullets moving right, rows 0-4
    eb_r_hi: torch.Tensor  # int64 enemy bullets moving right, rows 5-9


def reset(params: MinAtarParams, rng: Rng) -> SeaquestState:
    """N new games: sub at the surface, column 5, facing left; no objects (no draws)."""
    z = torch.zeros(rng.num_envs, dtype=I32, device=rng.device)
    z64 = torch.zeros(rng.num_envs, dtype=torch.int64, device=rng.device)
    return SeaquestState(
        oxygen=z + MAX_OXYGEN,
        diver_count=z,
        sub_x=z + 5,
        sub_y=z,
        sub_or=z,
        e_spawn_speed=z + INIT_SPAWN_SPEED,
        e_spawn_timer=z + INIT_SPAWN_SPEED,
        d_spawn_timer=z + DIVER_SPAWN_SPEED,
        move_speed=z + INIT_MOVE_INTERVAL,
        ramp_index=z,
        shot_timer=z,
        surface=z + 1,
        terminal=z,
        fb=(z, z),
        dv=(z, z),
        en=(z + DEAD,) * ENEMY_SLOTS,
        eb_l_lo=z64, eb_l_hi=z64, eb_r_lo=z64, eb_r_hi=z64,
    )  # fmt: skip


def _step_x(word: torch.Tensor) -> torch.Tensor:
    """+1 or -1 by the direction bit of packed words."""
    return ((word >> DIR_SHIFT) & 1) * 2 - 1


def _tree(x: torch.Tensor, op) -> torch.Tensor:  # noqa: ANN001
    """Reduce (32, N) over the slots with an elementwise (bitwise) ``op``.

    Bitwise ops have no torch reduction: this is one (N,) pass of 31 ops over the 32 rows,
    vectorised over N.
    """
    rows = x.unbind(0)
    out = rows[0]
    for r in rows[1:]:
        out = op(out, r)
    return out


def _materialize(*xs: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """The (N,) tensors ``xs``, computed into one stacked buffer.

    Inductor inlines a pointwise (N,) producer into each (32, N) consumer, recomputing it
    for every slot; a stack of more than ``max_pointwise_cat_inputs`` (8) tensors is written
    slice by slice instead, so the consumers load the values.
    """
    rows = list(xs) + [xs[0]] * max(0, 9 - len(xs))
    return torch.stack(rows).unbind(0)[: len(xs)]


def _store(x: torch.Tensor) -> torch.Tensor:
    """(32, N) ``x``, computed into a buffer once.

    A stack of more than 8 slices is written slice by slice, so later consumers load ``x``
    instead of each recomputing its whole chain of ops.
    """
    return torch.stack(x.unbind(0))


def _compact2(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Two list slots (0 = free) -> the same list with slot 0 filled first."""
    full = a != 0
    return torch.where(full, a, b), torch.where(full, b, 0)


def step(
    params: MinAtarParams, s: SeaquestState, action: torch.Tensor, words: torch.Tensor
) -> tuple[SeaquestState, torch.Tensor, torch.Tensor]:
    """One step of the reference's ``act`` on full actions (N,) int64 0..5.

    Args:
        params: Options.
        s: State.
        action: (N,) int64 full action indices.
        words: (N, 5) int64 random words in ``[0, 2**32)`` (streams 1-5 of the step).

    Returns:
        ``(state, reward (N,) int32, terminal (N,) bool)``; finished games are frozen.
    """
    ms = s.move_speed
    action = action.to(I32)
    en = torch.stack(s.en)  # (32, N): every slot op below is one op vectorised over N
    slot = torch.arange(ENEMY_SLOTS, device=en.device, dtype=I32)[:, None]

    # -- enemy spawn ------------------------------------------------------------------------
    spawn_e = s.e_spawn_timer == 0
    # Decisions from the draws, stored once (each draw is a hash the consumers would redo).
    action, lr, fish, row, d_lr, d_row = _materialize(
        action,
        ((words[:, 0] >> 8) < (1 << 23)).to(I32),  # rand() < 1/2: from the left, moving right
        (((words[:, 1] >> 8) * 3) >= (1 << 24)).to(I32),  # not rand() < 1/3 (exact)
        (1 + ((words[:, 2] * 8) >> 32)).to(I32),  # randint(1, 9)
        # The diver's draws: the next two after the enemy's, the first two without one.
        ((torch.where(spawn_e, words[:, 3], words[:, 0]) >> 8) < (1 << 23)).to(I32),
        (1 + ((torch.where(spawn_e, words[:, 4], words[:, 1]) * 8) >> 32)).to(I32),
    )
    # Blocked if an enemy in that row moves the other way: same (row, opposite direction).
    other = (row << 4) | ((1 - lr) << DIR_SHIFT)
    new = (10 - 9 * lr) | (row << 4) | (lr << DIR_SHIFT) | (ms << TIMER_SHIFT)
    new = new | (ENEMY_SHOT_INTERVAL << SHOT_SHIFT) | (fish << 23)
    e_spawn_timer = torch.where(spawn_e, s.e_spawn_speed, s.e_spawn_timer)

    # -- diver spawn ------------------------------------------------------------------------
    spawn_d = s.d_spawn_timer == 0
    d_new = (10 - 9 * d_lr) | (d_row << 4) | (d_lr << DIR_SHIFT)
    d_new = d_new | (DIVER_MOVE_INTERVAL << TIMER_SHIFT)
    has0 = s.dv[0] != 0
    dv = [
        torch.where(spawn_d & ~has0, d_new, s.dv[0]),
        torch.where(spawn_d & has0, d_new, s.dv[1]),
    ]
    d_spawn_timer = torch.where(spawn_d, DIVER_SPAWN_SPEED, s.d_spawn_timer)

    # -- player -----------------------------------------------------------------------------
    fire = (action == 5) & (s.shot_timer == 0)
    shot = (s.sub_x + 1) | (s.sub_y << 4) | (s.sub_or << DIR_SHIFT)
    has0 = s.fb[0] != 0
    fb = [torch.where(fire & ~has0, shot, s.fb[0]), torch.where(fire & has0, shot, s.fb[1])]
    shot_timer = torch.where(fire, SHOT_COOL_DOWN, s.shot_timer)
    left, right = action == 1, action == 3
    sub_x = torch.where(left, (s.sub_x - 1).clamp(min=0), s.sub_x)
    sub_x = torch.where(right, (sub_x + 1).clamp(max=9), sub_x)
    sub_or = torch.where(left, 0, torch.where(right, 1, s.sub_or))
    sub_y = torch.where(action == 2, (s.sub_y - 1).clamp(min=0), s.sub_y)
    sub_y = torch.where(action == 4, (sub_y + 1).clamp(max=8), sub_y)
    at_sub = (sub_x + 1) | (sub_y << 4)  # the sub's cell key

    # Friendly bullets move (their hits come below, after the spawn).
    fb = [torch.where(b != 0, b + _step_x(b), 0) for b in fb]
    cells = [torch.where(((b & 15) >= 1) & ((b & 15) <= 10), b & CELL, NOWHERE) for b in fb]

    # (N,) values that the (32, N) slot ops use, stored once instead of recomputed per slot.
    other, new, at_sub, cells[0], cells[1] = _materialize(other, new, at_sub, *cells)
    blocked = ((en & 0x1F0) == other).to(I32).amax(dim=0) != 0
    first_free = torch.where(en == DEAD, slot, ENEMY_SLOTS).amin(dim=0)
    en = _store(torch.where((slot == first_free) & (spawn_e & ~blocked), new, en))

    # -- friendly bullets (reverse order): hit the first fish at the cell, else first sub ---
    reward = torch.zeros_like(s.oxygen)
    for k in reversed(range(BULLET_SLOTS)):
        b, cell = fb[k], cells[k]
        inside = cell != NOWHERE
        victim = torch.where((en & CELL) == cell, en >> AGE_SHIFT, -1).amax(dim=0)
        hit = victim >= 0
        en = torch.where((en >> AGE_SHIFT) == victim, DEAD, en)
        reward = reward + hit.to(I32)
        fb[k] = torch.where(inside & ~hit, b, 0)
    fb = list(_compact2(*fb))
    en = _store(en)

    # -- divers (reverse order) -------------------------------------------------------------
    diver_count = s.diver_count
    for k in reversed(range(DIVER_SLOTS)):
        d = dv[k]
        live = d != 0
        pick = live & ((d & CELL) == at_sub) & (diver_count < MAX_DIVERS)
        diver_count = diver_count + pick.to(I32)
        rest = live & ~pick
        mv = rest & ((d & TIMER) == 0)
        d = torch.where(
            mv,
            d + _step_x(d) + (DIVER_MOVE_INTERVAL << TIMER_SHIFT),
            torch.where(rest, d - (1 << TIMER_SHIFT), d),
        )
        xk = d & 15
        out = mv & ((xk == 0) | (xk == 11))
        pick2 = mv & ~out & ((d & CELL) == at_sub) & (diver_count < MAX_DIVERS)
        diver_count = diver_count + pick2.to(I32)
        dv[k] = torch.where(rest & ~out & ~pick2, d, 0)
    dv = _compact2(*dv)

    # -- enemy subs and fish (each in reverse order; independent but for bullets) ----------
    cell0 = torch.where(fb[0] != 0, fb[0] & CELL, NOWHERE)
    cell1 = torch.where(fb[1] != 0, fb[1] & CELL, NOWHERE)
    ms_t = ms << TIMER_SHIFT
    term = ((en & CELL) == at_sub).to(I32).amax(dim=0) != 0
    gone = en == DEAD
    mv = (en & TIMER) == 0  # never for a free slot
    en = torch.where(mv, en + _step_x(en) + ms_t, en - (1 << TIMER_SHIFT))
    xk = en & 15
    out = (xk == 0) | (xk == 11)  # only after a move
    crash = (en & CELL) == at_sub
    term = term | (crash.to(I32).amax(dim=0) != 0)
    check = mv & ~out & ~crash  # looks for a friendly bullet at its new cell
    reload = (en & SHOT) == 0
    shoots = reload & (en < FISH) & ~out  # a sub removed by a bullet still shoots
    en = torch.where(reload, en + (ENEMY_SHOT_INTERVAL << SHOT_SHIFT), en - (1 << SHOT_SHIFT))
    en = _store(en)
    check = _store(check.to(I32)) != 0
    key = en >> AGE_SHIFT
    c = en & CELL
    # Moved enemies take the first remaining bullet at their cell (subs first, reverse order):
    # bullet 0 goes to the smallest key at its cell, bullet 1 to the smallest other one.
    k0 = torch.where(check & (c == cell0), key, 1000).amin(dim=0)
    k1 = torch.where(check & (c == cell1) & (key != k0), key, 1000).amin(dim=0)
    take0, take1 = k0 < 1000, k1 < 1000
    gone = gone | out | (key == k0) | (key == k1)
    en_next = torch.where(gone, DEAD, en + (1 << AGE_SHIFT))
    reward = reward + take0.to(I32) + take1.to(I32)
    fb = _compact2(torch.where(take0, 0, fb[0]), torch.where(take1, 0, fb[1]))

    # -- enemy bullets: new shots join, then all move --------------------------------------
    yk = (en >> 4) & 15
    hi = yk >= 5
    pos = (xk - 1 + 10 * yk - torch.where(hi, 50, 0)).clamp(0, 49).to(torch.int64)
    bit = torch.where(shoots, 1 << pos, 0)
    right = ((en >> DIR_SHIFT) & 1) == 1
    parts = [
        _tree(torch.where((right == r) & (hi == h), bit, 0), torch.bitwise_or)
        for r in (False, True)
        for h in (False, True)
    ]  # left lo, left hi, right lo, right hi
    l_lo, l_hi = s.eb_l_lo | parts[0], s.eb_l_hi | parts[1]
    r_lo, r_hi = s.eb_r_lo | parts[2], s.eb_r_hi | parts[3]
    sub_lo, sub_hi = cell_bits(sub_y, sub_x)
    hit = ((l_lo | r_lo) & sub_lo) | ((l_hi | r_hi) & sub_hi)
    l_lo, l_hi = (l_lo >> 1) & ~COL9, (l_hi >> 1) & ~COL9
    r_lo, r_hi = (r_lo << 1) & (WORD & ~COL0), (r_hi << 1) & (WORD & ~COL0)
    hit = hit | ((l_lo | r_lo) & sub_lo) | ((l_hi | r_hi) & sub_hi)
    term = term | (hit != 0)

    # -- timers, oxygen, surfacing --------------------------------------------------------
    e_spawn_timer = e_spawn_timer - (e_spawn_timer > 0).to(I32)
    d_spawn_timer = d_spawn_timer - (d_spawn_timer > 0).to(I32)
    shot_timer = shot_timer - (shot_timer > 0).to(I32)
    term = term | (s.oxygen <= 0)
    below = sub_y > 0
    oxygen = torch.where(below, s.oxygen - 1, s.oxygen)
    arrive = ~below & (s.surface == 0)
    term = term | (arrive & (diver_count == 0))
    surf = arrive & (diver_count != 0)
    full = surf & (diver_count == MAX_DIVERS)
    reward = reward + torch.where(full, tenths(oxygen), 0)
    diver_count = torch.where(full, 0, diver_count)
    oxygen = torch.where(surf, MAX_OXYGEN, oxygen)
    diver_count = diver_count - surf.to(I32)
    surface = torch.where(below, 0, s.surface | surf.to(I32))
    spawn_speed = s.e_spawn_speed
    ramp = surf & ((spawn_speed > 1) | (ms > 2)) & params.difficulty_ramping
    move_speed = ms - (ramp & (ms > 2) & ((s.ramp_index & 1) == 1)).to(I32)
    spawn_speed = spawn_speed - (ramp & (spawn_speed > 1)).to(I32)
    ramp_index = s.ramp_index + ramp.to(I32)

    nxt = SeaquestState(
        oxygen, diver_count, sub_x, sub_y, sub_or, spawn_speed, e_spawn_timer, d_spawn_timer,
        move_speed, ramp_index, shot_timer, surface, term.to(I32),
        tuple(fb), tuple(dv), tuple(en_next.unbind(0)), l_lo, l_hi, r_lo, r_hi,
    )  # fmt: skip
    done = s.terminal != 0
    nxt = select(done, s, nxt)
    reward = torch.where(done, 0, reward)
    return nxt, reward, nxt.terminal != 0


def cell_bits(y: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Bitboard words ``(lo, hi)`` (int64) of cells (row y, column x in 0..9), same shapes."""
    lo = y < 5
    bit = torch.ones_like(y, dtype=torch.int64) << (10 * torch.where(lo, y, y - 5) + x)
    return torch.where(lo, bit, 0), torch.where(lo, 0, bit)


def tenths(oxygen: torch.Tensor) -> torch.Tensor:
    """``max(oxygen, 0) * 10 // MAX_OXYGEN`` for oxygen <= MAX_OXYGEN, by comparisons.

    (Integer ``//`` and ``%`` compile to scalar code; comparisons vectorise.)
    """
    out = torch.zeros_like(oxygen)
    for k in range(1, 11):
        out = out + (oxygen >= k * MAX_OXYGEN // 10).to(oxygen.dtype)
    return out


#: ``(b * _SPREAD_MUL) & _SPREAD_MASK`` moves bit c of a 5-bit b to bit 10 c (no carries).
_SPREAD_MUL = sum(1 << (9 * k) for k in range(5))
_SPREAD_MASK = sum(1 << (10 * k) for k in range(5))


def _spread(board: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """Five cells ``board >> shift`` (bits 0-4) moved to bits 0, 10, .., 40."""
    return (((board >> shift) & 31) * _SPREAD_MUL) & _SPREAD_MASK


def _half_row_value(x: torch.Tensor, channel: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Cell-major half-row words ``(h0, h1)`` with bit ``10 (x % 5) + channel`` of column x.

    Columns outside 0..9 give zeros.
    """
    one = torch.ones_like(x, dtype=torch.int64)
    ok = (x >= 0) & (x <= 9)
    lo = x < 5
    bit = one << (10 * torch.where(lo, x, x - 5) + channel).clamp(0, 62)
    return torch.where(ok & lo, bit, 0), torch.where(ok & ~lo, bit, 0)


def observation(params: MinAtarParams, s: SeaquestState) -> torch.Tensor:
    """(N, 10, 10, 10) bool observation, channels as :data:`CHANNELS`.

    Fish, subs, trails and enemy bullets are bitboards (two words, :func:`cell_bits`) spread
    into cell-major half-row words (bit ``10 (x % 5) + channel``, five cells each); the sub,
    friendly bullets and divers are put straight into the half-row word of their row (the
    half rows are a (10, 2, N) tensor: envs innermost). The half rows are concatenated into
    16 64-bit words per env (the 1000 output bits, bit ``100 y + 10 x + channel``), whose
    nibbles are spread into bytes and stored as int32 words, which are viewed as the bool
    output (compiled bool/uint8 stores are written byte by byte; an int32 -> bool view is
    free).
    """
    dev = s.sub_x.device
    z64 = torch.zeros_like(s.eb_l_lo)
    en = torch.stack(s.en)  # (32, N)
    xk = (en & 15) - 1
    yk = (en >> 4) & 15
    live = en != DEAD
    hi = yk >= 5
    pos = torch.where(live, xk + 10 * yk - torch.where(hi, 50, 0), 0).to(torch.int64)
    bit = _store(torch.where(live, 1 << pos, 0))
    is_fish = en >= FISH
    f_lo, f_hi, s_lo, s_hi = (
        _tree(torch.where((is_fish == f) & (hi == h), bit, 0), torch.bitwise_or)
        for f in (True, False)
        for h in (False, True)
    )
    # Bit y: the enemies of row y move right.
    dirs = _tree(((en >> DIR_SHIFT) & 1) << torch.where(live, yk, 0), torch.bitwise_or)
    right_lo = z64
    right_hi = z64
    for y in range(1, 9):
        mask = torch.where(((dirs >> y) & 1) == 1, ROW << (10 * (y % 5)), 0)
        if y < 5:
            right_lo = right_lo | mask
        else:
            right_hi = right_hi | mask
    e_lo, e_hi = f_lo | s_lo, f_hi | s_hi
    t_lo = (((e_lo & right_lo) >> 1) & ~COL9) | (((e_lo & ~right_lo) << 1) & (WORD & ~COL0))
    t_hi = (((e_hi & right_hi) >> 1) & ~COL9) | (((e_hi & ~right_hi) << 1) & (WORD & ~COL0))
    b_lo, b_hi = s.eb_l_lo | s.eb_r_lo, s.eb_l_hi | s.eb_r_hi

    # Objects as (row, h0, h1): the sub (front, back), bullets, divers (+ trails).
    objects = []
    back = s.sub_x + 1 - 2 * s.sub_or  # wraps modulo 10 (never needed from a reset)
    back = torch.where(back < 0, 9, torch.where(back > 9, 0, back))
    f0, f1 = _half_row_value(s.sub_x, 0)
    b0, b1 = _half_row_value(back, 1)
    objects.append((s.sub_y, f0 | b0, f1 | b1))
    for b in s.fb:
        h0, h1 = _half_row_value((b & 15) - 1, 2)  # a free slot has x = -1: zeros
        objects.append(((b >> 4) & 15, h0, h1))
    for d in s.dv:
        xk = torch.where(d != 0, (d & 15) - 1, -9)  # a free slot: no body, no trail
        h0, h1 = _half_row_value(xk, 9)
        t0, t1 = _half_row_value(xk + 1 - 2 * ((d >> DIR_SHIFT) & 1), 3)
        objects.append(((d >> 4) & 15, h0 | t0, h1 | t1))

    # Half-row words of rows 0-9 as (10, 2, N) (envs innermost, so every op is vectorised
    # across envs): bitboard channels spread, objects added; row 9 holds the two gauges.
    rows = torch.arange(10, device=dev, dtype=I32)[:, None, None]  # (10, 1, 1)
    in_hi = rows >= 5
    shift = (10 * torch.where(in_hi, rows - 5, rows)).to(torch.int64) + torch.tensor(
        [0, 5], device=dev
    )[None, :, None]  # (10, 2, 1): first cell of the half row in its board word

    def board(lo: torch.Tensor, hi: torch.Tensor) -> torch.Tensor:
        return torch.where(in_hi, hi, lo)  # (10, 1, N)

    oxy = (1 << tenths(s.oxygen).to(torch.int64)) - 1  # columns 0..tenths-1
    dc = s.diver_count.clamp(0, 9).to(torch.int64)
    divers = ((1 << dc) - 1) << (9 - dc)  # columns 9-dc..8
    h = (
        (_spread(board(t_lo, t_hi), shift) << 3)
        | (_spread(board(b_lo, b_hi), shift) << 4)
        | (_spread(board(f_lo, f_hi), shift) << 5)
        | (_spread(board(s_lo, s_hi), shift) << 6)
    )  # (10, 2, N)
    objects.append((torch.full_like(s.sub_y, 9), *_gauge_halves(oxy, divers)))
    for y, h0, h1 in objects:
        h = h | torch.where(y == rows, torch.stack((h0, h1))[None], 0)
    # The observation of an env is the 1000-bit string of its half-row words (half row k at
    # bit 50 k); gather it into 64-bit words, then int32 output word j (bytes 4j..4j+3) is
    # nibble j % 16 of 64-bit word j // 16, spread into bytes (at most 2 sources per lane).
    half_rows = h.view(20, -1)
    flat = []
    for m in range(16):
        parts = []
        for k in range(20):
            d = 50 * k - 64 * m
            if -50 < d < 64:
                parts.append(half_rows[k] << d if d >= 0 else half_rows[k] >> -d)
        word = parts[0]
        for part in parts[1:]:
            word = word | part
        flat.append(word)
    flat = torch.stack(flat)  # (16, N) int64
    lo32 = (flat & 0xFFFFFFFF).to(I32).t()  # (N, 16): bits 64 m .. 64 m + 31
    hi32 = (flat >> 32).to(I32).t()  # bits 64 m + 32 .. 64 m + 63
    # Per lane (nibble) of a 64-bit word: its int32 half (-1 = low) and the shift in it.
    low = torch.tensor([-1 if q < 8 else 0 for q in range(16)], dtype=I32, device=dev)
    shift = torch.tensor([4 * (q % 8) for q in range(16)], dtype=I32, device=dev)

    def spread(a: torch.Tensor, b: torch.Tensor, lanes: int) -> torch.Tensor:
        m = low[:lanes]
        nib = (((a[..., None] & m) | (b[..., None] & ~m)) >> shift[:lanes]) & 15
        return (nib * 0x204081) & 0x01010101

    # Words 0-239 as (N, 15, 16) and 240-249; int32 tables, no bool loads.
    main = spread(lo32[:, :15], hi32[:, :15], 16).reshape(-1, 240)
    out = torch.cat((main, spread(lo32[:, 15], hi32[:, 15], 10)), dim=1)  # (N, 250) int32
    return out.view(torch.bool).view(-1, 10, 10, len(CHANNELS))


def _gauge_halves(oxy: torch.Tensor, divers: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Row 9's half-row words from the oxygen and diver gauges' 10-bit column masks."""
    zero = torch.zeros_like(oxy)
    h0 = (_spread(oxy, zero) << 7) | (_spread(divers, zero) << 8)
    h1 = (_spread(oxy, zero + 5) << 7) | (_spread(divers, zero + 5) << 8)
    return h0, h1


class Seaquest(MinAtarEnv):
    """MinAtar Seaquest (``-v0`` and ``-v1`` both have all 6 actions, as minatar)."""

    n_channels = len(CHANNELS)
    minimal_actions = (0, 1, 2, 3, 4, 5)

    def game_reset(self, params: MinAtarParams, rng: Rng) -> SeaquestState:
        """N new games (no random draws)."""
        return reset(params, rng)

    def game_step(
        self, params: MinAtarParams, state: SeaquestState, action: torch.Tensor, rng: Rng
    ) -> tuple[SeaquestState, torch.Tensor, torch.Tensor]:
        """One step; draws streams 1-5 (spawn decisions)."""
        return step(params, state, action, rng.bits(5))

    def game_observation(self, params: MinAtarParams, state: SeaquestState) -> torch.Tensor:
        """(N, 10, 10, 10) bool."""
        return observation(params, state)
