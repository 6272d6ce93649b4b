"""GpuVecEnv.state_dict / load_state_dict: bitwise resume, rewind-and-replay, rejected
checkpoints, and NaN/inf reporting."""

from __future__ import annotations

import copy
import dataclasses
import io
import pickle
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode
from registry_ids import GENERIC_IDS

import gpuvec_envs  # noqa: F401 - registers the IDs
from gpuvec_envs.core.checkpoint import FORMAT_VERSION
from gpuvec_envs.core.env import EnvDef
from gpuvec_envs.core.rng import Rng
from gpuvec_envs.core.vector import GpuVecEnv

ALL_IDS = GENERIC_IDS
MODES = list(AutoresetMode)


def cuda(test):  # noqa: ANN001, ANN201 - a test needing a CUDA device (tools/gpu_check.sh)
    return pytest.mark.cuda(
        pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")(test)
    )


def make(env_id: str, n: int, **kwargs: Any) -> GpuVecEnv:
    kwargs.setdefault("backend", "eager")
    return gym.make_vec(env_id, num_envs=n, vectorization_mode="vector_entry_point", **kwargs)


def actions(env: GpuVecEnv, steps: int, seed: int) -> list[torch.Tensor]:
    """A fixed sequence of random valid actions."""
    space = env.action_space
    space.seed(seed)
    return [torch.as_tensor(space.sample()) for _ in range(steps)]


def roundtrip(sd: dict[str, Any]) -> dict[str, Any]:
    """Through torch.save and a weights-only torch.load, as a checkpoint file would go."""
    buf = io.BytesIO()
    torch.save(sd, buf)
    buf.seek(0)
    return torch.load(buf, weights_only=True)


def run(env: GpuVecEnv, acts: list[torch.Tensor]) -> list[tuple[torch.Tensor, ...]]:
    """Outputs of each step (cloned: compiled steps reuse their buffers)."""
    out = []
    for a in acts:
        obs, rew, term, trunc, info = env.step(a)
        final = info.get("final_obs", torch.zeros(0))
        out.append(tuple(t.clone() for t in (obs, rew, term, trunc, final)))
    return out


def assert_outputs_equal(a: list[tuple[torch.Tensor, ...]], b: list[tuple[torch.Tensor, ...]]):
    assert len(a) == len(b)
    for t, (x, y) in enumerate(zip(a, b, strict=True)):
        for name, u, v in zip(("obs", "reward", "term", "trunc", "final_obs"), x, y, strict=True):
            assert u.dtype == v.dtype and torch.equal(u, v), f"step {t}: {name} differs"


