"""MiniGrid KeyCorridor: exact parity with minigrid 3.2.0 (generation bounds, ball pickup)."""

from __future__ import annotations

import numpy as np
import pytest
from minatar_common import single_thread
from minigrid_common import ParityDriver, check_registered

from gpuvec_envs.envs.minigrid.keycorridor import (
    KeyCorridor,
    KeyCorridorParams,
    additions,
    connect_iterations,
)
from gpuvec_envs.registry import MINIGRID

pytestmark = pytest.mark.usefixtures("single_thread")
__all__ = ["single_thread"]

IDS = [e.id for e in MINIGRID if "-KeyCorridor" in e.id]
PROBS = [0.15, 0.15, 0.35, 0.15, 0.05, 0.15, 0.0]


def test_bounds() -> None:
    """The documented T, additions and K, M."""
    assert [connect_iterations(r) for r in (1, 2, 3)] == [114, 239, 375]
    assert [additions(r) for r in (1, 2, 3)] == [1, 4, 8]
    env = KeyCorridor()
    ks = [env.placement_tries(KeyCorridorParams(room_size=s)) for s in (3, 4, 5, 6)]
    assert ks == [176, 73, 47, 36]


@pytest.mark.parametrize("env_id", IDS)
def test_parity(env_id: str) -> None:
    """12 envs x 80 steps of random actions with a short horizon: every layout, door
    colour, key and ball as minigrid draws them, over many resets."""
    d = ParityDriver(env_id, 12, max_steps=15)
    d.reset(seed=5)
    d.run(80, np.random.default_rng(6), probs=PROBS)
    assert d.resets > 60


def test_pickup_ball_ends() -> None:
    """Agents put on the opened door facing the ball (S3R1: one free cell per room):
    picking it up pays and ends the episode in both implementations; the dict
    observation's mission index maps to the reference's "pick up the <colour> ball"."""
    d = ParityDriver("gpuvec/MiniGrid-KeyCorridorS3R1-v0", 8, obs_mode="dict")
    d.reset(seed=3)
    # S3R1 rooms have one free cell: the ball at (5, 1); the agent must pass the locked
    # door at (4, 1): open it in both, then stand on it facing the ball
    st = d.vec.state.env
    grid = st.grid
    cells = grid.cells.clone()
    cells[:, 1 * 7 + 4] = 4 | (cells[:, 1 * 7 + 4] & 0xF0)  # door open: state 0
    four, zero = grid.agent_x * 0 + 4, grid.agent_x * 0
    d.vec.set_env_state(
        st._replace(grid=grid._replace(cells=cells, agent_x=four, agent_y=zero + 1, agent_dir=zero))
    )
    for ref in d.refs:
        ref.grid.get(4, 1).is_locked = False
        ref.grid.get(4, 1).is_open = True
        ref.agent_pos, ref.agent_dir = (4, 1), 0
    d.step(np.full(8, 3))  # pickup, facing the ball
    assert d.terminations == 8 and d.rewards > 7
    d.run(30, np.random.default_rng(2), probs=PROBS)


@pytest.mark.filterwarnings("ignore:.*out of date")
def test_registered() -> None:
    check_registered("gpuvec/MiniGrid-KeyCorridorS3R3-v0")
