"""check_env_def: accepts every registered env, rejects a catalogue of broken envs."""

from __future__ import annotations

import dataclasses
import warnings
from typing import NamedTuple

import gymnasium as gym
import numpy as np
import pytest
import torch
from registry_ids import GENERIC
from torch.utils import _pytree as pytree

import gpuvec_envs
from gpuvec_envs import EnvDef, EnvDefError, GpuVecEnv, check_env_def
from gpuvec_envs.core.arguments import resolve_env_def
from gpuvec_envs.core.env import params_from_kwargs


# -- a valid env to break -----------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class DriftParams:
    noise: float = 0.5
    bound: float = 4.0  # |x| beyond this terminates


class DriftState(NamedTuple):
    x: torch.Tensor  # (N,) float position
    t: torch.Tensor  # (N,) int64 steps since reset


class Drift(EnvDef[DriftState, DriftParams]):
    """A random walk pushed by actions {0, 1, 2} -> {-1, 0, +1}; reward -|x|."""

    params_type = DriftParams

    def observation_space(self, params, dtype):
        return gym.spaces.Box(-10.0, 10.0, (2,), dtype=np.float32)

    def action_space(self, params, dtype):
        return gym.spaces.Discrete(3)

    def reset(self, params, rng, dtype, options):
        x = rng.uniform(low=-1.0, high=1.0, dtype=dtype)
        return DriftState(x, torch.zeros(rng.num_envs, dtype=torch.int64, device=rng.device))

    def noise(self, params, state, rng):
        return rng.uniform(low=-params.noise, high=params.noise, dtype=state.x.dtype)

    def step(self, params, state, action, rng):
        x = state.x + (action - 1).to(state.x.dtype) + self.noise(params, state, rng)
        return DriftState(x, state.t + 1), self.reward(x), x.abs() > params.bound

    def reward(self, x):
        return -x.abs()

    def observation(self, params, state):
        return torch.stack([state.x, state.t.to(state.x.dtype)], dim=1).to(torch.float32) / 10


def check(env_def: EnvDef, **kwargs) -> EnvDefError:
    kwargs.setdefault("compiled", False)
    kwargs.setdefault("steps", 12)
    with pytest.raises(EnvDefError) as info:
        check_env_def(env_def, **kwargs)
    return info.value


def test_valid_env_passes_eager_and_traced():
    """(The compiled comparison runs on the example env in test_custom_env.py.)"""
    check_env_def(Drift(), steps=12, trace=True, compiled=False)
    check_env_def(Drift, steps=4, dtype=torch.float64, compiled=False)


@pytest.mark.parametrize("env", GENERIC, ids=lambda e: e.id)
def test_every_registered_env_passes(env):
    """Every ID, eager and untraced (the traced and compiled runs are in the slow test)."""
    env_def = resolve_env_def(env.env_def)
    params = params_from_kwargs(env_def.params_type, None, env.kwargs)
    check_env_def(env_def, params=params, steps=6, trace=False, compiled=False)


def test_registered_env_traced():
    check_env_def("gpuvec_envs.envs.classic.cartpole:CartPole", steps=4, trace=True, compiled=False)


@pytest.mark.slow
@pytest.mark.parametrize("env", GENERIC, ids=lambda e: e.id)
def test_every_registered_env_passes_traced_and_compiled(env):
    env_def = resolve_env_def(env.env_def)
    params = params_from_kwargs(env_def.params_type, None, env.kwargs)
    check_env_def(env_def, params=params, steps=32, trace=True, compiled=True)


# -- the catalogue ------------------------------------------------------------------------
class ItemSync(Drift):
    def step(self, params, state, action, rng):
        top = state.x.abs().max().item()  # host sync
        nxt, r, term = super().step(params, state, action, rng)
        return nxt, r * (1.0 / (1.0 + top)), term


class BoolBranch(Drift):
    def reward(self, x):
        if (x > 0).any():  # Python branch on a tensor
            return -x.abs()
        return x.abs()


class WrongRewardShape(Drift):
    def reward(self, x):
        return -x.abs()[:, None]


class BoolReward(Drift):
    def reward(self, x):
        return x > 0


class FloatTerminated(Drift):
    def step(self, params, state, action, rng):
        nxt, r, term = super().step(params, state, action, rng)
        return nxt, r, term.to(torch.float32)


class ComplexReward(Drift):
    def reward(self, x):
        return torch.complex(-x.abs(), x)


class WrongTerminatedShape(Drift):
    def step(self, params, state, action, rng):
        nxt, r, term = super().step(params, state, action, rng)
        return nxt, r, term[:, None]


class ObsOutside(Drift):
    def observation(self, params, state):
        return super().observation(params, state) * 100


