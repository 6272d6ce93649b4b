"""Classic-control specifics the generic parity tests do not cover.

Env parameters (Pendulum's ``g``, the cars' ``goal_velocity``, Acrobot's ``book_or_nips`` and
``torque_noise_max``), reset options, Acrobot's ``wrap``, and goal-reaching whole episodes
of both mountain cars (random actions never reach the goal). All float64 on the eager
backend, against gymnasium 1.4's classic-control envs.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.envs.classic_control import acrobot as ref_acrobot
from gymnasium.vector import AutoresetMode
from reference import REFERENCES, Reference

from gpuvec_envs.core.rng import STEP, Rng
from gpuvec_envs.envs.classic.acrobot import WRAP_ITERS, wrap

F64 = torch.float64


def ours(env_id: str, n: int, **kwargs) -> gym.vector.VectorEnv:
    kwargs = {"backend": "eager", "dtype": F64, "autoreset_mode": "disabled", **kwargs}
    return gym.make_vec(env_id, num_envs=n, **kwargs)


def injected_step(
    env_id: str, n: int, seed: int, ref_setup, ours_kwargs: dict, ref_kwargs: dict
) -> tuple[np.ndarray, ...]:
    """One step of ours and the reference from the same random states and actions.

    Returns:
        ``(our_next, ref_next, our_reward, ref_reward, our_term, ref_term)``.
    """
    ref = REFERENCES[env_id]
    rng = np.random.default_rng(seed)
    states, actions = ref.random_states(rng, n), ref.random_actions(rng, n)
    vec = ours(env_id, n, **ours_kwargs)
    vec.reset(seed=seed)
    vec.unwrapped.set_env_state(ref.to_env_state(vec.unwrapped, states))
    _, reward, term, _, _ = vec.step(actions)
    env = gym.make(ref.reference_id, disable_env_checker=True, **ref_kwargs).unwrapped
    rows = []
    for i in range(n):
        env.reset(seed=i)
        ref_setup(env, i)
        Reference.set_state(env, states[i])
        _, r, t, _, _ = env.step(actions[i])
        rows.append((Reference.get_state(env), r, t))
    return (
        ref.from_env_state(vec.unwrapped),
        np.stack([r[0] for r in rows]),
        reward.numpy(),
        np.array([r[1] for r in rows]),
        term.numpy(),
        np.array([r[2] for r in rows]),
    )


def assert_same_step(out: tuple[np.ndarray, ...]) -> None:
    our_next, ref_next, our_r, ref_r, our_t, ref_t = out
    np.testing.assert_allclose(our_next, ref_next, rtol=0, atol=1e-10)
    np.testing.assert_allclose(our_r, ref_r, rtol=0, atol=1e-10)
    np.testing.assert_array_equal(our_t, ref_t)


def no_setup(env: gym.Env, i: int) -> None:
    pass


@pytest.mark.parametrize("g", [9.81, 3.7])
def test_pendulum_gravity_option(g: float) -> None:
    out = injected_step("gpuvec/Pendulum-v1", 500, 1, no_setup, {"g": g}, {"g": g})
    assert_same_step(out)
    default = injected_step("gpuvec/Pendulum-v1", 500, 1, no_setup, {}, {})
    assert np.abs(default[0][:, 1] - out[0][:, 1]).max() > 1e-3  # g changes the dynamics


@pytest.mark.parametrize("env_id", ["gpuvec/MountainCar-v0", "gpuvec/MountainCarContinuous-v0"])
def test_mountain_car_goal_velocity_option(env_id: str) -> None:
    kw = {"goal_velocity": 0.03}
    out = injected_step(env_id, 1500, 2, no_setup, kw, kw)
    assert_same_step(out)
    default = injected_step(env_id, 1500, 2, no_setup, {}, {})
    assert 0 < out[4].sum() < default[4].sum()  # fewer, but some, terminations


def test_acrobot_nips_dynamics() -> None:
    def nips(env: gym.Env, i: int) -> None:
        env.book_or_nips = "nips"

    out = injected_step("gpuvec/Acrobot-v1", 800, 3, nips, {"book_or_nips": "nips"}, {})
    assert_same_step(out)
    book = injected_step("gpuvec/Acrobot-v1", 800, 3, no_setup, {}, {})
    assert np.abs(book[0] - out[0]).max() > 1e-3
    with pytest.raises(ValueError, match="book_or_nips"):
        ours("gpuvec/Acrobot-v1", 1, book_or_nips="other")


class _FixedUniform:
    """Stands in for the reference's ``np_random``: returns our noise draw for env ``i``."""

    def __init__(self, value: float, bound: float) -> None:
        self.value, self.bound = value, bound

    def uniform(self, low: float, high: float) -> float:
        assert (low, high) == (-self.bound, self.bound)
        return self.value


