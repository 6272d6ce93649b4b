"""Batched MinAtar Seaquest.

Mirrors ``minatar/environments/seaquest.py`` (minatar 1.0.15, ``Env``): a two-cell submarine
shoots enemy fish and subs (+1 each), picks up divers, loses oxygen under water and surfaces
to refill it (with at least one diver on board; surfacing with 6 gives ``oxygen * 10 // 200``
extra reward); each surfacing ramps the difficulty (faster enemy spawns and moves). The game
ends on contact with a fish, sub or enemy bullet, when the oxygen runs out, or on surfacing
without divers. Channels: sub_front, sub_back, friendly_bullet, trail, enemy_bullet,
enemy_fish, enemy_sub, oxygen_guage, diver_guage, diver. All 6 actions are minimal.

Representation (for speed). The state is (N,) tensors only (a NamedTuple with tuples of
(N,) words for the object lists), int32 but for the int64 bitboards. The fish and subs are
*bit-sliced*: each field of the 32 enemy slots is a few (N,) int32 planes whose bit i
belongs to slot i (:class:`Enemies`), so one (N,) op updates a field of all 32 slots
(moves and timers are ripple-carry adds over the planes), a cell test is an AND of the
planes, and a reduction over the slots is a mask test: ``free & -free`` is the lowest free
slot, the enemy with the largest or smallest key among candidates is found by narrowing the
key's bits from the top (:func:`_first`). The step also leaves the bitboards of the fish and
subs and the rows' directions in the state (``fish_*``, ``sub_*``, ``right``, derived from
``en``; :func:`enemy_boards` computes them for a state built elsewhere), one test per cell
of the slots in its row against those in its column, so the observation needs no pass
over the slots. With the inductor options of its registry entry (fusion limit raised,
reused values realised early) the compiled step and observation are one loop over the
batch, plus one loop per env that spreads the observation's bits into bytes. Conditions
that select int64 values are computed from int64 values: an int32 mask applied to int64
values compiles to a conversion call inside the loop.

* Bullets and divers are packed int32 words, columns stored plus one (``X = x + 1``) so
  that a step off either edge gives ``X`` = 0 or 11 without borrowing from the next field;
  bits 0-7 (``X | y << 4``) are the object's cell key, compared in one instruction.
* Enemies (the reference's ``e_subs`` and ``e_fish``) have planes for ``alive``, ``X`` (4),
  row - 1 (3; rows 1-8), direction (1 = right), fish (0 = sub), move timer (3), shot timer
  (4) and age (7: steps since the spawn); free slots hold zeros (and ``alive`` 0).
  :func:`enemy_planes` and :func:`enemy_words` convert from and to one packed word per slot
  (``X | y << 4 | dir << 8 | timer << 9 | shot << 12 | age << 16 | fish << 23``, free =
  :data:`DEAD`), for states built elsewhere. Slots are not kept in list order (no
  compaction): each list's order is spawn order, and at most one enemy spawns per step, so
  the ages of live enemies are distinct and order them (older = earlier in the list).
  ``128 * fish + age`` is the priority key of both orderings the reference uses: a friendly
  bullet hits the *first* fish at its cell, else the first sub (the largest key; bullet 1
  goes first, then bullet 0 takes the largest key at its cell other than bullet 1's victim);
  in the enemy loops, moved enemies take the first remaining friendly bullet at their new
  cell, subs (in reverse order) before fish (in reverse order), i.e. the smallest key
  first. A new enemy takes the lowest free slot.
* Friendly bullets (``f_bullets``, capacity 2) and divers (``divers``, capacity 2) are two
  words each in list order (slot 0 first, a free slot is 0): ``X | y << 4 | dir << 8``, and
  for divers the move timer in bits 9-11. They are walked in reverse as the reference.
* ``e_bullets`` are never removed except off-screen and their order is never observed, so
  they are two 10x10 occupancy bitboards (moving left / right, ``*_lo`` rows 0-4 and
  ``*_hi`` rows 5-9, bit ``10 (y % 5) + x``); duplicates are equivalent. A step's new
  shots are gathered into one board and split by the direction of their row (see below).
* The observation is assembled as 64-bit words of the env's 1000-bit output (cell-major,
  bit ``100 y + 10 x + channel``), from 20 half-row words per env built with static row
  indices, and spread into bytes four at a time as int32 words that are viewed as the bool
  output.

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

The observation's trail channel and the split of new enemy shots use one direction per
row: the reference never spawns an enemy in a row holding an enemy that moves the other way,
so all enemies in the lists during a step (the shooters included) that share a row share a
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

from collections.abc import Sequence
from typing import NamedTuple

import torch

from gpuvec_envs.core.constants import table
from gpuvec_envs.core.env import select
from gpuvec_envs.core.rng import Rng, below, scale
from gpuvec_envs.envs.minatar._common import COL0, COL9, ROW, WORD, MinAtarEnv, MinAtarParams

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
FISH_SHIFT = 23
FISH = 1 << FISH_SHIFT
#: A free slot in the packed enemy words of :func:`enemy_words` (cell (X, y) = (15, 15)).
DEAD = CELL | TIMER | FISH


class Enemies(NamedTuple):
    """The fish and subs as bit planes: bit i of every (N,) int32 word belongs to slot i.

    A field of ``b`` bits is ``b`` planes, least significant first. Free slots hold zeros.
    """

    alive: torch.Tensor  # the slot holds an enemy
    x: tuple[torch.Tensor, ...]  # 4 planes of X = column + 1 (0 or 11: just left the screen)
    row: tuple[torch.Tensor, ...]  # 3 planes of row - 1 (enemies are in rows 1-8)
    moves_right: torch.Tensor  # direction, 1 = right
    fish: torch.Tensor  # a fish (else a sub)
    timer: tuple[torch.Tensor, ...]  # 3 planes of the move timer [steps]
    shot: tuple[torch.Tensor, ...]  # 4 planes of the shot timer [steps]
    age: tuple[torch.Tensor, ...]  # 7 planes of the steps since the spawn


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
    en: Enemies  # the fish and subs, 32 slots as bit planes
    eb_l_lo: torch.Tensor  # int64 enemy bullets moving left, rows 0-4
    eb_l_hi: torch.Tensor  # int64 enemy bullets moving left, rows 5-9
    eb_r_lo: torch.Tensor  # int64 enemy bullets moving right, rows 0-4
    eb_r_hi: torch.Tensor  # int64 enemy bullets moving right, rows 5-9
    # Derived from ``en`` by the step (so the observation needs no pass over the slots):
    fish_lo: torch.Tensor  # int64 bitboard of the fish, rows 0-4
    fish_hi: torch.Tensor  # int64 bitboard of the fish, rows 5-9
    sub_lo: torch.Tensor  # int64 bitboard of the enemy subs, rows 0-4
    sub_hi: torch.Tensor  # int64 bitboard of the enemy subs, rows 5-9
    right: torch.Tensor  # int32 bit y set: the enemies of row y move right (any: no enemy)


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
        en=Enemies(z, (z,) * 4, (z,) * 3, z, z, (z,) * 3, (z,) * 4, (z,) * 7),
        eb_l_lo=z64, eb_l_hi=z64, eb_r_lo=z64, eb_r_hi=z64,
        fish_lo=z64, fish_hi=z64, sub_lo=z64, sub_hi=z64, right=z,
    )  # fmt: skip


def _step_x(word: torch.Tensor) -> torch.Tensor:
    """+1 or -1 by the direction bit of packed words."""
    return ((word >> (DIR_SHIFT - 1)) & 2) - 1


def _tree(xs: list[torch.Tensor], op) -> torch.Tensor:  # noqa: ANN001
    """Reduce (N,) tensors with an elementwise ``op`` as a balanced tree (pairwise)."""
    xs = list(xs)
    while len(xs) > 1:
        nxt = [op(a, b) for a, b in zip(xs[::2], xs[1::2], strict=False)]
        if len(xs) % 2:
            nxt.append(xs[-1])
        xs = nxt
    return xs[0]


def _bit_masks(value: torch.Tensor, bits: int) -> list[torch.Tensor]:
    """All-ones / zero (N,) int32 masks of bits ``0 .. bits - 1`` of the (N,) int32 ``value``."""
    return [-((value >> b) & 1) for b in range(bits)]


def _equal(planes: Sequence[torch.Tensor], value: torch.Tensor | int) -> torch.Tensor:
    """Slots whose field (its bit planes) equals ``value``, (N,) int32 or a constant."""
    out = None
    for b, p in enumerate(planes):
        if isinstance(value, int):
            term = p if (value >> b) & 1 else ~p
        else:
            term = p ^ (((value >> b) & 1) - 1)  # p where the bit is 1, ~p where it is 0
        out = term if out is None else out & term
    return out


def _at(
    en: Enemies, x1: torch.Tensor, y: torch.Tensor, ok: torch.Tensor | None = None
) -> torch.Tensor:
    """Live slots at ``X = x1``, row ``y`` ((N,) int32 each), only where ``ok`` (bool)."""
    ok = (y >= 1) & (y <= 8) if ok is None else ok & (y >= 1) & (y <= 8)
    return en.alive & _equal(en.x, x1) & _equal(en.row, y - 1) & -ok.to(I32)


def _first(cands: torch.Tensor, en: Enemies, largest: bool) -> torch.Tensor:
    """The slot (one bit, or 0 if none) of the largest or smallest key among ``cands``.

    The key is ``128 fish + age`` (distinct for live enemies); its bits are narrowed from the
    most significant down.
    """
    for p in (en.fish, *reversed(en.age)):
        t = cands & (p if largest else ~p)
        cands = torch.where(t != 0, t, cands)
    return cands


def _keep(en: Enemies, slots: torch.Tensor) -> Enemies:
    """``en`` with every plane cleared outside ``slots`` (free slots hold zeros)."""
    fields = (f & slots if isinstance(f, torch.Tensor) else tuple(p & slots for p in f) for f in en)
    return Enemies(*fields)


def _decrement(planes: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Every slot's field minus one (wrapping)."""
    out, borrow = [], None
    for p in planes:
        out.append(~p if borrow is None else p ^ borrow)
        borrow = ~p if borrow is None else borrow & ~p
    return out


