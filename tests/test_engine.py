"""The generic shell over every registered env: registration, spaces, seeding, autoreset
bookkeeping, input validation; and the engine pieces (RNG, backends, CUDA)."""

from __future__ import annotations

import re
import resource
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space
from registry_ids import GENERIC_IDS
from torch.utils import _pytree as pytree

import gpuvec_envs
from gpuvec_envs.compiler import Backend, flat
from gpuvec_envs.compiler.pytree import layout, leaf_paths, make_flattener
from gpuvec_envs.core.allocator import retain_freed_memory
from gpuvec_envs.core.rng import RESET, STEP, Rng, keys_from_seeds
from gpuvec_envs.core.step import pure_step
from gpuvec_envs.core.vector import GpuVecEnv
from gpuvec_envs.registry import REGISTRY

ALL_IDS = GENERIC_IDS


def cuda(test):  # noqa: ANN001, ANN201 - a test needing a CUDA device (tools/gpu_check.sh)
    return pytest.mark.cuda(
        pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")(test)
    )


def make(env_id: str, n: int, **kwargs) -> GpuVecEnv:
    kwargs.setdefault("backend", "eager")
    return gym.make_vec(env_id, num_envs=n, **kwargs)


def sample_actions(env: GpuVecEnv, seed: int) -> torch.Tensor:
    env.action_space.seed(seed)
    return torch.as_tensor(env.action_space.sample())


def state_copy(env: GpuVecEnv):
    return pytree.tree_map(torch.clone, env.unwrapped.state)


def assert_same_state(a, b) -> None:
    for x, y in zip(pytree.tree_leaves(a), pytree.tree_leaves(b), strict=True):
        assert torch.equal(x, y)


# -- registration and spaces -----------------------------------------------------------


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_make_vec_spaces_and_metadata(env_id: str) -> None:
    env = make(env_id, 5)
    assert isinstance(env, GpuVecEnv) and env.num_envs == 5
    assert env.spec.id == env_id
    entry = next(e for e in REGISTRY if e.id == env_id)
    assert env.cfg.max_episode_steps == entry.max_episode_steps
    assert env.metadata["autoreset_mode"] is AutoresetMode.NEXT_STEP
    assert env.observation_space == batch_space(env.single_observation_space, 5)
    assert env.action_space == batch_space(env.single_action_space, 5)
    obs, info = env.reset(seed=0)
    assert info == {}
    assert obs.shape == env.observation_space.shape and obs.device == torch.device("cpu")
    assert env.observation_space.contains(obs.numpy())
    for t in range(20):
        obs, reward, term, trunc, _ = env.step(sample_actions(env, t))
        assert env.observation_space.contains(obs.numpy())
        assert reward.shape == (5,) and reward.is_floating_point()
        assert term.dtype == trunc.dtype == torch.bool and term.shape == trunc.shape == (5,)


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_single_env_passes_check_env(env_id: str) -> None:
    env = gym.make(env_id)
    entry = next(e for e in REGISTRY if e.id == env_id)
    assert env.spec.max_episode_steps == entry.max_episode_steps
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        check_env(env.unwrapped, skip_render_check=True)
    # gymnasium's own CartPole and Pendulum get these notices too
    benign = ("infinity", "symmetric and normalized")
    messages = [str(w.message) for w in caught if not any(b in str(w.message) for b in benign)]
    assert messages == []
    obs, _ = env.reset(seed=1)
    assert isinstance(obs, np.ndarray) and env.observation_space.contains(obs)
    obs, reward, term, trunc, info = env.step(env.action_space.sample())
    assert isinstance(reward, float) and isinstance(term, bool) and isinstance(trunc, bool)


def test_cartpole_through_make_and_module_prefix() -> None:
    env = gym.make("gpuvec_envs:gpuvec/CartPole-v1")
    assert isinstance(env.unwrapped, gpuvec_envs.GpuEnv)
    check_env(env.unwrapped)
    vec = gym.make_vec("gpuvec_envs:gpuvec/CartPole-v1", num_envs=3, device="cpu")
    assert vec.num_envs == 3 and vec.cfg.max_episode_steps == 500
    assert gym.make_vec("gpuvec/CartPole-v0", num_envs=2).cfg.max_episode_steps == 200
    env = gym.make("gpuvec/CartPole-v1", max_episode_steps=7)
    env.reset(seed=0)
    steps = 0
    trunc = term = False
    while not (term or trunc):
        _, _, term, trunc, _ = env.step(0 if steps % 2 else 1)
        steps += 1
    assert trunc and not term and steps == 7


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_unknown_kwargs_raise_type_error(env_id: str) -> None:
    with pytest.raises(TypeError, match="bogus"):
        make(env_id, 2, bogus=1)
    with pytest.raises(TypeError, match="bogus"):
        gym.make(env_id, bogus=1)


