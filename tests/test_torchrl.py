"""The TorchRL adapter: specs, collector trajectories, partial resets, seeds, checkpoints.

Every comparison is against the engine itself: a ``GpuVecEnv`` in SAME_STEP mode (the mode
the adapter runs) stepped with the same seeds and actions, whose ``info["final_obs"]`` is
the transition's ``"next"`` observation and whose returned observation is the one TorchRL's
``_reset`` hands back for finished envs. Both run the eager step (the same code), so
floats compare bitwise. Time limits are short so that terminations and truncations end
episodes at different steps in different envs.
"""

from __future__ import annotations

import importlib.util
import io
import pathlib
import sys
from typing import Any

import gymnasium as gym
import pytest
import torch

torchrl = pytest.importorskip(
    "torchrl", reason="the TorchRL adapter needs torchrl: pip install gpuvec_envs[torchrl]"
)

from tensordict import TensorDict  # noqa: E402
from tensordict.nn import TensorDictModule  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils._python_dispatch import TorchDispatchMode  # noqa: E402
from torchrl.collectors import Collector  # noqa: E402
from torchrl.data import OneHot  # noqa: E402
from torchrl.envs import (  # noqa: E402
    Compose,
    ObservationNorm,
    RewardSum,
    StepCounter,
    TransformedEnv,
    VecNorm,
)
from torchrl.envs.libs.gym import _gym_to_torchrl_spec_transform  # noqa: E402
from torchrl.envs.utils import check_env_specs  # noqa: E402

import gpuvec_envs  # noqa: E402
from gpuvec_envs.adapters import TorchRLEnv, make_torchrl_env  # noqa: E402
from gpuvec_envs.core import eager as eager_module  # noqa: E402
from gpuvec_envs.core import rng as rng_module  # noqa: E402

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"


def load_example(name: str) -> Any:
    """An example script as a module, loaded once per process."""
    if name not in sys.modules:
        spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module  # dataclasses look their module up
        spec.loader.exec_module(module)
    return sys.modules[name]


#: One ID of every family; MiniGrid both as its image and as its Dict observation.
FAMILIES = {
    "CartPole": ("gpuvec/CartPole-v1", {}),
    "Pendulum": ("gpuvec/Pendulum-v1", {}),
    "MinAtar": ("gpuvec/MinAtar-Breakout-v1", {}),
    "MiniGrid": ("gpuvec/MiniGrid-Empty-5x5-v0", {}),
    "MiniGridDict": ("gpuvec/MiniGrid-DoorKey-5x5-v0", {"obs_mode": "dict"}),
}
#: Short time limits, so that truncations mix with terminations within a few steps.
LIMITS = {"CartPole": 16, "Pendulum": 9, "MinAtar": 13, "MiniGrid": 7, "MiniGridDict": 6}


def adapter(name: str, n: int, **kwargs: Any) -> TorchRLEnv:
    env_id, kw = FAMILIES[name]
    kw = {"max_episode_steps": LIMITS[name], "backend": "eager", **kw, **kwargs}
    return make_torchrl_env(env_id, n, **kw)


def reference(name: str, n: int, **kwargs: Any) -> Any:
    """The engine env the adapter wraps, made the same way, for the expected values."""
    env_id, kw = FAMILIES[name]
    kw = {"max_episode_steps": LIMITS[name], "backend": "eager", **kw, **kwargs}
    return gym.make_vec(
        env_id,
        num_envs=n,
        vectorization_mode="vector_entry_point",
        autoreset_mode="same_step",
        validate=False,
        **kw,
    )


def random_actions(env: Any, steps: int, seed: int) -> torch.Tensor:
    """(steps, N, *action_shape) engine actions drawn from the env's own action space."""
    gen = torch.Generator().manual_seed(seed)
    space = env.single_action_space
    n = env.num_envs
    if isinstance(space, gym.spaces.Discrete):
        return torch.randint(0, int(space.n), (steps, n), generator=gen)
    low = torch.as_tensor(space.low)
    high = torch.as_tensor(space.high)
    u = torch.rand((steps, n, *space.shape), generator=gen, dtype=torch.float32)
    return low + u * (high - low)


