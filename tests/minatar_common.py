"""Shared helpers for the MinAtar parity tests (stable API; other test modules import it).

The reference (``minatar`` 1.0.15) draws from ``numpy.random.RandomState`` objects: the
``Environment`` wrapper for sticky actions and each game's ``Env`` for its own randomness.
:class:`ReplayRandom` stands in for both and answers every call from a queue of raw 32-bit
words, mapped exactly as :class:`gpuvec_envs.core.rng.Rng` maps its ``bits``:

* ``rand(*size)`` -> ``(word >> 8) / 2**24`` (``Rng.uniform``: 24 bits, exact in float64),
* ``randint(low, high, size)`` -> ``low + (word * (high - low)) >> 32`` (``Rng.randint``).

Our env draws its streams ``0, 1, 2, ...`` of one step in the order the reference consumes
them (stream 0 is the sticky-action draw of ``MinAtarEnv.step``), so loading the words of
that step's streams, :func:`step_words`, makes the reference take the same decisions. A
reference call beyond the loaded words raises, so a module that draws less than the
reference (or in another order) fails loudly instead of silently diverging.

:class:`ParityDriver` steps a :class:`~gpuvec_envs.core.vector.GpuVecEnv` (eager, autoreset
``NEXT_STEP``) and one ``minatar.gym.BaseEnv`` per env in lockstep, replays our draws into
the references (step draws with domain ``STEP`` at the pre-step counter; autoreset draws
with domain ``RESET`` at the same counter, as ``pure_step`` does) and asserts observation,
reward and termination equal at every step. ``inject`` copies arbitrary reference states
into our env (state injection); ``check_state`` optionally compares hidden state too.

Also: :func:`compare_backends` (eager vs compiled, bitwise), :func:`check_registered`
(``make_vec``/``make``/``check_env`` and minatar's spaces) and the ``single_thread``
fixture (import it into a test module to use it).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
import torch
from compile_checks import assert_fast_path, expected_lean_wrapper, registered_compiler_options
from gymnasium.utils.env_checker import check_env
from minatar.gym import BaseEnv

from gpuvec_envs.core.rng import RESET, STEP, Rng
from gpuvec_envs.core.vector import GpuVecEnv
from gpuvec_envs.envs.minatar._common import MinAtarState


class ReplayRandom:
    """A ``numpy.random.RandomState`` stand-in that replays queued 32-bit words."""

    def __init__(self) -> None:
        self._words: list[int] = []
        self._next = 0

    def load(self, words: Sequence[int]) -> None:
        """Replace the queue with ``words`` (ints in ``[0, 2**32)``)."""
        self._words = [int(w) for w in words]
        self._next = 0

    @property
    def consumed(self) -> int:
        """How many words the reference has taken since the last :meth:`load`."""
        return self._next

    def _take(self, count: int) -> list[int]:
        if self._next + count > len(self._words):
            raise AssertionError(
                f"reference asked for {count} more word(s) after {self._next}; "
                f"only {len(self._words)} loaded (our env draws fewer or in another order)"
            )
        out = self._words[self._next : self._next + count]
        self._next += count
        return out

    def rand(self, *size: int) -> float | np.ndarray:
        """Uniform floats ``(word >> 8) / 2**24``; a float without ``size``."""
        if not size:
            return (self._take(1)[0] >> 8) / float(1 << 24)
        count = int(np.prod(size))
        vals = np.array([(w >> 8) / float(1 << 24) for w in self._take(count)])
        return vals.reshape(size)

    def randint(self, low: int, high: int | None = None, size: Any = None) -> int | np.ndarray:
        """Integers ``low + (word * (high - low)) >> 32`` (``randint(high)``: low = 0)."""
        if high is None:
            low, high = 0, low
        span = int(high) - int(low)
        if size is None:
            return int(low) + ((self._take(1)[0] * span) >> 32)
        shape = (size,) if np.isscalar(size) else tuple(size)
        vals = [int(low) + ((w * span) >> 32) for w in self._take(int(np.prod(shape)))]
        return np.array(vals, dtype=np.int64).reshape(shape)

    def choice(self, *args: Any, **kwargs: Any) -> Any:
        """Not mapped yet: fail loudly."""
        raise NotImplementedError("ReplayRandom.choice is not mapped to Rng draws")


def step_words(
    key0: torch.Tensor, key1: torch.Tensor, counter: torch.Tensor, domain: int, count: int
) -> np.ndarray:
    """Words of streams ``0..count-1`` of ``Rng(key0, key1, counter, domain)``, (N, count)."""
    return Rng(key0, key1, counter, domain).bits(count).cpu().numpy()


def make_reference(
    game: str, *, minimal: bool, sticky: float, ramping: bool
) -> tuple[BaseEnv, ReplayRandom]:
    """A ``minatar.gym.BaseEnv`` whose two random sources replay one :class:`ReplayRandom`."""
    ref = BaseEnv(
        game=game,
        use_minimal_action_set=minimal,
        sticky_action_prob=sticky,
        difficulty_ramping=ramping,
    )
    rnd = ReplayRandom()
    ref.game.random = rnd
    ref.game.env.random = rnd
    return ref, rnd


class ParityDriver:
    """Our env and ``n`` minatar references in lockstep; every step asserts equality.

    Args:
        env_def: Our game's :class:`~gpuvec_envs.envs.minatar._common.MinAtarEnv` instance.
        game: minatar's module name (``"breakout"``, ``"space_invaders"``...).
        n: Number of envs.
        words: Words each reference may consume per step (1 sticky draw + the game's draws
            per step; per reset: the game's reset draws). Use exactly what the module draws.
        reset_words: Words each reference reset may consume (the game's reset draws).
        minimal, sticky, ramping: The MinAtar options, given to both sides.
        autoreset_mode: ``"NextStep"`` (references reset when ours does) or ``"Disabled"``
            (both keep stepping a finished game: reward 0, terminal stays True).
        check_state: Optional ``f(refs, our_game_state)`` asserting hidden-state equality.
    """

    def __init__(
        self,
        env_def: Any,
        game: str,
        n: int,
        *,
        words: int,
        reset_words: int,
        minimal: bool = False,
        sticky: float = 0.1,
        ramping: bool = True,
        autoreset_mode: str = "NextStep",
        check_state: Callable[[list[Any], Any], None] | None = None,
    ) -> None:
        self.env = GpuVecEnv(
            env_def,
            n,
            backend="eager",
            autoreset_mode=autoreset_mode,
            sticky_action_prob=sticky,
            difficulty_ramping=ramping,
            minimal_action_set=minimal,
        )
        pairs = [
            make_reference(game, minimal=minimal, sticky=sticky, ramping=ramping) for _ in range(n)
        ]
        self.refs = [p[0] for p in pairs]
        self.rnds = [p[1] for p in pairs]
        self.n, self.words, self.reset_words = n, words, reset_words
        self.check_state = check_state
        self.steps = 0
        self.terminations = 0
        self.rewards = 0.0

    def _ref_obs(self) -> np.ndarray:
        return np.stack([r.game.state() for r in self.refs])

    def _compare(self, obs: torch.Tensor, what: str) -> None:
        ours = obs.cpu().numpy()
        theirs = self._ref_obs()
        assert ours.dtype == np.bool_ and ours.shape == theirs.shape
        if not np.array_equal(ours, theirs):
            bad = np.nonzero((ours != theirs).reshape(self.n, -1).any(1))[0]
            i = int(bad[0])
            diff = np.argwhere(ours[i] != theirs[i])[:8].tolist()
            raise AssertionError(f"{what}: obs differ in envs {bad.tolist()}; env {i} cells {diff}")
        if self.check_state is not None:
            self.check_state(self.refs, self.env.state.env.game)

    def reset(self, seed: int) -> None:
        """Reset ours with ``seed`` and each reference from the same draws; compare obs."""
        obs, _ = self.env.reset(seed=seed)
        st = self.env.state
        words = step_words(st.key0, st.key1, st.counter - 1, RESET, max(self.reset_words, 1))
        for ref, rnd, w in zip(self.refs, self.rnds, words, strict=True):
            rnd.load(w[: self.reset_words])
            ref.reset()
            ref.game.last_action = 0
        self._compare(obs, "reset")

    def inject(self, to_state: Callable[[list[Any]], Any]) -> None:
        """Copy the references' states into our env (``to_state(refs)`` -> game state)."""
        game = to_state([r.game.env for r in self.refs])
        last = torch.tensor([r.game.last_action for r in self.refs], dtype=torch.int64)
        self.env.set_env_state(MinAtarState(game, last))
        self._compare(self.env._user_obs(self.env._current_obs()), "inject")

    def step(self, actions: np.ndarray) -> None:
        """One lockstep step with agent ``actions`` (N,) int; asserts exact equality."""
        st = self.env.state
        pending = st.needs_reset.bool().cpu().numpy()
        sw = step_words(st.key0, st.key1, st.counter, STEP, self.words)
        rw = step_words(st.key0, st.key1, st.counter, RESET, max(self.reset_words, 1))
        obs, reward, term, trunc, _ = self.env.step(torch.as_tensor(actions, dtype=torch.int64))
        exp_r = np.zeros(self.n)
        exp_t = np.zeros(self.n, dtype=bool)
        for i, (ref, rnd) in enumerate(zip(self.refs, self.rnds, strict=True)):
            if pending[i]:
                rnd.load(rw[i, : self.reset_words])
                ref.reset()
                ref.game.last_action = 0
            else:
                rnd.load(sw[i])
                _, r, t, _, _ = ref.step(int(actions[i]))
                exp_r[i], exp_t[i] = r, t
        self.steps += 1
        self._compare(obs, f"step {self.steps}")
        where = f"step {self.steps}"
        np.testing.assert_array_equal(reward.cpu().numpy(), exp_r, err_msg=f"reward, {where}")
        np.testing.assert_array_equal(term.cpu().numpy(), exp_t, err_msg=f"terminal, {where}")
        assert not trunc.any()
        self.terminations += int(exp_t.sum())
        self.rewards += float(exp_r.sum())

    def run(
        self, steps: int, rng: np.random.Generator, probs: Sequence[float] | None = None
    ) -> None:
        """``steps`` lockstep steps with random agent actions (uniform, or ``probs``)."""
        n_actions = int(self.env.single_action_space.n)
        for _ in range(steps):
            self.step(rng.choice(n_actions, size=self.n, p=probs))


@pytest.fixture(scope="module")
def single_thread() -> Iterator[None]:
    """One torch thread for the module (small eager batches; immune to OpenMP contention)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def compare_backends(
    env_def: Any,
    n: int,
    steps: int,
    seed: int = 0,
    prepare: Callable[[Any], Any] | None = None,
    sample: Callable[[torch.Generator, torch.Tensor], torch.Tensor] | None = None,
    min_dones: int = 1,
    cpp_schedule: str | None = None,
    lean_wrapper: str | None = None,
) -> GpuVecEnv:
    """Step an eager and a compiled env (``n`` envs) alike; assert bitwise equal outputs.

    ``prepare(game_state) -> game_state`` may edit the state after the reset (e.g. so that
    episodes end within ``steps``); ``sample(gen, uniform_actions) -> actions`` may bias the
    actions. At least ``min_dones`` episodes must end. The compiled env has the registry's
    compiler options and must take the fast path (``cpp_schedule``, ``lean_wrapper``: the
    passes' expected statuses on the pinned torch; the lean wrapper's follows the registry
    options by default, see :func:`compile_checks.expected_lean_wrapper`). Returns the
    compiled env (one graph, NEXT_STEP autoreset) for further checks.
    """
    eager = GpuVecEnv(env_def, n, backend="eager")
    options = registered_compiler_options(env_def)
    compiled = GpuVecEnv(env_def, n, backend="compile", compiler_options=options)
    for a, b in zip(eager.reset(seed=seed)[:1], compiled.reset(seed=seed)[:1], strict=True):
        assert torch.equal(a, b)
    if prepare is not None:
        for env in (eager, compiled):
            env.set_env_state(env.state.env._replace(game=prepare(env.state.env.game)))
    gen = torch.Generator().manual_seed(seed)
    n_actions = int(eager.single_action_space.n)
    dones = 0
    for t in range(steps):
        action = torch.randint(0, n_actions, (n,), generator=gen)
        if sample is not None:
            action = sample(gen, action)
        out_e = eager.step(action)
        out_c = compiled.step(action)
        assert compiled.backend == "compile"
        names = ("obs", "reward", "terminated", "truncated")
        for name, x, y in zip(names, out_e, out_c, strict=False):
            assert x.dtype == y.dtype and torch.equal(x, y), f"{name} differs at step {t}"
        dones += int(out_e[2].sum())
    assert dones >= min_dones, f"{dones} episodes ended: too few for the autoreset path"
    leaves = torch.utils._pytree.tree_leaves
    for x, y in zip(leaves(eager.state), leaves(compiled.state), strict=True):
        assert torch.equal(x, y)
    lean_wrapper = lean_wrapper or expected_lean_wrapper(options)
    assert_fast_path(compiled.compile_report, cpp_schedule, lean_wrapper)
    return compiled


def check_registered(env_id: str, game: str, n_actions: int, n_channels: int) -> None:
    """``env_id`` works through ``make_vec`` and ``make``, with minatar's spaces; check_env."""
    import minatar.gym

    reference_id = env_id.replace("gpuvec/MinAtar-", "MinAtar/")
    if reference_id not in gym.registry:
        minatar.gym.register_envs()
    ref = gym.make(reference_id)
    vec = gym.make_vec(env_id, num_envs=3, backend="eager")
    assert vec.single_action_space == ref.action_space == gym.spaces.Discrete(n_actions)
    assert vec.single_observation_space == ref.observation_space
    assert vec.single_observation_space.shape == (10, 10, n_channels)
    obs, _ = vec.reset(seed=0)
    assert obs.shape == (3, 10, 10, n_channels) and obs.dtype == torch.bool
    obs, reward, term, trunc, _ = vec.step(torch.zeros(3, dtype=torch.int64))
    assert obs.shape == (3, 10, 10, n_channels) and reward.shape == (3,)
    assert vec.observation_space.contains(obs.numpy())
    single = gym.make(env_id)
    assert single.action_space == ref.action_space
    check_env(single.unwrapped, skip_render_check=True)
    obs, _ = single.reset(seed=1)
    assert single.observation_space.contains(obs)