def test_bad_constructor_arguments() -> None:
    for kwargs, exc, match in [
        ({"num_envs": 0}, ValueError, "num_envs"),
        ({"dtype": torch.int32}, ValueError, "dtype"),
        ({"backend": "jax"}, ValueError, "backend"),
        ({"autoreset_mode": "sometimes"}, ValueError, "autoreset_mode"),
        ({"max_episode_steps": 0}, ValueError, "max_episode_steps"),
        ({"frame_skip": 0}, ValueError, "frame_skip"),
        ({"render_mode": "ansi"}, ValueError, "render_mode"),
    ]:
        with pytest.raises(exc, match=match):
            GpuVecEnv("gpuvec_envs.envs.classic.cartpole:CartPole", **{"num_envs": 2, **kwargs})


def test_dtype_device_and_autoreset_mode_spellings() -> None:
    env = make("gpuvec/CartPole-v1", 3, dtype="float64", device=torch.device("cpu"))
    assert env.dtype == torch.float64
    assert env.single_observation_space.dtype == np.float64
    obs, _ = env.reset(seed=0)
    assert obs.dtype == torch.float64
    for spelling in ("same_step", "SameStep", AutoresetMode.SAME_STEP):
        assert make("gpuvec/CartPole-v1", 1, autoreset_mode=spelling).autoreset_mode is (
            AutoresetMode.SAME_STEP
        )
    assert "CartPole-v1" in repr(env) and "eager" in repr(env)


# -- seeding -----------------------------------------------------------------------------


def rollout(env: GpuVecEnv, seed: int, steps: int, actions_of_env) -> torch.Tensor:
    """Observations (steps + 1, N, ...) with env i taking actions_of_env(t)[i]."""
    obs, _ = env.reset(seed=seed)
    out = [obs]
    for t in range(steps):
        obs, *_ = env.step(actions_of_env(t)[: env.num_envs])
        out.append(obs)
    return torch.stack(out)


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_seeding_is_per_env_and_independent_of_batch_size(env_id: str) -> None:
    big = make(env_id, 64, max_episode_steps=9)  # short limit: autoresets draw too
    small = make(env_id, 4, max_episode_steps=9)
    table = torch.stack([sample_actions(big, t) for t in range(40)])
    a = rollout(big, 100, 40, lambda t: table[t])
    b = rollout(small, 100, 40, lambda t: table[t])
    assert torch.equal(a[:, :4], b)
    assert torch.equal(rollout(big, 100, 40, lambda t: table[t]), a)
    c = rollout(big, 101, 40, lambda t: table[t].roll(-1, 0))
    assert torch.equal(c[:, :63], a[:, 1:]), "env i with seed s+1 is env i+1 with seed s"
    assert not torch.equal(c[:, :4], a[:, :4])
    seeds = [100 + i for i in range(4)]
    small.reset(seed=seeds)
    assert torch.equal(small.reset(seed=seeds)[0], a[0, :4])


def test_reset_without_seed_continues_streams_and_first_reset_is_random() -> None:
    env = make("gpuvec/CartPole-v1", 4)
    first, _ = env.reset()
    other = make("gpuvec/CartPole-v1", 4)
    assert not torch.equal(other.reset()[0], first)
    a, _ = env.reset(seed=3)
    b, _ = env.reset()
    assert not torch.equal(a, b)
    assert torch.equal(env.reset(seed=3)[0], a)


def test_bad_seeds_raise_and_keep_state() -> None:
    env = make("gpuvec/CartPole-v1", 3)
    env.reset(seed=0)
    before = state_copy(env)
    for seed, exc in [
        (-1, ValueError),
        (1.5, TypeError),
        ("a", TypeError),
        ([1, 2], ValueError),
        ([1, 2, -3], ValueError),
        (True, TypeError),
        (2**63, ValueError),
    ]:
        with pytest.raises(exc, match="seed"):
            env.reset(seed=seed)
        assert_same_state(env.unwrapped.state, before)


# -- autoreset bookkeeping over every env ----------------------------------------------------


