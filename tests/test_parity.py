"""Parity with the gymnasium reference envs (every entry of ``reference.REFERENCES``).

- per-step state injection over thousands of random states and actions, float64 and float32;
- whole episodes in float64 after copying the reset state (flags and truncation exact);
- autoreset semantics in all three modes against ``gymnasium.vector.SyncVectorEnv``;
- eager and compiled backends agree.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode
from reference import REFERENCES, Reference

from gpuvec_envs.core.step import contiguous

IDS = sorted(REFERENCES)


def make_ours(ref: Reference, n: int, **kwargs) -> gym.vector.VectorEnv:
    kwargs = {"backend": "eager", "dtype": torch.float64, **ref.kwargs, **kwargs}
    return gym.make_vec(ref.env_id, num_envs=n, **kwargs)


def step_reference(env: gym.Env, state: np.ndarray, action) -> tuple:
    env.reset(seed=0)
    ref_state = np.array(state, dtype=np.float64)
    Reference.set_state(env, ref_state)
    obs, reward, terminated, truncated, _ = env.step(action)
    return obs, reward, terminated, Reference.get_state(env)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("env_id", IDS)
def test_step_parity_by_state_injection(env_id: str, dtype: torch.dtype) -> None:
    ref = REFERENCES[env_id]
    rng = np.random.default_rng(123)
    n = 2000
    states = ref.random_states(rng, n)
    actions = ref.random_actions(rng, n)
    ours = make_ours(ref, n, dtype=dtype, autoreset_mode="disabled")
    ours.reset(seed=1)
    ours.unwrapped.set_env_state(ref.to_env_state(ours.unwrapped, states))
    obs, reward, terminated, truncated, _ = ours.step(actions)

    reference = ref.make_reference()
    rows = [step_reference(reference, states[i], actions[i]) for i in range(n)]
    r_obs = np.stack([r[0] for r in rows]).astype(np.float64)
    r_reward = np.array([r[1] for r in rows], dtype=np.float64)
    r_term = np.array([r[2] for r in rows])
    r_next = np.stack([r[3] for r in rows])
    if ref.terminates:
        assert 0 < r_term.sum() < n, "the random states must include terminal transitions"
    else:
        assert not r_term.any()

    if dtype == torch.float64:
        # gymnasium casts the observation to float32: compare our float64 state exactly
        # and our observation to the reference's float32 rounding.
        np.testing.assert_allclose(ref.from_env_state(ours.unwrapped), r_next, rtol=0, atol=1e-10)
        np.testing.assert_allclose(obs.numpy().astype(np.float32), r_obs, rtol=0, atol=1e-6)
        np.testing.assert_allclose(reward.numpy(), r_reward, rtol=0, atol=1e-10)
        np.testing.assert_array_equal(terminated.numpy(), r_term)
    else:
        tol = ref.float32_tol
        np.testing.assert_allclose(obs.numpy(), r_obs, rtol=tol, atol=tol)
        np.testing.assert_allclose(reward.numpy(), r_reward, rtol=tol, atol=tol)
        differ = terminated.numpy() != r_term
        assert not (differ & ~ref.near_boundary(r_next)).any(), "termination differs"
    assert not truncated.any()
    assert obs.dtype == dtype and reward.dtype == dtype and terminated.dtype == torch.bool


@pytest.mark.parametrize("env_id", IDS)
def test_whole_episodes_float64(env_id: str) -> None:
    """Sync once per episode (at reset), then compare every step; several episodes per env."""
    ref = REFERENCES[env_id]
    n = 8
    rng = np.random.default_rng(7)
    ours = make_ours(ref, n, autoreset_mode="same_step")
    refs = [gym.make(ref.reference_id, disable_env_checker=True, **ref.kwargs) for _ in range(n)]
    limit = refs[0].spec.max_episode_steps
    steps = max(700, limit + 100)
    assert ours.unwrapped.cfg.max_episode_steps == limit

    def sync(i: int) -> None:
        refs[i].reset(seed=i)
        ref.set_state(refs[i], ref.from_env_state(ours.unwrapped)[i])

    ours.reset(seed=3)
    for i in range(n):
        sync(i)
    lengths, episodes = np.zeros(n, dtype=int), np.zeros(n, dtype=int)
    for _ in range(steps):
        actions = ref.random_actions(rng, n)
        if ref.resync:
            pre = ref.from_env_state(ours.unwrapped)
            for i in range(n):
                ref.set_state(refs[i], pre[i])
        obs, reward, term, trunc, info = ours.step(actions)
        lengths += 1
        for i in range(n):
            r_obs, r_rew, r_term, r_trunc, _ = refs[i].step(actions[i])
            done = bool(term[i] or trunc[i])
            ours_obs = info["final_obs"][i] if done else obs[i]
            np.testing.assert_allclose(ours_obs.numpy().astype(np.float32), r_obs, atol=1e-6)
            assert abs(float(reward[i]) - r_rew) <= 1e-10
            assert (bool(term[i]), bool(trunc[i])) == (r_term, r_trunc), (i, lengths[i])
            if not done:
                np.testing.assert_allclose(
                    ref.from_env_state(ours.unwrapped)[i], ref.get_state(refs[i]), atol=1e-10
                )
            else:
                if r_trunc and not r_term:
                    assert lengths[i] == limit
                lengths[i] = 0
                episodes[i] += 1
                sync(i)
    assert episodes.sum() >= n, "every env should finish at least one episode on average"


def _reset_rows(mode: AutoresetMode, prev_done: np.ndarray, done: np.ndarray) -> np.ndarray:
    if mode is AutoresetMode.NEXT_STEP:
        return prev_done
    if mode is AutoresetMode.SAME_STEP:
        return done
    return np.zeros_like(done)


@pytest.mark.parametrize("mode", list(AutoresetMode), ids=lambda m: m.value)
@pytest.mark.parametrize("env_id", IDS)
def test_autoreset_matches_sync_vector_env(env_id: str, mode: AutoresetMode) -> None:
    """Staggered ends (terminations and a short time limit) in every autoreset mode."""
    ref = REFERENCES[env_id]
    n, steps, limit = 6, 150, 23
    rng = np.random.default_rng(11)
    ours = make_ours(ref, n, autoreset_mode=mode, max_episode_steps=limit)
    sync = gym.vector.SyncVectorEnv(
        [lambda: ref.make_reference(max_episode_steps=limit) for _ in range(n)],
        autoreset_mode=mode,
    )

    def inject(rows: np.ndarray) -> np.ndarray:
        """Copy our state into the reference envs of ``rows``; return their observations."""
        states = ref.from_env_state(ours.unwrapped)
        for i in np.flatnonzero(rows):
            ref.set_state(sync.envs[i], states[i])
        return np.stack([ref.observe(e) for e in sync.envs])

    ours.reset(seed=5)
    sync.reset(seed=5)
    # Start from states that include near-terminal ones, so episodes end at staggered steps.
    start = ref.random_states(np.random.default_rng(12), n)
    ours.unwrapped.set_env_state(ref.to_env_state(ours.unwrapped, start))
    inject(np.ones(n, bool))
    prev_done = np.zeros(n, dtype=bool)
    seen_term = seen_trunc = 0
    for _ in range(steps):
        actions = ref.random_actions(rng, n)
        obs, reward, term, trunc, info = ours.step(actions)
        r_obs, r_reward, r_term, r_trunc, r_info = sync.step(actions)
        np.testing.assert_array_equal(term.numpy(), r_term)
        np.testing.assert_array_equal(trunc.numpy(), r_trunc)
        np.testing.assert_allclose(reward.numpy(), r_reward, atol=1e-10)
        done = r_term | r_trunc
        seen_term += int(r_term.sum())
        seen_trunc += int((r_trunc & ~r_term).sum())
        if mode is AutoresetMode.SAME_STEP:
            np.testing.assert_array_equal(info["_final_obs"].numpy(), done)
            for i in np.flatnonzero(done):
                ours_final = info["final_obs"][i].numpy().astype(np.float32)
                np.testing.assert_allclose(ours_final, r_info["final_obs"][i], atol=1e-6)
        else:
            assert info == {}
        reset_rows = _reset_rows(mode, prev_done, done)
        expected = r_obs.copy()
        expected[reset_rows] = inject(reset_rows)[reset_rows]
        np.testing.assert_allclose(obs.numpy().astype(np.float32), expected, atol=1e-6)
        if mode is AutoresetMode.DISABLED and done.any():
            obs, _ = ours.reset(options={"reset_mask": torch.as_tensor(done)})
            r_obs, _ = sync.reset(options={"reset_mask": done})
            expected = r_obs.copy()
            expected[done] = inject(done)[done]
            np.testing.assert_allclose(obs.numpy().astype(np.float32), expected, atol=1e-6)
        prev_done = done
    assert seen_trunc > 0, "need truncations"
    assert (seen_term > 0) == ref.terminates, "need terminations where the env has them"


# One env per distinct EnvDef: compiling costs 10-30 s per graph on a 2-core machine.
COMPILE_IDS = sorted({REFERENCES[i].env_id for i in IDS if not i.endswith("CartPole-v0")})


@pytest.mark.parametrize(  # one ID in the fast suite, the sweep in the heavy one
    "env_id",
    [
        pytest.param(i, marks=() if i == "gpuvec/CartPole-v1" else pytest.mark.heavy)
        for i in COMPILE_IDS
    ],
)
def test_eager_and_compiled_agree(env_id: str) -> None:
    """Bitwise: per step (compiled fed the eager state) and in free runs."""
    ref = REFERENCES[env_id]
    n, steps = 64, 300
    rng = np.random.default_rng(3)
    kwargs = {"autoreset_mode": "same_step", "max_episode_steps": 100}
    eager = make_ours(ref, n, **kwargs)
    compiled = make_ours(ref, n, backend="compile", **kwargs)
    eager.reset(seed=9)
    compiled.reset(seed=9)
    # the compiled step: any state of these shapes; its returned state is its own buffer,
    # overwritten by the next call, hence the copies
    step = compiled.unwrapped._step
    free = compiled.unwrapped.state
    for _ in range(steps):
        actions = torch.as_tensor(ref.random_actions(rng, n))
        before = eager.unwrapped.state
        obs, reward, term, trunc, info = eager.step(actions)
        synced = step(before, actions)
        out = step(free, actions)
        free = contiguous(out.state)
        assert compiled.unwrapped.backend == "compile"
        for o in (synced, out):
            assert torch.equal(o.obs, obs)
            assert torch.equal(o.reward, reward)
            assert torch.equal(o.final_obs, info["final_obs"])
            assert torch.equal(o.terminated.bool(), term)
            assert torch.equal(o.truncated.bool(), trunc)
