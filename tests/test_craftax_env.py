"""``gpuvec/Craftax-Classic-Symbolic-v1`` through the shell, against craftax 1.6.1 (jax CPU).

Reference: ``CraftaxClassicSymbolicEnvNoAutoReset`` under ``jit(vmap)`` in batches of at most
8 envs (jax 0.10.2's vmapped world generation repeats its noise past 8 envs; see
tests/test_craftax.py), reset from ``PRNGKey(seed)`` and stepped with each state's own key
``state.state_rng``, as the env documents. Unmarked tests run eagerly at small N (one jit
of the reference's reset and step per module); a longer sweep is ``heavy``, the compiled
backend ``slow`` (its compile takes tens of minutes on 2 cores).
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

import gpuvec_envs  # noqa: F401 - registers the IDs
from gpuvec_envs.core.rng import keys_from_seeds, seeds_from_keys
from gpuvec_envs.envs.craftax import classic
from gpuvec_envs.envs.craftax.classic import (
    EPISODE_TAG,
    CraftaxClassicSymbolic,
    craftax_score,
    success_rates,
)

ID = "gpuvec/Craftax-Classic-Symbolic-v1"


def make(n: int, **kwargs):
    kwargs.setdefault("backend", "eager")
    return gym.make_vec(ID, num_envs=n, **kwargs).unwrapped


def _actions(seed: int, steps: int, n: int) -> torch.Tensor:
    return torch.randint(0, 17, (steps, n), generator=torch.Generator().manual_seed(seed))


def _dying(state):
    """The state with every player at 0 health, food, drink and energy: dead after a step."""
    zero = torch.zeros_like(state.player_health)
    return state._replace(
        player_health=zero, player_food=zero, player_drink=zero, player_energy=zero
    )


# -- without jax --------------------------------------------------------------------------
def test_spaces_and_registry():
    env = make(3)
    assert env.single_observation_space == gym.spaces.Box(0.0, 1.0, (1345,), np.float32)
    assert env.single_action_space == gym.spaces.Discrete(17)
    assert env.spec.max_episode_steps == 10000 and env.cfg.max_episode_steps == 10000
    obs, info = env.reset(seed=0)
    assert obs.shape == (3, 1345) and obs.dtype == torch.float32 and info == {}


def test_step_keeps_the_state_layout():
    """Every field of a step's state has the shape, dtype and strides it came with (what the
    compiled backend's in-place state strategy needs)."""
    env = make(3)
    env.reset(seed=0)
    s = env.state.env
    nxt, _, _ = env.env_def.step(env.params, s, torch.zeros(3, dtype=torch.int64), None)
    for name, a, b in zip(s._fields, s, nxt, strict=True):
        assert (a.shape, a.dtype, a.stride()) == (b.shape, b.dtype, b.stride()), name


def test_seed_map_round_trips():
    seeds = torch.tensor([0, 1, 2**31, 2**32 - 1, 2**32, 2**63 - 1, 123456789012345])
    assert torch.equal(seeds_from_keys(*keys_from_seeds(seeds)), seeds)
    keys = classic.seed_keys(seeds)
    assert keys[3].tolist() == [0, 2**32 - 1] and keys[4].tolist() == [1, 0]


def test_batch_size_does_not_change_an_env():
    """Env 2 of N=3 (seeds 5, 6, 7) and the single env of seed 7: the same trajectory,
    through an autoreset."""
    acts = _actions(1, 6, 3)
    big, one = make(3, autoreset_mode="same_step"), make(1, autoreset_mode="same_step")
    a, _ = big.reset(seed=5)
    b, _ = one.reset(seed=[7])
    assert torch.equal(a[2:], b)
    big.set_env_state(_dying(big.state.env))
    one.set_env_state(_dying(one.state.env))
    for t in range(6):
        x, y = big.step(acts[t]), one.step(acts[t, 2:])
        for u, v in zip(x[:4], y[:4], strict=True):
            assert torch.equal(u[2:], v), t
        assert torch.equal(x[4]["final_obs"][2:], y[4]["final_obs"])