@pytest.mark.parametrize(  # Seaquest's eager steps cost ~10x the others': heavy suite
    "env_id",
    [pytest.param(i, marks=pytest.mark.heavy) if "Seaquest" in i else i for i in ALL_IDS],
)
def test_autoreset_modes_bookkeeping(env_id: str) -> None:
    """Same-seed runs in the three modes agree until the first episode end of each env."""
    n, limit, steps = 16, 13, 60
    envs = {m: make(env_id, n, autoreset_mode=m, max_episode_steps=limit) for m in AutoresetMode}
    for env in envs.values():
        env.reset(seed=21)
    prev_done = torch.zeros(n, dtype=torch.bool)
    ended = torch.zeros(n, dtype=torch.bool)
    elapsed = torch.zeros(n, dtype=torch.int64)
    for t in range(steps):
        actions = sample_actions(envs[AutoresetMode.NEXT_STEP], t)
        nxt = envs[AutoresetMode.NEXT_STEP].step(actions)
        same = envs[AutoresetMode.SAME_STEP].step(actions)
        dis = envs[AutoresetMode.DISABLED].step(actions)
        # NEXT_STEP: the step after an episode end is a reset step.
        assert torch.equal(nxt[1][prev_done], torch.zeros(int(prev_done.sum()), dtype=nxt[1].dtype))
        assert not (nxt[2] | nxt[3])[prev_done].any()
        done = nxt[2] | nxt[3]
        elapsed = torch.where(prev_done, 0, elapsed + 1)
        assert torch.equal(nxt[3], (elapsed >= limit) & ~prev_done)
        live = ~ended
        for out in (same, dis):
            assert torch.equal(out[1][live], nxt[1][live])
            assert torch.equal(out[2][live], nxt[2][live])
        # SAME_STEP reports the pre-reset observation in info.
        same_done = same[2] | same[3]
        assert torch.equal(same[4]["_final_obs"], same_done)
        assert torch.equal(same[4]["_final_info"], same_done)
        assert torch.equal(same[4]["final_obs"][live], nxt[0][live])
        assert torch.equal(same[4]["final_obs"][live], dis[0][live])
        ended |= done
        prev_done = done
    assert ended.all(), "every env should end an episode within the test"


def test_reset_mask_resets_only_masked_envs() -> None:
    env = make("gpuvec/CartPole-v1", 4, autoreset_mode="disabled")
    env.reset(seed=0)
    for _ in range(5):
        env.step(torch.ones(4, dtype=torch.int64))
    before = state_copy(env)
    mask = torch.tensor([True, False, True, False])
    obs, _ = env.reset(options={"reset_mask": mask})
    after = env.unwrapped.state
    assert torch.equal(after.elapsed, torch.tensor([0, 5, 0, 5]))
    for old, new in zip(before.env, after.env, strict=True):
        assert torch.equal(new[~mask], old[~mask]) and not torch.equal(new[mask], old[mask])
    assert (obs[mask].abs() <= 0.05).all()
    with pytest.raises(TypeError, match="reset_mask"):
        env.reset(options={"reset_mask": torch.ones(4)})
    with pytest.raises(ValueError, match="reset_mask"):
        env.reset(options={"reset_mask": np.ones(3, dtype=bool)})


# -- input validation ----------------------------------------------------------------------


def bad_actions(env: GpuVecEnv) -> list[tuple[object, type, str]]:
    n = env.num_envs
    good = sample_actions(env, 0)
    cases = [
        (good[:-1], ValueError, "shape"),
        (good[None], ValueError, "shape"),
        (good.bool(), TypeError, "bool"),
        (good.to("meta"), ValueError, "cannot move"),
        (np.array(["a"] * n), TypeError, "numeric"),
    ]
    if isinstance(env.single_action_space, gym.spaces.Discrete):
        top = int(env.single_action_space.n)
        cases += [
            (good.double(), TypeError, "integer"),
            (np.full(n, top), ValueError, "outside"),
            (np.full(n, -1), ValueError, "outside"),
        ]
    else:
        nan = good.clone().double()
        nan[n // 2] = float("nan")
        cases += [
            (nan, ValueError, "not finite"),
            (good + float("inf"), ValueError, "not finite"),
            # the env's own dtype as a numpy array: prepare_action's fast path
            (nan.to(good.dtype).numpy(), ValueError, "not finite"),
        ]
    return cases


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_bad_actions_raise_and_leave_state_unchanged(env_id: str) -> None:
    env = make(env_id, 6)
    env.reset(seed=0)
    env.step(sample_actions(env, 1))
    before = state_copy(env)
    for action, exc, match in bad_actions(env):
        with pytest.raises(exc, match=match):
            env.step(action)
        assert_same_state(env.unwrapped.state, before)
    # good inputs in every accepted container
    good = sample_actions(env, 2)
    for action in (good, good.numpy(), good.tolist()):
        env.step(action)


def test_validate_false_skips_value_checks_and_step_before_reset_raises() -> None:
    env = make("gpuvec/CartPole-v1", 2, validate=False)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(2, dtype=np.int64))
    env.reset(seed=0)
    env.step(np.array([5, -3]))  # not checked: any value other than 1 pushes left
    with pytest.raises(TypeError):
        env.step(np.zeros(2, dtype=np.float32))  # dtype checks stay on


