"""Warm start: a call that an earlier process compiled builds at the first ``auto`` call."""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import threading

import gymnasium as gym
import pytest
import torch
from test_background import _Double, _no_child

import gpuvec_envs  # noqa: F401 - registers the IDs
from gpuvec_envs.compiler import Backend, warm
from gpuvec_envs.compiler import backend as compiler_backend


def _times2(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def _backend(mode: str, on: bool = True) -> Backend:
    return Backend(_times2, (), mode, "warm", strategies=(_Double(),), compiler={"warm_start": on})


@pytest.fixture
def markers(tmp_path, monkeypatch):
    folder = tmp_path / "gpuvec_warm"
    monkeypatch.setattr(warm, "marker_dir", lambda: folder)
    _no_child(monkeypatch)
    return folder


def test_a_compile_leaves_a_marker_and_auto_then_builds_at_its_first_call(markers):
    x = torch.arange(4.0)
    cold = _backend("background")
    assert torch.equal(cold(x), x * 2) and cold.name == "eager"  # no marker: eager
    cold.cancel()
    first = _backend("compile")
    assert torch.equal(first(x), x * 2 + 1000)
    assert len(list(markers.iterdir())) == 1
    hot = _backend("auto")
    assert torch.equal(hot(x), x * 2 + 1000)  # compiled at the very first call
    assert hot.name == "compile" and hot.eager_calls == 0 and hot._pending is None


@pytest.mark.heavy
def test_the_background_switch_leaves_a_marker(markers, monkeypatch):
    monkeypatch.setattr(compiler_backend, "START_AFTER_S", 0.0)
    x = torch.arange(4.0)
    b = _backend("background")
    b(x)
    assert b.wait(60)
    assert torch.equal(b(x), x * 2 + 1000) and b.eager_calls == 1
    assert [p.name for p in markers.iterdir()] == [
        warm.call_key(_times2, (), (x,), b._warm_settings())
    ]


@pytest.mark.heavy
def test_other_shapes_and_the_switch_off_stay_eager(markers):
    x = torch.arange(4.0)
    _backend("compile")(x)
    other = _backend("auto")
    assert torch.equal(other(torch.arange(5.0)), torch.arange(5.0) * 2)
    assert other.name == "eager"
    other.cancel()
    off = _backend("auto", on=False)
    warm.mark_warm(warm.call_key(_times2, (), (x,), off._warm_settings()))
    assert torch.equal(off(x), x * 2) and off.name == "eager"
    off.cancel()


def test_the_key_follows_what_changes_the_compiled_code():
    x = torch.arange(4.0)
    key = warm.call_key(_times2, (), (x,), ("options", 2))
    assert key == warm.call_key(_times2, (), (x.clone(),), ("options", 2))
    changed = [
        warm.call_key(_times2, (), (torch.arange(5.0),), ("options", 2)),
        warm.call_key(_times2, (), (torch.arange(4),), ("options", 2)),
        warm.call_key(_times2, (), (torch.arange(8.0)[::2],), ("options", 2)),
        warm.call_key(_times2, (), (x,), ("options", 1)),
        warm.call_key(torch.neg, (), (x,), ("options", 2)),
        warm.call_key(_times2, (3,), (x,), ("options", 2)),
    ]
    assert None not in changed and len({key, *changed}) == 7
    lock = threading.Lock()
    assert warm.call_key(_times2, (lock,), (x,), ()) is None  # does not pickle: no key


@pytest.mark.heavy
def test_an_env_compiled_before_runs_compiled_from_its_first_step(markers):
    kw = dict(num_envs=8, max_episode_steps=30, compiler_options={"warm_start": True})
    actions = [
        torch.randint(0, 2, (8,), generator=torch.Generator().manual_seed(i)) for i in range(40)
    ]
    ref = gym.make_vec("gpuvec/CartPole-v1", backend="compile", **kw)
    env = gym.make_vec("gpuvec/CartPole-v1", **kw)  # backend="auto"
    try:
        ref.reset(seed=3)
        env.reset(seed=3)
        ref.step(actions[0])  # compiles, leaves the marker
        assert len(list(markers.iterdir())) == 1
        env.step(actions[0])
        step = env.unwrapped._step
        assert step.name == "compile" and step.eager_calls == 0
        assert env.unwrapped.compile_report is not None
        for a in actions[1:]:
            got, want = env.step(a), ref.step(a)
            for g, w in zip(got[:4], want[:4], strict=True):
                assert torch.equal(g, w)
    finally:
        env.close()
        ref.close()


@pytest.mark.heavy
def test_a_collector_scan_compiled_before_builds_at_the_first_collect(markers):
    """The scan's key leaves out the policy's weight values: a new policy of the same
    class and shapes finds the marker, and the rollout still equals the env-step loop."""
    from test_rollout import N, Policy, T, expect_loop

    from gpuvec_envs.rollout import RolloutCollector

    kw = dict(num_envs=N, dtype=torch.float64, max_episode_steps=12)
    kw["compiler_options"] = {"warm_start": True}
    first = gym.make_vec("gpuvec/CartPole-v1", backend="compile", **kw)
    first.reset(seed=1)
    RolloutCollector(first, Policy(), T, scan=True).collect()  # builds the scan: a marker
    assert len(list(markers.iterdir())) == 1
    env = gym.make_vec("gpuvec/CartPole-v1", **kw)  # backend="auto"
    ref = gym.make_vec("gpuvec/CartPole-v1", backend="eager", **kw)
    env.reset(seed=3)
    obs, _ = ref.reset(seed=3)
    policy = Policy()
    with torch.no_grad():
        policy.net.bias.fill_(0.25)  # other weight values, same shapes
    collector = RolloutCollector(env, policy, T)
    obs = expect_loop(collector.collect(), policy, ref, obs, extras=False)
    assert collector._scan_fn is not None and collector._scan_build is None  # no child
    assert len(collector._trial_times["scan"]) == 1  # the first rollout ran the scan
    for e in (first, env, ref):
        e.close()


@pytest.mark.parametrize("set_dir", [True, False])
def test_the_marker_folder_is_in_inductors_cache_dir(set_dir, monkeypatch, tmp_path):
    from torch._inductor.runtime import cache_dir_utils

    if set_dir:
        monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "rel" / ".."))
    else:
        monkeypatch.delenv("TORCHINDUCTOR_CACHE_DIR", raising=False)
        monkeypatch.setattr(cache_dir_utils.os, "makedirs", lambda *a, **k: None)
    # the rule used before inductor is imported, then inductor's own function
    monkeypatch.delitem(sys.modules, "torch._inductor.runtime.cache_dir_utils")
    ours = warm.inductor_cache_dir()
    monkeypatch.setitem(sys.modules, "torch._inductor.runtime.cache_dir_utils", cache_dir_utils)
    assert ours == cache_dir_utils.cache_dir() == warm.inductor_cache_dir()
    assert warm.marker_dir() == pathlib.Path(ours) / warm.FOLDER


def test_a_cold_first_step_does_not_import_inductor(tmp_path):
    script = (
        "import sys, gymnasium as gym, torch, gpuvec_envs\n"
        "env = gym.make_vec('gpuvec/CartPole-v1', num_envs=8)\n"
        "env.reset(seed=0)\n"
        "env.step(torch.zeros(8, dtype=torch.int64))\n"
        "print(env.unwrapped.backend, 'torch._inductor' in sys.modules)\n"
    )
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path), "GPUVEC_COMPILER": ""}
    out = subprocess.run(
        [sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.split() == ["eager", "False"]