def assert_sd_equal(a: Any, b: Any, where: str = "sd") -> None:
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.dtype == b.dtype, where
        assert torch.equal(a.cpu(), b.cpu()), where
    elif isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), where
        for k in a:
            assert_sd_equal(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_sd_equal(x, y, f"{where}.{i}")
    else:
        assert a == b, where


def episode_kwargs(env_id: str) -> dict[str, Any]:
    """Short, staggered time limits so that every mode's reset path runs in a few steps."""
    return {"max_episode_steps": 13}


# -- bitwise resume ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
@pytest.mark.parametrize("env_id", ALL_IDS)
def test_resume_in_a_fresh_env_is_bitwise(env_id: str, mode: AutoresetMode) -> None:
    """Mid-episode checkpoint through torch.save; a fresh env continues bit for bit."""
    kw = dict(autoreset_mode=mode, **episode_kwargs(env_id))
    env = make(env_id, 3, **kw)
    env.reset(seed=3)
    env.reset(seed=5, options={"reset_mask": torch.tensor([False, True, False])})  # stagger
    acts = actions(env, 24, seed=7)
    run(env, acts[:14])  # past one time limit: some envs mid-episode, some pending reset
    sd = roundtrip(env.state_dict())
    expected = run(env, acts[14:])
    twin = make(env_id, 3, **kw)
    twin.load_state_dict(sd)
    assert_outputs_equal(run(twin, acts[14:]), expected)
    assert_sd_equal(twin.state_dict(), env.state_dict())


@pytest.mark.parametrize("env_id", ["gpuvec/CartPole-v1", "gpuvec/MinAtar-Breakout-v1"])
def test_resume_with_frame_skip_and_episodes_ending_inside_a_skip(env_id: str) -> None:
    """frame_skip=3 with a time limit of 10 frames: episodes end inside a skip."""
    for mode in MODES:
        kw = dict(autoreset_mode=mode, frame_skip=3, max_episode_steps=10)
        env = make(env_id, 4, **kw)
        env.reset(seed=11)
        acts = actions(env, 24, seed=2)
        run(env, acts[:3])  # 9 frames: the next step ends every episode after 1 frame
        sd = pickle.loads(pickle.dumps(env.state_dict()))
        expected = run(env, acts[3:])
        assert expected[0][3].any()  # truncated after the first frame of the skip
        twin = make(env_id, 4, **kw)
        twin.load_state_dict(sd)
        assert_outputs_equal(run(twin, acts[3:]), expected)


def test_rewind_and_replay_after_resets_seeds_and_params() -> None:
    """Load an earlier checkpoint into the same env: the replay repeats every output."""
    env = make("gpuvec/CartPole-v1", 6, autoreset_mode="same_step", max_episode_steps=9)
    env.reset(seed=0)
    acts = actions(env, 30, seed=1)
    run(env, acts[:4])
    sd = env.state_dict()
    params = env.params

    def branch() -> list[tuple[torch.Tensor, ...]]:
        out = run(env, acts[4:12])
        env.reset(options={"reset_mask": torch.arange(6) % 2 == 0})
        out += run(env, acts[12:20])
        env.set_params(masspole=0.3)
        return out + run(env, acts[20:])

    first = branch()
    env.load_state_dict(sd)
    assert env.params == params  # the checkpoint's params are restored
    assert_outputs_equal(branch(), first)


def test_params_are_restored_and_recompiled() -> None:
    env = make("gpuvec/CartPole-v1", 3, force_mag=12.0)
    env.reset(seed=5)
    sd = env.state_dict()
    assert sd["params"]["force_mag"] == 12.0
    other = make("gpuvec/CartPole-v1", 3)
    other.load_state_dict(sd)
    assert other.params == env.params
    acts = actions(env, 10, seed=0)
    assert_outputs_equal(run(other, acts), run(env, acts))


def test_checkpoint_before_reset_and_deepcopy() -> None:
    env = make("gpuvec/Acrobot-v1", 2)
    sd = env.state_dict()
    assert sd["state"] is None and sd["format_version"] == FORMAT_VERSION
    env.reset(seed=1)
    env.load_state_dict(sd)
    with pytest.raises(RuntimeError, match="reset"):
        env.step(np.zeros(2, dtype=np.int64))
    env.reset(seed=1)
    clone = copy.deepcopy(env)
    acts = actions(env, 8, seed=0)
    assert_outputs_equal(run(clone, acts), run(env, acts))


@pytest.mark.parametrize(
    "mode",
    [
        pytest.param(AutoresetMode.SAME_STEP, id="SameStep", marks=pytest.mark.heavy),
        pytest.param(AutoresetMode.NEXT_STEP, id="NextStep", marks=pytest.mark.slow),
        pytest.param(AutoresetMode.DISABLED, id="Disabled", marks=pytest.mark.slow),
    ],
)
def test_compiled_rewind_reaches_the_in_place_buffers(mode: AutoresetMode) -> None:
    """A compiled step writes its state into its own buffers; a load must reach them."""
    # test_engine's compiled CartPole configuration: inductor's cache compiles it once
    kw = dict(autoreset_mode=mode, max_episode_steps=20, validate=False)
    env = make("gpuvec/CartPole-v1", 32, backend="compile", **kw)
    env.reset(seed=4)
    acts = actions(env, 40, seed=9)
    run(env, acts[:13])
    sd = env.state_dict()
    first = run(env, acts[13:])
    env.load_state_dict(roundtrip(sd))
    assert env.backend == "compile"
    assert_outputs_equal(run(env, acts[13:]), first)
    # an eager env loads the compiled env's checkpoint (states of one dtype and layout)
    eager = make("gpuvec/CartPole-v1", 32, **kw)
    eager.load_state_dict(sd)
    assert_sd_equal(eager.state_dict()["state"], sd["state"])


@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES, ids=[m.value for m in MODES])
@pytest.mark.parametrize("env_id", ALL_IDS)
def test_compiled_rewind_of_every_env_and_mode(env_id: str, mode: AutoresetMode) -> None:
    """The full matrix on the compiled backend: one compiled env per (ID, mode), rewound."""
    env = make(env_id, 6, backend="compile", autoreset_mode=mode, max_episode_steps=13)
    env.reset(seed=1)
    acts = actions(env, 30, seed=4)
    run(env, acts[:14])
    sd = roundtrip(env.state_dict())
    first = run(env, acts[14:])
    env.load_state_dict(sd)
    assert_outputs_equal(run(env, acts[14:]), first)
    assert env.backend == "compile"


