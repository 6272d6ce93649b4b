"""Tensor vector wrappers (gpuvec_envs.adapters.cleanrl) against gymnasium's numpy vector wrappers.

Parity method: record a trajectory of the raw tensor env, replay it as numpy through a
gymnasium VectorEnv into gymnasium's wrapper, and run our wrapper on a fresh env with the
same seed and actions; both wrappers then see the same data step by step. Staggered
episode ends come from a counter env whose episodes last 2..8 steps (drawn per env), cut
by a time limit of 6, so endings are both terminations and truncations at different steps.
"""

from __future__ import annotations

import dataclasses
import math
from typing import NamedTuple

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.wrappers import vector as gvec
from gymnasium.wrappers.utils import RunningMeanStd as NpRunningMeanStd

import gpuvec_envs  # noqa: F401  (registers the IDs)
from gpuvec_envs.adapters.cleanrl import (
    ClipAction,
    FlattenObservation,
    NormalizeObservation,
    NormalizeReward,
    RecordEpisodeStatistics,
    RescaleAction,
    RunningMeanStd,
    TransformObservation,
    TransformReward,
    episode_stats,
    to_numpy,
    to_torch,
)
from gpuvec_envs.core.env import EnvDef
from gpuvec_envs.core.vector import GpuVecEnv

N, T, LIMIT = 6, 40, 6
MODES = [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP]


# -- a counter env: obs encodes the step count, episodes of random length ---------------------
@dataclasses.dataclass(frozen=True)
class CounterParams:
    min_len: int = 2
    max_len: int = 8


class CounterState(NamedTuple):
    t: torch.Tensor  # (N,) steps since reset
    length: torch.Tensor  # (N,) termination step of this episode
    last_a: torch.Tensor  # (N,) last action


class Counter(EnvDef[CounterState, CounterParams]):
    """obs = [t, length, last action, t^2/10]; reward = t + action; ends at t == length."""

    params_type = CounterParams

    def observation_space(self, params, dtype):
        return gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)

    def action_space(self, params, dtype):
        return gym.spaces.Box(-1.0, 1.0, (1,), np.float32)

    def reset(self, params, rng, dtype, options):
        span = params.max_len - params.min_len + 1
        length = (params.min_len + rng.randint(span)).to(dtype)
        zero = torch.zeros_like(length)
        return CounterState(zero, length, zero)

    def step(self, params, state, action, rng):
        t = state.t + 1
        a = action[:, 0]
        return CounterState(t, state.length, a), t + a, t >= state.length

    def observation(self, params, state):
        return torch.stack((state.t, state.length, state.last_a, state.t * state.t / 10), 1)


def counter_env(mode: AutoresetMode, n: int = N) -> GpuVecEnv:
    return GpuVecEnv(Counter(), n, max_episode_steps=LIMIT, autoreset_mode=mode, backend="eager")


def actions(t: int = T, n: int = N, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, (t, n, 1)).astype(np.float32)


class Replay(gym.vector.VectorEnv):
    """A numpy vector env that replays a recorded trajectory (ignores its actions)."""

    def __init__(self, source: GpuVecEnv, reset_obs, steps):
        self.num_envs = source.num_envs
        self.metadata = {"autoreset_mode": source.autoreset_mode}
        self.single_observation_space = source.single_observation_space
        self.single_action_space = source.single_action_space
        self.observation_space = source.observation_space
        self.action_space = source.action_space
        self._reset_obs, self._steps, self._i = reset_obs, steps, 0

    def reset(self, *, seed=None, options=None):
        self._i = 0
        return self._reset_obs.copy(), {}

    def step(self, actions):
        obs, rew, term, trunc, info = self._steps[self._i]
        self._i += 1
        return obs.copy(), rew.copy(), term.copy(), trunc.copy(), dict(info)


def record(mode: AutoresetMode, acts: np.ndarray, seed: int = 7) -> Replay:
    env = to_numpy(counter_env(mode, acts.shape[1]))
    reset_obs, _ = env.reset(seed=seed)
    steps = [env.step(a) for a in acts]
    return Replay(env.unwrapped, reset_obs, steps)