def test_acrobot_torque_noise_matches_reference_given_the_same_draws() -> None:
    n, bound = 800, 0.4
    ref = REFERENCES["gpuvec/Acrobot-v1"]
    rng = np.random.default_rng(4)
    states, actions = ref.random_states(rng, n), ref.random_actions(rng, n)
    vec = ours(ref.env_id, n, torque_noise_max=bound)
    vec.reset(seed=4)
    vec.unwrapped.set_env_state(ref.to_env_state(vec.unwrapped, states))
    st = vec.unwrapped.state
    noise = Rng(st.key0, st.key1, st.counter, STEP).uniform(low=-bound, high=bound, dtype=F64)
    noise = noise.numpy()
    assert np.abs(noise).max() < bound and noise.std() > bound / 3
    _, reward, term, _, _ = vec.step(actions)

    env = ref.make_reference().unwrapped
    env.torque_noise_max = bound
    for i in range(n):
        env.reset(seed=i)
        env._np_random = _FixedUniform(float(noise[i]), bound)
        Reference.set_state(env, states[i])
        _, r, t, _, _ = env.step(actions[i])
        np.testing.assert_allclose(ref.from_env_state(vec.unwrapped)[i], env.state, atol=1e-10)
        assert (float(reward[i]), bool(term[i])) == (r, t)


def test_acrobot_wrap_is_the_reference_loop() -> None:
    pi = np.pi
    reach = (2 * WRAP_ITERS + 1) * pi
    x = np.random.default_rng(5).uniform(-reach, reach, 4000)
    x = np.concatenate([x, [pi, -pi, 3 * pi, -3 * pi, np.nextafter(pi, 4), 0.0]])
    ours_x = wrap(torch.as_tensor(x), -pi, pi).numpy()
    expected = np.array([ref_acrobot.wrap(v, -pi, pi) for v in x])
    np.testing.assert_array_equal(ours_x, expected)  # bit-exact up to WRAP_ITERS shifts
    far = wrap(torch.tensor([40 * pi + 0.5, -40 * pi - 0.5], dtype=F64), -pi, pi)
    torch.testing.assert_close(far, torch.tensor([0.5, -0.5], dtype=F64), rtol=0, atol=1e-12)


RESET_CASES = [
    # env id, options, per state component: (low, high) or a constant
    ("gpuvec/Pendulum-v1", None, [(-np.pi, np.pi), (-1.0, 1.0)]),
    ("gpuvec/Pendulum-v1", {"x_init": 0.5, "y_init": 0.2}, [(-0.5, 0.5), (-0.2, 0.2)]),
    ("gpuvec/MountainCar-v0", None, [(-0.6, -0.4), 0.0]),
    ("gpuvec/MountainCar-v0", {"low": -1.0, "high": 0.2}, [(-1.0, 0.2), 0.0]),
    ("gpuvec/MountainCarContinuous-v0", {"low": 0.1, "high": 0.3}, [(0.1, 0.3), 0.0]),
    ("gpuvec/Acrobot-v1", None, [(-0.1, 0.1)] * 4),
    ("gpuvec/Acrobot-v1", {"low": -0.5, "high": 1.0}, [(-0.5, 1.0)] * 4),
]