class _InStepReset(CraftaxClassicSymbolic):
    """The same env with the shell's in-step autoreset (every env's world built and selected)."""

    costly_reset = False


@pytest.mark.parametrize("mode", ["next_step", "same_step"])
def test_resets_after_the_step_equal_the_in_step_autoreset(mode):
    """``costly_reset``'s reset of the finished envs only equals the branch-free in-step
    autoreset bit for bit: obs, reward, flags, final_obs and the state, in both modes."""
    from gpuvec_envs.core.vector import GpuVecEnv

    n = 4
    envs = [
        GpuVecEnv(d, n, backend="eager", autoreset_mode=mode, max_episode_steps=10000)
        for d in (CraftaxClassicSymbolic(), _InStepReset())
    ]
    acts = _actions(2, 5, n)
    for e in envs:
        e.reset(seed=40)
        s = e.state.env
        half = torch.tensor([True, False, True, False])
        dying = _dying(s)
        e.set_env_state(
            type(s)(
                *(
                    torch.where(half.view(-1, *[1] * (a.dim() - 1)), d, a)
                    for d, a in zip(dying, s, strict=True)
                )
            )
        )
    for t in range(5):
        x, y = (e.step(acts[t]) for e in envs)
        for u, v in zip(x[:4], y[:4], strict=True):
            assert torch.equal(u, v), t
        assert x[4].keys() == y[4].keys()
        for k in x[4]:
            if isinstance(x[4][k], torch.Tensor):
                assert torch.equal(x[4][k], y[4][k]), (t, k)
        for u, v in zip(envs[0].state, envs[1].state, strict=True):
            for a, b in zip(
                torch.utils._pytree.tree_leaves(u), torch.utils._pytree.tree_leaves(v), strict=True
            ):
                assert torch.equal(a, b), t


def test_episode_end_info_and_score():
    env = make(2, autoreset_mode="next_step")
    env.reset(seed=3)
    s = env.state.env
    ach = torch.zeros_like(s.achievements)
    ach[0, :5] = True
    env.set_env_state(_dying(s)._replace(achievements=ach))
    _, _, term, trunc, info = env.step(torch.zeros(2, dtype=torch.int64))
    assert term.tolist() == [True, True] and not trunc.any()
    assert info["_achievements"].tolist() == [True, True]
    assert torch.equal(info["achievements"], ach)
    rates = success_rates(info["achievements"])
    assert rates[:5].tolist() == [0.5] * 5 and rates[5:].sum() == 0
    want = np.exp(np.mean(np.log(1 + 100 * rates.numpy()))) - 1
    assert craftax_score(rates) == pytest.approx(want, rel=1e-12)
    assert craftax_score([1.0] * 22) == pytest.approx(100.0)
    # the next step starts the new episode: reward 0, no flags, no info row
    _, r, term, trunc, info = env.step(torch.zeros(2, dtype=torch.int64))
    assert r.tolist() == [0, 0] and not (term | trunc).any() and not info["_achievements"].any()


def test_single_env_reports_the_achievements_at_the_end():
    env = gym.make(ID, backend="eager")
    env.reset(seed=4)
    vec = env.unwrapped.vector_env
    obs, r, term, trunc, info = env.step(0)
    assert obs.shape == (1345,) and info == {}
    vec.set_env_state(_dying(vec.state.env))
    _, _, term, _, info = env.step(0)
    assert term and info["achievements"].shape == (22,) and info["achievements"].dtype == bool


