"""MiniGrid Empty: exact parity with minigrid 3.2.0, observation modes, registration."""

from __future__ import annotations

import numpy as np
import pytest
from minatar_common import single_thread
from minigrid_common import ParityDriver, check_registered

from gpuvec_envs.registry import MINIGRID

pytestmark = pytest.mark.usefixtures("single_thread")
__all__ = ["single_thread"]

IDS = [e.id for e in MINIGRID if "-Empty-" in e.id]


@pytest.mark.parametrize("env_id", IDS)
def test_parity(env_id: str) -> None:
    """16 envs x 100 steps of random actions (forward-heavy), goals and resets."""
    d = ParityDriver(env_id, 16, max_steps=40)
    d.reset(seed=3)
    d.run(100, np.random.default_rng(1), probs=[0.15, 0.15, 0.5, 0.05, 0.05, 0.05, 0.05])
    assert d.resets > 16
    if "16x16" not in env_id:  # random agents rarely cross the big room
        assert d.terminations > 0


def test_parity_options() -> None:
    """Full observations, a smaller view and occlusion on."""
    d = ParityDriver(
        "gpuvec/MiniGrid-Empty-Random-6x6-v0", 16, obs_mode="full", see_through_walls=False
    )
    d.reset(seed=4)
    d.run(60, np.random.default_rng(2))
    d = ParityDriver("gpuvec/MiniGrid-Empty-Random-6x6-v0", 16, agent_view_size=5)
    d.reset(seed=5)
    d.run(60, np.random.default_rng(3))


@pytest.mark.filterwarnings("ignore:.*out of date")
def test_registered() -> None:
    check_registered("gpuvec/MiniGrid-Empty-8x8-v0")
