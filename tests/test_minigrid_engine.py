"""MiniGrid on the engine: autoreset modes, eager vs compiled, frames against minigrid's."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from compile_checks import assert_fast_path
from minatar_common import single_thread
from minigrid_common import ParityDriver
from test_minigrid_unlock import agent_attempts

from gpuvec_envs.registry import MINIGRID

pytestmark = pytest.mark.usefixtures("single_thread")
__all__ = ["single_thread"]

PROBS = [0.15, 0.15, 0.35, 0.1, 0.05, 0.15, 0.05]


@pytest.mark.parametrize("mode", ["SameStep", "Disabled"])
def test_autoreset_modes_match_reference(mode: str) -> None:
    """SAME_STEP (final_obs, then the reset of the same step) and DISABLED (finished
    episodes keep stepping, as the reference does) against minigrid; NEXT_STEP is the
    default of every parity test."""
    d = ParityDriver("gpuvec/MiniGrid-DoorKey-5x5-v0", 16, autoreset_mode=mode, max_steps=25)
    d.reset(seed=21)
    d.run(70, np.random.default_rng(10), probs=PROBS)
    assert d.truncations > 0
    d = ParityDriver("gpuvec/MiniGrid-LavaGapS5-v0", 16, autoreset_mode=mode, max_steps=25)
    d.reset(seed=22)
    d.run(40, np.random.default_rng(11), probs=[0.2, 0.2, 0.6, 0, 0, 0, 0])
    assert d.terminations > 0


@pytest.mark.parametrize(
    "env_id",
    [
        "gpuvec/MiniGrid-DoorKey-6x6-v0",
        "gpuvec/MiniGrid-LavaCrossingS9N2-v0",
        "gpuvec/MiniGrid-Dynamic-Obstacles-6x6-v0",
        "gpuvec/MiniGrid-Unlock-v0",
        "gpuvec/MiniGrid-KeyCorridorS4R3-v0",
    ],
)
def test_frames_equal_minigrid(env_id: str) -> None:
    """``render_frames`` (32-pixel tiles, the agent's view highlighted) equals minigrid's
    ``get_frame`` pixel for pixel, carried keys and open doors included."""
    patch = agent_attempts if "Unlock" in env_id else None
    d = ParityDriver(env_id, 6, patch=patch, max_steps=30)
    d.reset(seed=1)
    rng = np.random.default_rng(0)
    n_actions = int(d.env.single_action_space.n)
    for _ in range(3):
        d.run(10, rng, probs=PROBS if n_actions == 7 else None)
        ours = d.env.unwrapped.render_frames().numpy()
        for i, ref in enumerate(d.refs):
            np.testing.assert_array_equal(ours[i], ref.get_frame(highlight=True, tile_size=32))


def compare_backends(env_id: str, n: int, steps: int, **kwargs) -> None:
    """Eager and compiled envs of ``env_id`` step alike (bitwise), resets included."""
    envs = [
        gym.make_vec(env_id, num_envs=n, backend=b, **kwargs).unwrapped
        for b in ("eager", "compile")
    ]
    first = [e.reset(seed=5)[0] for e in envs]
    assert torch.equal(*first)
    gen = torch.Generator().manual_seed(6)
    dones = 0
    for t in range(steps):
        action = torch.randint(0, int(envs[0].single_action_space.n), (n,), generator=gen)
        out_e, out_c = (e.step(action) for e in envs)
        for name, x, y in zip(
            ("obs", "reward", "terminated", "truncated"), out_e, out_c, strict=False
        ):
            assert x.dtype == y.dtype and torch.equal(x, y), f"{name} differs at step {t}"
        dones += int((out_e[2] | out_e[3]).sum())
    assert dones > 0
    leaves = torch.utils._pytree.tree_leaves
    for x, y in zip(leaves(envs[0].state), leaves(envs[1].state), strict=True):
        assert torch.equal(x, y)
    assert_fast_path(envs[1].compile_report)


# One compile: ~40-80 s on a loaded 2-core CPU.
def test_compiled_matches_eager() -> None:
    compare_backends("gpuvec/MiniGrid-DoorKey-5x5-v0", 32, 120, max_episode_steps=40)


@pytest.mark.slow
@pytest.mark.parametrize("env_id", [e.id for e in MINIGRID])
def test_every_id_compiled_matches_eager(env_id: str) -> None:
    compare_backends(env_id, 32, 150, max_episode_steps=40)


@pytest.mark.slow
@pytest.mark.parametrize("env_id", [e.id for e in MINIGRID])
def test_every_id_long_parity(env_id: str) -> None:
    """16 envs x 2000 steps against the reference, the registered horizon."""
    patch = agent_attempts if "Unlock" in env_id else None
    d = ParityDriver(env_id, 16, patch=patch)
    d.reset(seed=31)
    n_actions = int(d.env.single_action_space.n)
    d.run(2000, np.random.default_rng(12), probs=PROBS if n_actions == 7 else None)


LANE_IDS = [
    "gpuvec/MiniGrid-FourRooms-v0",
    "gpuvec/MiniGrid-Unlock-v0",
    "gpuvec/MiniGrid-DoorKey-8x8-v0",
    "gpuvec/MiniGrid-KeyCorridorS3R1-v0",
]


@pytest.mark.parametrize("env_id", LANE_IDS)
def test_cuda_candidate_layout_draws_the_cpu_layouts_grids(
    env_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Placements laid along the cells (CUDA's layout, ``_grid.LANE_DEVICES``) pick the
    same cells as K candidates drawn directly (every placement, ``LANE_MAX_CHUNKS = 0``):
    equal grids over many resets."""
    from gpuvec_envs.envs.minigrid import _grid

    def grids(lane_devices: tuple[str, ...], max_chunks: int = 0) -> list[torch.Tensor]:
        monkeypatch.setattr(_grid, "LANE_DEVICES", lane_devices)
        monkeypatch.setattr(_grid, "LANE_MAX_CHUNKS", max_chunks)
        env = gym.make_vec(env_id, num_envs=256, backend="eager", max_episode_steps=3)
        vec = env.unwrapped

        def grid() -> torch.Tensor:
            g = vec.env_def.grid_state(vec.state.env)
            return torch.cat([g.cells, torch.stack([g.agent_x, g.agent_y, g.agent_dir], 1)], 1)

        env.reset(seed=7)
        out = [grid()]
        for _ in range(7):  # autoresets draw new grids at steps 3 and 6
            env.step(torch.zeros(256, dtype=torch.int64))
            out.append(grid())
        env.close()
        return out

    cpu, lanes = grids(("cuda",)), grids(("cuda", "cpu"))
    assert all(torch.equal(a, b) for a, b in zip(cpu, lanes, strict=True))