def torchrl_action(env: TorchRLEnv, action: torch.Tensor) -> torch.Tensor:
    """The engine's action in the adapter's encoding (one-hot unless categorical)."""
    if env.categorical_action_encoding or action.is_floating_point():
        return action
    return nn.functional.one_hot(action, env.action_spec.shape[-1])


def encoded(env: TorchRLEnv, obs: Any) -> dict[str, torch.Tensor]:
    """The reference env's observation as the adapter's entries."""
    if not isinstance(obs, dict):
        return {"observation": obs}
    out = {}
    for key, value in obs.items():
        spec = env.full_observation_spec[key]
        one_hot = isinstance(spec, OneHot)
        out[key] = nn.functional.one_hot(value, spec.shape[-1]) if one_hot else value
    return out


def reference_rollout(ref: Any, env: TorchRLEnv, actions: torch.Tensor, seed: int) -> dict:
    """The reference's (N, T, ...) trajectory: observation, next observation, reward, flags."""
    obs, _ = ref.reset(seed=seed)
    steps: dict[str, list[torch.Tensor]] = {}

    def add(key: Any, value: torch.Tensor) -> None:
        steps.setdefault(key, []).append(value)

    for action in actions:
        for key, value in encoded(env, obs).items():
            add(key, value)
        obs, reward, terminated, truncated, info = ref.step(action)
        for key, value in encoded(env, info["final_obs"]).items():
            add(("next", key), value)
        add(("next", "reward"), reward.unsqueeze(-1))
        add(("next", "terminated"), terminated.unsqueeze(-1))
        add(("next", "truncated"), truncated.unsqueeze(-1))
        add(("next", "done"), (terminated | truncated).unsqueeze(-1))
    return {key: torch.stack(values, dim=1) for key, values in steps.items()}


class Replay(nn.Module):
    """A policy that plays a fixed table of actions, one row per call."""

    def __init__(self, table: torch.Tensor) -> None:
        super().__init__()
        self.table = table
        self.calls = 0

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        action = self.table[self.calls]
        self.calls += 1
        return action


def replay_policy(env: TorchRLEnv, actions: torch.Tensor) -> TensorDictModule:
    table = torch.stack([torchrl_action(env, a) for a in actions])
    key = next(iter(env.full_observation_spec.keys()))
    return TensorDictModule(Replay(table), in_keys=[key], out_keys=["action"])


def collect(env: Any, policy: TensorDictModule, frames: int, total: int) -> list[Any]:
    """The batches of TorchRL's ``Collector`` playing ``policy``'s table from its first row."""
    collector = Collector(
        env,
        policy,
        frames_per_batch=frames,
        total_frames=total,
        auto_register_policy_transforms=False,
    )
    policy.module.calls = 0  # the collector calls the policy once on a fake batch first
    batches = list(collector)
    collector.shutdown()
    return batches


def assert_equal_entries(data: Any, expected: dict) -> None:
    for key, value in expected.items():
        got = data[key]
        assert got.dtype == value.dtype, key
        assert torch.equal(got, value), (key, got, value)


# -- specs ---------------------------------------------------------------------------------
@pytest.mark.parametrize("categorical", [False, True])
@pytest.mark.parametrize("name", list(FAMILIES))
def test_check_env_specs(name: str, categorical: bool) -> None:
    env = adapter(name, 3, categorical_action_encoding=categorical)
    check_env_specs(env, seed=0, break_when_any_done="both")
    assert env.batch_size == torch.Size([3])
    assert set(env.done_keys) == {"done", "terminated", "truncated"}


@pytest.mark.parametrize("categorical", [False, True])
@pytest.mark.parametrize("name", list(FAMILIES))
def test_specs_are_gym_envs(name: str, categorical: bool) -> None:
    """Observation and action specs are TorchRL's own mapping of the gymnasium spaces."""
    n = 3
    env = adapter(name, n, categorical_action_encoding=categorical)
    ref = reference(name, n)

    def batched(space: gym.Space) -> Any:
        spec = _gym_to_torchrl_spec_transform(
            space, device="cpu", categorical_action_encoding=categorical
        )
        if isinstance(space, gym.spaces.Dict):
            return {k: batched(s) for k, s in space.spaces.items()}
        return spec.expand(n, *spec.shape)

    obs = batched(ref.single_observation_space)
    expected_obs = obs if isinstance(obs, dict) else {"observation": obs}
    assert set(env.full_observation_spec.keys()) == set(expected_obs)
    for key, spec in expected_obs.items():
        assert env.full_observation_spec[key] == spec, key
    assert env.full_action_spec["action"] == batched(ref.single_action_space)
    gym_cartpole = torchrl.envs.GymEnv("CartPole-v1")  # the reward and done specs of GymEnv
    for spec_name in ("full_reward_spec", "full_done_spec"):
        ours, theirs = getattr(env, spec_name), getattr(gym_cartpole, spec_name)
        for key, spec in theirs.items():
            dtype = ref.unwrapped.dtype if key == "reward" else spec.dtype
            assert ours[key] == spec.expand(n, *spec.shape).to(dtype), key


