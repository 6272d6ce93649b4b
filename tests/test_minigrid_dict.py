"""MiniGrid's dict observation (``obs_mode="dict"``): parity with minigrid's raw dict obs."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from minatar_common import single_thread
from minigrid_common import ParityDriver
from test_minigrid_engine import compare_backends

from gpuvec_envs.adapters.cleanrl import RecordEpisodeStatistics, to_numpy
from gpuvec_envs.core.wrapper import StructuredObservation
from gpuvec_envs.envs.minigrid._grid import COLOR_TO_IDX
from gpuvec_envs.registry import MINIGRID, entry

pytestmark = pytest.mark.usefixtures("single_thread")
__all__ = ["single_thread"]

PROBS = [0.15, 0.15, 0.35, 0.1, 0.05, 0.15, 0.05]
DOORKEY = "gpuvec/MiniGrid-DoorKey-5x5-v0"


@pytest.mark.parametrize(
    ("env_id", "mode", "steps"),
    [
        (DOORKEY, "NextStep", 300),
        ("gpuvec/MiniGrid-LavaGapS5-v0", "SameStep", 300),
        ("gpuvec/MiniGrid-SimpleCrossingS9N1-v0", "NextStep", 200),
        ("gpuvec/MiniGrid-Dynamic-Obstacles-Random-6x6-v0", "SameStep", 200),
        ("gpuvec/MiniGrid-Unlock-v0", "Disabled", 200),
        ("gpuvec/MiniGrid-KeyCorridorS3R3-v0", "SameStep", 200),
    ],
)
def test_parity_with_minigrid_dict(env_id: str, mode: str, steps: int) -> None:
    """image, direction and mission (the reference's string mapped to its index) equal
    minigrid's raw dict at every step, over resets; SAME_STEP's final_obs too."""
    d = ParityDriver(env_id, 12, obs_mode="dict", autoreset_mode=mode, max_steps=30)
    assert isinstance(d.env, StructuredObservation)
    d.reset(seed=40)
    n_actions = int(d.env.single_action_space.n)
    d.run(steps, np.random.default_rng(41), probs=PROBS if n_actions == 7 else None)
    assert d.terminations + d.truncations > 12
    if mode != "Disabled":
        assert d.resets > 24


def test_spaces_and_missions() -> None:
    """The Dict space is minigrid's with the mission as Discrete(len(missions)): one
    mission (index 0) per ID, except KeyCorridor's six "pick up the <colour> ball"."""
    for e in MINIGRID:
        env = gym.make_vec(e.id, num_envs=2, backend="eager", obs_mode="dict")
        ref = gym.make(e.reference).unwrapped
        space = env.single_observation_space
        assert isinstance(space, gym.spaces.Dict) and list(space) == [
            "direction",
            "image",
            "mission",
        ]
        assert space["image"] == ref.observation_space["image"]
        assert space["direction"] == ref.observation_space["direction"]
        base = env.unwrapped
        missions = base.env_def.missions(base.params)
        ref.reset(seed=0)
        assert space["mission"] == gym.spaces.Discrete(len(missions))
        if "KeyCorridor" in e.id:
            assert missions == tuple(f"pick up the {c} ball" for c in sorted(COLOR_TO_IDX))
        else:
            assert missions == (ref.mission,)
        env.close()


def test_batch_layout() -> None:
    """Dtypes and shapes; the image equals obs_mode="image"'s, the direction the state's."""
    kw = {"num_envs": 5, "backend": "eager", "autoreset_mode": "SameStep"}
    env = gym.make_vec(DOORKEY, obs_mode="dict", **kw)
    plain = gym.make_vec(DOORKEY, **kw)
    obs, _ = env.reset(seed=3)
    image, _ = plain.reset(seed=3)
    gen = torch.Generator().manual_seed(0)
    for _ in range(40):
        assert obs["image"].dtype == torch.uint8 and obs["image"].shape == (5, 7, 7, 3)
        assert obs["image"].is_contiguous() and torch.equal(obs["image"], image)
        assert obs["direction"].dtype == torch.int64 and obs["direction"].shape == (5,)
        assert torch.equal(obs["direction"], env.unwrapped.state.env.agent_dir.long())
        assert torch.equal(obs["mission"], torch.zeros(5, dtype=torch.int64))
        assert env.observation_space.contains({k: v.numpy() for k, v in obs.items()})
        action = torch.randint(0, 7, (5,), generator=gen)
        obs, _, _, _, info = env.step(action)
        image, _, _, _, plain_info = plain.step(action)
        assert set(info["final_obs"]) == {"image", "direction", "mission"}
        assert torch.equal(info["final_obs"]["image"], plain_info["final_obs"])


def test_single_env() -> None:
    """``gymnasium.make(..., obs_mode="dict")``: numpy dict obs (numpy int64 scalars),
    gymnasium's check_env without warnings, the batch's first env."""
    single = gym.make(DOORKEY, obs_mode="dict")
    vec = gym.make_vec(DOORKEY, num_envs=1, backend="eager", obs_mode="dict")
    assert single.observation_space == vec.single_observation_space
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(single.unwrapped)
    obs, _ = single.reset(seed=9)
    assert type(obs["direction"]) is np.int64 and type(obs["mission"]) is np.int64
    assert obs["image"].shape == (7, 7, 3) and obs["image"].dtype == np.uint8
    batch, _ = vec.reset(seed=9)
    for action in (0, 2, 1, 2):
        for k in obs:
            np.testing.assert_array_equal(obs[k], batch[k][0].numpy())
        obs = single.step(action)[0]
        batch = vec.step(torch.tensor([action]))[0]


def test_wrappers_and_checkpoints() -> None:
    """Tensor wrappers stack on it, to_numpy gives numpy dicts, a checkpoint restores it."""
    env = RecordEpisodeStatistics(
        gym.make_vec(DOORKEY, num_envs=4, backend="eager", obs_mode="dict", max_steps=10)
    )
    env.reset(seed=1)
    actions = torch.tensor([[a % 7, (a + 2) % 7, 2, 5] for a in range(30)])
    for a in actions[:12]:
        env.step(a)
    saved = env.state_dict()
    first = [env.step(a) for a in actions[12:]]
    env.load_state_dict(saved)
    for a, (obs, rew, *_rest, info) in zip(actions[12:], first, strict=True):
        obs2, rew2, *_rest2, info2 = env.step(a)
        assert all(torch.equal(obs[k], obs2[k]) for k in obs) and torch.equal(rew, rew2)
        assert torch.equal(info["episode"]["r"], info2["episode"]["r"])
    view = to_numpy(gym.make_vec(DOORKEY, num_envs=2, backend="eager", obs_mode="dict"))
    obs, _ = view.reset(seed=0)
    assert {k: type(v) for k, v in obs.items()} == dict.fromkeys(obs, np.ndarray)


def test_bad_input() -> None:
    """An unknown obs_mode names the valid ones; consumers of the one-tensor observation
    (SB3, the rollout collector) refuse the dict with a hint."""
    with pytest.raises(ValueError, match=r"obs_mode must be one of \('image', 'full', 'dict'\)"):
        gym.make_vec(DOORKEY, num_envs=2, obs_mode="Dict")
    with pytest.raises(ValueError, match="obs_mode must be one of"):
        gym.make(DOORKEY, obs_mode="rgb")
    with pytest.raises(TypeError, match="obs_mode"):  # not an option of other envs
        gym.make_vec("gpuvec/CartPole-v1", num_envs=2, obs_mode="dict")
    from gpuvec_envs.adapters.sb3 import make_sb3_vec_env
    from gpuvec_envs.rollout import RolloutCollector

    with pytest.raises(TypeError, match="obs_mode='image'"):
        make_sb3_vec_env(DOORKEY, n_envs=2, env_kwargs={"obs_mode": "dict"}, backend="eager")
    env = gym.make_vec(DOORKEY, num_envs=2, backend="eager", obs_mode="dict")
    with pytest.raises(ValueError, match="obs_mode='dict'"):
        RolloutCollector(env, lambda obs: obs[:, 0].long() % 7, 4)


@pytest.mark.slow
def test_compiled_matches_eager() -> None:
    """The packed dict row compiles with the step (bitwise equal to eager)."""
    assert entry(DOORKEY).max_episode_steps == 250
    compare_backends(DOORKEY, 16, 60, max_episode_steps=20, obs_mode="dict")
