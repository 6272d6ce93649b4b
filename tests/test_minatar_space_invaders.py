"""MinAtar Space Invaders against minatar 1.0.15: exact parity of observation, reward,
termination and hidden state, eager vs compiled, and the registered IDs.

The game draws no random numbers; only the sticky-action draw is replayed into the
reference (:mod:`minatar_common`). Random play from reset rarely clears a wave, so injected
states with few, fast aliens cover wave clears, the difficulty ramp down to interval 6,
aliens stepping down past the bottom row and deaths by enemy bullets.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch
from minatar_common import ParityDriver, check_registered, compare_backends

import gpuvec_envs  # noqa: F401  (registers the IDs)
from gpuvec_envs.envs.minatar.space_invaders import SpaceInvaders, SpaceInvadersState

MAPS = {"f": "f_bullet_map", "e": "e_bullet_map", "a": "alien_map"}
SCALARS = {
    "pos": "pos",
    "alien_dir": "alien_dir",
    "move_interval": "enemy_move_interval",
    "move_timer": "alien_move_timer",
    "alien_shot_timer": "alien_shot_timer",
    "ramp_index": "ramp_index",
    "shot_timer": "shot_timer",
    "terminal": "terminal",
}
#: Bit of cell (row, col) in its map word: rows 0-4 in ``*_lo``, rows 5-9 in ``*_hi``.
WEIGHTS = 1 << (10 * (np.arange(10)[:, None] % 5) + np.arange(10)[None, :])


def to_state(envs: list) -> SpaceInvadersState:
    """Our batched state from minatar ``Env`` objects."""
    fields = {}
    for ours, theirs in MAPS.items():
        maps = np.stack([getattr(e, theirs) for e in envs]).astype(np.int64)  # (N, 10, 10)
        fields[f"{ours}_lo"] = torch.from_numpy((maps[:, :5] * WEIGHTS[:5]).sum(axis=(1, 2)))
        fields[f"{ours}_hi"] = torch.from_numpy((maps[:, 5:] * WEIGHTS[5:]).sum(axis=(1, 2)))
    for ours, theirs in SCALARS.items():
        fields[ours] = torch.tensor([int(getattr(e, theirs)) for e in envs], dtype=torch.int64)
    return SpaceInvadersState(**fields)


class StateCheck:
    """``check_state`` for :class:`ParityDriver`: every hidden field, plus coverage."""

    def __init__(self) -> None:
        self.max_ramp = 0
        self.min_interval = 12
        self.row9_deaths = 0
        self.clears = 0
        self.ramps = 0
        self._prev: dict[int, tuple[int, bool, int]] = {}

    def forget(self) -> None:
        """Drop the previous states (before an injection)."""
        self._prev.clear()

    def __call__(self, refs: list, game: SpaceInvadersState) -> None:
        envs = [r.game.env for r in refs]
        ours = to_state(envs)
        for name, a, b in zip(SpaceInvadersState._fields, game, ours, strict=True):
            assert torch.equal(a, b), name
        for i, e in enumerate(envs):
            count = int(np.count_nonzero(e.alien_map))
            prev = self._prev.get(i)
            if prev is not None and not prev[1] and count > prev[0] + 1:
                self.clears += 1  # a new wave (a reset follows a terminal step instead)
                self.ramps += e.enemy_move_interval == prev[2] - 1
            self._prev[i] = (count, bool(e.terminal), e.enemy_move_interval)
            self.max_ramp = max(self.max_ramp, e.ramp_index)
            self.min_interval = min(self.min_interval, e.enemy_move_interval)
            self.row9_deaths += bool(e.terminal and e.alien_map[9].any())


def random_wave(envs: list, rng: np.random.Generator) -> None:
    """Reset each minatar ``Env`` into a late situation: few aliens, fast, bullets flying."""
    for e in envs:
        e.reset()
        aliens = np.zeros((10, 10))
        k = int(rng.integers(1, 6))
        low = int(rng.integers(3, 9))  # lowest row the aliens reach
        aliens[rng.integers(0, low + 1, k), rng.integers(0, 10, k)] = 1
        e.alien_map = aliens
        e.f_bullet_map = (rng.random((10, 10)) < 0.03).astype(float)
        e.e_bullet_map = (rng.random((10, 10)) < 0.03).astype(float)
        e.alien_dir = int(rng.choice([-1, 1]))
        e.enemy_move_interval = int(rng.integers(6, 13))
        e.ramp_index = 12 - e.enemy_move_interval
        e.alien_move_timer = int(rng.integers(0, e.enemy_move_interval))
        e.alien_shot_timer = int(rng.integers(0, 10))
        e.shot_timer = int(rng.integers(0, 6))
        e.pos = int(rng.integers(0, 10))


@pytest.mark.parametrize(
    ("minimal", "sticky", "ramping"), [(False, 0.1, True), (True, 0.0, True), (True, 0.1, False)]
)
def test_parity_from_reset_random_play(minimal: bool, sticky: float, ramping: bool) -> None:
    d = ParityDriver(
        SpaceInvaders(), "space_invaders", 32, words=1, reset_words=0, minimal=minimal,
        sticky=sticky, ramping=ramping, check_state=StateCheck(),
    )  # fmt: skip
    d.reset(seed=21)
    d.run(150, np.random.default_rng(2))
    assert d.terminations > 20 and d.rewards > 50


@pytest.mark.parametrize("ramping", [True, False])
def test_parity_injected_late_waves(ramping: bool) -> None:
    """Few fast aliens: wave clears, the ramp to interval 6, bottom-row deaths."""
    rng = np.random.default_rng(3)
    check = StateCheck()
    d = ParityDriver(
        SpaceInvaders(), "space_invaders", 32, words=1, reset_words=0, minimal=True,
        ramping=ramping, check_state=check,
    )  # fmt: skip
    d.reset(seed=5)
    for _ in range(3):
        random_wave([r.game.env for r in d.refs], rng)
        check.forget()
        d.inject(to_state)
        for _ in range(80):
            # Minimal actions n, l, r, f: fire half of the time.
            d.step(np.where(rng.random(32) < 0.5, 3, rng.integers(0, 3, 32)))
    assert d.terminations > 20 and d.rewards > 100
    assert check.row9_deaths > 0 and check.clears > 10
    # Ramping: intervals fall to 6 and stop there (ramp_index 6 = 12 - 6, never beyond).
    assert check.min_interval == 6 and check.max_ramp == 6
    assert (check.ramps > 5) if ramping else (check.ramps == 0)


def test_finished_games_stay_frozen() -> None:
    d = ParityDriver(
        SpaceInvaders(), "space_invaders", 16, words=1, reset_words=0,
        autoreset_mode="Disabled", check_state=StateCheck(),
    )  # fmt: skip
    d.reset(seed=8)
    d.run(150, np.random.default_rng(4))
    assert int(d.env.state.env.game.terminal.sum()) >= 12  # most games over, then frozen


def test_eager_and_compiled_agree() -> None:
    compare_backends(SpaceInvaders(), 8, 300, seed=4, min_dones=6)


@pytest.mark.parametrize("version", ["v0", "v1"])
def test_registered_ids(version: str) -> None:
    n_actions = 6 if version == "v0" else 4
    check_registered(f"gpuvec/MinAtar-SpaceInvaders-{version}", "space_invaders", n_actions, 6)