# -- trajectories --------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["CartPole", "Pendulum", "MinAtar", "MiniGridDict"])
def test_collector_equals_engine_trajectories(name: str) -> None:
    """Two collector batches of 6 envs x 12 steps equal the engine's steps bitwise."""
    n, t, seed = 6, 12, 7
    env = adapter(name, n)
    ref = reference(name, n)
    actions = random_actions(ref, 2 * t, seed=1)
    expected = reference_rollout(ref, env, actions, seed)
    assert expected["next", "terminated"].any() or name in ("Pendulum", "MiniGridDict")
    assert expected["next", "truncated"].any() and not expected["next", "done"].all()
    env.set_seed(seed)
    batches = collect(env, replay_policy(env, actions), n * t, 2 * n * t)
    assert [b.shape for b in batches] == [torch.Size([n, t])] * 2
    data = torch.cat(batches, dim=1)
    assert_equal_entries(data, expected)


@pytest.mark.parametrize("categorical", [False, True])
def test_reset_entry_equals_engine_reset_mask(categorical: bool) -> None:
    """A ``"_reset"`` mask resets exactly those envs, as the engine's ``reset_mask``.

    The mask covers envs the last step ended (already reset by the SAME_STEP step) and envs
    it did not (reset now by the engine's masked reset); a second reset of the same mask
    resets them all; afterwards both envs agree step for step.
    """
    n, seed = 8, 3
    env = adapter("CartPole", n, categorical_action_encoding=categorical)
    ref = reference("CartPole", n)
    actions = random_actions(ref, 40, seed=2)
    mask = torch.arange(n) % 2 == 0
    env.set_seed(seed)
    td = env.reset()
    obs, _ = ref.reset(seed=seed)
    assert torch.equal(td["observation"], obs)
    for k in range(len(actions)):
        action = actions[k]
        td["action"] = torchrl_action(env, action)
        out = env.step(td)
        obs, _, terminated, truncated, info = ref.step(action)
        done = terminated | truncated
        if (mask & done).any() and (mask & ~done).any():
            break
        td = env.step_mdp(out)
        td = env.maybe_reset(td)
    else:
        pytest.fail("no step ended some envs in the mask but not all")
    td = env.step_mdp(out)
    td["_reset"] = mask.unsqueeze(-1)
    td = env.reset(td)
    ref_obs, _ = ref.reset(options={"reset_mask": mask & ~done})
    assert torch.equal(td["observation"][mask], ref_obs[mask])
    kept = out["next", "observation"]
    assert torch.equal(td["observation"][~mask], kept[~mask])  # TorchRL keeps the others
    assert not td["done"][mask].any()
    td["_reset"] = mask.unsqueeze(-1)  # again: now the engine resets every env in the mask
    td = env.reset(td)
    ref_obs, _ = ref.reset(options={"reset_mask": mask})
    assert torch.equal(td["observation"][mask], ref_obs[mask])
    for action in actions[k + 1 : k + 15]:
        td["action"] = torchrl_action(env, action)
        out = env.step(td)
        ref_obs, reward, terminated, truncated, info = ref.step(action)
        assert torch.equal(out["next", "observation"], info["final_obs"])
        assert torch.equal(out["next", "reward"].squeeze(-1), reward)
        assert torch.equal(out["next", "terminated"].squeeze(-1), terminated)
        assert torch.equal(out["next", "truncated"].squeeze(-1), truncated)
        td = env.step_mdp(out)
        td = env.maybe_reset(td)
        assert torch.equal(td["observation"], ref_obs)