# -- RecordEpisodeStatistics ---------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_episode_statistics_staggered_ends(mode):
    """r, l and the mask are exact under staggered terminations and truncations."""
    acts = actions()
    env = RecordEpisodeStatistics(counter_env(mode))
    env.reset(seed=7)
    ret = np.zeros(N)
    length = np.zeros(N, dtype=int)
    prev_done = np.zeros(N, dtype=bool)
    ended = []
    mixed_steps = 0
    for k in range(T):
        obs, rew, term, trunc, info = env.step(torch.from_numpy(acts[k]))
        done = (term | trunc).numpy()
        # independent bookkeeping: what a numpy loop over the raw data would count
        rew = rew.numpy().astype(np.float64)
        if mode is AutoresetMode.NEXT_STEP:
            ret = np.where(prev_done, 0.0, ret + rew)
            length = np.where(prev_done, 0, length + 1)
        else:
            ret, length = ret + rew, length + 1
        last = info["final_obs"].numpy() if mode is AutoresetMode.SAME_STEP else obs.numpy()
        # the episode's length is the step count in its last observation (exact check)
        np.testing.assert_array_equal(length[done], last[done, 0])
        assert (last[done, 0] == np.minimum(last[done, 1], LIMIT)).all()
        np.testing.assert_array_equal(info["_episode"].numpy(), done)
        np.testing.assert_array_equal(info["episode"]["l"].numpy(), np.where(done, length, 0))
        np.testing.assert_allclose(info["episode"]["r"].numpy(), np.where(done, ret, 0.0))
        t = info["episode"]["t"].numpy()
        assert (t[~done] == 0).all() and (t[done] >= 0).all() and (t[done] < 60).all()
        assert info["episode"]["l"].dtype == torch.int64
        mixed_steps += bool(done.any() and not done.all())
        ended += list(ret[done])
        if mode is AutoresetMode.SAME_STEP:
            ret, length = np.where(done, 0.0, ret), np.where(done, 0, length)
        prev_done = done
    assert mixed_steps >= 5  # ends really are staggered
    assert int(env.episode_count) == len(ended) > 20
    np.testing.assert_allclose(list(env.return_queue), ended[-100:])
    assert all(isinstance(x, int) for x in env.length_queue)


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_episode_statistics_match_gymnasium(mode):
    """Same info['episode'] r/l/mask and queues as gymnasium's numpy wrapper, same data."""
    acts = actions()
    ref = gvec.RecordEpisodeStatistics(record(mode, acts), buffer_length=7)
    ours = RecordEpisodeStatistics(counter_env(mode), buffer_length=7)
    ref.reset()
    ours.reset(seed=7)
    for k in range(T):
        *_, ri = ref.step(acts[k])
        *_, oi = ours.step(torch.from_numpy(acts[k]))
        if "_episode" not in ri:
            assert not oi["_episode"].any()
            continue
        np.testing.assert_array_equal(oi["_episode"].numpy(), ri["_episode"])
        np.testing.assert_array_equal(oi["episode"]["l"].numpy(), ri["episode"]["l"])
        np.testing.assert_allclose(oi["episode"]["r"].numpy(), ri["episode"]["r"], rtol=1e-6)
    assert int(ours.episode_count) == ref.episode_count
    np.testing.assert_allclose(list(ours.return_queue), list(ref.return_queue), rtol=1e-6)
    assert list(ours.length_queue) == list(ref.length_queue)
    assert len(ours.time_queue) == 7


def test_episode_statistics_ring_buffer_overflow():
    """More endings in one step than the buffer holds keeps the last ones, in env order."""
    env = RecordEpisodeStatistics(counter_env(AutoresetMode.SAME_STEP, n=16), buffer_length=5)
    env.reset(seed=3)
    seen = []
    for _ in range(12):
        *_, info = env.step(torch.zeros(16, 1))
        seen += info["episode"]["l"][info["_episode"]].tolist()
    assert list(env.length_queue) == seen[-5:]
    assert int(env.episode_count) == len(seen)


def test_episode_statistics_partial_reset_and_key_clash():
    env = RecordEpisodeStatistics(counter_env(AutoresetMode.SAME_STEP))
    env.reset(seed=1)
    env.step(torch.ones(N, 1))
    mask = torch.tensor([True, False, False, False, False, True])
    env.reset(options={"reset_mask": mask})
    assert env.episode_lengths.tolist() == [0, 1, 1, 1, 1, 0]
    with pytest.raises(ValueError, match="already has"):
        RecordEpisodeStatistics(env).step(torch.zeros(N, 1))


