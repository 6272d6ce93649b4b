"""Shared harness of the MiniGrid parity tests (other test modules import it).

The reference (``minigrid`` 3.2.0) draws from ``env.np_random`` (a ``numpy.random.Generator``).
:class:`ReplayRandom` stands in for it and answers every call from a queue of our raw
32-bit words, mapped as :mod:`gpuvec_envs.envs.minigrid._grid` maps its draws:

* ``integers(low, high)`` -> ``low + (word * (high - low)) >> 32`` (one word),
* ``choice(seq)`` -> ``seq[integers(0, len(seq))]``,
* ``shuffle(list)`` -> Fisher-Yates: for ``i = n-1 .. 1``, swap ``i`` with
  ``integers(0, i + 1)`` (one word each).

Inside ``place_obj`` (:attr:`ReplayRandom.paired`) one word answers a try's two calls: x
from its high and y from its low 16 bits (``lo + (half * (hi - lo)) >> 16``). Our ``place``
draws a fixed ``K`` words per placement while ``place_obj`` takes one per try until one
succeeds, so :func:`make_reference` wraps the reference's ``place_obj`` to start each
placement at the next ``K`` boundary (and to check it took at most ``K`` tries).

:class:`ParityDriver` steps a :class:`~gpuvec_envs.core.vector.GpuVecEnv` (eager, autoreset
``NEXT_STEP``, the registered time limit) and one reference per env in lockstep, replays
our draws (reset draws with domain ``RESET``, step draws with ``STEP``, at the counters
``pure_step`` uses) and asserts grid, agent pose, carried object, step count, observation,
reward, terminated and truncated equal at every step.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import minigrid  # noqa: F401  (registers the reference IDs)
import numpy as np
import torch
from gymnasium.utils.env_checker import check_env

from gpuvec_envs.core.rng import RESET, STEP, Rng
from gpuvec_envs.core.vector import GpuVecEnv
from gpuvec_envs.envs.minigrid._grid import GridState, unpack
from gpuvec_envs.registry import entry


class ReplayRandom:
    """A ``numpy.random.Generator`` stand-in that replays queued 32-bit words."""

    def __init__(self) -> None:
        self.words: list[int] = []
        self.pos = 0
        #: Inside ``place_obj``: one word per try, x from its high and y from its low 16 bits.
        self.paired = False
        self._half: int | None = None

    def load(self, words: Sequence[int]) -> None:
        """Replace the queue with ``words`` (ints in ``[0, 2**32)``)."""
        self.words = [int(w) for w in words]
        self.pos = 0

    def _take(self) -> int:
        if self.pos >= len(self.words):
            raise AssertionError(
                f"reference asked for word {self.pos}; only {len(self.words)} loaded "
                "(our env draws fewer or in another order)"
            )
        self.pos += 1
        return self.words[self.pos - 1]

    def integers(self, low: int, high: int | None = None, size: Any = None) -> int:
        """``low + (word * (high - low)) >> 32``; inside ``place_obj``, see :attr:`paired`."""
        assert size is None
        if high is None:
            low, high = 0, low
        span = int(high) - int(low)
        if not self.paired:
            return int(low) + ((self._take() * span) >> 32)
        if self._half is None:  # x: the high 16 bits of a new word
            self._half = self._take()
            return int(low) + (((self._half >> 16) * span) >> 16)
        word, self._half = self._half, None  # y: the low 16 bits of the same word
        return int(low) + (((word & 0xFFFF) * span) >> 16)

    def choice(self, seq: Sequence[Any]) -> Any:
        """``seq[integers(0, len(seq))]``."""
        items = list(seq)
        return items[self.integers(0, len(items))]

    def shuffle(self, items: list[Any]) -> None:
        """Fisher-Yates in place, one word per swap from the end."""
        for i in range(len(items) - 1, 0, -1):
            j = self.integers(0, i + 1)
            items[i], items[j] = items[j], items[i]

    def __getattr__(self, name: str) -> Any:
        raise NotImplementedError(f"ReplayRandom.{name} is not mapped to Rng draws")


def make_reference(ref_id: str, tries: int, **kwargs: Any) -> tuple[Any, ReplayRandom]:
    """The unwrapped reference env with a :class:`ReplayRandom` and segmented placements."""
    see = kwargs.pop("see_through_walls", None)  # not an argument of every reference env
    ref = gym.make(ref_id, **kwargs).unwrapped
    if see is not None:
        ref.see_through_walls = see
    rnd = ReplayRandom()
    ref.np_random = rnd
    original = ref.place_obj

    def place_obj(*args: Any, **kw: Any) -> Any:
        start = rnd.pos
        rnd.paired = True
        try:
            return original(*args, **kw)
        finally:
            rnd.paired = False
            used = rnd.pos - start
            assert used <= tries, f"place_obj took {used} tries > K={tries}"
            rnd.pos = start + tries

    ref.place_obj = place_obj
    return ref, rnd


def encode(ref: Any) -> np.ndarray:
    """``ref.grid.encode()`` (W, H, 3), fast."""
    g = ref.grid
    codes = [(1, 0, 0) if c is None else c.encode() for c in g.grid]
    return np.array(codes, dtype=np.uint8).reshape(g.height, g.width, 3).transpose(1, 0, 2)


def reference_state(ref: Any) -> dict[str, Any]:
    """Grid, agent pose, carried object and step count of a reference env."""
    carrying = (0, 0, 0) if ref.carrying is None else ref.carrying.encode()
    return {
        "grid": encode(ref),
        "agent": (int(ref.agent_pos[0]), int(ref.agent_pos[1]), int(ref.agent_dir)),
        "carrying": tuple(int(c) for c in carrying),
        "step_count": int(ref.step_count),
    }


def our_state(s: GridState, i: int, width: int, height: int) -> dict[str, Any]:
    """The same of env ``i`` of our state."""
    grid = unpack(s.cells[i].view(height, width)).numpy().transpose(1, 0, 2)
    carrying = tuple(int(c) for c in unpack(s.carrying[i]).numpy())
    return {
        "grid": grid,
        "agent": (int(s.agent_x[i]), int(s.agent_y[i]), int(s.agent_dir[i])),
        "carrying": carrying,
        "step_count": int(s.step_count[i]),
    }


def count_draws(env: GpuVecEnv, fn: str) -> int:
    """Streams one ``reset`` (``fn="reset"``) or ``step`` of the env's EnvDef consumes."""
    st = env.state
    rng = Rng(st.key0[:1], st.key1[:1], st.counter[:1], RESET)
    one = torch.utils._pytree.tree_map(lambda t: t[:1], st.env)
    if fn == "reset":
        env.env_def.reset(env.params, rng, env.dtype, None)
    else:
        env.env_def.step(env.params, one, torch.zeros(1, dtype=torch.int64), rng)
    return rng._next


