"""Checkpoints of the SB3 adapter, SB3's VecNormalize over it, the torch wrappers, and a
whole SB3 PPO run resumed to the uninterrupted result."""

from __future__ import annotations

import io
import pickle
import random
from typing import Any

import numpy as np
import pytest
import torch
from stable_baselines3 import PPO
from stable_baselines3.common.vec_env import VecNormalize

import gpuvec_envs  # noqa: F401 - registers the IDs
from gpuvec_envs.adapters.cleanrl import (
    ClipAction,
    NormalizeObservation,
    NormalizeReward,
    RecordEpisodeStatistics,
    RunningMeanStd,
)
from gpuvec_envs.adapters.sb3 import SB3VecEnv, make_sb3_vec_env
from gpuvec_envs.core.vector import GpuVecEnv


def roundtrip(sd: dict[str, Any]) -> dict[str, Any]:
    buf = io.BytesIO()
    torch.save(sd, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def sb3_env(n: int = 4, **kw: Any) -> SB3VecEnv:
    env_kwargs = {"max_episode_steps": 11, **kw}
    return make_sb3_vec_env("CartPole-v1", n, seed=0, backend="eager", env_kwargs=env_kwargs)


def sb3_run(env: Any, acts: list[np.ndarray]) -> list[tuple[Any, ...]]:
    out = []
    for a in acts:
        obs, rew, done, infos = env.step(a)
        eps = [(i["episode"]["r"], i["episode"]["l"]) for i in infos if "episode" in i]
        terms = [i["terminal_observation"].copy() for i in infos if "terminal_observation" in i]
        out.append((obs.copy(), rew.copy(), done.copy(), eps, terms))
    return out


def assert_sb3_equal(a: list[tuple[Any, ...]], b: list[tuple[Any, ...]]) -> None:
    for t, (x, y) in enumerate(zip(a, b, strict=True)):
        for u, v in zip(x[:3], y[:3], strict=True):
            np.testing.assert_array_equal(u, v, err_msg=f"step {t}")
        assert x[3] == y[3], f"step {t}: episode statistics differ"
        for u, v in zip(x[4], y[4], strict=True):
            np.testing.assert_array_equal(u, v, err_msg=f"step {t}: terminal observation")


def random_actions(n: int, steps: int, seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.integers(0, 2, n) for _ in range(steps)]


# -- SB3 adapter -----------------------------------------------------------------------------


def test_sb3_adapter_resumes_bitwise_with_monitor_statistics() -> None:
    env = sb3_env()
    env.reset()
    acts = random_actions(4, 30, 0)
    sb3_run(env, acts[:15])
    sd = roundtrip(env.state_dict())
    expected = sb3_run(env, acts[15:])
    twin = sb3_env()
    twin.load_state_dict(sd)  # no reset: the checkpoint is the state
    assert_sb3_equal(sb3_run(twin, acts[15:]), expected)
    assert any(step[3] for step in expected)  # episodes ended after the checkpoint


def test_sb3_adapter_rejects_mismatched_checkpoints_unchanged() -> None:
    env = sb3_env()
    env.reset()
    sb3_run(env, random_actions(4, 5, 1))
    sd = env.state_dict()
    unmonitored = make_sb3_vec_env(
        "CartPole-v1", 4, backend="eager", monitor=False, env_kwargs={"max_episode_steps": 11}
    )
    with pytest.raises(ValueError, match="monitor"):
        unmonitored.load_state_dict(sd)
    other = sb3_env(n=3)
    other.reset()
    before = other.state_dict()
    for bad, exc, match in [
        (sd, ValueError, "num_envs"),
        ({**before, "extra": 1}, ValueError, "unexpected keys \\['extra'\\]"),
        ({**before, "seeds": [None] * 4}, ValueError, "seeds"),
        ({**before, "episode": before["episode"][:1]}, ValueError, "episode"),
        ("nope", TypeError, "must be a dict"),
    ]:
        with pytest.raises(exc, match=match):
            other.load_state_dict(bad)
        assert torch.equal(
            other.state_dict()["venv"]["state"]["counter"], before["venv"]["state"]["counter"]
        )
        assert all(
            torch.equal(a, b) for a, b in zip(other._episode, before["episode"], strict=True)
        )


def test_vec_normalize_save_and_load_over_the_adapter(tmp_path: Any) -> None:
    """SB3's VecNormalize.save/load; with the adapter's checkpoint the run continues exactly.

    ``VecNormalize.load`` zeroes the running discounted returns (SB3 does not pickle them),
    so they are carried over by hand for an exact reward normalisation.
    """
    env = VecNormalize(sb3_env(), gamma=0.9)
    env.reset()
    acts = random_actions(4, 30, 2)
    sb3_run(env, acts[:18])
    path = tmp_path / "vecnormalize.pkl"
    env.save(str(path))
    sd = env.venv.state_dict()
    returns = env.returns.copy()
    expected = sb3_run(env, acts[18:])
    loaded = VecNormalize.load(str(path), sb3_env())
    loaded.venv.load_state_dict(sd)
    loaded.returns = returns
    assert_sb3_equal(sb3_run(loaded, acts[18:]), expected)
    np.testing.assert_array_equal(loaded.obs_rms.mean, env.obs_rms.mean)


# -- torch wrappers ------------------------------------------------------------------------


def wrapper_stack(mode: str) -> Any:
    env = GpuVecEnv(
        "gpuvec_envs.envs.classic.pendulum:Pendulum",
        3,
        backend="eager",
        autoreset_mode=mode,
        max_episode_steps=9,
    )
    env = RecordEpisodeStatistics(env, buffer_length=4)
    env = NormalizeObservation(env)
    return NormalizeReward(ClipAction(env), gamma=0.9)


def wrapper_run(env: Any, acts: list[torch.Tensor]) -> list[tuple[torch.Tensor, ...]]:
    out = []
    for a in acts:
        obs, rew, term, trunc, info = env.step(a)
        ep = info["episode"]
        out.append((obs.clone(), rew.clone(), term | trunc, ep["r"].clone(), ep["l"].clone()))
    return out


@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
def test_wrapper_stack_resumes_bitwise(mode: str) -> None:
    env = wrapper_stack(mode)
    env.reset(seed=1)
    gen = torch.Generator().manual_seed(0)
    acts = [torch.rand(3, 1, generator=gen, dtype=torch.float64) * 6 - 3 for _ in range(30)]
    wrapper_run(env, acts[:14])
    sd = pickle.loads(pickle.dumps(env.state_dict()))
    assert (
        sd["wrapper"] == "NormalizeReward" and sd["env"]["env"]["wrapper"] == "NormalizeObservation"
    )
    expected = wrapper_run(env, acts[14:])
    twin = wrapper_stack(mode)
    twin.load_state_dict(sd)
    got = wrapper_run(twin, acts[14:])
    for t, (x, y) in enumerate(zip(got, expected, strict=True)):
        for u, v in zip(x, y, strict=True):
            assert torch.equal(u, v), f"step {t}"
    stats = [twin.env.env.env, env.env.env.env]
    assert all(isinstance(w, RecordEpisodeStatistics) for w in stats)
    assert list(stats[0].return_queue) == list(stats[1].return_queue)
    assert int(stats[0].episode_count) == int(stats[1].episode_count) > 0


def test_wrapper_checkpoint_of_another_stack_changes_nothing() -> None:
    env = wrapper_stack("next_step")
    env.reset(seed=0)
    env.step(torch.zeros(3, 1, dtype=torch.float64))
    sd = env.state_dict()
    inner = env.env.env  # NormalizeObservation
    with pytest.raises(ValueError, match="NormalizeReward wrapper, not NormalizeObservation"):
        inner.load_state_dict(sd)
    bad = {**sd, "stats": {**sd["stats"], "accumulated_reward": torch.zeros(4)}}
    before = env.state_dict()
    with pytest.raises(ValueError, match="accumulated_reward"):
        env.load_state_dict(bad)
    deep = pickle.loads(pickle.dumps(sd))
    deep["env"]["env"]["env"]["env"]["num_envs"] = 4  # the GpuVecEnv's own checkpoint
    with pytest.raises(ValueError, match="num_envs"):
        env.load_state_dict(deep)
    after = env.state_dict()
    assert torch.equal(after["stats"]["accumulated_reward"], before["stats"]["accumulated_reward"])
    rms_a = after["env"]["env"]["stats"]["obs_rms"]
    rms_b = before["env"]["env"]["stats"]["obs_rms"]
    assert all(torch.equal(rms_a[k], rms_b[k]) for k in rms_a)


def test_running_mean_std_state_dict() -> None:
    rms = RunningMeanStd((2,))
    rms.update(torch.tensor([[1.0, 2.0], [3.0, 5.0]]))
    other = RunningMeanStd((2,))
    other.load_state_dict(rms.state_dict())
    assert all(torch.equal(getattr(other, k), getattr(rms, k)) for k in ("mean", "var", "count"))
    with pytest.raises(ValueError, match="mean"):
        other.load_state_dict({**rms.state_dict(), "mean": torch.zeros(3, dtype=torch.float64)})


# -- a whole SB3 training run --------------------------------------------------------------


def _ppo(env: SB3VecEnv) -> PPO:
    return PPO(
        "MlpPolicy",
        env,
        n_steps=32,
        batch_size=64,
        n_epochs=2,
        seed=0,
        device="cpu",
        policy_kwargs={"net_arch": [16]},
    )


@pytest.fixture
def one_thread() -> Any:
    """One intra-op thread, so that float reductions in the PPO update have a fixed order."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.usefixtures("one_thread")
def test_sb3_ppo_run_resumed_from_a_checkpoint_equals_the_uninterrupted_run(tmp_path: Any) -> None:
    """PPO for 4 rollouts straight, against 2 + save/load of model, env and RNGs + 2.

    ``PPO.load(..., force_reset=False)`` keeps the saved last observation, so the resumed
    run does not reset the env it has just restored.
    """
    straight = _ppo(sb3_env())
    straight.learn(256)

    first = _ppo(sb3_env())
    first.learn(128)
    first.save(tmp_path / "ppo")
    ckpt = {
        "env": first.get_env().state_dict(),
        "torch_rng": torch.get_rng_state(),
        "numpy_rng": np.random.get_state(),
        "random_rng": random.getstate(),
    }
    torch.save(ckpt, tmp_path / "extra.pt")
    del first

    ckpt = torch.load(tmp_path / "extra.pt", weights_only=False)
    env = sb3_env()
    env.load_state_dict(ckpt["env"])
    resumed = PPO.load(tmp_path / "ppo", env=env, device="cpu", force_reset=False)
    torch.set_rng_state(ckpt["torch_rng"])
    np.random.set_state(ckpt["numpy_rng"])
    random.setstate(ckpt["random_rng"])
    resumed.learn(128, reset_num_timesteps=False)

    assert resumed.num_timesteps == straight.num_timesteps == 256
    a, b = straight.policy.state_dict(), resumed.policy.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    np.testing.assert_array_equal(resumed._last_obs, straight._last_obs)


@pytest.mark.slow
def test_compiled_sb3_adapter_rewinds_through_the_fused_step() -> None:
    """The adapter's fused step keeps env state and episode statistics in its buffers."""
    env = make_sb3_vec_env(
        "CartPole-v1", 8, seed=0, backend="compile", env_kwargs={"max_episode_steps": 11}
    )
    env.reset()
    acts = random_actions(8, 40, 5)
    sb3_run(env, acts[:15])
    sd = env.state_dict()
    first = sb3_run(env, acts[15:])
    env.load_state_dict(sd)
    assert_sb3_equal(sb3_run(env, acts[15:]), first)