def test_bad_inputs_raise_and_leave_the_state():
    env = make(2)
    env.reset(seed=1)
    before = env.state
    with pytest.raises(ValueError, match="range|17"):
        env.step(torch.tensor([0, 17]))
    with pytest.raises(TypeError):
        env.step(torch.tensor([0.0, 1.0]))
    with pytest.raises(ValueError):
        env.step(torch.tensor([0, 1, 2]))
    with pytest.raises(ValueError, match="seed"):
        env.reset(seed=-1)
    for a, b in zip(
        torch.utils._pytree.tree_leaves(before),
        torch.utils._pytree.tree_leaves(env.state),
        strict=True,
    ):
        assert torch.equal(a, b)
    with pytest.raises(ValueError, match="22"):
        craftax_score([0.5] * 21)
    with pytest.raises(ValueError, match="22"):
        craftax_score([2.0] * 22)
    with pytest.raises(ValueError):
        success_rates(torch.zeros(0, 22, dtype=torch.bool))
    with pytest.raises(ValueError, match="64x64"):
        make(1, map_size=(32, 32)).reset(seed=0)


def test_checkpoint_continues_bitwise():
    env = make(2, autoreset_mode="same_step")
    env.reset(seed=9)
    env.set_env_state(_dying(env.state.env))
    env.step(torch.tensor([1, 2]))  # both reset
    saved = env.state_dict()
    acts = _actions(3, 4, 2)
    want = [env.step(a)[:4] for a in acts]
    other = make(2, autoreset_mode="same_step")
    other.load_state_dict(saved)
    for a, w in zip(acts, want, strict=True):
        for u, v in zip(other.step(a)[:4], w, strict=True):
            assert torch.equal(u, v)


def test_reset_mask_rebuilds_only_the_masked_worlds():
    env = make(3)
    env.reset(seed=20)
    keep = env.state.env
    env.step(torch.tensor([1, 2, 3]))
    stepped = env.state.env
    env.reset(seed=20, options={"reset_mask": torch.tensor([True, False, True])})
    now = env.state.env
    for a, b, c in zip(now, keep, stepped, strict=True):
        assert torch.equal(a[0], b[0]) and torch.equal(a[2], b[2]) and torch.equal(a[1], c[1])


# -- against craftax ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def ref():
    """craftax's reset and step (no autoreset), ``jit(vmap)`` over batches of <= 8 envs."""
    jax = pytest.importorskip("jax")
    pytest.importorskip("craftax")
    from craftax.craftax_classic.envs.craftax_symbolic_env import (
        CraftaxClassicSymbolicEnvNoAutoReset,
    )

    import tests.craftax_common as cc

    env = CraftaxClassicSymbolicEnvNoAutoReset()
    params = env.default_params
    reset = jax.jit(jax.vmap(env.reset_env, in_axes=(0, None)))
    step = jax.jit(jax.vmap(env.step_env, in_axes=(0, 0, 0, None)))

    class Ref:
        common = cc

        @staticmethod
        def keys(keys: torch.Tensor):
            return jax.numpy.asarray(keys.numpy().astype(np.uint32))

        @staticmethod
        def reset(keys: torch.Tensor):
            return reset(Ref.keys(keys), params)

        @staticmethod
        def step(state, action: torch.Tensor):
            return step(state.state_rng, state, jax.numpy.asarray(action.numpy()), params)

    return Ref


def _compare_trajectory(ref, env, seed: int, steps: int, action_seed: int) -> None:
    n = env.num_envs
    obs, _ = env.reset(seed=seed)
    key = classic.seed_keys(torch.arange(seed, seed + n))
    want_obs, state = ref.reset(key)
    np.testing.assert_array_equal(obs.numpy(), np.asarray(want_obs))
    ref.common.check_state(env.state.env, state)
    acts = _actions(action_seed, steps, n)
    for t in range(steps):
        obs, reward, term, trunc, _ = env.step(acts[t])
        want_obs, state, want_r, done, _ = ref.step(state, acts[t])
        np.testing.assert_array_equal(obs.numpy(), np.asarray(want_obs), f"obs, step {t}")
        np.testing.assert_array_equal(reward.numpy(), np.asarray(want_r), f"reward, step {t}")
        np.testing.assert_array_equal((term | trunc).numpy(), np.asarray(done), f"step {t}")
        if bool(term.any()):
            break
    ref.common.check_state(env.state.env, state)