def segments(spans: dict[str, int]) -> Callable[[Any, ReplayRandom], None]:
    """A patch making each named method of the reference take exactly its span of words.

    For the reference's retry loops (``RoomGrid.place_agent``, ``connect_all``), which our
    envs bound: each draws a fixed span of words, of which the reference reads a prefix.
    """

    def patch(ref: Any, rnd: ReplayRandom) -> None:
        for name, span in spans.items():
            original = getattr(ref, name)

            def wrapped(*args: Any, _original=original, _span=span, **kwargs: Any) -> Any:
                start = rnd.pos
                out = _original(*args, **kwargs)
                assert rnd.pos - start <= _span, f"took {rnd.pos - start} words > {_span}"
                rnd.pos = start + _span
                return out

            setattr(ref, name, wrapped)

    return patch


def retry_segments(env_def: Any, params: Any) -> Callable[[Any, ReplayRandom], None] | None:
    """The :func:`segments` patch of an env with bounded retry loops, or None."""
    from gpuvec_envs.envs.minigrid.keycorridor import KeyCorridor
    from gpuvec_envs.envs.minigrid.unlock import AGENT_ATTEMPTS, Unlock

    if isinstance(env_def, KeyCorridor):
        k = env_def.placement_tries(params)
        return segments(
            {
                "place_agent": env_def.agent_attempts(params) * (k + 1),
                "connect_all": env_def.connect_words(params),
            }
        )
    if isinstance(env_def, Unlock):
        return segments({"place_agent": AGENT_ATTEMPTS * (env_def.placement_tries(params) + 1)})
    return None