# -- CartPole options ------------------------------------------------------------------------


def test_cartpole_sutton_barto_reward_and_reset_bounds() -> None:
    env = make("gpuvec/CartPole-v1", 4, sutton_barto_reward=True, autoreset_mode="same_step")
    obs, _ = env.reset(seed=0, options={"low": -0.2, "high": -0.1})
    assert ((obs >= -0.2) & (obs < -0.1)).all()
    with pytest.raises(ValueError):
        env.reset(options={"low": 1.0, "high": 0.0})
    rewards = set()
    for _ in range(300):
        _, reward, term, _, _ = env.step(torch.ones(4, dtype=torch.int64))
        assert torch.equal(reward, torch.where(term, -1.0, 0.0))
        rewards |= set(reward.tolist())
    assert rewards == {0.0, -1.0}


# -- RNG ----------------------------------------------------------------------------------------


def test_rng_streams_depend_only_on_seed_and_counter() -> None:
    k0, k1 = keys_from_seeds(torch.arange(10, 74))
    counter = torch.arange(64) % 5
    a = Rng(k0, k1, counter, STEP).bits(3, 2)
    b = Rng(k0[7:9], k1[7:9], counter[7:9], STEP).bits(3, 2)
    assert torch.equal(a[7:9], b)
    assert not torch.equal(Rng(k0, k1, counter, RESET).bits(3, 2), a)
    u = Rng(k0, k1, counter, STEP).uniform(1000, dtype=torch.float64)
    assert (u >= 0).all() and (u < 1).all() and abs(float(u.mean()) - 0.5) < 0.01
    assert torch.equal(u * (1 << 24), torch.floor(u * (1 << 24))), "24-bit draws"
    r = Rng(k0, k1, counter, STEP).randint(6, 2000)
    assert set(r.unique().tolist()) == set(range(6))
    assert len(set(k0.tolist())) == 64
    for p in (0.0, 0.1, 1 / 3, 0.5, 2**-24, 1.0):
        draws = Rng(k0, k1, counter, STEP)
        expected = Rng(k0, k1, counter, STEP).uniform(500, dtype=torch.float64) < p
        assert torch.equal(draws.bernoulli(p, 500), expected), p


@pytest.mark.heavy
def test_rng_bitwise_equal_eager_and_compiled() -> None:
    def draws(k0, k1, c):
        rng = Rng(k0, k1, c, STEP)
        return rng.bits(4), rng.uniform(3, low=-0.05, high=0.05, dtype=torch.float64)

    k0, k1 = keys_from_seeds(torch.arange(256))
    c = torch.arange(256) * 3
    eager = draws(k0, k1, c)
    compiled = torch.compile(draws, fullgraph=True, dynamic=False)(k0, k1, c)
    assert torch.equal(eager[0], compiled[0]) and torch.equal(eager[1], compiled[1])


# -- backends ------------------------------------------------------------------------------------


def compiled_graphs() -> int:
    """Graphs compiled so far: guard-free fused graphs plus torch.compile (dynamo) graphs."""
    return flat.compiled_graphs + torch._dynamo.utils.counters["stats"]["unique_graphs"]