class WrongObsDtype(Drift):
    def observation(self, params, state):
        return super().observation(params, state).double()


class TorchRand(Drift):
    def noise(self, params, state, rng):
        return (torch.rand_like(state.x) - 0.5) * params.noise


class NumpyRand(Drift):
    def reset(self, params, rng, dtype, options):
        x = torch.as_tensor(np.random.uniform(-1, 1, rng.num_envs), dtype=dtype)
        return DriftState(x, torch.zeros(rng.num_envs, dtype=torch.int64))


class BatchCoupled(Drift):
    def noise(self, params, state, rng):
        return 0.1 * state.x.mean() + super().noise(params, state, rng)


class LayoutChange(Drift):
    def step(self, params, state, action, rng):
        nxt, r, term = super().step(params, state, action, rng)
        return DriftState(nxt.x, nxt.t.to(torch.int32)), r, term


class PythonField(Drift):
    def reset(self, params, rng, dtype, options):
        return DriftState(super().reset(params, rng, dtype, options).x, 0)


class InPlace(Drift):
    def step(self, params, state, action, rng):
        state.t.add_(1)
        return super().step(params, state, action, rng)


class MaskAssign(Drift):
    def reward(self, x):
        r = -x.abs()
        r[x > 3.0] = -10.0  # data-dependent shape
        return r


class SelfCounter(Drift):
    def step(self, params, state, action, rng):
        self.calls = getattr(self, "calls", 0) + 1
        return super().step(params, state, action, rng)


CATALOGUE = [
    (ItemSync, "step", "host-sync", "`.item()` reads a tensor value back", "top = state.x.abs()"),
    (BoolBranch, "step", "host-sync", "`bool()` of a tensor: a Python `if`", "if (x > 0).any()"),
    (WrongRewardShape, "step", "reward", "reward must have shape (8,) on cpu", None),
    (BoolReward, "step", "reward", "reward must be a real float or integer dtype", None),
    (FloatTerminated, "step", "terminated", "terminated must be bool, got torch.float32", None),
    (ComplexReward, "step", "reward", "reward must be a real float or integer dtype", None),
    (WrongTerminatedShape, "step", "terminated", "terminated must have shape (8,) on cpu", None),
    (ObsOutside, "observation", "observation", "outside [-10.0, 10.0]", None),
    (WrongObsDtype, "observation", "observation", "got (8, 2) torch.float64 on cpu", None),
    (TorchRand, "step", "rng", "`rand_like` draws from a torch generator", "torch.rand_like"),
    (NumpyRand, "shell", "rng", "two runs with seed 0 differ", None),
    (BatchCoupled, "shell", "independence", "other envs or the batch size (8 envs against", None),
    (LayoutChange, "step", "layout", "field 't' is (8,) torch.int32 on cpu instead of", None),
    (PythonField, "reset", "layout", "state field 't' is a int, not a tensor", None),
    (InPlace, "step", "purity", "writes its input state in place (field 't')", None),
    (MaskAssign, "step", "trace", "boolean-mask assignment", "r[x > 3.0] = -10.0"),
    (SelfCounter, "step", "purity", "sets attribute(s) ['calls'] on self", None),
]


@pytest.mark.parametrize(
    ("cls", "method", "rule", "message", "source"),
    CATALOGUE,
    ids=[c[0].__name__ for c in CATALOGUE],
)
def test_broken_env_is_rejected_with_its_message(cls, method, rule, message, source):
    err = check(cls())
    found = [v for v in err.violations if (v.method, v.rule) == (method, rule)]
    assert found, str(err)
    assert message in found[0].message, str(err)
    if source is not None:
        assert found[0].where is not None and found[0].where.startswith(__file__), str(err)
        assert source in found[0].where
    text = str(err)
    assert text.startswith(f"{cls.__name__} breaks {len(err.violations)} rule(s)")
    assert f"{method} [{rule}]" in text


# -- the shell's own check of step outputs --------------------------------------------------
SHELL_REJECTS = [
    (BoolReward, TypeError, "reward must be a real float or integer dtype, got torch.bool"),
    (ComplexReward, TypeError, "reward must be a real float or integer dtype, got torch.complex64"),
    (WrongRewardShape, ValueError, "reward must have shape (8,) on cpu, got (8, 1) torch.float32"),
    (FloatTerminated, TypeError, "terminated must be bool, got torch.float32"),
    (WrongTerminatedShape, ValueError, "terminated must have shape (8,) on cpu, got (8, 1)"),
]


