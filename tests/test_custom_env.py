"""An env registered from outside the package (examples/custom_env.py) works everywhere.

``gpuvec_envs.register`` and its bad input; the example's FruitCatch against a numpy
reference by state injection; then through ``make_vec``, ``make``, SB3, the tensor wrappers
and the rollout collector, eager and compiled; the example's learning runs (slow).
"""

from __future__ import annotations

import importlib.util
import pathlib
import sys

import gymnasium as gym
import numpy as np
import pytest
import torch

import gpuvec_envs
from gpuvec_envs import GpuVecEnv, check_env_def
from gpuvec_envs.adapters import make_sb3_vec_env
from gpuvec_envs.adapters.cleanrl import NormalizeObservation, RecordEpisodeStatistics
from gpuvec_envs.rollout import RolloutCollector

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def load(name: str):
    """The example script as a module, loaded once per process."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


ex = load("custom_env")
ENV_ID = ex.ENV_ID


def follow(obs: torch.Tensor) -> torch.Tensor:
    """Move the basket towards the fruit: (N,) int64 actions from (N, 5) observations."""
    return (obs[:, 4].sign() + 1).to(torch.int64)


# -- register -----------------------------------------------------------------------------
def test_register_forms_defaults_and_replace():
    spec = gpuvec_envs.register("test/Fruit-v0", ex.FruitCatch(), max_episode_steps=7, wind=0.0)
    assert spec.id == "test/Fruit-v0" and spec.max_episode_steps == 7
    env = gym.make_vec("test/Fruit-v0", num_envs=3, backend="eager")
    assert isinstance(env, GpuVecEnv) and env.params.wind == 0.0 and env.cfg.max_episode_steps == 7
    assert gym.make_vec("test/Fruit-v0", num_envs=2, wind=0.5, backend="eager").params.wind == 0.5
    with pytest.raises(ValueError, match=r"'test/Fruit-v0' is already registered; pass replace"):
        gpuvec_envs.register("test/Fruit-v0", ex.FruitCatch)
    gpuvec_envs.register("test/Fruit-v0", "custom_env:FruitCatch", replace=True, width=5)
    single = gym.make("test/Fruit-v0")
    assert single.unwrapped.vector_env.params.width == 5
    assert single.spec.max_episode_steps is None
    del gym.registry["test/Fruit-v0"]


@pytest.mark.parametrize(
    ("args", "kwargs", "error", "match"),
    [
        (("test/Bad-v0", ex.FruitCatch), {"windd": 0.1}, TypeError, r"unknown keyword.*'windd'"),
        (("test/Bad-v0", ex.FruitCatch), {"num_envs": 4}, TypeError, "num_envs is chosen per"),
        (("test/Bad-v0", ex.FruitCatch), {"autoreset_mode": "same_step"}, TypeError, "per make"),
        (("test/Bad-v0", ex.FruitCatch), {"dtype": "int8"}, ValueError, "invalid defaults"),
        (("test/Bad-v0", ex.FruitCatch), {"max_episode_steps": 0}, ValueError, "max_episode"),
        (("test/Bad-v0", ex.FruitCatchParams), {}, TypeError, "must be an EnvDef subclass"),
        (("test/Bad-v0", 3), {}, TypeError, "must be an EnvDef subclass, instance or"),
        (("test/Bad-v0", "custom_env.FruitCatch"), {}, ValueError, "must be 'module:Class'"),
        (("test/Bad-v0", "custom_env:Nope"), {}, ValueError, "cannot import"),
        ((7, ex.FruitCatch), {}, TypeError, "env_id must be a str"),
        (("bad id/x y", ex.FruitCatch), {}, ValueError, "is not a gymnasium ID"),
        (("gpuvec/CartPole-v1", ex.FruitCatch), {}, ValueError, "already registered"),
    ],
)
def test_register_bad_input(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        gpuvec_envs.register(*args, **kwargs)
    assert "test/Bad-v0" not in gym.registry
    assert gym.spec("gpuvec/CartPole-v1").max_episode_steps == 500


# -- the example env against a reference ------------------------------------------------
def reference_step(p, s: dict, action: int) -> tuple[dict, float, bool]:
    """One FruitCatch step of one env in plain Python, without wind (no draws but respawn)."""
    basket = min(max(s["basket"] + action - 1, 0), p.width - 1)
    fy = s["fruit_y"] + 1
    landed = fy == p.height - 1
    caught = landed and s["fruit_x"] == basket
    reward = 1.0 if caught else -1.0 if landed else 0.0
    lives = s["lives"] - (landed and not caught)
    return {"basket": basket, "fruit_y": 0 if landed else fy, "lives": lives}, reward, lives == 0


def test_fruit_catch_matches_reference_by_state_injection():
    n = 64
    env = GpuVecEnv(ex.FruitCatch(), n, backend="eager", autoreset_mode="disabled", wind=0.0)
    env.reset(seed=3)
    gen = np.random.default_rng(0)
    for _ in range(40):
        s = env.state.env
        inject = ex.FruitCatchState(
            torch.from_numpy(gen.integers(0, 8, n)),
            torch.from_numpy(gen.integers(0, 8, n)),
            torch.from_numpy(gen.integers(0, 9, n)),
            torch.from_numpy(gen.integers(1, 4, n)),
        )
        env.set_env_state(inject)
        action = gen.integers(0, 3, n)
        obs, reward, term, _, _ = env.step(action)
        s = env.state.env
        for i in range(n):
            before = {
                k: int(getattr(inject, k)[i]) for k in ("basket", "fruit_x", "fruit_y", "lives")
            }
            want, r, t = reference_step(env.params, before, int(action[i]))
            got = {k: int(getattr(s, k)[i]) for k in want}
            assert got == want and float(reward[i]) == r and bool(term[i]) == t
            if want["fruit_y"] != 0:
                assert int(s.fruit_x[i]) == before["fruit_x"]  # no wind
        assert obs.dtype == torch.float32 and bool(((obs >= -1) & (obs <= 1)).all())


@pytest.mark.heavy
def test_fruit_catch_passes_the_checker_compiled():
    check_env_def(ex.FruitCatch, steps=16, trace=True, compiled=True)


# -- everywhere an env goes ---------------------------------------------------------------
def trajectory(env, steps: int, policy=follow):
    obs, _ = env.reset(seed=11)
    out = []
    for _ in range(steps):
        obs, r, term, trunc, _ = env.step(policy(obs))
        out.append((obs.clone(), r.clone(), term.clone(), trunc.clone()))
    return out


@pytest.mark.heavy
def test_make_vec_eager_and_compiled_time_limit_and_render():
    eager = gym.make_vec(ENV_ID, num_envs=8, backend="eager", autoreset_mode="same_step")
    comp = gym.make_vec(
        ENV_ID, num_envs=8, backend="compile", autoreset_mode="same_step", render_mode="rgb_array"
    )
    assert eager.cfg.max_episode_steps == 200 and comp.backend == "compile"
    a, b = trajectory(eager, 201), trajectory(comp, 201)
    assert comp.backend == "compile"
    for x, y in zip(a, b, strict=True):
        for t, u in zip(x, y, strict=True):
            assert torch.equal(t, u)
    rewards = torch.stack([x[1] for x in a])
    trunc = torch.stack([x[3] for x in a])
    term = torch.stack([x[2] for x in a])
    # following the fruit catches all 22 of 200 steps; every episode truncates at step 200
    assert torch.equal(rewards[:200].sum(0), torch.full((8,), 22.0))
    assert not term.any() and trunc[199].all() and not trunc[:199].any()
    frames = comp.render()
    assert len(frames) == 8 and frames[0].shape == (160, 128, 3) and frames[0].dtype == np.uint8
    obs = b[-1][0]
    cell = frames[0][144:160].reshape(16, 8, 16, 3)[0, :, 0]  # the bottom row's cells
    assert (cell == [240, 240, 240]).all(1).nonzero()[0].tolist() == [round(float(obs[0, 0]) * 7)]


def test_make_single_env_with_time_limit():
    env = gym.make(ENV_ID, render_mode="rgb_array")
    assert env.spec.max_episode_steps == 200
    obs, _ = env.reset(seed=5)
    assert obs.shape == (5,) and obs.dtype == np.float32 and env.observation_space.contains(obs)
    steps = 0
    while True:
        obs, r, term, trunc, _ = env.step(int(obs[4] > 0) - int(obs[4] < 0) + 1)
        steps += 1
        assert isinstance(r, float) and env.observation_space.contains(obs)
        if term or trunc:
            break
    assert term or steps == 200
    assert env.render().shape == (160, 128, 3)


@pytest.mark.parametrize("backend", ["eager", pytest.param("compile", marks=pytest.mark.slow)])
def test_sb3_adapter(backend):
    venv = make_sb3_vec_env(ENV_ID, n_envs=4, seed=0, backend=backend)
    obs = venv.reset()
    assert obs.shape == (4, 5) and obs.dtype == np.float32
    episodes = 0
    for _ in range(300):
        obs, rewards, dones, infos = venv.step(np.asarray(follow(torch.from_numpy(obs))))
        for i in np.flatnonzero(dones):
            episodes += 1
            assert "episode" in infos[i] and "terminal_observation" in infos[i]
            assert infos[i]["TimeLimit.truncated"] == (infos[i]["episode"]["l"] == 200)
    assert episodes >= 4


def test_tensor_wrappers():
    env = gym.make_vec(ENV_ID, num_envs=6, backend="eager")
    env = NormalizeObservation(RecordEpisodeStatistics(env))
    obs, _ = env.reset(seed=1)
    ended = 0
    for _ in range(250):
        obs, r, term, trunc, info = env.step(torch.randint(0, 3, (6,)))
        ended += int(info["_episode"].sum())
        assert obs.shape == (6, 5) and torch.isfinite(obs).all()
    assert ended >= 6  # random play loses its 3 lives in well under 250 steps


@pytest.mark.heavy
@pytest.mark.parametrize("scan", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_rollout_collector_eager_and_compiled(scan):
    rollouts = {}
    for backend in ("eager", "compile"):
        env = gym.make_vec(ENV_ID, num_envs=5, backend=backend, autoreset_mode="same_step")
        env.reset(seed=2)
        collector = RolloutCollector(env, follow, 12, backend=backend, scan=scan)
        rollouts[backend] = [tuple(t.clone() for t in collector.collect()[:5]) for _ in range(2)]
        if backend == "compile":  # the scan, or the loop of the env's compiled step
            assert collector.kind == ("scan" if scan else "env_step")
            assert scan or env.unwrapped._step.report is not None
    for a, b in zip(rollouts["eager"], rollouts["compile"], strict=True):
        for t, u in zip(a, b, strict=True):
            assert torch.equal(t, u)


# -- learning (slow) ----------------------------------------------------------------------
@pytest.mark.slow
def test_cleanrl_ppo_learns_fruit_catch():
    """Mean return of 50 episodes >= 20 of at most 22 (random play: about -2.5)."""
    result = ex.train_cleanrl(300_000, target=20.0, seed=1)
    assert result["mean_return"] >= 20.0, result


@pytest.mark.slow
def test_sb3_ppo_learns_fruit_catch():
    """Deterministic-policy mean return of 50 episodes >= 20 of at most 22."""
    assert ex.train_sb3(200_000, seed=1) >= 20.0