# -- NormalizeObservation ------------------------------------------------------------------
def test_normalize_observation_matches_gymnasium_next_step():
    mode = AutoresetMode.NEXT_STEP
    acts = actions()
    ref = gvec.NormalizeObservation(record(mode, acts))
    ours = NormalizeObservation(counter_env(mode))
    ro, _ = ref.reset()
    oo, _ = ours.reset(seed=7)
    np.testing.assert_allclose(oo.numpy(), ro, rtol=1e-5, atol=1e-5)
    for k in range(T):
        ro, *_ = ref.step(acts[k])
        oo, *_ = ours.step(torch.from_numpy(acts[k]))
        assert oo.dtype == torch.float32
        np.testing.assert_allclose(oo.numpy(), ro, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ours.obs_rms.mean.numpy(), ref.obs_rms.mean, rtol=1e-5)
    np.testing.assert_allclose(ours.obs_rms.var.numpy(), ref.obs_rms.var, rtol=1e-5)
    assert float(ours.obs_rms.count) == pytest.approx(ref.obs_rms.count)


def test_normalize_observation_same_step_counts_final_obs():
    """SAME_STEP (refused by gymnasium's vector wrapper): every observation returned plus
    the final observations of the ended episodes, merged by gymnasium's own numpy
    RunningMeanStd with variable-size batches."""
    mode = AutoresetMode.SAME_STEP
    acts = actions()
    data = record(mode, acts)
    rms = NpRunningMeanStd(shape=(4,))
    ours = NormalizeObservation(counter_env(mode))
    oo, _ = ours.reset(seed=7)
    rms.update(data._reset_obs.astype(np.float64))
    for k in range(T):
        obs, _, term, trunc, info = data._steps[k]
        oo, _, _, _, oi = ours.step(torch.from_numpy(acts[k]))
        batch = obs
        if "final_obs" in info:
            batch = np.concatenate((info["final_obs"][info["_final_obs"]], obs))
        rms.update(batch.astype(np.float64))
        scale = np.sqrt(rms.var + 1e-8)
        np.testing.assert_allclose(oo.numpy(), (obs - rms.mean) / scale, rtol=1e-5, atol=1e-5)
        done = term | trunc
        np.testing.assert_allclose(
            oi["final_obs"].numpy()[done],
            (info["final_obs"][done] - rms.mean) / scale if done.any() else np.zeros((0, 4)),
            rtol=1e-5,
            atol=1e-5,
        )
    np.testing.assert_allclose(ours.obs_rms.mean.numpy(), rms.mean, rtol=1e-10)
    np.testing.assert_allclose(ours.obs_rms.var.numpy(), rms.var, rtol=1e-10)
    assert float(ours.obs_rms.count) == pytest.approx(rms.count, rel=1e-12)


def test_normalize_observation_frozen_and_partial_reset():
    env = NormalizeObservation(counter_env(AutoresetMode.NEXT_STEP))
    env.reset(seed=2)
    count = float(env.obs_rms.count)
    env.reset(options={"reset_mask": torch.tensor([True, True, False, False, False, False])})
    assert float(env.obs_rms.count) == pytest.approx(count + 2)
    env.update_running_mean = False
    env.step(torch.zeros(N, 1))
    assert float(env.obs_rms.count) == pytest.approx(count + 2)


def test_running_mean_std_weights_match_subset():
    x = torch.randn(9, 3, dtype=torch.float64)
    w = torch.tensor([1, 0, 1, 1, 0, 0, 1, 1, 0], dtype=torch.bool)
    a, b = RunningMeanStd((3,)), RunningMeanStd((3,))
    a.update(x, w)
    b.update(x[w])
    torch.testing.assert_close(a.mean, b.mean)
    torch.testing.assert_close(a.var, b.var)
    a.update(x, torch.zeros(9, dtype=torch.bool))  # an empty batch changes nothing
    torch.testing.assert_close(a.var, b.var)
    assert float(a.count) == float(b.count)


