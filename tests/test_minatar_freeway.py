"""MinAtar Freeway: exact parity with minatar 1.0.15, backends, registration."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from minatar_common import (
    ParityDriver,
    ReplayRandom,
    check_registered,
    compare_backends,
    single_thread,
)

from gpuvec_envs.envs.minatar.freeway import Freeway, FreewayState

pytestmark = pytest.mark.usefixtures("single_thread")
__all__ = ["single_thread"]

WORDS = 3  # per step: sticky draw, randint(1, 6, 8) and rand(8) from one word each
RESET_WORDS = 2  # randint(1, 6, 8), rand(8)


class FreewayReplay(ReplayRandom):
    """Our Freeway draws one word for all 8 periods and one for all 8 directions; feed
    the reference the periods (base-5 digits) and uniforms on the same side of 0.5."""

    def randint(self, low, high=None, size=None):
        if (low, high, size) != (1, 6, 8):
            return super().randint(low, high, size)
        code = (self._take(1)[0] * 5**8) >> 32
        return np.array([(code // 5**i) % 5 + 1 for i in range(8)], dtype=np.int64)

    def rand(self, *size):
        if size != (8,):
            return super().rand(*size)
        word = self._take(1)[0]
        return np.array([0.25 if (word >> i) & 1 else 0.75 for i in range(8)])


class FreewayDriver(ParityDriver):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.rnds = [FreewayReplay() for _ in self.refs]
        for ref, rnd in zip(self.refs, self.rnds, strict=True):
            ref.game.random = ref.game.env.random = rnd


#: Mostly "up" (v0: index 2; v1 = n, u, d: index 1), so chickens score and cars get redrawn.
UP_V0 = [0.1, 0.02, 0.7, 0.02, 0.14, 0.02]
UP_V1 = [0.15, 0.7, 0.15]


def _packed(values: torch.Tensor, width: int) -> torch.Tensor:
    """(N, 8) small ints -> (N,) int32 with field i at bits ``width * i`` (two's complement)."""
    words = (values.to(torch.int64) << (width * torch.arange(8))).sum(dim=1)
    return torch.where(words >= 1 << 31, words - (1 << 32), words).to(torch.int32)


def to_state(envs: list) -> FreewayState:
    """Our packed state from minatar ``freeway.Env`` objects."""
    cars = torch.tensor([e.cars for e in envs], dtype=torch.int64)  # (N, 8, [x, y, timer, speed])
    assert torch.equal(cars[:, :, 1], torch.arange(1, 9).expand(len(envs), 8))

    def col(name: str) -> torch.Tensor:
        return torch.tensor([int(getattr(e, name)) for e in envs], dtype=torch.int32)

    return FreewayState(
        car_x=_packed(cars[:, :, 0], 4),
        car_timer=_packed(cars[:, :, 2], 4),
        car_period=_packed(cars[:, :, 3].abs(), 4),
        car_left=_packed(cars[:, :, 3] < 0, 1),
        pos=col("pos"),
        move_timer=col("move_timer"),
        time_left=col("terminate_timer"),
        terminal=col("terminal"),
    )


def check_state(refs: list, ours: FreewayState) -> None:
    expected = to_state([r.game.env for r in refs])
    for name, a, b in zip(FreewayState._fields, ours, expected, strict=True):
        assert torch.equal(a, b), name


def randomize(env, rng: np.random.Generator) -> None:
    """A random mid-game state; a third of them a few frames before the time limit."""
    for i in range(8):
        speed = int(rng.integers(1, 6)) * int(rng.choice([-1, 1]))
        env.cars[i] = [int(rng.integers(10)), i + 1, int(rng.integers(0, abs(speed) + 1)), speed]
    env.pos = int(rng.integers(1, 10))
    env.move_timer = int(rng.integers(0, 4))
    env.terminate_timer = int(rng.integers(0, 80) if rng.random() < 0.35 else rng.integers(0, 2501))
    env.terminal = False


@pytest.mark.parametrize("minimal", [False, True], ids=["v0", "v1"])
def test_parity_rollout(minimal: bool) -> None:
    """64 envs x 200 steps from reset, mostly moving up: scoring redraws the car speeds."""
    d = FreewayDriver(
        Freeway(),
        "freeway",
        64,
        words=WORDS,
        reset_words=RESET_WORDS,
        minimal=minimal,
        check_state=check_state,
    )
    d.reset(seed=21 + minimal)
    d.run(200, np.random.default_rng(minimal), UP_V1 if minimal else UP_V0)
    assert d.rewards > 60


@pytest.mark.parametrize(
    ("sticky", "mode"), [(0.5, "NextStep"), (0.0, "Disabled")], ids=["sticky0.5", "disabled"]
)
def test_parity_injected(sticky: float, mode: str) -> None:
    """Random injected states: collisions, scoring, the 2500-frame termination (and, with
    ``Disabled``, stepping on after it: frozen, reward 0, as the reference)."""
    d = FreewayDriver(
        Freeway(),
        "freeway",
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
    d.run(120, rng, UP_V0)
    assert d.terminations > 10 and d.rewards > 30


def test_time_limit_terminates() -> None:
    """The game ends on the 2501st frame (the reference's terminate_timer < 0)."""
    d = FreewayDriver(Freeway(), "freeway", 2, words=WORDS, reset_words=RESET_WORDS)
    d.reset(seed=0)
    d.env.set_env_state(
        d.env.state.env._replace(
            game=d.env.state.env.game._replace(time_left=torch.tensor([1, 0], dtype=torch.int32))
        )
    )
    for r in d.refs:
        r.game.env.terminate_timer = 1
    d.refs[1].game.env.terminate_timer = 0
    d.step(np.array([0, 0]))
    assert d.terminations == 1
    d.step(np.array([0, 0]))
    assert d.terminations == 2


# Compiles the step once: ~25-30 s on an idle 2-core CPU.
def test_compiled_matches_eager() -> None:
    def near_the_end(game: FreewayState) -> FreewayState:  # games end within 300 steps
        return game._replace(time_left=torch.arange(16, dtype=torch.int32) * 15)

    env = compare_backends(Freeway(), 16, 300, seed=3, prepare=near_the_end)
    assert env.state.env.game.time_left.min() < 2500 - 200


@pytest.mark.filterwarnings("ignore:.*out of date")
@pytest.mark.parametrize(("version", "n_actions"), [("v0", 6), ("v1", 3)])
def test_registered(version: str, n_actions: int) -> None:
    check_registered(f"gpuvec/MinAtar-Freeway-{version}", "freeway", n_actions, 7)