@cuda
@pytest.mark.parametrize("backend", ["eager", "compile"])
def test_cpu_checkpoint_loads_onto_cuda_and_back(backend: str) -> None:
    """CPU -> CUDA (graph static buffers on the compiled backend) -> CPU, bitwise in the
    integer MinAtar games."""
    env_id = "gpuvec/MinAtar-Breakout-v1"
    cpu = make(env_id, 16, autoreset_mode="same_step")
    cpu.reset(seed=2)
    acts = actions(cpu, 30, seed=3)
    run(cpu, acts[:10])
    sd = cpu.state_dict()
    expected = run(cpu, acts[10:])
    gpu = make(env_id, 16, autoreset_mode="same_step", device="cuda", backend=backend)
    gpu.reset(seed=0)
    run(gpu, [a.cuda() for a in acts[:3]])  # compiled and graphed before the load
    gpu.load_state_dict(sd)
    got = run(gpu, [a.cuda() for a in acts[10:20]])
    assert_outputs_equal([tuple(t.cpu() for t in s) for s in got], expected[:10])
    back = make(env_id, 16, autoreset_mode="same_step")
    back.load_state_dict(gpu.state_dict())
    assert_outputs_equal(run(back, acts[20:]), expected[10:])


# -- rejected checkpoints ------------------------------------------------------------------


def _bad_checkpoints(sd: dict[str, Any]) -> list[tuple[str, Any, type, str]]:
    def edit(**changes: Any) -> dict[str, Any]:
        return {**sd, **changes}

    def edit_state(**changes: Any) -> dict[str, Any]:
        return {**sd, "state": {**sd["state"], **changes}}

    env_state = sd["state"]["env"]
    missing = dict(sd)
    del missing["state"]
    extra_field = {**env_state, "spin": env_state["x"]}
    return [
        ("not a dict", [1, 2], TypeError, "must be a dict"),
        ("version", edit(format_version=99), ValueError, "format_version"),
        ("env", edit(env_def="gpuvec_envs.envs.classic.pendulum:Pendulum"), ValueError, "Pendulum"),
        ("env id", edit(env_id="gpuvec/CartPole-v0"), ValueError, "CartPole-v0"),
        ("num_envs", edit(num_envs=5), ValueError, "num_envs"),
        ("dtype", edit(dtype="float64"), ValueError, "dtype"),
        ("mode", edit(autoreset_mode="SameStep"), ValueError, "autoreset_mode"),
        ("time limit", edit(max_episode_steps=None), ValueError, "max_episode_steps"),
        ("frame skip", edit(frame_skip=2), ValueError, "frame_skip"),
        ("missing key", missing, ValueError, "missing keys \\['state'\\]"),
        ("unexpected key", edit(optimizer=1), ValueError, "unexpected keys \\['optimizer'\\]"),
        ("unknown param", edit(params={"mass": 1.0}), TypeError, "mass"),
        ("params type", edit(params=[1]), TypeError, "params must be a dict"),
        ("state type", edit(state=3), TypeError, "state must be a dict"),
        ("state field", edit_state(env=extra_field), ValueError, "unexpected keys \\['spin'\\]"),
        ("shape", edit_state(elapsed=torch.zeros(3, dtype=torch.int32)), ValueError, "elapsed"),
        ("dtype of field", edit_state(counter=sd["state"]["counter"].int()), ValueError, "int32"),
        ("not a tensor", edit_state(key0=[0, 0, 0, 0]), TypeError, "key0 must be a tensor"),
        ("key range", edit_state(key1=sd["state"]["key1"] - 2**40), ValueError, "key1 of env 0"),
        ("flag", edit_state(needs_reset=torch.full((4,), 2, dtype=torch.int32)), ValueError, "0"),
    ]