# -- NormalizeReward -----------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_normalize_reward_matches_gymnasium(mode):
    acts = actions()
    ref = gvec.NormalizeReward(record(mode, acts), gamma=0.9)
    ours = NormalizeReward(counter_env(mode), gamma=0.9)
    ref.reset()
    ours.reset(seed=7)
    for k in range(T):
        _, rr, *_ = ref.step(acts[k])
        _, orr, *_ = ours.step(torch.from_numpy(acts[k]))
        assert orr.dtype == torch.float32
        np.testing.assert_allclose(orr.numpy(), rr, rtol=1e-5)
        np.testing.assert_allclose(
            ours.accumulated_reward.numpy(), ref.accumulated_reward, rtol=1e-5
        )
    np.testing.assert_allclose(float(ours.return_rms.var), ref.return_rms.var, rtol=1e-5)
    np.testing.assert_allclose(float(ours.return_rms.mean), ref.return_rms.mean, rtol=1e-5)
    assert float(ours.return_rms.count) == pytest.approx(ref.return_rms.count)


class ReplayOne(gym.Env):
    """Env ``i`` of a recorded vector trajectory as a single env (for per-env wrappers).

    Under a ``SyncVectorEnv`` of the same autoreset mode it sees exactly env ``i``'s steps:
    in ``NEXT_STEP`` mode the vector env calls ``reset`` instead of ``step`` on the
    autoreset step, so ``reset`` skips that recorded step (reward 0, no flags).
    """

    def __init__(self, replay: Replay, i: int):
        self.observation_space = replay.single_observation_space
        self.action_space = replay.single_action_space
        self._replay, self._i, self._k = replay, i, 0

    def reset(self, *, seed=None, options=None):
        if self._k > 0 and self._replay.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP:
            self._k += 1
        return self._replay._reset_obs[self._i].copy(), {}

    def step(self, action):
        obs, rew, term, trunc, _ = self._replay._steps[self._k]
        self._k += 1
        i = self._i
        return obs[i].copy(), float(rew[i]), bool(term[i]), bool(trunc[i]), {}


@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_normalize_reward_per_env_matches_gymnasium_single_env_wrappers(mode):
    """``per_env=True`` is a SyncVectorEnv of gymnasium's single-env NormalizeReward.

    That is CleanRL's setup (``make_env`` wraps each env). Its discounted return is never
    restarted at a truncation (Counter's time limit truncates some episodes here; Pendulum
    only truncates), it survives ``reset``, and each env has its own variance; gymnasium's
    vector wrapper (the default) restarts the return and shares one variance.
    """
    acts = actions(t=60)
    rec = record(mode, acts)
    ref = gym.vector.SyncVectorEnv(
        [lambda i=i: gym.wrappers.NormalizeReward(ReplayOne(rec, i), gamma=0.9) for i in range(N)],
        autoreset_mode=mode,
    )
    ours = NormalizeReward(counter_env(mode), gamma=0.9, per_env=True)
    shared = NormalizeReward(counter_env(mode), gamma=0.9)
    ref.reset()
    ours.reset(seed=7)
    shared.reset(seed=7)
    truncated_mid_return = False
    for k in range(acts.shape[0]):
        _, rr, term, trunc, _ = ref.step(acts[k])
        _, orr, oterm, otrunc, _ = ours.step(torch.from_numpy(acts[k]))
        _, srr, *_ = shared.step(torch.from_numpy(acts[k]))
        np.testing.assert_array_equal(oterm.numpy(), term)
        np.testing.assert_array_equal(otrunc.numpy(), trunc)
        np.testing.assert_allclose(orr.numpy(), rr, rtol=1e-6)
        g = np.array([e.discounted_reward[0] for e in ref.envs])
        np.testing.assert_allclose(ours.accumulated_reward.numpy(), g, rtol=1e-9)
        truncated_mid_return |= bool((trunc & (np.abs(g) > 0)).any())
    for i, e in enumerate(ref.envs):
        np.testing.assert_allclose(float(ours.return_rms.var[i]), e.return_rms.var, rtol=1e-9)
        np.testing.assert_allclose(float(ours.return_rms.mean[i]), e.return_rms.mean, rtol=1e-9)
        assert float(ours.return_rms.count[i]) == pytest.approx(e.return_rms.count)
    assert truncated_mid_return  # a return did run on over a truncation
    assert not np.allclose(srr.numpy(), orr.numpy())  # and the vector semantics differ
    # a full reset keeps the per-env returns, as the single-env wrapper does
    before = ours.accumulated_reward.clone()
    ours.reset(seed=7)
    assert torch.equal(ours.accumulated_reward, before)


