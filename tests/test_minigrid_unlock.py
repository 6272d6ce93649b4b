"""MiniGrid Unlock: exact parity with minigrid 3.2.0 (door colours, unlocking reward)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from minatar_common import single_thread
from minigrid_common import ParityDriver, ReplayRandom, check_registered

from gpuvec_envs.envs.minigrid.unlock import AGENT_ATTEMPTS, Unlock, UnlockParams

pytestmark = pytest.mark.usefixtures("single_thread")
__all__ = ["single_thread"]

ID = "gpuvec/MiniGrid-Unlock-v0"
PROBS = [0.15, 0.15, 0.3, 0.15, 0.05, 0.2, 0.0]


def agent_attempts(ref: Any, rnd: ReplayRandom) -> None:
    """``RoomGrid.place_agent`` retries: our env draws ``AGENT_ATTEMPTS`` of them."""
    original = ref.place_agent
    span = AGENT_ATTEMPTS * (Unlock().placement_tries(UnlockParams()) + 1)

    def place_agent(*args: Any, **kwargs: Any) -> Any:
        start = rnd.pos
        out = original(*args, **kwargs)
        assert rnd.pos - start <= span
        rnd.pos = start + span
        return out

    ref.place_agent = place_agent


def test_parity() -> None:
    """16 envs x 120 steps: pickups, drops, toggles, resets."""
    d = ParityDriver(ID, 16, patch=agent_attempts, max_steps=40)
    d.reset(seed=12)
    d.run(120, np.random.default_rng(8), probs=PROBS)
    assert d.resets > 16 and d.carried > 0


def test_unlocking() -> None:
    """Agents given the key in front of the door: toggling unlocks, pays, ends the episode."""
    from minigrid.core.world_object import Key

    d = ParityDriver(ID, 16, patch=agent_attempts)
    d.reset(seed=13)
    s = d.env.state.env
    cells = s.cells.view(16, 6, 11).clone()
    door_y = ((cells[:, :, 5] & 15) == 4).int().argmax(1).to(torch.int32)
    key = (cells & 15) == 5
    carrying = (cells * key).flatten(1).amax(1)
    cells[key] = 1
    four = torch.full_like(door_y, 4)
    d.env.set_env_state(
        s._replace(
            cells=cells.view(16, -1),
            agent_x=four,
            agent_y=door_y,
            agent_dir=torch.zeros_like(door_y),
            carrying=carrying,
        )
    )
    for i, ref in enumerate(d.refs):
        ref.grid.set(*next(iter(_key_pos(ref))), None)
        ref.carrying = Key(ref.door.color)
        ref.agent_pos, ref.agent_dir = (4, int(door_y[i])), 0
    d.step(np.full(16, 5))  # toggle
    assert d.terminations == 16 and d.rewards > 15
    d.run(40, np.random.default_rng(9), probs=PROBS)


def _key_pos(ref: Any) -> list[tuple[int, int]]:
    g = ref.grid
    return [(i % g.width, i // g.width) for i, c in enumerate(g.grid) if c and c.type == "key"]


@pytest.mark.filterwarnings("ignore:.*out of date")
def test_registered() -> None:
    check_registered(ID)