class ParityDriver:
    """Our registered env and ``n`` references in lockstep; every step asserts equality.

    Args:
        env_id: Our registered ID (``gpuvec/MiniGrid-...``); the reference is its entry's.
        n: Number of envs.
        obs_mode: ``"image"``, ``"full"`` (the reference side applies
            ``FullyObsWrapper``'s observation) or ``"dict"`` (the reference's whole dict,
            its mission string mapped to its index in our ``missions``).
        autoreset_mode: ``"NextStep"`` (references reset when ours does), ``"SameStep"``
            (``final_obs`` is the reference's last obs, then it resets) or ``"Disabled"``
            (references keep stepping finished episodes).
        patch: ``patch(ref, replay)`` adapts a reference to more of our draw layout (e.g.
            segments of a retry loop around ``place_obj``); default:
            :func:`retry_segments` of the env.
        **kwargs: Env parameters, given to both sides (minigrid's names); ``max_steps``
            also sets our time limit.
    """

    def __init__(
        self,
        env_id: str,
        n: int,
        *,
        obs_mode: str = "image",
        autoreset_mode: str = "NextStep",
        patch: Callable[[Any, ReplayRandom], None] | None = None,
        **kwargs: Any,
    ) -> None:
        e = entry(env_id)
        limit = kwargs.get("max_steps", e.max_episode_steps)
        self.env = gym.make_vec(
            env_id,
            num_envs=n,
            backend="eager",
            autoreset_mode=autoreset_mode,
            obs_mode=obs_mode,
            max_episode_steps=limit,
            **kwargs,
        )
        self.vec = self.env.unwrapped  # the GpuVecEnv (make_vec may wrap it)
        self.env.reset(seed=0)
        tries = getattr(self.vec.env_def, "placement_tries", lambda p: 0)(self.vec.params)
        self.reset_words = count_draws(self.vec, "reset")
        self.step_words = count_draws(self.vec, "step")
        self.missions = self.vec.env_def.missions(self.vec.params)
        if patch is None:
            patch = retry_segments(self.vec.env_def, self.vec.params)
        pairs = [make_reference(e.reference, tries, **kwargs) for _ in range(n)]
        self.refs = [p[0] for p in pairs]
        self.rnds = [p[1] for p in pairs]
        for ref, rnd in pairs:
            if patch is not None:
                patch(ref, rnd)
        assert self.refs[0].max_steps == limit
        self.width, self.height = self.refs[0].width, self.refs[0].height
        self.n, self.obs_mode = n, obs_mode
        self.steps = self.terminations = self.truncations = 0
        self.rewards = 0.0
        self.resets = 0
        self.carried = self.open_doors = 0  # env-steps carrying something / with a door open

    def _ref_obs(self, ref: Any, obs: dict[str, Any]) -> Any:
        if self.obs_mode == "dict":
            assert set(obs) == {"image", "direction", "mission"}
            mission = self.missions.index(obs["mission"])  # ValueError: a mission we lack
            return {"image": obs["image"], "direction": obs["direction"], "mission": mission}
        if self.obs_mode == "full":
            from minigrid.wrappers import FullyObsWrapper

            return FullyObsWrapper.observation(type("W", (), {"unwrapped": ref})(), obs)["image"]
        return obs["image"]

    def _compare(self, i: int, obs: Any, ref_obs: Any, what: str) -> None:
        st = self.vec.state.env
        ours = our_state(getattr(st, "grid", st), i, self.width, self.height)
        theirs = reference_state(self.refs[i])
        for k in ours:
            np.testing.assert_array_equal(ours[k], theirs[k], err_msg=f"{what}, env {i}: {k}")
        self.carried += ours["carrying"] != (0, 0, 0)
        self.open_doors += bool(((ours["grid"][..., 0] == 4) & (ours["grid"][..., 2] == 0)).any())
        assert_obs_equal(_row(obs, i), ref_obs, f"{what}, env {i}: observation")

    def _reset_ref(self, i: int, words: np.ndarray) -> np.ndarray:
        ref, rnd = self.refs[i], self.rnds[i]
        rnd.load(words)
        obs, _ = ref.reset()
        assert rnd.pos == self.reset_words, f"reference reset took {rnd.pos} words"
        self.resets += 1
        return self._ref_obs(ref, obs)

    def reset(self, seed: int) -> None:
        """Reset ours with ``seed`` and each reference from the same draws; compare."""
        obs, _ = self.env.reset(seed=seed)
        st = self.vec.state
        words = _words(st.key0, st.key1, st.counter - 1, RESET, self.reset_words)
        for i in range(self.n):
            self._compare(i, obs, self._reset_ref(i, words[i]), "reset")

    def step(self, actions: np.ndarray) -> None:
        """One lockstep step with ``actions`` (N,) int; asserts exact equality."""
        st = self.vec.state
        pending = st.needs_reset.bool().numpy()
        sw = _words(st.key0, st.key1, st.counter, STEP, self.step_words)
        rw = _words(st.key0, st.key1, st.counter, RESET, self.reset_words)
        obs, reward, term, trunc, info = self.env.step(torch.as_tensor(actions, dtype=torch.int64))
        reward, term, trunc = reward.numpy(), term.numpy(), trunc.numpy()
        same_step = "final_obs" in info
        self.steps += 1
        where = f"step {self.steps}"
        for i in range(self.n):
            if pending[i]:
                ref_obs = self._reset_ref(i, rw[i])
                r, t, tr = 0.0, False, False
            else:
                self.rnds[i].load(sw[i])
                o, r, t, tr, _ = self.refs[i].step(int(actions[i]))
                assert self.rnds[i].pos == self.step_words
                ref_obs = self._ref_obs(self.refs[i], o)
                if same_step and (t or tr):  # SAME_STEP: the final obs, then a reset
                    assert bool(info["_final_obs"][i])
                    final = _row(info["final_obs"], i)
                    assert_obs_equal(final, ref_obs, f"{where}, env {i}: final_obs")
                    ref_obs = self._reset_ref(i, rw[i])
            self._compare(i, obs, ref_obs, where)
            assert reward[i] == np.float32(r), f"{where}, env {i}: reward {reward[i]} != {r}"
            assert term[i] == t and trunc[i] == tr, f"{where}, env {i}: flags"
            self.terminations += bool(t)
            self.truncations += bool(tr)
            self.rewards += float(r)

    def run(self, steps: int, rng: np.random.Generator, probs: Sequence[float] | None = None):
        """``steps`` lockstep steps with random actions (uniform, or ``probs``)."""
        n_actions = int(self.env.single_action_space.n)
        for _ in range(steps):
            self.step(rng.choice(n_actions, size=self.n, p=probs))