def test_running_mean_std_update_each_skips_zero_weights():
    """update_each: one sample per component, as separate scalar statistics; weight 0 skips."""
    rng = np.random.default_rng(3)
    xs = rng.normal(size=(9, 3))
    w = rng.uniform(size=(9, 3)) < 0.6
    ours = RunningMeanStd((3,), "cpu")
    refs = [NpRunningMeanStd(shape=()) for _ in range(3)]
    for x, wk in zip(xs, w, strict=True):
        ours.update_each(torch.from_numpy(x), torch.from_numpy(wk))
        for i in range(3):
            if wk[i]:
                refs[i].update(np.array([x[i]]))
    for i in range(3):
        assert float(ours.mean[i]) == pytest.approx(refs[i].mean, rel=1e-12)
        assert float(ours.var[i]) == pytest.approx(refs[i].var, rel=1e-12)
        assert float(ours.count[i]) == pytest.approx(refs[i].count, rel=1e-12)


# -- action, transform and flatten wrappers ------------------------------------------------
def test_clip_and_rescale_action_match_gymnasium():
    raw = counter_env(AutoresetMode.NEXT_STEP)
    a = np.random.default_rng(1).uniform(-3, 3, (N, 1)).astype(np.float32)
    for ours, ref in (
        (ClipAction(raw), gvec.ClipAction(to_numpy(raw))),
        (RescaleAction(raw, -5.0, 3.0), gvec.RescaleAction(to_numpy(raw), -5.0, 3.0)),
    ):
        assert ours.single_action_space == ref.single_action_space
        ours.reset(seed=0)
        obs, *_ = ours.step(torch.from_numpy(a))  # obs[:, 2] is the action the env got
        np.testing.assert_allclose(obs[:, 2].numpy(), ref.actions(a)[:, 0], rtol=1e-6)
    with pytest.raises(TypeError):
        ClipAction(gym.make_vec("gpuvec/CartPole-v1", num_envs=2, backend="eager"))


def test_transform_and_flatten_observation_same_step():
    env = counter_env(AutoresetMode.SAME_STEP)
    env = TransformObservation(env, lambda o: o * 2)
    env = TransformReward(env, lambda r: -r)
    env = TransformObservation(env, lambda o: o.reshape(-1, 2, 2), gym.spaces.Box(-1, 1, (2, 2)))
    env = FlattenObservation(env)
    assert env.single_observation_space.shape == (4,)
    env.reset(seed=5)
    for _ in range(LIMIT):
        obs, rew, term, trunc, info = env.step(torch.zeros(N, 1))
    done = term | trunc
    assert done.any()
    raw = info["final_obs"][done]
    assert raw.shape[1] == 4
    # the final obs went through both transforms: step count doubled
    assert (raw[:, 0] == 2 * torch.minimum(raw[:, 1] / 2, torch.tensor(LIMIT))).all()
    assert (obs[done, 0] == 0).all()
    assert (rew < 0).all()


# -- array views ---------------------------------------------------------------------------
def test_numpy_view_runs_an_unmodified_gymnasium_loop():
    """The loop of gymnasium's RecordEpisodeStatistics docstring, on numpy arrays."""
    ref_like = gym.make_vec("CartPole-v1", num_envs=3, vectorization_mode="sync")
    envs = to_numpy(
        RecordEpisodeStatistics(gym.make_vec("gpuvec/CartPole-v1", num_envs=3, backend="eager"))
    )
    for e in (ref_like, envs):
        assert e.single_observation_space == ref_like.single_observation_space
    obs, info = envs.reset(seed=123)
    _ = envs.action_space.seed(123)
    assert isinstance(obs, np.ndarray) and obs.shape == (3, 4) and info == {}
    end = False
    steps = 0
    while not end:
        obs, rew, term, trunc, info = envs.step(envs.action_space.sample())
        assert isinstance(rew, np.ndarray) and term.dtype == np.bool_
        end = term.any() or trunc.any()
        steps += 1
        if not end:
            assert "episode" not in info and "_episode" not in info
    i = int(np.flatnonzero(info["_episode"])[0])
    assert info["episode"]["l"][i] == steps and info["episode"]["r"][i] == steps
    envs.close()