def _increment(planes: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Every slot's field plus one (wrapping)."""
    out, carry = [], None
    for p in planes:
        out.append(~p if carry is None else p ^ carry)
        carry = p if carry is None else carry & p
    return out


def _compact2(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Two list slots (0 = free) -> the same list with slot 0 filled first."""
    full = a != 0
    return torch.where(full, a, b), torch.where(full, b, 0)


def step(
    params: MinAtarParams, s: SeaquestState, action: torch.Tensor, words: tuple[torch.Tensor, ...]
) -> tuple[SeaquestState, torch.Tensor, torch.Tensor]:
    """One step of the reference's ``act`` on full actions (N,) int64 0..5.

    Args:
        params: Options.
        s: State.
        action: (N,) int64 full action indices.
        words: 5 (N,) int32 random bits (streams 1-5 of the step, ``Rng.bits32``).

    Returns:
        ``(state, reward (N,) int32, terminal (N,) bool)``; finished games are frozen.
    """
    ms = s.move_speed
    action = action.to(I32)
    en = s.en

    # -- enemy spawn ------------------------------------------------------------------------
    spawn_e = s.e_spawn_timer == 0
    lr = below(words[0], 1 / 2).to(I32)
    fish = (~below(words[1], 1 / 3)).to(I32)
    row = 1 + scale(words[2], 8)
    d_lr = below(torch.where(spawn_e, words[3], words[0]), 1 / 2).to(I32)
    d_row = 1 + scale(torch.where(spawn_e, words[4], words[1]), 8)
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

    fb = [torch.where(b != 0, b + _step_x(b), 0) for b in fb]

    # A new enemy takes the lowest free slot, unless an enemy of its row moves the other way.
    other_way = en.moves_right ^ -lr
    blocked = (en.alive & other_way & _equal(en.row, row - 1)) != 0
    free = ~en.alive
    slot = torch.where(spawn_e & ~blocked, free & -free, 0)
    keep = ~slot

    def put(planes: Sequence[torch.Tensor], value: torch.Tensor | int) -> tuple[torch.Tensor, ...]:
        if isinstance(value, int):
            return tuple(p | slot if (value >> b) & 1 else p & keep for b, p in enumerate(planes))
        masks = _bit_masks(value, len(planes))
        return tuple((p & keep) | (slot & m) for p, m in zip(planes, masks, strict=True))

    en = Enemies(
        alive=en.alive | slot,
        x=put(en.x, 10 - 9 * lr),
        row=put(en.row, row - 1),
        moves_right=(en.moves_right & keep) | (slot & -lr),
        fish=(en.fish & keep) | (slot & -fish),
        timer=put(en.timer, ms),
        shot=put(en.shot, ENEMY_SHOT_INTERVAL),
        age=put(en.age, 0),
    )

    # Friendly bullets, in reverse order: bullet 1 hits the largest key at its cell (the
    # first fish, else the first sub), bullet 0 the largest other one at its cell.
    onscreen = [((b & 15) >= 1) & ((b & 15) <= 10) for b in fb]
    at = [_at(en, b & 15, (b >> 4) & 15, ok) for b, ok in zip(fb, onscreen, strict=True)]
    victim1 = _first(at[1], en, largest=True)
    victim0 = _first(at[0] & ~victim1, en, largest=True)
    en = en._replace(alive=en.alive & ~(victim0 | victim1))
    reward = (victim0 != 0).to(I32) + (victim1 != 0).to(I32)
    for k, victim in ((0, victim0), (1, victim1)):
        fb[k] = torch.where(onscreen[k] & (victim == 0), fb[k], 0)
    fb = list(_compact2(*fb))

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

    # Enemies move (their move timer at 0), may leave the screen, crash into the sub (before
    # or after moving), reload and shoot (subs), then take the first remaining friendly
    # bullet at their new cell: subs (in reverse order) before fish (in reverse order), i.e.
    # the smallest key first.
    alive = en.alive
    crash = _at(en, sub_x + 1, sub_y)
    move = alive & ~(en.timer[0] | en.timer[1] | en.timer[2])
    timer = tuple(
        (p & ~move) | (move & m)
        for p, m in zip(_decrement(en.timer), _bit_masks(ms, 3), strict=True)
    )
    right_, left_ = move & en.moves_right, move & ~en.moves_right
    x = []
    for p in en.x:  # X + 1 where moving right, X - 1 where moving left
        x.append(p ^ right_ ^ left_)
        right_, left_ = right_ & p, left_ & ~p
    en = en._replace(x=tuple(x), timer=timer)
    out = alive & (_equal(en.x, 0) | _equal(en.x, 11))
    crashed = _at(en, sub_x + 1, sub_y)
    checks = move & ~out & ~crashed
    reload = ~(en.shot[0] | en.shot[1] | en.shot[2] | en.shot[3])
    shooters = alive & ~en.fish & reload & ~out
    shot = _decrement(en.shot)  # reload: 10 = 0b1010
    shot = (shot[0] & ~reload, shot[1] | reload, shot[2] & ~reload, shot[3] | reload)
    en = en._replace(shot=shot)
    term = (crash | crashed) != 0
    ok = [b != 0 for b in fb]
    take0 = _first(_at(en, fb[0] & 15, (fb[0] >> 4) & 15, ok[0]) & checks, en, largest=False)
    cands1 = _at(en, fb[1] & 15, (fb[1] >> 4) & 15, ok[1]) & checks & ~take0
    take1 = _first(cands1, en, largest=False)
    left = alive & ~out & ~take0 & ~take1
    reward = reward + (take0 != 0).to(I32) + (take1 != 0).to(I32)
    fb = _compact2(torch.where(take0 != 0, 0, fb[0]), torch.where(take1 != 0, 0, fb[1]))

    # Bitboards of the moved enemies: the new enemy shots, split by the direction of their
    # row (all enemies of a row share one, module docstring), and the fish and subs still
    # in the lists (the next state's boards for the observation).
    rows = _row_sets(en)
    shot_lo, shot_hi, fish_lo, fish_hi, sub_lo, sub_hi = _boards(
        en, rows, shooters, left & en.fish, left & ~en.fish
    )
    right = _right_rows(en, rows, alive)
    age = _increment(en.age)
    en_next = _keep(en._replace(alive=left, age=tuple(age)), left)
    right_lo, right_hi = _row_masks(right)
    l_lo, l_hi = s.eb_l_lo | (shot_lo & ~right_lo), s.eb_l_hi | (shot_hi & ~right_hi)
    r_lo, r_hi = s.eb_r_lo | (shot_lo & right_lo), s.eb_r_hi | (shot_hi & right_hi)
    at_lo, at_hi = cell_bits(sub_y, sub_x)
    hit = ((l_lo | r_lo) & at_lo) | ((l_hi | r_hi) & at_hi)
    l_lo, l_hi = (l_lo >> 1) & ~COL9, (l_hi >> 1) & ~COL9
    r_lo, r_hi = (r_lo << 1) & (WORD & ~COL0), (r_hi << 1) & (WORD & ~COL0)
    hit = hit | ((l_lo | r_lo) & at_lo) | ((l_hi | r_hi) & at_hi)
    term = term | (hit != 0)

    e_spawn_timer = e_spawn_timer - (e_spawn_timer > 0).to(I32)
    d_spawn_timer = d_spawn_timer - (d_spawn_timer > 0).to(I32)
    shot_timer = shot_timer - (shot_timer > 0).to(I32)
    term = term | (s.oxygen <= 0)
    submerged = sub_y > 0
    oxygen = torch.where(submerged, s.oxygen - 1, s.oxygen)
    arrive = ~submerged & (s.surface == 0)
    term = term | (arrive & (diver_count == 0))
    surf = arrive & (diver_count != 0)
    full = surf & (diver_count == MAX_DIVERS)
    reward = reward + torch.where(full, tenths(oxygen), 0)
    diver_count = torch.where(full, 0, diver_count)
    oxygen = torch.where(surf, MAX_OXYGEN, oxygen)
    diver_count = diver_count - surf.to(I32)
    surface = torch.where(submerged, 0, s.surface | surf.to(I32))
    spawn_speed = s.e_spawn_speed
    ramp = surf & ((spawn_speed > 1) | (ms > 2)) & params.difficulty_ramping
    move_speed = ms - (ramp & (ms > 2) & ((s.ramp_index & 1) == 1)).to(I32)
    spawn_speed = spawn_speed - (ramp & (spawn_speed > 1)).to(I32)
    ramp_index = s.ramp_index + ramp.to(I32)

    nxt = SeaquestState(
        oxygen, diver_count, sub_x, sub_y, sub_or, spawn_speed, e_spawn_timer, d_spawn_timer,
        move_speed, ramp_index, shot_timer, surface, term.to(I32),
        tuple(fb), tuple(dv), en_next, l_lo, l_hi, r_lo, r_hi,
        fish_lo, fish_hi, sub_lo, sub_hi, right,
    )  # fmt: skip
    done = s.terminal != 0
    nxt = select(done, s, nxt)
    reward = torch.where(done, 0, reward)
    return nxt, reward, nxt.terminal != 0


def _row_sets(en: Enemies) -> list[torch.Tensor]:
    """The slots (any, live or not) in rows 1..8."""
    return [_equal(en.row, y - 1) for y in range(1, 9)]


def _boards(
    en: Enemies, rows: Sequence[torch.Tensor], *sets: torch.Tensor
) -> tuple[torch.Tensor, ...]:
    """Bitboards ``(lo, hi)`` (int64, layout of :func:`cell_bits`) of the cells of each slot set.

    ``rows`` are :func:`_row_sets`. A cell's bit is one test of the set's slots in its row
    against the slots in its column, ORed into one of three int32 words (rows 1-3, 4-6, 7-8;
    bit ``10 (y - 1 - 3 j) + x``) that are widened into ``(lo, hi)`` once at the end.
    """
    cols = [_equal(en.x, x + 1) for x in range(10)]
    out = []
    for slots in sets:
        words = [torch.zeros_like(slots) for _ in range(3)]
        for y in range(1, 9):
            j = (y - 1) // 3
            in_row = slots & rows[y - 1]
            for x, col in enumerate(cols):
                w, bit = words[j], 1 << (10 * (y - 1 - 3 * j) + x)
                words[j] = torch.where((in_row & col) != 0, w | bit, w)
        w0, w1, w2 = (w.to(torch.int64) for w in words)
        out += [(w0 << 10) | ((w1 & ROW) << 40), (w1 >> 10) | (w2 << 20)]
    return tuple(out)


def _right_rows(en: Enemies, rows: Sequence[torch.Tensor], present: torch.Tensor) -> torch.Tensor:
    """(N,) int32 with bit y set where a ``present`` enemy of row y moves right."""
    right = present & en.moves_right
    out = torch.zeros_like(present)
    for y in range(1, 9):
        out = torch.where((right & rows[y - 1]) != 0, out | (1 << y), out)
    return out


def enemy_boards(en: Enemies) -> tuple[torch.Tensor, ...]:
    """The derived fields ``(fish_lo, fish_hi, sub_lo, sub_hi, right)`` of the enemies ``en``.

    For states built outside the step (e.g. injected from the reference).
    """
    rows = _row_sets(en)
    boards = _boards(en, rows, en.alive & en.fish, en.alive & ~en.fish)
    return (*boards, _right_rows(en, rows, en.alive))


def enemy_planes(words: Sequence[torch.Tensor]) -> Enemies:
    """:class:`Enemies` from packed enemy words (one (N,) int32 per slot, :data:`DEAD` = free).

    A word is ``X | y << 4 | dir << 8 | timer << 9 | shot << 12 | age << 16 | fish << 23``
    (``X`` = column + 1), the format of :func:`enemy_words`; for states built elsewhere.
    """
    assert len(words) == ENEMY_SLOTS
    live = [(w != DEAD).to(torch.int64) for w in words]

    def planes(shift: int, bits: int, offset: int = 0) -> tuple[torch.Tensor, ...]:
        acc = [torch.zeros_like(live[0]) for _ in range(bits)]
        for i, (w, alive) in enumerate(zip(words, live, strict=True)):
            value = ((w >> shift) & ((1 << bits) - 1)) - offset
            for b in range(bits):
                acc[b] |= (((value >> b) & 1) * alive) << i
        return tuple(a.to(I32) for a in acc)  # wraps bit 31 into the sign

    return Enemies(
        alive=sum(alive << i for i, alive in enumerate(live)).to(I32),
        x=planes(0, 4),
        row=planes(4, 3, offset=1),
        moves_right=planes(DIR_SHIFT, 1)[0],
        fish=planes(FISH_SHIFT, 1)[0],
        timer=planes(TIMER_SHIFT, 3),
        shot=planes(SHOT_SHIFT, 4),
        age=planes(AGE_SHIFT, 7),
    )


def enemy_words(en: Enemies) -> tuple[torch.Tensor, ...]:
    """The packed enemy word of every slot (:data:`DEAD` if free); see :func:`enemy_planes`."""

    def field(planes: Sequence[torch.Tensor], i: int) -> torch.Tensor:
        return sum(((p >> i) & 1) << b for b, p in enumerate(planes))

    out = []
    for i in range(ENEMY_SLOTS):
        word = field(en.x, i) | ((field(en.row, i) + 1) << 4)
        word = word | (field([en.moves_right], i) << DIR_SHIFT)
        word = word | (field(en.timer, i) << TIMER_SHIFT) | (field(en.shot, i) << SHOT_SHIFT)
        word = word | (field(en.age, i) << AGE_SHIFT) | (field([en.fish], i) << FISH_SHIFT)
        out.append(torch.where(((en.alive >> i) & 1) == 1, word, DEAD))
    return tuple(out)


def _row_masks(dirs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Bitboard words ``(lo, hi)`` (int64) of the rows y whose bit y is set in int32 ``dirs``."""
    dirs = dirs.to(torch.int64)  # int64 masks for int64 values (module docstring)
    lo = hi = torch.zeros_like(dirs)
    for y in range(1, 9):
        mask = torch.where(((dirs >> y) & 1) == 1, ROW << (10 * (y % 5)), 0)
        if y < 5:
            lo = lo | mask
        else:
            hi = hi | mask
    return lo, hi


def cell_bits(y: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Bitboard words ``(lo, hi)`` (int64) of cells (row y in 0..9, column x), same shapes.

    A column outside 0..9 gives no cell (zeros).
    """
    y, x = y.to(torch.int64), x.to(torch.int64)
    ok = (x >= 0) & (x <= 9)
    lo = y < 5
    bit = torch.where(ok, 1, 0) << torch.where(ok, 10 * torch.where(lo, y, y - 5) + x, 0)
    return torch.where(lo, bit, 0), torch.where(lo, 0, bit)


def tenths(oxygen: torch.Tensor) -> torch.Tensor:
    """``max(oxygen, 0) * 10 // MAX_OXYGEN`` for oxygen <= MAX_OXYGEN, by comparisons.

    (Integer ``//`` and ``%`` compile to scalar code; comparisons vectorise.)
    """
    out = torch.zeros_like(oxygen)
    for k in range(1, 11):
        out = out + (oxygen >= k * MAX_OXYGEN // 10).to(oxygen.dtype)
    return out


#: ``((b & 7) * _MUL3) & _MASK3`` moves bit i of a 3-bit b to bit 10 i (the nine partial
#: products land on distinct bits, so there are no carries); the same for 2 bits.
_MUL3, _MASK3 = 1 | 1 << 9 | 1 << 18, 1 | 1 << 10 | 1 << 20
_MUL2, _MASK2 = 1 | 1 << 9, 1 | 1 << 10
_ROWS30 = (1 << 30) - 1  # three rows of a bitboard word


def _row_words(lo: torch.Tensor, hi: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """A bitboard ``(lo, hi)`` (int64) as four int32 words of rows 0-2, 3-4, 5-7 and 8-9.

    Row ``r`` is at bit ``10 (r - first row of its word)``. The only int64 right shifts of
    the observation are here (AVX2 has none; ATen emulates them).
    """
    return (
        (lo & _ROWS30).to(I32),
        (lo >> 30).to(I32),
        (hi & _ROWS30).to(I32),
        (hi >> 30).to(I32),
    )


def _spread_cells(word: torch.Tensor, shift: int, channel: int) -> tuple[torch.Tensor, ...]:
    """Cells ``shift .. shift + 4`` of a row word (int32) as the bits of their channel.

    Returns ``(a, b)``: cells 0-2 at bits ``channel + 10 i`` of ``a``, cells 3-4 at bits
    ``channel + 10 i`` of ``b`` (i counted from cell 3); int32 multiplies, which AVX2 has.
    """
    a = (((word >> shift) & 7) * (_MUL3 << channel)) & (_MASK3 << channel)
    b = (((word >> (shift + 3)) & 3) * (_MUL2 << channel)) & (_MASK2 << channel)
    return a, b


def _lane_shifts() -> list[int]:
    """Shift of nibble lane ``q`` (0-15) inside its int32 half of a 64-bit word."""
    return [4 * (q % 8) for q in range(16)]


def observation(params: MinAtarParams, s: SeaquestState) -> torch.Tensor:
    """(N, 10, 10, 10) uint8 0/1 observation, channels as :data:`CHANNELS`.

    The observation of an env is the 1000-bit string ``bit 100 y + 10 x + channel`` (cell
    major), built as 32 int32 words, every op a (N,) op. Every channel but the gauges is a
    bitboard (the sub's front and back, the friendly bullets, the trails of the fish, subs
    and divers, the enemy bullets, fish, subs and divers; rows 0-8, those of the enemies
    and divers rows 1-8), split into int32 words of whole rows; five cells of a row (half
    a row: 50 bits of the string) are spread to their bits by two int32 multiplications
    (cells 0-2, 30 bits, and cells 3-4, 20 bits): cheaper than selecting the row of each
    object. Row 9 holds the two gauges. Each 30- or 20-bit piece is shifted into the one
    or two string words it overlaps. Pairs of string words (a 64-bit word) have their
    nibbles spread into bytes and stored as int32 words, which are viewed as the bool
    output (compiled bool/uint8 stores are written byte by byte; an int32 -> bool view is
    free). Everything after the bitboards is int32: AVX2 has no 64-bit multiply or
    arithmetic right shift.
    """
    e_lo, e_hi = s.fish_lo | s.sub_lo, s.fish_hi | s.sub_hi
    right_lo, right_hi = _row_masks(s.right)  # rows whose enemies move right
    t_lo = (((e_lo & right_lo) >> 1) & ~COL9) | (((e_lo & ~right_lo) << 1) & (WORD & ~COL0))
    t_hi = (((e_hi & right_hi) >> 1) & ~COL9) | (((e_hi & ~right_hi) << 1) & (WORD & ~COL0))
    back = s.sub_x + 1 - 2 * s.sub_or  # wraps modulo 10 (never needed from a reset)
    back = torch.where(back < 0, 9, torch.where(back > 9, 0, back))
    bullets = [cell_bits((b >> 4) & 15, (b & 15) - 1) for b in s.fb]  # free: x = -1
    divers = []
    for d in s.dv:
        x, y = torch.where(d != 0, (d & 15) - 1, -9), (d >> 4) & 15  # free: off the board
        divers.append(cell_bits(y, x))
        trail = cell_bits(y, x + 1 - 2 * ((d >> DIR_SHIFT) & 1))
        t_lo, t_hi = t_lo | trail[0], t_hi | trail[1]
    # (channel, row words) of the bitboards of row 0, then of rows 1-8
    top = (
        (0, _row_words(*cell_bits(s.sub_y, s.sub_x))),
        (1, _row_words(*cell_bits(s.sub_y, back))),
        (2, _row_words(bullets[0][0] | bullets[1][0], bullets[0][1] | bullets[1][1])),
    )
    boards = (
        *top,
        (3, _row_words(t_lo, t_hi)),
        (4, _row_words(s.eb_l_lo | s.eb_r_lo, s.eb_l_hi | s.eb_r_hi)),
        (5, _row_words(s.fish_lo, s.fish_hi)),
        (6, _row_words(s.sub_lo, s.sub_hi)),
        (9, _row_words(divers[0][0] | divers[1][0], divers[0][1] | divers[1][1])),
    )
    one = torch.ones_like(s.oxygen)
    oxy = (one << tenths(s.oxygen)) - 1  # columns 0..tenths-1
    dc = s.diver_count.clamp(0, 9)
    gauge = ((one << dc) - 1) << (9 - dc)  # columns 9-dc..8
    first_row = (0, 3, 5, 8)  # of each row word

    pieces = []  # (string bit, width, int32 piece)
    for y in range(10):
        for half in range(2):
            if y == 9:
                spread = [_spread_cells(oxy, 5 * half, 7), _spread_cells(gauge, 5 * half, 8)]
            else:
                w = 0 if y < 3 else 1 if y < 5 else 2 if y < 8 else 3
                shift = 10 * (y - first_row[w]) + 5 * half
                spread = [
                    _spread_cells(words[w], shift, c) for c, words in (top if y == 0 else boards)
                ]
            start = 100 * y + 50 * half
            pieces.append((start, 30, _tree([a for a, _ in spread], torch.bitwise_or)))
            pieces.append((start + 30, 20, _tree([b for _, b in spread], torch.bitwise_or)))
    # String word m holds bits 32 m .. 32 m + 31.
    string = []
    for m in range(32):
        parts = []
        for start, width, piece in pieces:
            d = start - 32 * m
            if -width < d < 32:
                parts.append(piece << d if d >= 0 else piece >> -d)
        string.append(_tree(parts, torch.bitwise_or))
    # Env-major (N, 16): the byte-spread loop reads an env's 16 words. Rows of a (16, N)
    # stack are 4 N bytes apart, a multiple of 4 KiB when N is a multiple of 1024, so an
    # env's 16 words sat in one set of the 8-way L1 cache and evicted each other; the batch
    # loop's strided stores into (N, 16) cost less.
    lo32 = torch.stack(string[0::2], dim=1)  # (N, 16): bits 64 m .. 64 m + 31
    hi32 = torch.stack(string[1::2], dim=1)  # bits 64 m + 32 .. 64 m + 63
    # Per lane (nibble) q of a 64-bit word: its int32 half (low for q < 8, selected by a
    # compare, which compiles to fewer instructions than masking) and the shift in it.
    dev = s.sub_x.device
    lane = torch.arange(16, dtype=I32, device=dev)
    shift = table(_lane_shifts, dtype=I32, like=lane)

    def spread(a: torch.Tensor, b: torch.Tensor, lanes: int) -> torch.Tensor:
        half = torch.where(lane[:lanes] < 8, a[..., None], b[..., None])
        nib = (half >> shift[:lanes]) & 15
        return (nib * 0x204081) & 0x01010101

    # Words 0-239 as (N, 15, 16) and 240-249; int32 tables, no bool loads.
    main = spread(lo32[:, :15], hi32[:, :15], 16).reshape(-1, 240)
    out = torch.cat((main, spread(lo32[:, 15], hi32[:, 15], 10)), dim=1)  # (N, 250) int32
    return out.view(torch.uint8).view(-1, 10, 10, len(CHANNELS))


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
        return step(params, state, action, rng.columns(5, "bits32"))

    def game_observation(self, params: MinAtarParams, state: SeaquestState) -> torch.Tensor:
        """(N, 10, 10, 10) uint8 0/1 (bool to users)."""
        return observation(params, state)
