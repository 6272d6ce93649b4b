"""MinAtar Seaquest against minatar 1.0.15: exact parity of observation, reward, termination
and hidden state (including the order of every object list), eager vs compiled, and the
registered IDs.

The references replay our random draws (:mod:`minatar_common`); each step our module draws
6 words (sticky action, enemy spawn x3, diver spawn x2), the reference consumes those it
needs in order. Random play dies young, so most steps run from injected mid-game states
under a scripted policy that chases divers and surfaces, reaching pickups, surfacing with 6,
oxygen death, the whole difficulty ramp and crowded enemy lists.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from minatar_common import ParityDriver, check_registered, compare_backends

import gpuvec_envs  # noqa: F401  (registers the IDs)
from gpuvec_envs.envs.minatar.seaquest import (
    AGE_SHIFT,
    BULLET_SLOTS,
    DEAD,
    DIR_SHIFT,
    DIVER_SLOTS,
    ENEMY_SLOTS,
    FISH,
    SHOT_SHIFT,
    TIMER_SHIFT,
    Seaquest,
    SeaquestState,
    enemy_boards,
    enemy_planes,
    enemy_words,
)

WORDS = 6  # draws per step: sticky + enemy spawn (3) + diver spawn (2)
SCALARS = (
    "oxygen", "diver_count", "sub_x", "sub_y", "sub_or", "e_spawn_speed", "e_spawn_timer",
    "d_spawn_timer", "move_speed", "ramp_index", "shot_timer", "surface", "terminal",
)  # fmt: skip


def pack(x: int, y: int, right: int, timer: int = 0) -> int:
    """A packed bullet / diver word (column stored plus one)."""
    return (x + 1) | (y << 4) | (right << DIR_SHIFT) | (timer << TIMER_SHIFT)


def unpack(word: int, timer: bool) -> list[int]:
    """``[x, y, dir(, timer)]`` of a packed bullet / diver word."""
    out = [(word & 15) - 1, (word >> 4) & 15, (word >> DIR_SHIFT) & 1]
    return out + [(word >> TIMER_SHIFT) & 7] if timer else out


def to_state(envs: list) -> SeaquestState:
    """Our batched state from minatar ``Env`` objects (lists copied in order).

    Enemies get distinct ages in list order (subs, then fish; how the two lists interleave
    is never observed), older first.
    """
    n = len(envs)
    col = {k: torch.tensor([int(getattr(e, k)) for e in envs], dtype=torch.int32) for k in SCALARS}

    def words(rows: list[list[int]], cap: int, fill: int) -> tuple[torch.Tensor, ...]:
        out = np.full((cap, n), fill, dtype=np.int32)
        for i, objs in enumerate(rows):
            assert len(objs) <= cap
            out[: len(objs), i] = objs
        return tuple(torch.from_numpy(a) for a in out)

    fb = [[pack(int(x), int(y), int(d)) for x, y, d in e.f_bullets] for e in envs]
    dv = [[pack(int(x), int(y), int(d), int(t)) for x, y, d, t in e.divers] for e in envs]
    enemies = []
    for e in envs:
        objs = [(x, y, d, t, sh, 0) for x, y, d, t, sh in e.e_subs]
        objs += [(x, y, d, t, 10, 1) for x, y, d, t in e.e_fish]
        enemies.append([
            pack(int(x), int(y), int(d), int(t)) | (int(sh) << SHOT_SHIFT)
            | ((len(objs) - k) << AGE_SHIFT) | (FISH if f else 0)
            for k, (x, y, d, t, sh, f) in enumerate(objs)
        ])  # fmt: skip
    eb = np.zeros((4, n), dtype=np.int64)  # left lo, left hi, right lo, right hi
    for i, e in enumerate(envs):
        for x, y, d in e.e_bullets:
            eb[2 * int(d) + y // 5, i] |= 1 << (10 * (y % 5) + x)
    en = enemy_planes(words(enemies, ENEMY_SLOTS, DEAD))
    return SeaquestState(
        *(col[k] for k in SCALARS),
        words(fb, BULLET_SLOTS, 0), words(dv, DIVER_SLOTS, 0), en, *torch.from_numpy(eb),
        *enemy_boards(en),
    )  # fmt: skip


def lists(game: SeaquestState, i: int, words: np.ndarray) -> dict[str, list[list[int]]]:
    """Env ``i``'s object lists as the reference's (decoded; enemies ordered by age).

    ``words`` are the enemy words of every env, (32, N): ``enemy_words(game.en)``.
    """
    fb = [int(w[i]) for w in game.fb]
    dv = [int(w[i]) for w in game.dv]
    # A list is compacted: no object after a free slot.
    assert fb[0] != 0 or fb[1] == 0
    assert dv[0] != 0 or dv[1] == 0
    en = [int(w) for w in words[:, i] if int(w) != DEAD]
    en.sort(key=lambda w: -((w >> AGE_SHIFT) & 127))  # older first
    ages = [(w >> AGE_SHIFT) & 127 for w in en]
    assert len(set(ages)) == len(ages), "live enemies must have distinct ages"
    subs = [unpack(w, True) + [(w >> SHOT_SHIFT) & 15] for w in en if not w & FISH]
    fish = [unpack(w, True) for w in en if w & FISH]
    return {
        "f_bullets": [unpack(w, False) for w in fb if w],
        "divers": [unpack(w, True) for w in dv if w],
        "e_subs": subs,
        "e_fish": fish,
    }


class StateCheck:
    """``check_state`` for :class:`ParityDriver`: every field and list order, plus coverage."""

    def __init__(self) -> None:
        self.max_enemies = 0
        self.max_ramp = 0
        self.pickups = 0
        self.oxygen_deaths = 0
        self._prev: dict[int, tuple[int, bool]] = {}

    def __call__(self, refs: list, game: SeaquestState) -> None:
        # The step's derived bitboards are those of its enemy words; ``right`` may also mark
        # the rows of enemies that left during the step.
        derived = enemy_boards(game.en)
        for name, want in zip(("fish_lo", "fish_hi", "sub_lo", "sub_hi"), derived, strict=False):
            assert torch.equal(getattr(game, name), want), name
        words = enemy_words(game.en)
        rows = torch.zeros_like(game.right)
        for w in words:
            rows |= torch.where(w != DEAD, 1 << ((w >> 4) & 15), 0)
        words = torch.stack(words).numpy()
        assert torch.equal(game.right & rows, derived[4])
        g = {k: getattr(game, k).numpy() for k in SCALARS}
        for i, ref in enumerate(refs):
            e = ref.game.env
            for k in SCALARS:
                assert int(g[k][i]) == int(getattr(e, k)), (i, k)
            ours = lists(game, i, words)
            for name, objs in ours.items():
                assert objs == [[int(v) for v in o] for o in getattr(e, name)], (i, name)
            cells = {(int(d), y, x) for x, y, d in e.e_bullets}
            ours_eb = {
                (d, 5 * h + k // 10, k % 10)
                for d, side in enumerate("lr")
                for h, half in enumerate(("lo", "hi"))
                for k in range(50)
                if (int(getattr(game, f"eb_{side}_{half}")[i]) >> k) & 1
            }
            assert ours_eb == cells, (i, "e_bullets")
            self.max_enemies = max(self.max_enemies, len(ours["e_subs"]) + len(ours["e_fish"]))
            self.max_ramp = max(self.max_ramp, e.ramp_index)
            prev = self._prev.get(i)
            if prev is not None and not prev[1]:
                self.pickups += e.diver_count == prev[0] + 1
                self.oxygen_deaths += e.terminal and e.oxygen <= 0
            self._prev[i] = (e.diver_count, e.terminal)


def count_surfacings(refs: list) -> list[int]:
    """Wrap each reference's ``_surface``: returns a [surfacings, with 6 divers] counter."""
    counter = [0, 0]
    for ref in refs:
        env = ref.game.env
        inner = env._surface

        def wrapped(env=env, inner=inner) -> int:
            counter[0] += 1
            counter[1] += env.diver_count == 6
            return inner()

        env._surface = wrapped
    return counter