def _row(obs: Any, i: int) -> Any:
    """Env ``i`` of a batch (a tensor or a dict of tensors) as numpy."""
    if isinstance(obs, dict):
        return {k: v[i].numpy() for k, v in obs.items()}
    return obs[i].numpy()


def assert_obs_equal(ours: Any, theirs: Any, what: str) -> None:
    """Observations (arrays, or dicts of arrays and ints) exactly equal."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and set(ours) == set(theirs), f"{what}: keys"
        for k in theirs:
            np.testing.assert_array_equal(ours[k], theirs[k], err_msg=f"{what}: {k}")
    else:
        np.testing.assert_array_equal(ours, theirs, err_msg=what)


def _words(key0, key1, counter, domain: int, count: int) -> np.ndarray:
    """Words of streams ``0..count-1`` of ``Rng(key0, key1, counter, domain)``, (N, count)."""
    return Rng(key0, key1, counter, domain).bits(max(count, 1)).numpy()


def check_registered(env_id: str) -> None:
    """``env_id`` via ``make_vec`` and ``make`` has the reference's image space; check_env."""
    e = entry(env_id)
    ref = gym.make(e.reference)
    vec = gym.make_vec(env_id, num_envs=3, backend="eager")
    assert vec.single_action_space == ref.action_space
    assert vec.single_observation_space == ref.observation_space["image"]
    obs, _ = vec.reset(seed=0)
    assert obs.dtype == torch.uint8 and vec.observation_space.contains(obs.numpy())
    single = gym.make(env_id)
    assert single.spec.max_episode_steps == ref.unwrapped.max_steps
    check_env(single.unwrapped)