def test_set_seed_gives_env_i_the_stream_of_seed_plus_i() -> None:
    n, t, seed = 4, 30, 1000
    actions = random_actions(reference("CartPole", n), t, seed=4)
    env = adapter("CartPole", n)
    env.set_seed(seed)
    batch = env.rollout(t, replay_policy(env, actions), break_when_any_done=False)
    assert batch["next", "done"].sum() >= n  # every env restarted with its own stream
    for i in range(n):
        single = adapter("CartPole", 1)
        single.set_seed(seed + i)
        one = single.rollout(
            t, replay_policy(single, actions[:, i : i + 1]), break_when_any_done=False
        )
        for key in (("observation"), ("next", "observation"), ("next", "reward"), ("next", "done")):
            assert torch.equal(batch[key][i], one[key][0]), (i, key)


# -- checkpoints -------------------------------------------------------------------------
def test_state_dict_round_trip_continues_bitwise() -> None:
    """Saved between a step and TorchRL's reset, with a seed set for the next full reset."""
    n = 6
    env = adapter("MinAtar", n)
    actions = random_actions(reference("MinAtar", n), 60, seed=5)
    env.set_seed(11)
    td = env.reset()
    k = 0
    while True:
        td["action"] = torchrl_action(env, actions[k])
        out = env.step(td)
        k += 1
        if out["next", "done"].any():
            break
        td = env.maybe_reset(env.step_mdp(out))
    env.set_seed(42)
    buf = io.BytesIO()
    torch.save(env.state_dict(), buf)
    buf.seek(0)
    restored = adapter("MinAtar", n)
    restored.load_state_dict(torch.load(buf, weights_only=True))
    tds = [env.maybe_reset(env.step_mdp(out)), restored.maybe_reset(restored.step_mdp(out.clone()))]
    assert torch.equal(tds[0]["observation"], tds[1]["observation"])
    for action in actions[k : k + 30]:
        outs = []
        for e, td in zip((env, restored), tds, strict=True):
            td["action"] = torchrl_action(e, action)
            outs.append(e.step(td))
        assert (outs[0] == outs[1]).all(), action
        tds = [e.maybe_reset(e.step_mdp(o)) for e, o in zip((env, restored), outs, strict=True)]
    first = [e.reset()["observation"] for e in (env, restored)]
    ref_obs, _ = reference("MinAtar", n).reset(seed=42)
    assert torch.equal(first[0], ref_obs) and torch.equal(first[1], ref_obs)


def test_load_state_dict_of_another_env_raises_and_changes_nothing() -> None:
    env = adapter("CartPole", 4)
    env.set_seed(0)
    before = env.reset()["observation"]
    other = adapter("CartPole", 5)
    other.reset()
    with pytest.raises(ValueError, match="num_envs"):
        env.load_state_dict(other.state_dict())
    with pytest.raises(ValueError, match="expected keys"):
        env.load_state_dict({"_extra_state": {"venv": {}}})
    td = env.step(
        TensorDict({"action": torchrl_action(env, torch.zeros(4, dtype=torch.int64))}, [4])
    )
    ref = reference("CartPole", 4)
    ref_obs, _ = ref.reset(seed=0)
    assert torch.equal(before, ref_obs)
    assert torch.equal(td["next", "observation"], ref.step(torch.zeros(4, dtype=torch.int64))[0])


