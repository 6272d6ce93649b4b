"""Batched MinAtar Seaquest.

Mirrors ``minatar/environments/seaquest.py`` (minatar 1.0.15, ``Env``): a two-cell submarine
shoots enemy fish and subs (+1 each), picks up divers, loses oxygen under water and surfaces
to refill it (with at least one diver on board; surfacing with 6 gives ``oxygen * 10 // 200``
extra reward); each surfacing ramps the difficulty (faster enemy spawns and moves). The game
ends on contact with a fish, sub or enemy bullet, when the oxygen runs out, or on surfacing
without divers. Channels: sub_front, sub_back, friendly_bullet, trail, enemy_bullet,
enemy_fish, enemy_sub, oxygen_guage, diver_guage, diver. All 6 actions are minimal.

Lists as slots. The reference keeps Python lists (``f_bullets``, ``e_bullets``, ``e_fish``,
``e_subs``, ``divers``) that it walks in reverse while removing from them. Here each is a
fixed-capacity slot array kept compacted in list order (slot ``k`` = list index ``k``, the
first ``n`` slots in use); removals during a step clear an ``alive`` mask and the slots are
compacted (order kept) at the end of the step, which reproduces the reference's order:

* ``f_bullets`` (capacity 2) and ``divers`` (capacity 2) are walked slot by slot in reverse,
  exactly as the reference.
* Fish and subs share one slot array of capacity :data:`ENEMY_SLOTS` with a ``sub`` flag
  (each kind keeps its own list order; how the two interleave never matters). A friendly
  bullet hits the *first* fish at its cell, else the first sub. In the enemy loops, moved
  enemies take the first remaining bullet at their new cell, subs (in reverse order) before
  fish (in reverse order); with at most 2 bullets this is computed with two masked maxima of
  the processing key ``slot + ENEMY_SLOTS * is_sub`` instead of a sequential loop.
* ``e_bullets`` are never removed except off-screen and their order is never observed, so
  they are two 10x10 occupancy bitboards (moving left / right); duplicates are equivalent.

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
  3 + 15 = 18 or 4 + 0 = 4 enemies.

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
from gpuvec_envs.envs._minatar import COL0, COL9, WORD, MinAtarEnv, MinAtarParams

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
#: Slots of the combined fish + sub list (bound proved in the module docstring).
ENEMY_SLOTS = 32
#: Slots of the friendly-bullet and diver lists.
BULLET_SLOTS = 2
DIVER_SLOTS = 2


class SeaquestState(NamedTuple):
    """Batched Seaquest state. Positions are grid cells: x = column, y = row (0 = top).

    Slot arrays are compacted: the first ``*_n`` slots hold the list in the reference's order,
    unused slots are 0. Directions are 1 = right (the reference's ``True``), 0 = left.
    """

    oxygen: torch.Tensor  # (N,) int64 [steps] left (may end at -1 on the final step)
    diver_count: torch.Tensor  # (N,) int64 divers on board (-1 and below after a full surfacing)
    sub_x: torch.Tensor  # (N,) int64 [col]
    sub_y: torch.Tensor  # (N,) int64 [row] 0..8
    sub_or: torch.Tensor  # (N,) int64 facing 1 = right, 0 = left
    e_spawn_speed: torch.Tensor  # (N,) int64 [steps] enemy spawn interval
    e_spawn_timer: torch.Tensor  # (N,) int64 [steps] until an enemy spawns
    d_spawn_timer: torch.Tensor  # (N,) int64 [steps] until a diver spawns
    move_speed: torch.Tensor  # (N,) int64 [steps] enemy move timer reload
    ramp_index: torch.Tensor  # (N,) int64 difficulty ramps so far
    shot_timer: torch.Tensor  # (N,) int64 [steps] sub's cool-down
    surface: torch.Tensor  # (N,) int64 1 = the sub has surfaced and not dived since
    terminal: torch.Tensor  # (N,) int64 1 = game over
    fb_x: torch.Tensor  # (N, 2) int64 friendly bullets [col]
    fb_y: torch.Tensor  # (N, 2) int64 [row]
    fb_dir: torch.Tensor  # (N, 2) int64 1 = right
    fb_n: torch.Tensor  # (N,) int64 bullets in use
    en_x: torch.Tensor  # (N, 32) int64 fish and subs [col]
    en_y: torch.Tensor  # (N, 32) int64 [row]
    en_dir: torch.Tensor  # (N, 32) int64 1 = right
    en_sub: torch.Tensor  # (N, 32) int64 1 = sub, 0 = fish
    en_timer: torch.Tensor  # (N, 32) int64 [steps] until the next move
    en_shot: torch.Tensor  # (N, 32) int64 [steps] until a sub shoots (fish: unused, 10)
    en_n: torch.Tensor  # (N,) int64 enemies in use
    dv_x: torch.Tensor  # (N, 2) int64 divers [col]
    dv_y: torch.Tensor  # (N, 2) int64 [row]
    dv_dir: torch.Tensor  # (N, 2) int64 1 = right
    dv_timer: torch.Tensor  # (N, 2) int64 [steps] until the next move
    dv_n: torch.Tensor  # (N,) int64 divers in use
    # Enemy bullets as bitboards: bit 10 (y % 5) + x, rows 0-4 in ``*_lo``, 5-9 in ``*_hi``.
    eb_l_lo: torch.Tensor  # (N,) int64 bullets moving left, rows 0-4
    eb_l_hi: torch.Tensor  # (N,) int64 bullets moving left, rows 5-9
    eb_r_lo: torch.Tensor  # (N,) int64 bullets moving right, rows 0-4
    eb_r_hi: torch.Tensor  # (N,) int64 bullets moving right, rows 5-9


def reset(params: MinAtarParams, rng: Rng) -> SeaquestState:
    """N new games: sub at the surface, column 5, facing left; no objects (no draws)."""
    n, dev = rng.num_envs, rng.device
    z = torch.zeros(n, dtype=torch.int64, device=dev)
    z2 = torch.zeros(n, BULLET_SLOTS, dtype=torch.int64, device=dev)
    ze = torch.zeros(n, ENEMY_SLOTS, dtype=torch.int64, device=dev)
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
        fb_x=z2, fb_y=z2, fb_dir=z2, fb_n=z,
        en_x=ze, en_y=ze, en_dir=ze, en_sub=ze, en_timer=ze, en_shot=ze, en_n=z,
        dv_x=z2, dv_y=z2, dv_dir=z2, dv_timer=z2, dv_n=z,
        eb_l_lo=z, eb_l_hi=z, eb_r_lo=z, eb_r_hi=z,
    )  # fmt: skip


def _compact2(alive: list[torch.Tensor], fields: list[list[torch.Tensor]]):
    """Compact a 2-slot list: ``alive`` [(N,) bool] * 2, ``fields`` of [(N,)] * 2 each.

    Returns ``(fields as (N, 2) tensors, count (N,) int64)``, unused slots 0.
    """
    a0, a1 = alive
    both = a0 & a1
    out = []
    for f0, f1 in fields:
        s0 = torch.where(a0, f0, torch.where(a1, f1, 0))
        s1 = torch.where(both, f1, 0)
        out.append(torch.stack((s0, s1), dim=1))
    return out, a0.long() + a1.long()


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
        ``(state, reward (N,) int64, terminal (N,) bool)``; finished games are frozen.
    """
    dev = action.device
    slots = torch.arange(ENEMY_SLOTS, device=dev)[None, :]
    reward = torch.zeros_like(s.oxygen)
    term = torch.zeros_like(s.terminal, dtype=torch.bool)
    ms = s.move_speed

    # -- spawns ---------------------------------------------------------------------------
    alive = slots < s.en_n[:, None]
    spawn_e = s.e_spawn_timer == 0
    lr = (words[:, 0] >> 8) < (1 << 23)  # rand() < 1/2
    is_sub = ((words[:, 1] >> 8) * 3) < (1 << 24)  # rand() < 1/3, exactly
    row = 1 + ((words[:, 2] * 8) >> 32)  # randint(1, 9)
    lr_i = lr.long()
    blocked = (alive & (s.en_y == row[:, None]) & (s.en_dir != lr_i[:, None])).any(dim=1)
    new = (spawn_e & ~blocked)[:, None] & (slots == s.en_n[:, None])
    en_x = torch.where(new, torch.where(lr, 0, 9)[:, None], s.en_x)
    en_y = torch.where(new, row[:, None], s.en_y)
    en_dir = torch.where(new, lr_i[:, None], s.en_dir)
    en_sub = torch.where(new, is_sub.long()[:, None], s.en_sub)
    en_timer = torch.where(new, ms[:, None], s.en_timer)
    en_shot = torch.where(new, ENEMY_SHOT_INTERVAL, s.en_shot)
    alive = alive | new
    e_spawn_timer = torch.where(spawn_e, s.e_spawn_speed, s.e_spawn_timer)

    spawn_d = s.d_spawn_timer == 0
    dw = torch.where(spawn_e[:, None], words[:, 3:5], words[:, 0:2])
    d_lr = ((dw[:, 0] >> 8) < (1 << 23)).long()
    d_row = 1 + ((dw[:, 1] * 8) >> 32)
    dv_alive, dv_x, dv_y, dv_dir, dv_t = [], [], [], [], []
    for k in range(DIVER_SLOTS):
        a = k < s.dv_n
        nk = spawn_d & (s.dv_n == k)
        dv_alive.append(a | nk)
        dv_x.append(torch.where(nk, torch.where(d_lr == 1, 0, 9), s.dv_x[:, k]))
        dv_y.append(torch.where(nk, d_row, s.dv_y[:, k]))
        dv_dir.append(torch.where(nk, d_lr, s.dv_dir[:, k]))
        dv_t.append(torch.where(nk, DIVER_MOVE_INTERVAL, s.dv_timer[:, k]))
    d_spawn_timer = torch.where(spawn_d, DIVER_SPAWN_SPEED, s.d_spawn_timer)

    # -- player ---------------------------------------------------------------------------
    fire = (action == 5) & (s.shot_timer == 0)
    fb_alive, fb_x, fb_y, fb_dir = [], [], [], []
    for k in range(BULLET_SLOTS):
        nk = fire & (s.fb_n == k)
        fb_alive.append((k < s.fb_n) | nk)
        fb_x.append(torch.where(nk, s.sub_x, s.fb_x[:, k]))
        fb_y.append(torch.where(nk, s.sub_y, s.fb_y[:, k]))
        fb_dir.append(torch.where(nk, s.sub_or, s.fb_dir[:, k]))
    shot_timer = torch.where(fire, SHOT_COOL_DOWN, s.shot_timer)
    left, right = action == 1, action == 3
    sub_x = torch.where(left, (s.sub_x - 1).clamp(min=0), s.sub_x)
    sub_x = torch.where(right, (sub_x + 1).clamp(max=9), sub_x)
    sub_or = torch.where(left, 0, torch.where(right, 1, s.sub_or))
    sub_y = torch.where(action == 2, (s.sub_y - 1).clamp(min=0), s.sub_y)
    sub_y = torch.where(action == 4, (sub_y + 1).clamp(max=8), sub_y)

    # -- friendly bullets (reverse order): move, then hit the first fish, else first sub ----
    for k in reversed(range(BULLET_SLOTS)):
        a = fb_alive[k]
        x = torch.where(a, fb_x[k] + 2 * fb_dir[k] - 1, fb_x[k])
        fb_x[k] = x
        inside = a & (x >= 0) & (x <= 9)
        at = alive & (en_x == x[:, None]) & (en_y == fb_y[k][:, None]) & inside[:, None]
        first_fish = torch.where(at & (en_sub == 0), slots, ENEMY_SLOTS).amin(dim=1)
        first_sub = torch.where(at & (en_sub == 1), slots, ENEMY_SLOTS).amin(dim=1)
        victim = torch.where(first_fish < ENEMY_SLOTS, first_fish, first_sub)
        hit = victim < ENEMY_SLOTS
        alive = alive & (slots != victim[:, None])
        reward = reward + hit.long()
        fb_alive[k] = inside & ~hit

    # -- divers (reverse order) -------------------------------------------------------------
    diver_count = s.diver_count
    for k in reversed(range(DIVER_SLOTS)):
        a = dv_alive[k]
        pick = a & (dv_x[k] == sub_x) & (dv_y[k] == sub_y) & (diver_count < MAX_DIVERS)
        diver_count = diver_count + pick.long()
        rest = a & ~pick
        mv = rest & (dv_t[k] == 0)
        dv_t[k] = torch.where(mv, DIVER_MOVE_INTERVAL, torch.where(rest, dv_t[k] - 1, dv_t[k]))
        x = torch.where(mv, dv_x[k] + 2 * dv_dir[k] - 1, dv_x[k])
        dv_x[k] = x
        out = mv & ((x < 0) | (x > 9))
        pick2 = mv & ~out & (x == sub_x) & (dv_y[k] == sub_y) & (diver_count < MAX_DIVERS)
        diver_count = diver_count + pick2.long()
        dv_alive[k] = rest & ~out & ~pick2

    # -- enemy subs and fish (each in reverse order; independent but for bullets) ----------
    at_sub = (en_y == sub_y[:, None]) & (en_x == sub_x[:, None])
    term = term | (alive & at_sub).any(dim=1)
    mv = alive & (en_timer == 0)
    en_timer = torch.where(mv, ms[:, None], torch.where(alive, en_timer - 1, en_timer))
    en_x = torch.where(mv, en_x + 2 * en_dir - 1, en_x)
    out = mv & ((en_x < 0) | (en_x > 9))
    crash = mv & ~out & (en_y == sub_y[:, None]) & (en_x == sub_x[:, None])
    term = term | crash.any(dim=1)
    checks = mv & ~out & ~crash  # look for a friendly bullet at the new cell
    alive_now = alive & ~out
    # Subs shoot (even one removed this step) from their cell.
    subs = alive & (en_sub == 1)
    shoots = subs & (en_shot == 0)
    reload = torch.where(en_shot == 0, ENEMY_SHOT_INTERVAL, en_shot - 1)
    en_shot = torch.where(subs, reload, en_shot)
    # Moved enemies take the first remaining bullet at their cell: subs first, reverse order.
    key = torch.where(checks, slots + ENEMY_SLOTS * en_sub, -1)
    b0, b1 = fb_alive
    at0 = b0[:, None] & (en_x == fb_x[0][:, None]) & (en_y == fb_y[0][:, None])
    at1 = b1[:, None] & (en_x == fb_x[1][:, None]) & (en_y == fb_y[1][:, None])
    k0 = torch.where(at0, key, -1).amax(dim=1)
    same = b0 & b1 & (fb_x[0] == fb_x[1]) & (fb_y[0] == fb_y[1])
    at1 = at1 & ~(same[:, None] & (key == k0[:, None]))
    k1 = torch.where(at1, key, -1).amax(dim=1)
    take0, take1 = k0 >= 0, k1 >= 0
    killed = (take0[:, None] & (key == k0[:, None])) | (take1[:, None] & (key == k1[:, None]))
    alive = alive_now & ~killed
    reward = reward + take0.long() + take1.long()
    fb_alive = [b0 & ~take0, b1 & ~take1]

    # -- enemy bullets: new shots join, then all move --------------------------------------
    shot_ok = shoots & (en_x >= 0) & (en_x <= 9)
    hi, right = en_y >= 5, en_dir == 1
    bit = torch.where(shot_ok, 1 << (10 * (en_y - 5 * hi.long()) + en_x.clamp(0, 9)), 0)
    parts = [torch.where((right == r) & (hi == h), bit, 0) for r in (0, 1) for h in (0, 1)]
    new = or_reduce(torch.stack(parts, dim=1))  # (N, 4): left lo, left hi, right lo, right hi
    l_lo, l_hi = s.eb_l_lo | new[:, 0], s.eb_l_hi | new[:, 1]
    r_lo, r_hi = s.eb_r_lo | new[:, 2], s.eb_r_hi | new[:, 3]
    sub_lo, sub_hi = cell_bits(sub_y, sub_x)
    hit = ((l_lo | r_lo) & sub_lo) | ((l_hi | r_hi) & sub_hi)
    l_lo, l_hi = (l_lo >> 1) & ~COL9, (l_hi >> 1) & ~COL9
    r_lo, r_hi = (r_lo << 1) & (WORD & ~COL0), (r_hi << 1) & (WORD & ~COL0)
    hit = hit | ((l_lo | r_lo) & sub_lo) | ((l_hi | r_hi) & sub_hi)
    term = term | (hit != 0)

    # -- timers, oxygen, surfacing --------------------------------------------------------
    e_spawn_timer = e_spawn_timer - (e_spawn_timer > 0).long()
    d_spawn_timer = d_spawn_timer - (d_spawn_timer > 0).long()
    shot_timer = shot_timer - (shot_timer > 0).long()
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
    diver_count = diver_count - surf.long()
    surface = torch.where(below, 0, s.surface | surf.long())
    spawn_speed = s.e_spawn_speed
    ramp = surf & ((spawn_speed > 1) | (ms > 2)) & params.difficulty_ramping
    move_speed = ms - (ramp & (ms > 2) & ((s.ramp_index & 1) == 1)).long()
    spawn_speed = spawn_speed - (ramp & (spawn_speed > 1)).long()
    ramp_index = s.ramp_index + ramp.long()

    # -- compact the lists ----------------------------------------------------------------
    (fbx, fby, fbd), fb_n = _compact2(fb_alive, [fb_x, fb_y, fb_dir])
    (dvx, dvy, dvd, dvt), dv_n = _compact2(dv_alive, [dv_x, dv_y, dv_dir, dv_t])
    packed = en_x | (en_y << 4) | (en_dir << 8) | (en_sub << 9) | (en_timer << 10) | (en_shot << 14)
    dest = torch.where(alive, torch.cumsum(alive.long(), dim=1) - 1, ENEMY_SLOTS)
    packed = torch.zeros(packed.shape[0], ENEMY_SLOTS + 1, dtype=torch.int64, device=dev).scatter(
        1, dest, torch.where(alive, packed, 0)
    )[:, :ENEMY_SLOTS]
    nxt = SeaquestState(
        oxygen, diver_count, sub_x, sub_y, sub_or, spawn_speed, e_spawn_timer, d_spawn_timer,
        move_speed, ramp_index, shot_timer, surface, term.long(),
        fbx, fby, fbd, fb_n,
        packed & 15, (packed >> 4) & 15, (packed >> 8) & 1, (packed >> 9) & 1,
        (packed >> 10) & 15, (packed >> 14) & 15, alive.long().sum(dim=1),
        dvx, dvy, dvd, dvt, dv_n, l_lo, l_hi, r_lo, r_hi,
    )  # fmt: skip
    done = s.terminal != 0
    nxt = select(done, s, nxt)
    reward = torch.where(done, 0, reward)
    return nxt, reward, nxt.terminal != 0


def or_reduce(x: torch.Tensor) -> torch.Tensor:
    """Bitwise OR over the last dim (a power of 2) by halving, (..., K) -> (...)."""
    while x.shape[-1] > 1:
        h = x.shape[-1] // 2
        x = x[..., :h] | x[..., h:]
    return x[..., 0]


def cell_bits(y: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Bitboard words ``(lo, hi)`` of cells (row y, column x in 0..9), same shapes."""
    lo = y < 5
    bit = 1 << (10 * torch.where(lo, y, y - 5) + x)
    return torch.where(lo, bit, 0), torch.where(lo, 0, bit)


def tenths(oxygen: torch.Tensor) -> torch.Tensor:
    """``max(oxygen, 0) * 10 // MAX_OXYGEN`` for oxygen <= MAX_OXYGEN, by comparisons.

    (Integer ``//`` and ``%`` compile to scalar code; comparisons vectorise.)
    """
    out = torch.zeros_like(oxygen)
    for k in range(1, 11):
        out = out + (oxygen >= k * MAX_OXYGEN // 10).long()
    return out


#: ``(b * _SPREAD_MUL) & _SPREAD_MASK`` moves bit c of a 5-bit b to bit 10 c (no carries).
_SPREAD_MUL = sum(1 << (9 * k) for k in range(5))
_SPREAD_MASK = sum(1 << (10 * k) for k in range(5))
#: Right shifts taking nibble q (bits 4q..4q+3) of ``h0 + h1 << 50`` from h0 and ``h1 << 2``
#: (63 shifts a part out: h0 < 2**50, and ``h1 << 2 >> 63`` is 0 for h1 < 2**50).
_NIBBLE_SHIFTS = (
    [4 * q if 4 * q < 50 else 63 for q in range(25)],
    [4 * q - 48 if 4 * q >= 48 else 63 for q in range(25)],
)


def observation(params: MinAtarParams, s: SeaquestState) -> torch.Tensor:
    """(N, 10, 10, 10) bool observation, channels as :data:`CHANNELS`.

    Each channel is first a bitboard (two words, :func:`cell_bits`); then each half row
    (5 cells x 10 channels) becomes a 50-bit word, bit ``10 (x % 5) + channel``, whose bits
    are spread into bytes four at a time and stored as int32 words, which are viewed as the
    bool output (compiled bool/uint8 stores are written byte by byte; a same-width bool view is
    a copy, an int32 -> bool view is free).
    """
    dev = s.sub_x.device

    def slots_or(y, x, ok):  # noqa: ANN001, ANN202 - (N, K) cells -> lo, hi words
        lo, hi = cell_bits(y, x.clamp(0, 9))
        return torch.where(ok, lo, 0), torch.where(ok, hi, 0)

    boards = [None] * len(CHANNELS)  # (lo, hi) per channel
    boards[0] = cell_bits(s.sub_y, s.sub_x)
    back = s.sub_x + 1 - 2 * s.sub_or  # wraps modulo 10 (never needed from a reset)
    boards[1] = cell_bits(s.sub_y, torch.where(back < 0, 9, torch.where(back > 9, 0, back)))
    en_ok = torch.arange(ENEMY_SLOTS, device=dev)[None, :] < s.en_n[:, None]
    e_lo, e_hi = slots_or(s.en_y, s.en_x, en_ok)
    back = s.en_x + 1 - 2 * s.en_dir
    t_lo, t_hi = slots_or(s.en_y, back, en_ok & (back >= 0) & (back <= 9))
    fish = s.en_sub == 0
    enemy = or_reduce(
        torch.stack(
            (
                torch.where(fish, e_lo, 0), torch.where(fish, e_hi, 0),
                torch.where(fish, 0, e_lo), torch.where(fish, 0, e_hi), t_lo, t_hi,
            ),
            dim=1,
        )
    )  # fmt: skip
    boards[5] = enemy[:, 0], enemy[:, 1]
    boards[6] = enemy[:, 2], enemy[:, 3]
    small = [None] * 3
    fb_ok = torch.arange(BULLET_SLOTS, device=dev)[None, :] < s.fb_n[:, None]
    small[0] = slots_or(s.fb_y, s.fb_x, fb_ok)
    dv_ok = torch.arange(DIVER_SLOTS, device=dev)[None, :] < s.dv_n[:, None]
    small[1] = slots_or(s.dv_y, s.dv_x, dv_ok)
    back = s.dv_x + 1 - 2 * s.dv_dir
    small[2] = slots_or(s.dv_y, back, dv_ok & (back >= 0) & (back <= 9))
    small = [(or_reduce(lo), or_reduce(hi)) for lo, hi in small]
    boards[2] = small[0]
    boards[9] = small[1]
    boards[3] = enemy[:, 4] | small[2][0], enemy[:, 5] | small[2][1]
    boards[4] = s.eb_l_lo | s.eb_r_lo, s.eb_l_hi | s.eb_r_hi
    zero = torch.zeros_like(s.sub_x)
    oxy = (1 << tenths(s.oxygen)) - 1
    boards[7] = zero, oxy << 40
    dc = s.diver_count.clamp(0, 9)
    boards[8] = zero, ((1 << dc) - 1) << (49 - dc)
    words = []
    for y in range(10):
        for half in range(2):
            w = zero
            for ch, board in enumerate(boards):
                b = (board[y // 5] >> (10 * (y % 5) + 5 * half)) & 31
                w = w | (((b * _SPREAD_MUL) & _SPREAD_MASK) << ch)
            words.append(w)
    words = torch.stack(words, dim=1).view(-1, 10, 2)
    # Row y is the 100-bit number h0 + h1 << 50; int32 word q holds its bits 4q..4q+3.
    shift0, shift1 = (torch.tensor(t, device=dev) for t in _NIBBLE_SHIFTS)
    nib = (words[:, :, :1] >> shift0) | ((words[:, :, 1:] << 2) >> shift1)
    out = (((nib & 15) * 0x204081) & 0x01010101).to(torch.int32)  # (N, 10, 25)
    return out.view(torch.bool).view(-1, 10, 10, len(CHANNELS))


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
