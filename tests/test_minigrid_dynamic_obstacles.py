"""MiniGrid Dynamic-Obstacles: exact parity with minigrid 3.2.0 (moving balls, collisions)."""

from __future__ import annotations

import numpy as np
import pytest
from minatar_common import single_thread
from minigrid_common import ParityDriver, check_registered

from gpuvec_envs.registry import MINIGRID

pytestmark = pytest.mark.usefixtures("single_thread")
__all__ = ["single_thread"]

IDS = [e.id for e in MINIGRID if "Dynamic-Obstacles" in e.id]


@pytest.mark.parametrize("env_id", IDS)
def test_parity(env_id: str) -> None:
    """16 envs x 100 steps of random actions: collisions (-1), goals, resets."""
    d = ParityDriver(env_id, 16)
    d.reset(seed=10)
    d.run(100, np.random.default_rng(7), probs=[0.25, 0.25, 0.5])
    assert d.resets > 16 and d.rewards < 0


@pytest.mark.filterwarnings("ignore:.*out of date")
def test_registered() -> None:
    check_registered("gpuvec/MiniGrid-Dynamic-Obstacles-Random-5x5-v0")
