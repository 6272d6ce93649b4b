"""MiniGrid DoorKey and FourRooms: exact parity with minigrid 3.2.0, registration."""

from __future__ import annotations

import numpy as np
import pytest
from minatar_common import single_thread
from minigrid_common import ParityDriver, check_registered

from gpuvec_envs.registry import MINIGRID

pytestmark = pytest.mark.usefixtures("single_thread")
__all__ = ["single_thread"]

IDS = [e.id for e in MINIGRID if "-DoorKey-" in e.id or "-FourRooms-" in e.id]
#: forward, pickup and toggle often enough to carry keys and open doors
REGISTERED = ["gpuvec/MiniGrid-DoorKey-5x5-v0", "gpuvec/MiniGrid-FourRooms-v0"]
PROBS = [0.15, 0.15, 0.35, 0.1, 0.05, 0.15, 0.05]


@pytest.mark.parametrize("env_id", IDS)
def test_parity(env_id: str) -> None:
    """16 envs x 120 steps of random actions; a short horizon for frequent resets."""
    d = ParityDriver(env_id, 16, max_steps=40)
    d.reset(seed=7)
    d.run(120, np.random.default_rng(4), probs=PROBS)
    assert d.resets > 16
    if "DoorKey" in env_id:
        assert d.carried > 0
    if env_id.endswith(("5x5-v0", "6x6-v0")):  # random agents rarely get farther
        assert d.open_doors > 0


def test_parity_full_obs() -> None:
    d = ParityDriver("gpuvec/MiniGrid-DoorKey-6x6-v0", 16, obs_mode="full", max_steps=40)
    d.reset(seed=8)
    d.run(100, np.random.default_rng(5), probs=PROBS)
    assert d.truncations > 0


@pytest.mark.filterwarnings("ignore:.*out of date")
@pytest.mark.parametrize("env_id", REGISTERED)
def test_registered(env_id: str) -> None:
    check_registered(env_id)