def test_torch_view_of_sync_vector_env_and_episode_stats():
    mode = AutoresetMode.SAME_STEP
    sync = gym.make_vec(
        "CartPole-v1",
        num_envs=2,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": mode},
        wrappers=[gym.wrappers.RecordEpisodeStatistics],
    )
    env = to_torch(sync, "cpu")
    obs, _ = env.reset(seed=0)
    assert isinstance(obs, torch.Tensor) and obs.shape == (2, 4)
    lengths = []
    for _ in range(200):
        obs, rew, term, trunc, info = env.step(torch.ones(2, dtype=torch.int64))
        assert isinstance(term, torch.Tensor) and term.dtype == torch.bool
        stats = episode_stats(info)
        if stats is not None:
            r, ell, m = stats
            lengths += ell[m].tolist()
    assert len(lengths) > 10 and all(8 <= x <= 12 for x in lengths)


# -- real CartPole, float64, staggered ends by state injection ----------------------------
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_cartpole_episode_lengths_match_reference_under_injection(mode):
    """Inject different pole angles so envs fall at different steps; lengths and returns
    equal those of gymnasium's CartPole started from the same states (float64)."""
    n = 5
    env = RecordEpisodeStatistics(
        gym.make_vec(
            "gpuvec/CartPole-v1",
            num_envs=n,
            backend="eager",
            dtype="float64",
            autoreset_mode=mode,
        )
    )
    env.reset(seed=0)
    theta = torch.tensor([0.0, 0.05, 0.1, 0.15, 0.2], dtype=torch.float64)
    state = env.unwrapped.state.env
    zeros = torch.zeros(n, dtype=torch.float64)
    env.unwrapped.set_env_state(type(state)(zeros, zeros, theta, zeros))
    expected = []
    for th in theta.tolist():
        ref = gym.make("CartPole-v1").unwrapped
        ref.reset(seed=0)
        ref.state = np.array([0.0, 0.0, th, 0.0])
        k = 0
        while True:
            k += 1
            *_, term, _, _ = ref.step(1)
            if term:
                break
        expected.append(k)
    assert len(set(expected)) == n
    got = {}
    for _ in range(max(expected) + 1):
        *_, info = env.step(torch.ones(n, dtype=torch.int64))
        for i in np.flatnonzero(info["_episode"].numpy()):
            got.setdefault(int(i), int(info["episode"]["l"][i]))
            assert float(info["episode"]["r"][i]) == got[int(i)]
    assert [got[i] for i in range(n)] == expected
    assert math.isfinite(float(env.time_queue[0]))


# -- any device ----------------------------------------------------------------------------
@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("mode", MODES, ids=lambda m: m.name)
def test_wrapper_stack_on_cuda_matches_cpu(mode):
    """The full CleanRL stack gives the same numbers on CUDA as on CPU (tensors stay there)."""

    def stack(device):
        env = GpuVecEnv(
            Counter(), N, max_episode_steps=LIMIT, autoreset_mode=mode, backend="eager",
            device=device,
        )  # fmt: skip
        env = RecordEpisodeStatistics(env)
        env = ClipAction(env)
        env = NormalizeObservation(env)
        env = TransformObservation(env, lambda o: torch.clamp(o, -10, 10))
        env = NormalizeReward(env)
        return TransformReward(env, lambda r: torch.clamp(r, -10, 10))

    acts = torch.from_numpy(actions() * 2)
    outs = {}
    for device in ("cpu", "cuda"):
        env = stack(device)
        env.reset(seed=7)
        outs[device] = []
        for k in range(T):
            obs, rew, term, trunc, info = env.step(acts[k].to(device))
            assert obs.device.type == device and info["episode"]["r"].device.type == device
            outs[device].append((obs, rew, term, info["episode"]["r"], info["_episode"]))
    for a, b in zip(outs["cpu"], outs["cuda"], strict=True):
        for x, y in zip(a, b, strict=True):
            torch.testing.assert_close(x, y.cpu(), rtol=1e-5, atol=1e-6)
