"""MinAtar Breakout: exact parity with minatar 1.0.15, backends, registration."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from minatar_common import ParityDriver, check_registered, compare_backends, single_thread

from gpuvec_envs.envs.minatar.breakout import FULL_WALL, Breakout, BreakoutState

pytestmark = pytest.mark.usefixtures("single_thread")
__all__ = ["single_thread"]

WORDS = 1  # per step: the sticky draw only
RESET_WORDS = 1  # randint(2)


def to_state(envs: list) -> BreakoutState:
    """Our state from minatar ``breakout.Env`` objects."""
    masks = []
    for e in envs:
        bricks = np.asarray(e.brick_map)
        assert not bricks[[0, 4, 5, 6, 7, 8, 9]].any()
        bits = bricks[1:4].reshape(30).astype(bool)
        masks.append(int(np.sum(np.left_shift(1, np.arange(30))[bits])))

    def col(name: str) -> torch.Tensor:
        return torch.tensor([int(getattr(e, name)) for e in envs], dtype=torch.int32)

    return BreakoutState(
        ball_x=col("ball_x"),
        ball_y=col("ball_y"),
        ball_dir=col("ball_dir"),
        pos=col("pos"),
        last_x=col("last_x"),
        last_y=col("last_y"),
        bricks=torch.tensor(masks, dtype=torch.int32),
        strike=col("strike"),
        terminal=col("terminal"),
    )


def check_state(refs: list, ours: BreakoutState) -> None:
    expected = to_state([r.game.env for r in refs])
    for name, a, b in zip(BreakoutState._fields, ours, expected, strict=True):
        assert torch.equal(a, b), name


def randomize(env, rng: np.random.Generator) -> None:
    """A random mid-game reference state (walls partly or fully broken, strike states)."""
    env.brick_map = np.zeros((10, 10))
    if rng.random() < 0.8:
        env.brick_map[1:4] = rng.random((3, 10)) < rng.random()
    env.ball_dir = int(rng.integers(4))
    env.ball_x = int(rng.integers(10))
    env.ball_y = int(rng.integers(0, 9))
    env.strike = bool(env.brick_map[env.ball_y, env.ball_x]) or bool(rng.random() < 0.2)
    env.pos = int(rng.integers(10))
    dx = 1 if env.ball_dir in (1, 2) else -1
    dy = -1 if env.ball_dir < 2 else 1
    env.last_x = min(max(env.ball_x - dx, 0), 9)
    env.last_y = min(max(env.ball_y - dy, 0), 9)
    env.terminal = False


@pytest.mark.parametrize("minimal", [False, True], ids=["v0", "v1"])
def test_parity_rollout(minimal: bool) -> None:
    """64 envs x 200 steps from reset, random actions, autoreset after game over."""
    d = ParityDriver(
        Breakout(),
        "breakout",
        64,
        words=WORDS,
        reset_words=RESET_WORDS,
        minimal=minimal,
        check_state=check_state,
    )
    d.reset(seed=11 + minimal)
    d.run(200, np.random.default_rng(minimal))
    assert d.terminations > 200 and d.rewards > 200


@pytest.mark.parametrize(
    ("sticky", "mode"), [(0.5, "NextStep"), (0.0, "Disabled")], ids=["sticky0.5", "disabled"]
)
def test_parity_injected(sticky: float, mode: str) -> None:
    """Random injected states (cleared walls, strikes, corners); ``Disabled`` keeps stepping
    finished games, which must stay frozen with reward 0 as in the reference."""
    d = ParityDriver(
        Breakout(),
        "breakout",
        64,
        words=WORDS,
        reset_words=RESET_WORDS,
        sticky=sticky,
        autoreset_mode=mode,
        check_state=check_state,
    )
    d.reset(seed=5)
    rng = np.random.default_rng(7)
    for ref in d.refs:
        randomize(ref.game.env, rng)
    d.inject(to_state)
    d.run(120, rng)
    assert d.terminations > 30 and d.rewards > 30


def test_wall_refills_when_cleared() -> None:
    """Breaking the last brick, then reaching the bottom row, refills rows 1-3."""
    env = Breakout()
    d = ParityDriver(env, "breakout", 1, words=WORDS, reset_words=RESET_WORDS, sticky=0.0)
    d.reset(seed=0)
    e = d.refs[0].game.env
    e.brick_map = np.zeros((10, 10))
    e.brick_map[3, 5] = 1
    e.ball_x, e.ball_y, e.ball_dir, e.pos, e.last_x, e.last_y = 4, 4, 1, 0, 3, 5
    e.strike = e.terminal = False
    d.inject(to_state)
    d.step(np.array([0]))  # hits the last brick
    assert int(d.env.state.env.game.bricks[0]) == 0
    for _ in range(5):  # back down to the bottom row
        d.step(np.array([0]))
    assert int(d.env.state.env.game.bricks[0]) == FULL_WALL
    assert d.rewards == 1


# Compiles the step once: ~25-30 s on an idle 2-core CPU.
def test_compiled_matches_eager() -> None:
    # without the in-place state the step returns one of its inputs as it is, so the lean
    # wrapper has nothing to keep
    compare_backends(Breakout(), 16, 300)  # in_place=False: lean wrapper not_needed


@pytest.mark.filterwarnings("ignore:.*out of date")
@pytest.mark.parametrize(("version", "n_actions"), [("v0", 6), ("v1", 3)])
def test_registered(version: str, n_actions: int) -> None:
    check_registered(f"gpuvec/MinAtar-Breakout-{version}", "breakout", n_actions, 4)