# -- transforms ----------------------------------------------------------------------------
@pytest.mark.filterwarnings("ignore:Support of VecNormV2 for containers with non-empty batch")
def test_transforms_under_the_collector() -> None:
    """StepCounter and RewardSum count the engine's episodes; ObservationNorm and VecNorm."""
    n, t, seed = 5, 40, 9
    loc = torch.tensor([0.1, -0.2, 0.05, 0.3])
    scale = torch.tensor([2.0, 0.5, 4.0, 0.25])
    env = TransformedEnv(
        adapter("CartPole", n),
        Compose(
            StepCounter(),
            RewardSum(),
            ObservationNorm(loc, scale, in_keys=["observation"], standard_normal=True),
        ),
    )
    ref = reference("CartPole", n)
    actions = random_actions(ref, t, seed=6)
    expected = reference_rollout(ref, env.base_env, actions, seed)
    env.set_seed(seed)
    (data,) = collect(env, replay_policy(env.base_env, actions), n * t, n * t)
    torch.testing.assert_close(
        data["observation"], (expected["observation"] - loc) / scale, rtol=1e-6, atol=0
    )
    done = expected["next", "done"].squeeze(-1)
    reward = expected["next", "reward"].squeeze(-1)
    length = torch.zeros(n, dtype=torch.int64)
    ret = torch.zeros(n)
    for k in range(t):
        length += 1
        ret += reward[:, k]
        assert torch.equal(data["next", "step_count"][:, k, 0], length)
        assert torch.equal(data["next", "episode_reward"][:, k, 0], ret)
        length = torch.where(done[:, k], 0, length)
        ret = torch.where(done[:, k], 0.0, ret)

    norm = TransformedEnv(adapter("CartPole", n), VecNorm(in_keys=["observation"], new_api=True))
    batch = norm.rollout(t, break_when_any_done=False)
    raw = batch["observation"]
    assert raw.isfinite().all() and not torch.equal(raw, expected["observation"])
    assert (raw[:, -10:].std(dim=(0, 1)) > 0.2).all()  # scaled towards unit variance


# -- input checks, reads, devices, custom envs -----------------------------------------------
def test_bad_input_raises_clear_errors() -> None:
    env = adapter("CartPole", 4)
    td = env.reset()
    with pytest.raises(ValueError, match=r"one-hot actions must have shape \(4, 2\)"):
        env.step(td.set("action", torch.zeros(4, dtype=torch.int64)))
    cat = adapter("CartPole", 4, categorical_action_encoding=True)
    td = cat.reset()
    with pytest.raises(TypeError, match="expects integer actions"):
        cat.step(td.set("action", torch.zeros(4)))
    with pytest.raises(ValueError, match=r"actions must have shape \(4,\)"):
        cat.step(td.set("action", torch.zeros(4, 1, dtype=torch.int64)))
    with pytest.raises(TypeError, match="'_reset' must be bool"):
        cat.reset(TensorDict({"_reset": torch.ones(4, 1, dtype=torch.int64)}, [4]))
    with pytest.raises(ValueError, match=r"'_reset' must have shape \(4,\) or \(4, 1\)"):
        cat.reset(TensorDict({"_reset": torch.ones(4, 2, dtype=torch.bool)}, [4]))
    checked = adapter("CartPole", 4, validate=True)
    td = checked.reset()
    bad = nn.functional.one_hot(torch.zeros(4, dtype=torch.int64), 2)
    bad[2] = torch.tensor([1, 1])
    with pytest.raises(ValueError, match=r"action \[1, 1\] of env 2 is not one-hot"):
        checked.step(td.set("action", bad))
    checked_cat = adapter("CartPole", 4, validate=True, categorical_action_encoding=True)
    td = checked_cat.reset()
    with pytest.raises(ValueError, match=r"action 2 of env 1 is outside \[0, 2\)"):
        checked_cat.step(td.set("action", torch.tensor([0, 2, 1, 0])))
    pendulum = adapter("Pendulum", 2, validate=True)
    td = pendulum.reset()
    with pytest.raises(ValueError, match="of env 1 is not finite"):
        pendulum.step(td.set("action", torch.tensor([[0.0], [float("nan")]])))
    with pytest.raises(ValueError, match="SAME_STEP"):
        make_torchrl_env("gpuvec/CartPole-v1", 2, autoreset_mode="next_step")
    with pytest.raises(ValueError, match="autoreset_mode='same_step'"):
        TorchRLEnv(gym.make_vec("gpuvec/CartPole-v1", num_envs=2, backend="eager"))
    with pytest.raises(TypeError, match="expected a gpuvec GpuVecEnv"):
        TorchRLEnv(gym.make_vec("CartPole-v1", num_envs=2))
    with pytest.raises(ValueError, match="make it with device='meta'"):
        env.to("meta")
    assert env.to("cpu") is env
    # a rejected action leaves the state as it was: the next steps are the engine's
    ref = reference("CartPole", 4)
    env.set_seed(5)
    td = env.reset()
    ref.reset(seed=5)
    with pytest.raises(ValueError):
        env.step(td.set("action", torch.zeros(4, 3, dtype=torch.int64)))
    action = torch.tensor([1, 0, 1, 1])
    one_hot = torchrl_action(env, action)
    out = env.step(td.set("action", one_hot))
    assert torch.equal(out["next", "observation"], ref.step(action)[4]["final_obs"])
    assert torch.equal(one_hot, torchrl_action(env, action))  # the caller's action untouched