def policy(envs: list, rng: np.random.Generator) -> np.ndarray:
    """Scripted full actions: chase the first diver, surface with divers, shoot, explore."""
    out = np.empty(len(envs), dtype=np.int64)
    for i, e in enumerate(envs):
        u = rng.random()
        if u < 0.2:
            out[i] = rng.integers(6)
        elif u < 0.3:
            out[i] = 5
        elif e.diver_count != 0 and (e.diver_count >= 6 or e.oxygen < 70 or e.diver_count < 0):
            out[i] = 2
        elif e.divers:
            x, y = e.divers[0][:2]
            out[i] = 4 if y > e.sub_y else 2 if y < e.sub_y else 3 if x > e.sub_x else 1
        else:
            out[i] = 4 if e.sub_y < 4 else rng.choice([1, 3, 5])
    return out


def mid_game(envs: list, rng: np.random.Generator) -> None:
    """Reset each minatar ``Env`` and put it into a random mid-game situation."""
    for e in envs:
        e.reset()
        ramp = int(rng.integers(0, 20))
        e.ramp_index = ramp
        e.e_spawn_speed = max(1, 20 - ramp)
        e.move_speed = 5 - min(3, ramp // 2)
        e.e_spawn_timer = int(rng.integers(0, e.e_spawn_speed + 1))
        e.d_spawn_timer = int(rng.integers(0, 30))
        e.diver_count = int(rng.choice([-3, -1, 0, 1, 2, 5, 6]))
        e.oxygen = int(rng.choice([3, 15, 40, 120, 200]))
        e.sub_y = int(rng.integers(0, 9))
        e.sub_x = int(rng.integers(1, 9))
        e.sub_or = bool(rng.integers(2))
        e.surface = e.sub_y == 0
        e.shot_timer = int(rng.integers(0, 6))
        if rng.random() < 0.7:
            # The diver spawned 30 steps before the next one (divers share one timer phase,
            # which the capacity and list-order arguments rely on).
            born = e.d_spawn_timer - 30  # < 0: steps ago
            moves = max(0, (-1 - (born + 5)) // 6 + 1)
            right = bool(rng.integers(2))
            x = moves if right else 9 - moves
            e.divers = [[x, int(rng.integers(1, 9)), right, 5 - (-born) % 6]]


def run_policy(driver: ParityDriver, steps: int, rng: np.random.Generator) -> None:
    """Scripted play (full action indices; Seaquest's minimal set is all 6 in order)."""
    for _ in range(steps):
        driver.step(policy([r.game.env for r in driver.refs], rng))


@pytest.mark.parametrize(
    ("minimal", "sticky", "ramping"), [(False, 0.1, True), (True, 0.0, True), (False, 0.1, False)]
)
def test_parity_from_reset_random_play(minimal: bool, sticky: float, ramping: bool) -> None:
    check = StateCheck()
    d = ParityDriver(
        Seaquest(), "seaquest", 32, words=WORDS, reset_words=0, minimal=minimal,
        sticky=sticky, ramping=ramping, check_state=check,
    )  # fmt: skip
    d.reset(seed=11)
    d.run(150, np.random.default_rng(1))
    assert d.terminations > 20 and d.rewards > 0


def test_parity_mid_game_policy() -> None:
    """Injected mid-game states + scripted play: pickups, surfacing, oxygen, the full ramp."""
    rng = np.random.default_rng(5)
    check = StateCheck()
    d = ParityDriver(Seaquest(), "seaquest", 32, words=WORDS, reset_words=0, check_state=check)
    surfaced = count_surfacings(d.refs)
    d.reset(seed=7)
    for _ in range(2):
        mid_game([r.game.env for r in d.refs], rng)
        d.inject(to_state)
        run_policy(d, 150, rng)
    assert check.pickups > 10 and surfaced[0] > 10 and surfaced[1] >= 1
    assert check.oxygen_deaths >= 1 and check.max_ramp == 19
    assert check.max_enemies >= 12
    assert d.terminations > 20


def test_parity_crowded_surface_and_disabled_autoreset() -> None:
    """Fully ramped games (a spawn every step) crowd the lists; finished games stay frozen."""
    rng = np.random.default_rng(9)
    check = StateCheck()
    d = ParityDriver(
        Seaquest(), "seaquest", 32, words=WORDS, reset_words=0, autoreset_mode="Disabled",
        check_state=check,
    )  # fmt: skip
    d.reset(seed=3)
    for e in (r.game.env for r in d.refs):
        e.ramp_index, e.e_spawn_speed, e.move_speed, e.e_spawn_timer = 19, 1, 2, 0
        e.diver_count = -5  # surfacing never ends the game (the reference's count goes negative)
    d.inject(to_state)
    for t in range(160):
        # Mostly wait at the surface (enemies never reach row 0), dive now and then.
        acts = np.where(rng.random(32) < 0.85, 2, rng.integers(0, 6, 32))
        d.step(acts if t % 40 < 30 else rng.integers(0, 6, 32))
    assert check.max_enemies >= 20
    assert d.terminations > 0  # frozen games repeat terminal=True with reward 0


# Compiles the step once: ~35-60 s on a 2-core CPU (the longest test of this module).
def test_eager_and_compiled_agree() -> None:
    def surface_often(gen: torch.Generator, action: torch.Tensor) -> torch.Tensor:
        return torch.where(torch.rand(8, generator=gen) < 0.4, 2, action)

    compare_backends(Seaquest(), 8, 300, seed=4, sample=surface_often, min_dones=6)


@pytest.mark.parametrize("version", ["v0", "v1"])
def test_registered_ids(version: str) -> None:
    check_registered(f"gpuvec/MinAtar-Seaquest-{version}", "seaquest", 6, 10)
    single = gym.make(f"gpuvec/MinAtar-Seaquest-{version}")
    assert single.unwrapped.vector_env.params.minimal_action_set == (version == "v1")
