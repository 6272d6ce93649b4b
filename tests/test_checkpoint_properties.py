"""Property-based tests (hypothesis): random sequences of step / reset / set_params /
state_dict round trips / rewinds against an uninterrupted env, and random invalid inputs to
every public entry point, which must raise TypeError/ValueError and change nothing.

The model of what an env must do is a twin eager env that sees the same calls without the
checkpoint operations (and is rewound by ``copy.deepcopy`` where the env under test loads an
earlier checkpoint). Everything runs on the eager backend with a few envs, bounded by
``max_examples`` so the suites stay within a few tens of seconds.
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

import gpuvec_envs  # noqa: F401 - registers the IDs
from gpuvec_envs.adapters.cleanrl import (
    NormalizeObservation,
    NormalizeReward,
    RecordEpisodeStatistics,
)
from gpuvec_envs.adapters.sb3 import SB3VecEnv
from gpuvec_envs.core.vector import GpuVecEnv
from gpuvec_envs.rollout import RolloutCollector

N = 4
#: Env ID -> (a param field, strategy of its values) used by set_params.
CASES: dict[str, tuple[str, st.SearchStrategy]] = {
    "gpuvec/CartPole-v1": ("force_mag", st.floats(5.0, 15.0)),
    "gpuvec/Pendulum-v1": ("max_torque", st.floats(1.0, 3.0)),
    "gpuvec/MinAtar-Breakout-v1": ("sticky_action_prob", st.floats(0.0, 1.0)),
}
SETTINGS = settings(
    max_examples=10,
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def make(env_id: str, **kw: Any) -> GpuVecEnv:
    kw = {"backend": "eager", "max_episode_steps": 7, **kw}
    return gym.make_vec(env_id, num_envs=N, vectorization_mode="vector_entry_point", **kw)


def same(a: Any, b: Any) -> bool:
    """Bitwise equality of nested dicts/lists of tensors and plain values."""
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and set(a) == set(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def action_for(env: GpuVecEnv, seed: int) -> torch.Tensor:
    space = env.action_space
    space.seed(seed)
    return torch.as_tensor(space.sample())


def invalid_calls(env: GpuVecEnv) -> list[tuple[str, Any]]:
    """(name, call) pairs that must each raise TypeError or ValueError."""
    good = action_for(env, 0)
    sd = env.state_dict()
    calls: list[tuple[str, Any]] = [
        ("short action", lambda: env.step(good[:-1])),
        ("bool action", lambda: env.step(good.bool())),
        ("text action", lambda: env.step(np.array(["x"] * N))),
        ("negative seed", lambda: env.reset(seed=-1)),
        ("float seed", lambda: env.reset(seed=1.5)),
        ("seed list length", lambda: env.reset(seed=[1, 2])),
        ("int mask", lambda: env.reset(options={"reset_mask": torch.ones(N, dtype=torch.int64)})),
        ("mask shape", lambda: env.reset(options={"reset_mask": torch.ones(N + 1).bool()})),
        ("unknown param", lambda: env.set_params(no_such_field=1.0)),
        ("other num_envs", lambda: env.load_state_dict({**sd, "num_envs": N + 1})),
        ("bad state", lambda: env.load_state_dict({**sd, "state": {"env": {}}})),
        ("not a dict", lambda: env.load_state_dict(None)),
    ]
    if isinstance(env.single_action_space, gym.spaces.Discrete):
        n = int(env.single_action_space.n)
        calls += [
            ("action too large", lambda: env.step(torch.full((N,), n))),
            ("float action", lambda: env.step(good.double())),
        ]
    else:
        calls += [("nan action", lambda: env.step(torch.full_like(good, float("nan"))))]
    return calls


class ResumeMachine(RuleBasedStateMachine):
    """The env under test (``sut``) against an uninterrupted twin (``model``)."""

    env_id = "gpuvec/CartPole-v1"
    snapshots = Bundle("snapshots")

    def __init__(self) -> None:
        super().__init__()
        self.sut = make(self.env_id, autoreset_mode=self.mode)
        self.model = make(self.env_id, autoreset_mode=self.mode)
        for env in (self.sut, self.model):
            env.reset(seed=0)

    mode = "next_step"

    @rule(seed=st.integers(0, 2**16))
    def step(self, seed: int) -> None:
        a = action_for(self.model, seed)
        out_s, out_m = self.sut.step(a), self.model.step(a)
        assert same(list(out_s[:4]), list(out_m[:4]))
        assert same(out_s[4].get("final_obs"), out_m[4].get("final_obs"))

    @rule(
        seed=st.one_of(
            st.none(), st.integers(0, 2**40), st.lists(st.integers(0, 99), min_size=N, max_size=N)
        ),
        mask=st.one_of(st.none(), st.lists(st.booleans(), min_size=N, max_size=N)),
    )
    def reset(self, seed: Any, mask: list[bool] | None) -> None:
        options = None if mask is None else {"reset_mask": torch.tensor(mask)}
        if seed is None and mask is None:
            seed = 5  # a first-time-like reset without a seed draws fresh entropy
        out_s = self.sut.reset(seed=seed, options=options)[0]
        out_m = self.model.reset(seed=seed, options=options)[0]
        assert same(out_s, out_m)

    @rule(data=st.data())
    def set_params(self, data: st.DataObject) -> None:
        field, values = CASES[self.env_id]
        value = data.draw(values)
        self.sut.set_params(**{field: value})
        self.model.set_params(**{field: value})

    @rule()
    def roundtrip_into_a_fresh_env(self) -> None:
        sd = pickle.loads(pickle.dumps(self.sut.state_dict()))
        self.sut = make(self.env_id, autoreset_mode=self.mode)
        self.sut.load_state_dict(sd)

    @rule(target=snapshots)
    def snapshot(self) -> tuple[dict[str, Any], GpuVecEnv]:
        return self.sut.state_dict(), copy.deepcopy(self.model)

    @rule(snap=snapshots)
    def rewind(self, snap: tuple[dict[str, Any], GpuVecEnv]) -> None:
        self.sut.load_state_dict(snap[0])
        self.model = copy.deepcopy(snap[1])

    @precondition(lambda self: True)
    @rule(which=st.integers(0, 100))
    def invalid_input_changes_nothing(self, which: int) -> None:
        calls = invalid_calls(self.sut)
        name, call = calls[which % len(calls)]
        before = self.sut.state_dict()
        with pytest.raises((TypeError, ValueError)) as info:
            call()
        assert str(info.value), name
        assert same(self.sut.state_dict(), before), name

    @invariant()
    def same_state(self) -> None:
        assert same(self.sut.state_dict()["state"], self.model.state_dict()["state"])
        assert self.sut.params == self.model.params


@pytest.mark.parametrize(
    ("env_id", "mode"),
    [
        ("gpuvec/CartPole-v1", "next_step"),
        ("gpuvec/CartPole-v1", "same_step"),
        ("gpuvec/Pendulum-v1", "disabled"),
        ("gpuvec/MinAtar-Breakout-v1", "same_step"),
    ],
)
def test_random_call_sequences_match_an_uninterrupted_env(env_id: str, mode: str) -> None:
    machine = type("Machine", (ResumeMachine,), {"env_id": env_id, "mode": mode})
    machine.TestCase.settings = SETTINGS
    machine.TestCase().runTest()


# -- invalid inputs to constructors, adapters, wrappers and the collector --------------------

NOT_POSITIVE_INT = st.one_of(
    st.integers(max_value=0), st.floats(allow_nan=True), st.text(max_size=3), st.none()
)
NOT_A_NAME = st.text(max_size=8).filter(
    lambda s: (
        s.replace("_", "").replace("-", "").lower()
        not in {"nextstep", "samestep", "disabled", "auto", "eager", "compile"}
    )
)


@settings(max_examples=20, deadline=None)
@given(
    key=st.sampled_from(
        ["num_envs", "max_episode_steps", "frame_skip", "dtype", "mode", "backend"]
    ),
    bad_int=NOT_POSITIVE_INT,
    bad_name=NOT_A_NAME,
)
def test_invalid_constructor_arguments_raise(key: str, bad_int: Any, bad_name: str) -> None:
    kw: dict[str, Any] = {
        "num_envs": {"num_envs": bad_int},
        "max_episode_steps": {"max_episode_steps": bad_int if bad_int is not None else 0},
        # None is frame_skip's default (1, or the env's own), so it is not a bad value
        "frame_skip": {"frame_skip": bad_int if bad_int is not None else 0},
        "dtype": {"dtype": bad_name or "int8"},
        "mode": {"autoreset_mode": bad_name},
        "backend": {"backend": bad_name},
    }[key]
    num_envs = kw.pop("num_envs", 2)
    with pytest.raises((TypeError, ValueError)) as info:
        GpuVecEnv("gpuvec_envs.envs.classic.cartpole:CartPole", num_envs, **kw)
    assert str(info.value)


@settings(max_examples=30, deadline=None)
@given(
    name=st.text(min_size=1, max_size=10).filter(str.isidentifier),
    value=st.one_of(st.floats(), st.integers(), st.text(max_size=3)),
)
def test_unknown_env_keywords_raise_type_error(name: str, value: Any) -> None:
    known = {"device", "dtype", "max_episode_steps", "autoreset_mode", "backend", "validate"}
    known |= {"frame_skip", "render_mode", "params"}
    known |= {"gravity", "masscart", "masspole", "length", "force_mag", "tau", "euler"}
    known |= {"theta_threshold_degrees", "x_threshold", "sutton_barto_reward", "reset_bound"}
    if name in known:
        return
    with pytest.raises(TypeError, match=name):
        GpuVecEnv("gpuvec_envs.envs.classic.cartpole:CartPole", 2, **{name: value})


@pytest.fixture(scope="module")
def sb3_env() -> SB3VecEnv:
    venv = make("gpuvec/CartPole-v1", autoreset_mode="same_step")
    env = SB3VecEnv(venv, monitor=True)
    env.reset()
    return env


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    bad=st.one_of(
        st.lists(st.integers(-5, 5), min_size=0, max_size=N - 1),  # wrong shape
        st.lists(st.integers(2, 10**6), min_size=N, max_size=N),  # out of range
        st.lists(st.integers(-(10**6), -1), min_size=N, max_size=N),
        st.lists(st.floats(), min_size=N, max_size=N),  # floats for a discrete space
    )
)
def test_sb3_adapter_rejects_invalid_actions_unchanged(sb3_env: SB3VecEnv, bad: list) -> None:
    before = sb3_env.state_dict()
    with pytest.raises((TypeError, ValueError)) as info:
        sb3_env.step_async(np.asarray(bad))
    assert str(info.value)
    after = sb3_env.state_dict()
    assert same(after["venv"], before["venv"]) and same(after["episode"], before["episode"])


@settings(max_examples=30, deadline=None)
@given(
    which=st.sampled_from(["gamma", "epsilon_reward", "epsilon_obs", "buffer", "rollout_steps"]),
    real=st.one_of(st.floats(max_value=0.0), st.just(float("nan"))),
    big=st.floats(min_value=1.0000001),
    count=st.integers(-5, 0),
)
def test_wrappers_and_collector_reject_invalid_arguments(
    which: str, real: float, big: float, count: int
) -> None:
    env = make("gpuvec/CartPole-v1")
    build = {
        "gamma": lambda: NormalizeReward(env, gamma=big if count % 2 else real),
        "epsilon_reward": lambda: NormalizeReward(env, epsilon=real),
        "epsilon_obs": lambda: NormalizeObservation(env, epsilon=real),
        "buffer": lambda: RecordEpisodeStatistics(env, buffer_length=count),
        "rollout_steps": lambda: RolloutCollector(env, lambda o: o[:, 0].long(), count),
    }[which]
    if which == "gamma" and real == 0.0 and not count % 2:
        return  # gamma = 0 is valid
    with pytest.raises((TypeError, ValueError)) as info:
        build()
    assert str(info.value)


@settings(max_examples=25, deadline=None)
@given(
    bad=st.one_of(
        st.integers(0, N - 1).map(lambda k: torch.zeros(k, 1, dtype=torch.float64)),
        st.just(torch.zeros(N, 1, dtype=torch.bool)),
        st.just(torch.zeros(N, 1, dtype=torch.complex64)),
        st.integers(1, 3).map(lambda k: torch.zeros(N, k + 1, dtype=torch.float64)),
    )
)
def test_wrapper_stack_rejects_invalid_actions_unchanged(bad: torch.Tensor) -> None:
    env = make("gpuvec/Pendulum-v1", autoreset_mode="same_step")
    stack = NormalizeReward(NormalizeObservation(RecordEpisodeStatistics(env)))
    stack.reset(seed=0)
    stack.step(torch.zeros(N, 1, dtype=torch.float64))
    before = stack.state_dict()
    with pytest.raises((TypeError, ValueError)) as info:
        stack.step(bad)
    assert str(info.value)
    after = stack.state_dict()
    for path in (("stats",), ("env", "stats"), ("env", "env", "stats"), ("env", "env", "env")):
        a, b = after, before
        for k in path:
            a, b = a[k], b[k]
        if path[-1] == "stats" and "episode_times" in a:  # wall-clock: changes by itself
            a, b = dict(a), dict(b)
            del a["episode_times"], b["episode_times"]
        assert same(a, b), path


def test_collector_rejects_a_policy_of_the_wrong_shape_unchanged() -> None:
    env = make("gpuvec/CartPole-v1")
    env.reset(seed=0)
    before = env.state_dict()
    collector = RolloutCollector(env, lambda obs: obs[:2, 0].long(), 4, backend="eager")
    with pytest.raises(ValueError, match="shape"):
        collector.collect()
    assert same(env.state_dict(), before)