@pytest.mark.parametrize("env_id", ALL_IDS)
@pytest.mark.parametrize("mode", ["NextStep", "SameStep"])
def test_a_step_returns_its_whole_state_first_as_it_took_it(env_id: str, mode: str) -> None:
    """What a CUDA graph replay relies on (compiler/cuda_graph.py): the step's output leaf i
    is the next value of its input leaf i for every state leaf, which the replay feeds back
    into its static buffers; a state leaf the step left out or reordered would be frozen at
    capture or written into another leaf's buffer."""
    env = make(env_id, 8, autoreset_mode=mode).unwrapped
    env.reset(seed=5)
    state, action = env.state, sample_actions(env, 1)
    out = pure_step(env.env_def, env.params, env._step_cfg, state, action)
    assert leaf_paths(out.state, "s") == leaf_paths(state, "s")  # the same tree
    n = len(leaf_paths(state))
    fed_back = make_flattener((out,))(out)[:n]
    took = make_flattener((state,))(state)
    assert [layout(t)[:2] for t in fed_back] == [layout(t)[:2] for t in took]
    env.step(action)  # the state the shell keeps is the one fed back
    assert all(map(torch.equal, fed_back, make_flattener((env.state,))(env.state)))


def test_compiled_cartpole_is_one_graph_without_recompiles() -> None:
    """Steps in all modes, reset(seed), reset_mask and state injection reuse one graph each."""
    torch._dynamo.reset()
    for mode in AutoresetMode:
        env = make(
            "gpuvec/CartPole-v1",
            32,
            backend="compile",
            autoreset_mode=mode,
            max_episode_steps=20,
            validate=False,
        )
        env.reset(seed=0)
        before = compiled_graphs()
        for t in range(60):
            obs = env.step(sample_actions(env, t))[0]
            assert obs.stride() == (1, 32)  # column-wise observation, see README
            if t == 10:
                env.reset(seed=5)
            if t == 20:
                env.reset(options={"reset_mask": torch.arange(32) % 2 == 0})
            if t == 30:
                env.set_env_state(env.state.env)
            # the guard-free call relies on the shell keeping every state leaf contiguous
            assert all(leaf.is_contiguous() for leaf in pytree.tree_leaves(env.state))
        assert env.backend == "compile"
        assert compiled_graphs() - before == 1


def _count_steps(out, extra):  # noqa: ANN001, ANN202 - a post function for GpuVecEnv.fuse
    (count,) = extra
    count = count + 1
    done = (out.terminated | out.truncated) != 0
    return (torch.where(done, 0, count),), (out.obs, out.reward * 2, count)


@pytest.mark.parametrize("backend", ["eager", pytest.param("compile", marks=pytest.mark.heavy)])
def test_fuse_runs_a_post_function_in_the_step(backend: str) -> None:
    """fuse(post) steps as step() does, carries post's state and follows set_params.

    The reference is an eager env: equal bit for bit to an eager fused step, and to float32
    rounding to a compiled one (inductor may contract a*b+c into an FMA).
    """
    kw = dict(autoreset_mode="same_step", max_episode_steps=15, validate=False)
    plain = make("gpuvec/CartPole-v1", 16, backend="eager", **kw)
    env = make("gpuvec/CartPole-v1", 16, backend=backend, **kw)
    fused = env.fuse(_count_steps)
    plain.reset(seed=3)
    env.reset(seed=3)

    def same(a: torch.Tensor, b: torch.Tensor) -> bool:
        if backend == "eager" or not a.is_floating_point():
            return torch.equal(a, b)
        return torch.allclose(a, b, rtol=1e-5, atol=1e-6)

    extra = (torch.zeros(16, dtype=torch.int64),)
    length = torch.zeros(16, dtype=torch.int64)
    ends = 0
    for t in range(40):
        if t == 25:  # new params: the fused step must use them too
            plain.set_params(masspole=0.4)
            env.set_params(masspole=0.4)
        action = sample_actions(env, t)
        obs, reward, term, trunc, _ = plain.step(action)
        length += 1
        extra, (f_obs, f_reward2, f_count) = fused(extra, env.prepare_action(action))
        assert same(f_obs, obs) and same(f_reward2, reward * 2)
        assert torch.equal(f_count, length)  # the count includes this step
        length[term | trunc] = 0
        ends += int((term | trunc).sum())
        assert torch.equal(extra[0], length)
        leaves = zip(pytree.tree_leaves(env.state), pytree.tree_leaves(plain.state), strict=True)
        assert all(same(a, b) for a, b in leaves)
        if backend == "compile":  # keep the trajectories identical despite rounding
            plain.set_env_state(env.state.env)
    assert ends >= 16  # every env ended at least once (time limit 15)