def test_bad_checkpoints_raise_and_change_nothing() -> None:
    env = make("gpuvec/CartPole-v1", 4, max_episode_steps=20)
    env.reset(seed=0)
    run(env, actions(env, 5, seed=0))
    good = env.state_dict()
    twin = copy.deepcopy(env)
    for name, bad, exc, match in _bad_checkpoints(env.state_dict()):
        with pytest.raises(exc, match=match):
            env.load_state_dict(bad)
        assert_sd_equal(env.state_dict(), good, name)
    acts = actions(env, 10, seed=1)
    assert_outputs_equal(run(env, acts), run(twin, acts))


@pytest.mark.parametrize(
    ("env_id", "old_path"),
    [
        ("gpuvec/CartPole-v1", "gpuvec_envs.envs.cartpole:CartPole"),
        ("gpuvec/MinAtar-Breakout-v1", "gpuvec_envs.envs.minatar_breakout:Breakout"),
    ],
)
def test_checkpoints_naming_an_env_module_by_its_earlier_path_load(env_id, old_path) -> None:
    env = make(env_id, 3)
    env.reset(seed=0)
    run(env, actions(env, 4, seed=0))
    sd = env.state_dict()
    assert sd["env_def"] != old_path  # the module moved to its family's folder
    other = make(env_id, 3)
    other.load_state_dict({**sd, "env_def": old_path})
    assert_sd_equal(other.state_dict(), sd)
    wrong = old_path.replace(":", ":Not")
    with pytest.raises(ValueError, match="checkpoint of env"):
        other.load_state_dict({**sd, "env_def": wrong})


def test_non_strict_load_ignores_unknown_keys_and_keeps_params() -> None:
    env = make("gpuvec/CartPole-v1", 2, masspole=0.2)
    env.reset(seed=0)
    sd = {k: v for k, v in env.state_dict().items() if k not in ("params", "env_id")}
    sd["note"] = "from another tool"
    other = make("gpuvec/CartPole-v1", 2)
    with pytest.raises(ValueError, match="missing keys"):
        other.load_state_dict(sd)
    other.load_state_dict(sd, strict=False)
    assert other.params.masspole == 0.1
    assert_sd_equal(other.state_dict()["state"], env.state_dict()["state"])


def test_params_of_the_wrong_type_are_rejected() -> None:
    env = make("gpuvec/MinAtar-Breakout-v0", 2)
    env.reset(seed=0)
    sd = env.state_dict()
    before = env.state_dict()
    for value in ("high", None, (0.1,)):
        sd["params"] = {**before["params"], "sticky_action_prob": value}
        with pytest.raises(TypeError, match="sticky_action_prob"):
            env.load_state_dict(sd)
    assert_sd_equal(env.state_dict(), before)
    sd["params"] = {**before["params"], "minimal_action_set": True}  # as set_params allows
    env.load_state_dict(sd)
    assert env.single_action_space == gym.spaces.Discrete(3)