def test_partial_step_masks_are_refused() -> None:
    env = adapter("CartPole", 4, max_episode_steps=None)
    env.set_seed(0)
    with pytest.raises(NotImplementedError, match="'_step' masks"):
        env.rollout(200, break_when_any_done=False, break_when_all_done=True)


HOST_FILES = (eager_module.__file__, rng_module.__file__)
READS = ("cpu", "item", "tolist", "__bool__", "nonzero", "numpy", "any", "all")


def count_reads(monkeypatch: pytest.MonkeyPatch, fn: Any) -> dict[str, int]:
    """Read-backs (``.item()``, ``bool()``, ``.any()``...) of tensors during ``fn()``.

    The eager step's host shortcuts (on plain CPU tensors, never on CUDA) do not count.
    """
    calls: dict[str, int] = {}
    for name in READS:
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _name=name, _original=original, **kwargs):
            if sys._getframe(1).f_code.co_filename not in HOST_FILES:
                calls[_name] = calls.get(_name, 0) + 1
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    try:
        fn()
    finally:
        monkeypatch.undo()
    return calls


@pytest.mark.parametrize("name", list(FAMILIES))
def test_lean_step_equals_torchrl_post_processing(monkeypatch, name: str) -> None:
    """``LEAN_STEP`` skips TorchRL's ``_step_proc_data`` (``EnvBase.step`` still reaches the
    adapter's hook), and the steps equal TorchRL's own post-processing entry for entry:
    keys, shapes, dtypes and values; ``run_type_checks`` runs TorchRL's version."""
    from torchrl.envs import EnvBase

    import gpuvec_envs.adapters.torchrl as module

    n, steps = 6, 20  # past every family's time limit (LIMITS)
    actions = random_actions(reference(name, n), steps, seed=5)
    torchrl_calls = []
    original = EnvBase._step_proc_data

    def counted(self: Any, data: Any) -> Any:
        torchrl_calls.append(1)
        return original(self, data)

    monkeypatch.setattr(EnvBase, "_step_proc_data", counted)
    runs = {}
    for lean, checks in ((True, False), (False, False), (True, True)):
        monkeypatch.setattr(module, "LEAN_STEP", lean)
        env = adapter(name, n)
        env.run_type_checks = checks
        env.set_seed(2)
        td, outs = env.reset(), []
        del torchrl_calls[:]
        for action in actions:
            td["action"] = torchrl_action(env, action)
            out, td = env.step_and_maybe_reset(td)
            outs.append(out["next"].clone())
        assert len(torchrl_calls) == (0 if lean and not checks else steps), (lean, checks)
        runs[lean, checks] = outs
    assert torch.stack([out["done"] for out in runs[True, False]]).any()
    for other in ((False, False), (True, True)):
        for got, want in zip(runs[True, False], runs[other], strict=True):
            assert set(got.keys(True, True)) == set(want.keys(True, True))
            for key in want.keys(True, True):
                assert got[key].dtype == want[key].dtype, key
                assert torch.equal(got[key], want[key]), key


@pytest.mark.parametrize("categorical", [False, True])
def test_a_step_reads_nothing_back_and_a_reset_one_flag(monkeypatch, categorical: bool) -> None:
    n = 6
    env = adapter("CartPole", n, categorical_action_encoding=categorical)
    td = env.reset()
    actions = random_actions(reference("CartPole", n), 30, seed=8)
    for action in actions:
        td["action"] = torchrl_action(env, action)
        outs = []
        assert count_reads(monkeypatch, lambda td=td, outs=outs: outs.append(env.step(td))) == {}
        out = outs[0]
        if out["next", "done"].any():
            break
    nxt = env.step_mdp(out)
    reset = TensorDict({"_reset": nxt["done"].clone()}, [n])
    assert count_reads(monkeypatch, lambda: env._reset(reset)) == {"any": 1, "__bool__": 1}