def test_reset_and_trajectory_equal_craftax(ref):
    """Seeds 0-3: worlds and 20 random steps equal (obs, reward, done, final state)."""
    _compare_trajectory(ref, make(4, validate=False), 0, 20, 0)


def test_varied_states_step_like_craftax(ref):
    """From 4 varied injected states (low health, mobs near, border players): 10 steps of
    obs, reward and ``done`` equal, deaths included (DISABLED autoreset). N=4 as the other
    tests, so that the reference's jit is shared."""
    import torch.utils._pytree as pt

    env = make(4, autoreset_mode="disabled", validate=False)
    env.reset(seed=0)
    states = ref.common.random_states(77, 4)
    env.set_env_state(states)
    theirs = ref.common.to_craftax(states)
    acts = _actions(5, 10, 4)
    ended = 0
    for t in range(10):
        obs, reward, term, trunc, _ = env.step(acts[t])
        want_obs, theirs, want_r, done, _ = ref.step(theirs, acts[t])
        np.testing.assert_array_equal(obs.numpy(), np.asarray(want_obs), f"step {t}")
        np.testing.assert_array_equal(reward.numpy(), np.asarray(want_r), f"step {t}")
        np.testing.assert_array_equal(term.numpy(), np.asarray(done), f"step {t}")
        ended += int(term.sum())
    assert len(pt.tree_leaves(env.state.env)) == 38
    assert ended > 0  # the injected states include deaths
    ref.common.check_state(env.state.env, theirs)


def test_autoreset_world_is_the_documented_key(ref):
    """An episode that starts at counter c gets ``fold_in(fold_in(PRNGKey(s), TAG), c)``."""
    import jax

    env = make(2, autoreset_mode="same_step")
    env.reset(seed=11)
    for _ in range(2):
        env.step(torch.zeros(2, dtype=torch.int64))
    counter = env.state.counter.clone()
    env.set_env_state(_dying(env.state.env))
    obs, _, term, _, info = env.step(torch.zeros(2, dtype=torch.int64))
    assert term.all()
    keys = []
    for i, s in enumerate((11, 12)):
        k = jax.random.fold_in(
            jax.random.fold_in(jax.random.PRNGKey(s), EPISODE_TAG), int(counter[i])
        )
        keys.append(
            np.asarray(
                jax.random.key_data(k)
                if hasattr(k, "dtype") and jax.dtypes.issubdtype(k.dtype, jax.dtypes.prng_key)
                else k
            )
        )
    want_obs, state = ref.reset(torch.from_numpy(np.stack(keys).astype(np.int64)))
    np.testing.assert_array_equal(obs.numpy(), np.asarray(want_obs))
    ref.common.check_state(env.state.env, state)


@pytest.mark.heavy
def test_long_trajectories_equal_craftax(ref):
    """4 worlds (seeds 100-103) x 300 random steps: obs, reward, done at every step."""
    _compare_trajectory(ref, make(4, validate=False), 100, 300, 100)


@pytest.mark.slow
def test_compiled_equals_eager():
    """backend="compile" steps bitwise like eager (SAME_STEP, resets included).

    ``slow``: compiling the step takes ~5 minutes on a shared 2-core VM (docs/craftax.md)."""
    envs = [make(4, backend=b, autoreset_mode="same_step") for b in ("compile", "eager")]
    acts = _actions(6, 12, 4)
    for e in envs:
        e.reset(seed=50)
    for t in range(12):
        if t == 5:
            for e in envs:
                e.set_env_state(_dying(e.state.env))
        x, y = (e.step(acts[t]) for e in envs)
        for u, v in zip(x[:4], y[:4], strict=True):
            assert torch.equal(u, v), t
        assert torch.equal(x[4]["final_obs"], y[4]["final_obs"])
    report = envs[0].compile_report
    assert report is not None and envs[0].backend == "compile", str(report)