# -- NaN / inf -----------------------------------------------------------------------------


class _FaultState(NamedTuple):
    pos: torch.Tensor  # (N,) float
    vel: torch.Tensor  # (N, 2) float


@dataclasses.dataclass(frozen=True)
class _FaultParams:
    bad_env: int = 2  # the env whose velocity becomes NaN
    bad_step: int = 3  # at this step of its episode


class _FaultyEnv(EnvDef[_FaultState, _FaultParams]):
    """A counter env whose ``bad_env`` gets a NaN velocity at ``bad_step``."""

    params_type = _FaultParams

    def observation_space(self, params: _FaultParams, dtype: torch.dtype) -> gym.Space:
        return gym.spaces.Box(-np.inf, np.inf, (1,), np.float32)

    def action_space(self, params: _FaultParams, dtype: torch.dtype) -> gym.Space:
        return gym.spaces.Discrete(2)

    def reset(self, params, rng: Rng, dtype, options) -> _FaultState:  # noqa: ANN001
        n = rng.num_envs
        return _FaultState(torch.zeros(n, dtype=dtype), torch.zeros(n, 2, dtype=dtype))

    def step(self, params, state, action, rng):  # noqa: ANN001, ANN201
        idx = torch.arange(state.pos.shape[0])
        fault = (idx == params.bad_env) & (state.pos == params.bad_step - 1)
        vel = torch.where(fault[:, None], torch.nan, state.vel + 1)
        nxt = _FaultState(state.pos + 1, vel)
        return nxt, torch.ones_like(state.pos), torch.zeros_like(idx, dtype=torch.bool)

    def observation(self, params, state) -> torch.Tensor:  # noqa: ANN001
        return state.pos[:, None]


def test_validate_reports_the_env_and_field_of_a_nan() -> None:
    env = GpuVecEnv(_FaultyEnv(), 4, backend="eager")
    env.reset(seed=0)
    env.step(np.zeros(4, dtype=np.int64))
    env.step(np.zeros(4, dtype=np.int64))
    with pytest.raises(FloatingPointError, match=r"state\.vel of env 2"):
        env.step(np.zeros(4, dtype=np.int64))
    # the faulty state is kept for inspection; check_finite reports it again
    assert torch.isnan(env.state.env.vel[2]).all() and not torch.isnan(env.state.env.vel[1]).any()
    with pytest.raises(FloatingPointError, match=r"state\.vel of env 2"):
        env.check_finite()
    env.reset(options={"reset_mask": torch.arange(4) == 2})
    env.check_finite()


def test_validate_false_propagates_nan_and_check_finite_finds_it() -> None:
    env = GpuVecEnv(_FaultyEnv(), 3, backend="eager", validate=False, bad_env=1)
    env.reset(seed=0)
    for _ in range(4):
        env.step(np.zeros(3, dtype=np.int64))
    with pytest.raises(FloatingPointError, match=r"state\.vel of env 1"):
        env.check_finite()


@pytest.mark.parametrize(  # compiled: the fused probe
    "backend", ["eager", pytest.param("compile", marks=pytest.mark.heavy)]
)
def test_params_that_produce_inf_are_reported_at_the_first_step(backend: str) -> None:
    """CartPole with a massless, zero-length pole divides by zero in the first step."""
    env = make("gpuvec/CartPole-v1", 3, length=0.0, masspole=0.0, backend=backend)
    env.reset(seed=0)
    with pytest.raises(FloatingPointError, match=r"state\.x_dot of env 0"):
        env.step(np.ones(3, dtype=np.int64))


def test_nan_from_reset_params_is_reported() -> None:
    env = make("gpuvec/CartPole-v1", 2)
    env.reset(seed=0)
    with pytest.raises(FloatingPointError, match=r"state\.x of env 0"):
        env.reset(options={"low": float("nan"), "high": 0.0})