class _AtenOps(TorchDispatchMode):
    """Records the aten ops dispatched while active (``paused`` stops recording)."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[str] = []
        self.paused = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        if not self.paused:
            self.ops.append(str(func))
        return func(*args, **(kwargs or {}))


def ops_outside_the_fused_step(env: TorchRLEnv, td: TensorDict) -> list[str]:
    """The aten ops ``env.step(td)`` dispatches outside the adapter's fused step call."""
    fused = env._fused_step
    mode = _AtenOps()

    def paused(*args: Any) -> Any:
        mode.paused = True
        try:
            return fused(*args)
        finally:
            mode.paused = False

    env._fused_step = paused
    try:
        with mode:
            env.step(td)
    finally:
        env._fused_step = fused
    return mode.ops


def test_one_hot_actions_cost_no_op_beyond_categorical_ones() -> None:
    """The one-hot decode runs inside the fused (compiled) step: outside it, a one-hot step
    runs exactly the categorical step's ops (none of its own: no decode, cast or copy)."""
    n = 8
    action = random_actions(reference("CartPole", n), 1, seed=2)[0]
    ops = {}
    for categorical in (True, False):
        env = adapter("CartPole", n, categorical_action_encoding=categorical)
        td = env.reset()
        td["action"] = torchrl_action(env, action)
        env.step(td.clone())  # TorchRL's first-call bookkeeping
        ops[categorical] = ops_outside_the_fused_step(env, td)
    assert ops[False] == ops[True]


def test_one_hot_dtypes_and_rows_that_are_not_one_hot() -> None:
    """bool, float and int64 one-hot actions step alike; with ``validate=False`` a row that
    is not one-hot still gives an action in range (``sum_j j * a_j``, clamped to [0, n))."""
    from gpuvec_envs.adapters.torchrl import _one_hot_index

    n, steps = 6, 12
    ref = reference("MinAtar", n)
    actions = random_actions(ref, steps, seed=4)
    ref.reset(seed=3)
    expected = [ref.step(a)[4]["final_obs"] for a in actions]
    for dtype in (torch.int64, torch.bool, torch.float32, torch.uint8):
        env = adapter("MinAtar", n)
        env.set_seed(3)
        td = env.reset()
        for a, want in zip(actions, expected, strict=True):
            out = env.step(td.set("action", torchrl_action(env, a).to(dtype)))
            assert torch.equal(out["next", "observation"], want), dtype
            td = env.step_mdp(out)
    rows = torch.tensor([[0, 0, 0], [1, 1, 1], [0, 0, 1], [5, 0, 7], [-4, 0, 0], [0, 1, 0]])
    assert _one_hot_index(rows).tolist() == [0, 2, 2, 2, 0, 1]
    assert _one_hot_index(torch.ones(3, 1, dtype=torch.int64)).tolist() == [0, 0, 0]


def test_a_registered_custom_env_works() -> None:
    module = load_example("custom_env")
    gpuvec_envs.register(
        "test/TorchRLFruit-v0", module.FruitCatch, max_episode_steps=12, replace=True
    )
    env = make_torchrl_env("test/TorchRLFruit-v0", 4, backend="eager")
    check_env_specs(env, seed=0, break_when_any_done="both")
    batch = env.rollout(30, break_when_any_done=False)
    assert batch["next", "truncated"][:, 11].all() and batch["observation"].shape == (4, 30, 5)


# -- slow: the compiled step, and the PPO example ------------------------------------------
@pytest.mark.slow
def test_compiled_collector_equals_compiled_engine_float64() -> None:
    """The fused compiled step (adapter) and the engine's compiled step, in float64."""
    n, t, seed = 64, 50, 1
    env = adapter("CartPole", n, dtype=torch.float64, backend="compile")
    ref = reference("CartPole", n, dtype=torch.float64, backend="compile")
    actions = random_actions(ref, t, seed=3)
    expected = reference_rollout(ref, env, actions, seed)
    env.set_seed(seed)
    (data,) = collect(env, replay_policy(env, actions), n * t, n * t)
    assert_equal_entries(data, expected)


@pytest.mark.slow
def test_ppo_example_reaches_475() -> None:
    module = load_example("torchrl_ppo")
    threads = torch.get_num_threads()
    try:
        result = module.main(["--quiet"])
    finally:
        torch.set_num_threads(threads)
    assert result["reached_at"] is not None, result
    assert result["mean_return"] >= 475