@pytest.mark.parametrize("env_id,options,bounds", RESET_CASES)
def test_reset_distribution_and_options_as_gymnasium(env_id: str, options, bounds) -> None:
    n = 4096
    vec = ours(env_id, n)
    vec.reset(seed=0, options=options)
    got = REFERENCES[env_id].from_env_state(vec.unwrapped)
    env = REFERENCES[env_id].make_reference().unwrapped
    refs = np.stack([(env.reset(seed=i, options=options), env.state)[1] for i in range(300)])
    for j, b in enumerate(bounds):
        if isinstance(b, tuple):
            lo, hi = b
            width = hi - lo
            for sample in (got[:, j], refs[:, j]):
                assert lo <= sample.min() and sample.max() <= hi, (j, b)
            assert got[:, j].min() < lo + 0.01 * width and got[:, j].max() > hi - 0.01 * width
            assert abs(got[:, j].mean() - (lo + hi) / 2) < 0.03 * width
        else:
            assert (got[:, j] == b).all() and (refs[:, j] == b).all()
    if env_id == "gpuvec/Acrobot-v1":  # gymnasium rounds the reset state to float32
        np.testing.assert_array_equal(got.astype(np.float32).astype(np.float64), got)


@pytest.mark.parametrize(
    "env_id,options",
    [
        ("gpuvec/MountainCar-v0", {"low": 0.5, "high": -0.5}),
        ("gpuvec/MountainCarContinuous-v0", {"low": "x"}),
        ("gpuvec/Acrobot-v1", {"low": 1.0, "high": 0.0}),
        ("gpuvec/Pendulum-v1", {"x_init": "not a number"}),
    ],
)
def test_bad_reset_options_raise_as_in_gymnasium(env_id: str, options: dict) -> None:
    env = REFERENCES[env_id].make_reference()
    with pytest.raises(ValueError) as ref_err:
        env.reset(seed=0, options=options)
    with pytest.raises(ValueError) as our_err:
        ours(env_id, 2).reset(seed=0, options=options)
    assert str(our_err.value) == str(ref_err.value)


def _pump(env_id: str, obs: torch.Tensor) -> np.ndarray:
    """Energy-pumping policy: push in the direction of the velocity (reaches the goal)."""
    v = obs[:, 1].numpy()
    if env_id == "gpuvec/MountainCar-v0":
        return np.where(v >= 0, 2, 0)
    return np.where(v >= 0, 0.8, -1.2)[:, None]  # |a| > 1 exercises the clip


@pytest.mark.parametrize("env_id", ["gpuvec/MountainCar-v0", "gpuvec/MountainCarContinuous-v0"])
def test_goal_reaching_whole_episodes_float64(env_id: str) -> None:
    """As the generic whole-episode test (same sync rule), but driven to the goal."""
    ref = REFERENCES[env_id]
    n, steps = 6, 400
    vec = ours(env_id, n, autoreset_mode=AutoresetMode.SAME_STEP)
    refs = [gym.make(ref.reference_id, disable_env_checker=True) for _ in range(n)]

    def sync(i: int) -> None:
        refs[i].reset(seed=i)
        ref.set_state(refs[i], ref.from_env_state(vec.unwrapped)[i])

    obs, _ = vec.reset(seed=6)
    for i in range(n):
        sync(i)
    lengths, goals = np.zeros(n, dtype=int), 0
    for _ in range(steps):
        actions = _pump(env_id, obs)
        if ref.resync:
            pre = ref.from_env_state(vec.unwrapped)
            for i in range(n):
                ref.set_state(refs[i], pre[i])
        obs, reward, term, trunc, info = vec.step(actions)
        lengths += 1
        state = ref.from_env_state(vec.unwrapped)
        for i in range(n):
            r_obs, r_rew, r_term, r_trunc, _ = refs[i].step(actions[i])
            done = bool(term[i] or trunc[i])
            mine = info["final_obs"][i] if done else obs[i]
            # the reference's observation is float32; its float64 state is compared below
            np.testing.assert_allclose(mine.numpy().astype(np.float32), r_obs, rtol=0, atol=1e-7)
            assert abs(float(reward[i]) - r_rew) <= 1e-10
            assert (bool(term[i]), bool(trunc[i])) == (r_term, r_trunc), (i, lengths[i])
            if done:
                if "Continuous" in env_id:  # episodes end at the goal, with the +100
                    assert r_term and r_rew > 50
                goals += int(r_term)
                lengths[i] = 0
                sync(i)
            else:
                np.testing.assert_allclose(state[i], ref.get_state(refs[i]), rtol=0, atol=1e-10)
    assert goals >= 2 * n