def test_compile_failure_falls_back_to_eager_with_warning() -> None:
    def impure(x: torch.Tensor) -> torch.Tensor:
        if x.sum().item() > 0:  # a host sync: a graph break, fatal under fullgraph=True
            return x + 1
        return x - 1

    backend = Backend(impure, (), "compile", "fallback_test")
    with pytest.warns(RuntimeWarning, match="eager"):
        out = backend(torch.ones(3))
    assert backend.name == "eager" and torch.equal(out, torch.full((3,), 2.0))
    report = backend.report
    assert report.strategy == "eager" and not report.fast_path and report.passes == ()
    assert [f.strategy for f in report.fallbacks] == ["flat_call", "torch_compile"]
    assert all(re.match(r"\w+: \S", f.reason) for f in report.fallbacks)  # "Type: message"
    assert [s.strategy for s in report.skipped] == ["cuda_graph", "in_place_state"]


# -- CUDA (skipped without a GPU) -----------------------------------------------------------------


@cuda
def test_cuda_rng_matches_cpu() -> None:
    k0, k1 = keys_from_seeds(torch.arange(1000))
    c = torch.arange(1000)
    cpu = Rng(k0, k1, c, STEP).bits(7)
    gpu = Rng(k0.cuda(), k1.cuda(), c.cuda(), STEP).bits(7)
    assert torch.equal(cpu, gpu.cpu())


@cuda
@pytest.mark.parametrize("backend", ["eager", "compile"])
def test_cuda_cartpole_matches_cpu_without_host_sync(backend: str) -> None:
    kwargs = {
        "dtype": torch.float64,
        "autoreset_mode": "same_step",
        "validate": False,
        "max_episode_steps": 50,
    }
    cpu = make("gpuvec/CartPole-v1", 256, backend="eager", **kwargs)
    gpu = make("gpuvec/CartPole-v1", 256, backend=backend, device="cuda", **kwargs)
    gpu.reset(seed=4)
    gpu.step(sample_actions(cpu, 0).cuda())  # compile outside the no-sync region
    cpu.reset(seed=4)
    gpu.reset(seed=4)
    for t in range(100):
        a = sample_actions(cpu, t)
        a_gpu = a.cuda()
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            g = gpu.step(a_gpu)
        finally:
            torch.cuda.set_sync_debug_mode(0)
        c = cpu.step(a)
        torch.testing.assert_close(g[0].cpu(), c[0], rtol=0, atol=1e-9)
        assert torch.equal(g[2].cpu(), c[2]) and torch.equal(g[3].cpu(), c[3])


def test_cartpole_rgb_array_render_follows_the_state() -> None:
    env = make("gpuvec/CartPole-v1", 3, render_mode="rgb_array")
    assert make("gpuvec/CartPole-v1", 1).render() is None
    env.reset(seed=0)
    s = env.state.env
    x = torch.tensor([-1.0, 0.0, 1.5])
    env.set_env_state(s._replace(x=x, theta=torch.tensor([0.2, 0.0, -0.2])))
    frames = env.render()
    assert len(frames) == 3 and frames[0].shape == (400, 600, 3) and frames[0].dtype == np.uint8
    black_cols = [np.flatnonzero((f[399 - 90] == 0).all(-1)) for f in frames]  # y = 90
    for cols, xi in zip(black_cols, x.tolist(), strict=True):
        centre = (cols.min() + cols.max() + 1) / 2
        assert abs(centre - (xi * 600 / 4.8 + 300)) <= 1.0
    pole = [np.argwhere((f == (202, 152, 101)).all(-1)) for f in frames]
    assert pole[0][:, 1].max() > black_cols[0].max() - 25  # leaning right for theta > 0
    assert pole[1][:, 1].min() >= 295 and pole[1][:, 1].max() <= 305  # upright
    assert np.array_equal(env.render([2])[0], frames[2])
    single = gym.make("gpuvec/CartPole-v1", render_mode="rgb_array")
    single.reset(seed=0)
    assert single.render().shape == (400, 600, 3)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc mallopt")
def test_cpu_steps_reuse_freed_memory_instead_of_page_faulting() -> None:
    """Fresh outputs reuse the previous step's freed memory (~500 faults/step without, ~6 with).

    The bound leaves room for a test process whose heap is already fragmented (51 seen).
    """
    env = make("gpuvec/CartPole-v1", 65536, backend="eager", validate=False)
    if not retain_freed_memory():
        pytest.skip("not glibc, or GPUVEC_RETAIN_MEMORY=0")
    env.reset(seed=0)
    action = torch.zeros(65536, dtype=torch.int64)
    for _ in range(30):
        env.step(action)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(30):
        env.step(action)
    assert (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 30 < 150
