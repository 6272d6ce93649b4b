"""MinAtar Asterix: exact parity with minatar 1.0.15, backends, registration."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from minatar_common import ParityDriver, check_registered, compare_backends, single_thread

from gpuvec_envs.envs.minatar.asterix import Asterix, AsterixState

pytestmark = pytest.mark.usefixtures("single_thread")
__all__ = ["single_thread"]

WORDS = 4  # per step: sticky draw, rand() < 1/2, rand() < 1/3, randint(free slots)
RESET_WORDS = 0
TIMERS = ("spawn_speed", "spawn_timer", "move_speed", "move_timer", "ramp_timer", "ramp_index")


def _signed32(v: int) -> int:
    return v - (1 << 32) if v >= 1 << 31 else v


def to_state(envs: list) -> AsterixState:
    """Our packed state from minatar ``asterix.Env`` objects (empty slots: 0)."""
    for e in envs:
        assert all(x[1] == i + 1 for i, x in enumerate(e.entities) if x is not None)

    def col(name: str) -> torch.Tensor:
        return torch.tensor([int(getattr(e, name)) for e in envs], dtype=torch.int32)

    def packed(value, width: int) -> torch.Tensor:
        words = [
            sum(value(x) << (width * i) for i, x in enumerate(e.entities) if x is not None)
            for e in envs
        ]
        return torch.tensor([_signed32(w) for w in words], dtype=torch.int32)

    return AsterixState(
        col("player_x"),
        col("player_y"),
        packed(lambda x: 0 if x[3] else x[0] + 1, 4),
        packed(lambda x: x[0] + 1 if x[3] else 0, 4),
        packed(lambda x: int(x[2]), 1),
        *(col(name) for name in TIMERS),
        col("terminal"),
    )


def check_state(refs: list, ours: AsterixState) -> None:
    expected = to_state([r.game.env for r in refs])
    alive = torch.zeros_like(ours.enemy)  # bit i: slot i holds an entity
    for i in range(8):
        alive = alive | ((((ours.enemy | ours.gold) >> (4 * i)) & 15 != 0).to(torch.int32) << i)
    assert torch.equal(ours.right & alive, expected.right), "right"
    for name in ("player_x", "player_y", "enemy", "gold", *TIMERS, "terminal"):
        assert torch.equal(getattr(ours, name), getattr(expected, name)), name


def randomize(env, rng: np.random.Generator) -> None:
    """A random mid-game state at a random difficulty, often just before a ramp step."""
    env.player_x = int(rng.integers(10))
    env.player_y = int(rng.integers(1, 9))
    fill = rng.random()
    env.entities = [
        [int(rng.integers(10)), i + 1, bool(rng.random() < 0.5), bool(rng.random() < 0.4)]
        if rng.random() < fill
        else None
        for i in range(8)
    ]
    env.spawn_speed = int(rng.integers(1, 11))
    env.spawn_timer = int(rng.integers(0, env.spawn_speed))
    env.move_speed = int(rng.integers(1, 6))
    env.move_timer = int(rng.integers(0, env.move_speed))
    env.ramp_timer = int(rng.integers(-1, 8) if rng.random() < 0.6 else rng.integers(-1, 101))
    env.ramp_index = int(rng.integers(0, 12))
    env.terminal = False


@pytest.mark.parametrize("minimal", [False, True], ids=["v0", "v1"])
def test_parity_rollout(minimal: bool) -> None:
    """64 envs x 200 steps from reset, random actions, game overs and autoresets."""
    d = ParityDriver(
        Asterix(),
        "asterix",
        64,
        words=WORDS,
        reset_words=RESET_WORDS,
        minimal=minimal,
        check_state=check_state,
    )
    d.reset(seed=31 + minimal)
    d.run(200, np.random.default_rng(minimal))
    assert d.terminations > 60 and d.rewards > 60


@pytest.mark.parametrize(
    ("sticky", "ramping", "mode"),
    [(0.5, True, "NextStep"), (0.1, False, "NextStep"), (0.0, True, "Disabled")],
    ids=["sticky0.5", "no-ramping", "disabled"],
)
def test_parity_injected(sticky: float, ramping: bool, mode: str) -> None:
    """Random injected states: full rows, every speed, ramp steps (or none without
    ramping); ``Disabled`` steps finished games on, frozen with reward 0 as the reference."""
    d = ParityDriver(
        Asterix(),
        "asterix",
        64,
        words=WORDS,
        reset_words=RESET_WORDS,
        sticky=sticky,
        ramping=ramping,
        autoreset_mode=mode,
        check_state=check_state,
    )
    d.reset(seed=5)
    rng = np.random.default_rng(7)
    for ref in d.refs:
        randomize(ref.game.env, rng)
    d.inject(to_state)
    ramp_steps = 0
    for _ in range(100):
        before = d.env.state.env.game.ramp_index
        d.run(1, rng)
        ramp_steps += int((d.env.state.env.game.ramp_index > before).sum())
    assert d.terminations > 20 and d.rewards > 20
    assert (ramp_steps > 30) if ramping else (ramp_steps == 0)


def test_difficulty_ramps_on_schedule() -> None:
    """From reset with ramping and no sticky actions: first ramp step after 102 frames."""
    d = ParityDriver(Asterix(), "asterix", 4, words=WORDS, reset_words=RESET_WORDS, sticky=0.0)
    d.reset(seed=0)
    for ref in d.refs:  # keep the player out of harm's way: no entities ever spawn
        ref.game.env.spawn_timer = 10**6
    d.inject(to_state)
    d.run(101, np.random.default_rng(0), [1.0, 0, 0, 0, 0, 0])
    assert d.env.state.env.game.ramp_index.tolist() == [0] * 4
    d.run(1, np.random.default_rng(0), [1.0, 0, 0, 0, 0, 0])
    game = d.env.state.env.game
    assert game.ramp_index.tolist() == [1] * 4 and game.spawn_speed.tolist() == [9] * 4


def test_compiled_matches_eager() -> None:
    compare_backends(Asterix(), 16, 300, seed=4)


@pytest.mark.filterwarnings("ignore:.*out of date")
@pytest.mark.parametrize(("version", "n_actions"), [("v0", 6), ("v1", 5)])
def test_registered(version: str, n_actions: int) -> None:
    check_registered(f"gpuvec/MinAtar-Asterix-{version}", "asterix", n_actions, 4)