@pytest.mark.parametrize("backend", ["eager", "compile"])
@pytest.mark.parametrize(
    ("cls", "error", "message"), SHELL_REJECTS, ids=[c[0].__name__ for c in SHELL_REJECTS]
)
def test_the_shell_rejects_bad_step_outputs_and_keeps_the_state(cls, error, message, backend):
    """Without the checker: the shell's step names the class, method and rule, at trace time."""
    env = GpuVecEnv(cls(), 8, backend=backend)
    env.reset(seed=3)
    before = pytree.tree_leaves(env.state)
    action = torch.ones(8, dtype=torch.int64)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="gpuvec_envs compiler")  # no fallback
        for _ in range(2):  # and again: nothing was built, nothing changed
            with pytest.raises(error) as info:
                env.step(action)
            text = str(info.value)
            assert text.startswith(f"{cls.__name__}.step breaks the EnvDef contract: "), text
            assert message in text
            assert text.count(" must ") == 1  # this rule only
    assert env.compile_report is None
    assert env.backend == backend
    after = pytree.tree_leaves(env.state)
    assert all(torch.equal(a, b) for a, b in zip(before, after, strict=True))


def test_the_shell_accepts_any_real_reward_dtype():
    class IntReward(Drift):
        def reward(self, x):
            return (x > 0).to(torch.int32) - 1

    env = GpuVecEnv(IntReward(), 8, dtype=torch.float64, backend="eager")
    env.reset(seed=0)
    _, reward, terminated, _, _ = env.step(torch.ones(8, dtype=torch.int64))
    assert reward.dtype == torch.float64 and terminated.dtype == torch.bool
    assert set(reward.tolist()) <= {-1.0, 0.0}


def test_all_violations_in_one_error_each_with_its_line():
    class Many(Drift):
        def step(self, params, state, action, rng):
            top = state.x.abs().max().item()
            nxt, _, term = super().step(params, state, action, rng)
            if (nxt.x > top).any():
                return nxt, nxt.x > 0, term
            return nxt, nxt.x < 0, term

    err = check(Many())
    rules = {(v.method, v.rule) for v in err.violations}
    assert {("step", "host-sync"), ("step", "reward")} <= rules
    lines = {v.where.split(" in ")[0] for v in err.violations if v.rule == "host-sync"}
    assert len(lines) == 2  # the .item() line and the `if` line


def test_trace_catches_what_the_monitors_do_not():
    class DynamicShape(Drift):
        def observation(self, params, state):
            return super().observation(params, state)[: int(state.t.shape[0])]

    check_env_def(DynamicShape(), steps=2, compiled=False)  # static: fine

    class Unique(Drift):
        def reward(self, x):
            return -x.abs() * torch.unique(x > 0).numel()

    err = check(Unique(), trace=True)
    assert ("step", "trace") in {(v.method, v.rule) for v in err.violations}
    assert "`unique" in str(err) or "_unique" in str(err)


def test_contract_errors_at_class_level():
    class NoParams(Drift):
        params_type = None

    with pytest.raises(TypeError, match=r"NoParams.params_type is not set"):
        NoParams()
    err = check(NoParams)
    assert err.violations[0].rule == "contract"

    @dataclasses.dataclass
    class Mutable:
        a: int = 1

    class MutableParams(Drift):
        params_type = Mutable

    with pytest.raises(TypeError, match=r"must be frozen"):
        MutableParams()

    @dataclasses.dataclass(frozen=True)
    class NoDefault:
        a: int

    class NoDefaultParams(Drift):
        params_type = NoDefault

    with pytest.raises(TypeError, match=r"fields need defaults: \['a'\]"):
        NoDefaultParams()

    class Incomplete(EnvDef):
        params_type = DriftParams

    with pytest.raises(TypeError, match="abstract"):
        Incomplete()


def test_spaces_and_render_rules():
    class BadAction(Drift):
        def action_space(self, params, dtype):
            return gym.spaces.MultiDiscrete([2, 2])

    assert "must be Discrete or Box" in str(check(BadAction()))

    class RenderNoMode(Drift):
        def render(self, params, state):
            return torch.zeros(state.x.shape[0], 2, 2, 3, dtype=torch.uint8)

    assert "lists 'rgb_array' if and only if render" in str(check(RenderNoMode()))

    class BadFrames(RenderNoMode):
        metadata = {"render_modes": ["rgb_array"]}

        def render(self, params, state):
            return super().render(params, state).float()

    assert "must return (N, H, W, 3) uint8 on cpu" in str(check(BadFrames()))


def test_bad_arguments():
    with pytest.raises(TypeError, match="env_def must be an EnvDef"):
        check_env_def(object())
    with pytest.raises(ValueError, match="num_envs must be a positive int"):
        check_env_def(Drift(), num_envs=0)
    with pytest.raises(TypeError, match="params must be a DriftParams"):
        check_env_def(Drift(), params=object())
    assert gpuvec_envs.check_env_def is check_env_def
