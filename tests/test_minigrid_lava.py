"""MiniGrid LavaGap, LavaCrossing and SimpleCrossing: exact parity with minigrid 3.2.0."""

from __future__ import annotations

import numpy as np
import pytest
from minatar_common import single_thread
from minigrid_common import ParityDriver, check_registered

from gpuvec_envs.registry import MINIGRID

pytestmark = pytest.mark.usefixtures("single_thread")
__all__ = ["single_thread"]

IDS = [e.id for e in MINIGRID if "Lava" in e.id or "Crossing" in e.id]
PROBS = [0.2, 0.2, 0.45, 0.05, 0.05, 0.0, 0.05]


@pytest.mark.parametrize("env_id", IDS)
def test_parity(env_id: str) -> None:
    """12 envs x 100 steps of forward-heavy random actions: lava deaths, resets."""
    d = ParityDriver(env_id, 12, max_steps=30)
    d.reset(seed=9)
    d.run(100, np.random.default_rng(6), probs=PROBS)
    assert d.resets > 12
    if "Lava" in env_id:
        assert d.terminations > 0


def test_parity_large_view() -> None:
    """9x9, 13x13 (right-to-left sweeps by shifts, no table) and 3x3 views."""
    for view in (9, 13, 3):
        d = ParityDriver("gpuvec/MiniGrid-LavaCrossingS9N3-v0", 8, agent_view_size=view)
        d.reset(seed=view)
        d.run(60, np.random.default_rng(view), probs=PROBS)


@pytest.mark.filterwarnings("ignore:.*out of date")
@pytest.mark.parametrize(
    "env_id", ["gpuvec/MiniGrid-LavaGapS5-v0", "gpuvec/MiniGrid-LavaCrossingS9N2-v0"]
)
def test_registered(env_id: str) -> None:
    check_registered(env_id)
