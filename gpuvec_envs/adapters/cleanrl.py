"""CleanRL-style loops on gpuvec envs: tensor wrappers, array views and an episode helper.

A CleanRL script needs ``single_observation_space``, ``single_action_space``,
``reset(seed=)``, ``step(action)`` and ``info["episode"]``; a gpuvec env gives all of them
natively, as torch tensors on its device::

    import gymnasium as gym
    import gpuvec_envs  # registers gpuvec/...
    from gpuvec_envs.adapters.cleanrl import RecordEpisodeStatistics

    envs = gym.make_vec("gpuvec/CartPole-v1", num_envs=8, device="cuda",
                        autoreset_mode="SameStep", validate=False)
    envs = RecordEpisodeStatistics(envs)
    obs, _ = envs.reset(seed=1)
    obs, reward, terminated, truncated, info = envs.step(action)  # action: a tensor
    ended_returns = info["episode"]["r"][info["_episode"]]       # no host sync until read

The wrappers are tensor counterparts of gymnasium's numpy vector wrappers
(``gymnasium/wrappers/vector/{common,stateful_observation,stateful_reward,
vectorize_action,vectorize_observation,vectorize_reward}.py``, gymnasium 1.4): same
constructor arguments, same info keys, same statistics on the same data. Differences:

* Everything stays on the env's device and no wrapper reads a value back to the host in
  ``step``: masks are returned with the data instead of being tested (so
  :class:`RecordEpisodeStatistics` puts ``info["episode"]`` and ``info["_episode"]`` in every
  step's info, with an all-False mask on steps where no episode ended; gymnasium adds them
  only on steps with an ending). :func:`to_numpy` restores gymnasium's exact format.
* Every wrapper supports ``NEXT_STEP``, ``SAME_STEP`` and ``DISABLED`` autoreset. In
  ``SAME_STEP`` mode the observation wrappers also transform ``info["final_obs"]``, and
  :class:`NormalizeObservation` adds the final observations of the ended episodes to its
  statistics (gymnasium's vector version refuses ``SAME_STEP``).
* Running statistics are kept in float64 (float32 on MPS, which has no float64).
* Partial resets (``options["reset_mask"]``) are supported by every wrapper.

:func:`to_numpy` gives a numpy view of a tensor env, so loops written for gymnasium's numpy
vector envs run unchanged; :func:`to_torch` is the reverse (a numpy vector env seen as
tensors, without gymnasium's ``array-api-compat`` dependency).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.spaces import Box
from gymnasium.vector import AutoresetMode, VectorEnv, VectorWrapper
from gymnasium.vector.utils import batch_space
from gymnasium.wrappers.utils import rescale_box

from gpuvec_envs.core.arguments import as_device
from gpuvec_envs.core.wrapper import (
    ObservationWrapper,
    Step,
    TensorWrapper,
    check_tensors,
    device_of,
    reset_mask_of,
)

__all__ = [
    "ClipAction",
    "FlattenObservation",
    "NormalizeObservation",
    "NormalizeReward",
    "RecordEpisodeStatistics",
    "RescaleAction",
    "RunningMeanStd",
    "TransformObservation",
    "TransformReward",
    "episode_stats",
    "to_numpy",
    "to_torch",
]


def stats_dtype(device: torch.device) -> torch.dtype:
    """Dtype of running statistics: float64, or float32 on MPS (no float64 there)."""
    return torch.float32 if device.type == "mps" else torch.float64


class RunningMeanStd:
    """Running mean and variance of batches, merged as gymnasium's ``RunningMeanStd``.

    Chan et al.'s parallel update (``gymnasium/wrappers/utils.py``) with gymnasium's prior
    (mean 0, variance 1, count ``epsilon``). Batches may carry a 0/1 ``weight`` per sample, so
    a variable subset of envs is added without host synchronisation; an all-zero weight
    leaves the statistics unchanged.

    Args:
        shape: Shape of one sample.
        device: Device of the statistics.
        dtype: Dtype of mean, variance and count (default :func:`stats_dtype`).
        epsilon: Initial count.
    """

    def __init__(
        self,
        shape: tuple[int, ...] = (),
        device: str | torch.device = "cpu",
        dtype: torch.dtype | None = None,
        epsilon: float = 1e-4,
    ) -> None:
        device = torch.device(device)
        self.dtype = dtype or stats_dtype(device)
        self.mean = torch.zeros(shape, dtype=self.dtype, device=device)
        self.var = torch.ones(shape, dtype=self.dtype, device=device)
        self.count = torch.tensor(epsilon, dtype=self.dtype, device=device)

    def state_dict(self) -> dict[str, torch.Tensor]:
        """Copies of ``mean``, ``var`` (sample shape) and ``count`` (0-dim or per component)."""
        return {k: getattr(self, k).detach().clone() for k in ("mean", "var", "count")}

    def load_state_dict(self, state_dict: dict[str, torch.Tensor]) -> None:
        """Restore a :meth:`state_dict` (any device); raises as :func:`check_tensors`."""
        self._prepare_load(state_dict, "RunningMeanStd")()

    def _prepare_load(self, d: Any, where: str) -> Callable[[], None]:
        counts = {(), tuple(self.mean.shape)}
        new = check_tensors(self.state_dict(), d, where, loose={"count": counts})

        def apply() -> None:
            self.mean, self.var, self.count = new["mean"], new["var"], new["count"]

        return apply

    def update(self, x: torch.Tensor, weight: torch.Tensor | None = None) -> None:
        """Add a batch ``x`` of shape (B, *shape); ``weight`` (B,) bool/0-1 selects samples."""
        x = x.to(self.dtype)
        if weight is None:
            batch_var, batch_mean = torch.var_mean(x, dim=0, correction=0)
            batch_count: torch.Tensor | float = float(x.shape[0])
        else:
            w = weight.to(self.dtype).reshape(-1, *([1] * (x.dim() - 1)))
            batch_count = w.sum(0).reshape(())
            n = batch_count.clamp_min(1.0)
            batch_mean = (w * x).sum(0) / n
            batch_var = (w * torch.square(x - batch_mean)).sum(0) / n
        delta = batch_mean - self.mean
        tot = self.count + batch_count
        self.mean = self.mean + delta * batch_count / tot
        m2 = self.var * self.count + batch_var * batch_count
        m2 = m2 + torch.square(delta) * self.count * batch_count / tot
        self.var = m2 / tot
        self.count = tot

    def update_each(self, x: torch.Tensor, weight: torch.Tensor | None = None) -> None:
        """Add one sample to each component's own statistics (a bank of scalar statistics).

        ``x`` has the statistics' shape; component ``i`` is merged with the batch ``[x[i]]``
        exactly as a scalar ``RunningMeanStd`` would be, and ``weight`` (same shape, bool or
        0/1) skips the components where it is 0. :attr:`count` becomes per component.
        """
        x = x.to(self.dtype)
        w = torch.ones_like(x) if weight is None else weight.to(self.dtype)
        count = self.count.expand_as(self.mean)
        delta = x - self.mean
        tot = count + w
        mean = self.mean + delta * w / tot
        var = (self.var * count + torch.square(delta) * count * w / tot) / tot
        keep = w == 0
        self.mean = torch.where(keep, self.mean, mean)
        self.var = torch.where(keep, self.var, var)
        self.count = tot


# -- episode statistics ---------------------------------------------------------------------
class RecordEpisodeStatistics(TensorWrapper):
    """Episode return ``r``, length ``l`` and time ``t`` in ``info[stats_key]``, as gymnasium.

    Every step's info holds ``info["episode"] = {"r", "l", "t"}`` (each shape (N,), zero
    where no episode ended) and the mask ``info["_episode"]`` (N,) bool of the envs whose
    episode ended at this step. Unlike gymnasium the keys are present on every step (an
    all-False mask when nothing ended) so that no step reads a flag back from the device.

    ``r`` is float64 (float32 on MPS), ``l`` int64. ``t`` [s] is the wall-clock time from the
    episode's start to its end, rounded to 1 µs as gymnasium's, but measured on the host
    when ``step``/``reset`` is *called*: with an asynchronous device this is dispatch time,
    which may run ahead of the device's execution by a few queued steps.

    :attr:`return_queue`, :attr:`length_queue` and :attr:`time_queue` hold the last
    ``buffer_length`` episodes (oldest first) in device ring buffers, filled every 32 steps
    (and on reading) so that a step costs only the few element-wise ops above; reading them
    copies to the host. :attr:`episode_count` is a 0-dim int64 tensor.

    Args:
        env: A vector env returning torch tensors.
        buffer_length: Number of recent episodes kept.
        stats_key: Info key of the statistics.
    """

    def __init__(self, env: VectorEnv, buffer_length: int = 100, stats_key: str = "episode"):
        super().__init__(env)
        if buffer_length < 1:
            raise ValueError(f"buffer_length must be >= 1, got {buffer_length}")
        self._stats_key = stats_key
        self.buffer_length = buffer_length
        n, dev, fdt = self.num_envs, self.device, stats_dtype(self.device)
        self.episode_returns = torch.zeros(n, dtype=fdt, device=dev)
        self.episode_lengths = torch.zeros(n, dtype=torch.int64, device=dev)
        self.episode_start_times = torch.zeros(n, dtype=fdt, device=dev)
        self.prev_dones = torch.zeros(n, dtype=torch.bool, device=dev)
        self._count = torch.zeros((), dtype=torch.int64, device=dev)
        # per-step (dones, r, l, t), moved into the ring buffers every `_flush_every` steps
        self._pending: list[tuple[torch.Tensor, ...]] = []
        self._flush_every = 32
        # ring buffers with one spare slot that absorbs the writes of envs that did not end
        self._buf_r = torch.zeros(buffer_length + 1, dtype=fdt, device=dev)
        self._buf_l = torch.zeros(buffer_length + 1, dtype=torch.int64, device=dev)
        self._buf_t = torch.zeros(buffer_length + 1, dtype=fdt, device=dev)

    def reset(
        self, *, seed: Any = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the env and the running episode statistics (of the masked envs)."""
        obs, info = self.env.reset(seed=seed, options=options)
        now = time.perf_counter()
        mask = reset_mask_of(options, self.device)
        if mask is None:
            mask = torch.ones(self.num_envs, dtype=torch.bool, device=self.device)
        self.episode_returns = torch.where(mask, 0.0, self.episode_returns)
        self.episode_lengths = torch.where(mask, 0, self.episode_lengths)
        self.episode_start_times = torch.where(mask, now, self.episode_start_times)
        self.prev_dones = self.prev_dones & ~mask
        return obs, info

    def step(self, actions: Any) -> Step:
        """Step and record; see the class docstring for the info entries."""
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        if not isinstance(infos, dict):
            raise TypeError(f"RecordEpisodeStatistics needs a dict info, got {type(infos)}")
        key = self._stats_key
        if key in infos or f"_{key}" in infos:
            raise ValueError(f"info already has the key {key!r}: {list(infos)}")
        now = time.perf_counter()
        rewards_s = rewards.to(self.episode_returns.dtype)
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            returns = self.episode_returns + rewards_s
            lengths = self.episode_lengths + 1
            starts = self.episode_start_times
        else:  # the step after an ending is the autoreset step and starts a new episode
            prev = self.prev_dones
            returns = torch.where(prev, 0.0, self.episode_returns + rewards_s)
            lengths = torch.where(prev, 0, self.episode_lengths + 1)
            starts = torch.where(prev, now, self.episode_start_times)
        dones = terminations | truncations
        elapsed = torch.round(now - starts, decimals=6)
        r = torch.where(dones, returns, 0.0)
        ell = torch.where(dones, lengths, 0)
        t = torch.where(dones, elapsed, 0.0)
        infos = {**infos, key: {"r": r, "l": ell, "t": t}, f"_{key}": dones}
        self._pending.append((dones, r, ell, t))
        if len(self._pending) >= self._flush_every:
            self._flush()
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            returns = torch.where(dones, 0.0, returns)
            lengths = torch.where(dones, 0, lengths)
            starts = torch.where(dones, now, starts)
        self.episode_returns, self.episode_lengths = returns, lengths
        self.episode_start_times, self.prev_dones = starts, dones
        return obs, rewards, terminations, truncations, infos

    _STATS = ("episode_returns", "episode_lengths", "prev_dones", "_count", "_buf_r", "_buf_l")

    def _stats(self) -> dict[str, Any]:
        """Running episodes, episode count and ring buffers.

        The running episodes are (N,) return, length, time so far [s] and previous dones.
        """
        self._flush()
        out = {k.lstrip("_"): getattr(self, k).clone() for k in (*self._STATS, "_buf_t")}
        out["episode_times"] = time.perf_counter() - self.episode_start_times
        return out

    def _prepare_stats(self, stats: Any) -> Callable[[], None]:
        new = check_tensors(self._stats(), stats, "RecordEpisodeStatistics stats")

        def apply() -> None:
            self._pending = []
            for k in (*self._STATS, "_buf_t"):
                setattr(self, k, new[k.lstrip("_")])
            self.episode_start_times = time.perf_counter() - new["episode_times"]

        return apply

    def _flush(self) -> None:
        """Append the pending steps' ended episodes to the ring buffers, without a sync.

        Episodes are appended in step order, then env order; when more end than the
        buffer holds, the last ``buffer_length`` are kept.
        """
        if not self._pending:
            return
        dones, r, ell, t = (torch.stack(x).reshape(-1) for x in zip(*self._pending, strict=True))
        self._pending = []
        size = self.buffer_length
        rank = torch.cumsum(dones.to(torch.int64), 0) - 1  # order among the ended episodes
        total = rank[-1] + 1
        keep = dones & (rank >= total - size)  # only the last `size` fit
        slot = torch.where(keep, (self._count + rank) % size, size)
        self._buf_r.scatter_(0, slot, r)
        self._buf_l.scatter_(0, slot, ell)
        self._buf_t.scatter_(0, slot, t)
        self._count = self._count + total

    @property
    def episode_count(self) -> torch.Tensor:
        """Number of episodes ended so far, a 0-dim int64 tensor on the device."""
        self._flush()
        return self._count

    def _queue(self, buf: torch.Tensor) -> deque:
        count = int(self.episode_count)  # flushes
        size = self.buffer_length
        values = buf[:size].tolist()
        if count > size:
            start = count % size
            values = values[start:] + values[:start]
        return deque(values[: min(count, size)], maxlen=size)

    @property
    def return_queue(self) -> deque:
        """Returns of the last ``buffer_length`` episodes, oldest first (host copy)."""
        return self._queue(self._buf_r)

    @property
    def length_queue(self) -> deque:
        """Lengths of the last ``buffer_length`` episodes, oldest first (host copy)."""
        return self._queue(self._buf_l)

    @property
    def time_queue(self) -> deque:
        """Durations [s] of the last ``buffer_length`` episodes, oldest first (host copy)."""
        return self._queue(self._buf_t)


# -- observation wrappers -------------------------------------------------------------------
class TransformObservation(ObservationWrapper):
    """Apply ``func`` to every batch of observations (and to ``final_obs``).

    Args:
        env: A tensor vector env.
        func: Maps an (N, *obs_shape) tensor to the new observations.
        observation_space: The new single-env observation space (default: unchanged).
    """

    def __init__(
        self,
        env: VectorEnv,
        func: Callable[[torch.Tensor], torch.Tensor],
        observation_space: gym.Space | None = None,
    ) -> None:
        super().__init__(env)
        self.func = func
        if observation_space is not None:
            self.single_observation_space = observation_space
            self.observation_space = batch_space(observation_space, self.num_envs)

    def observations(self, observations: torch.Tensor) -> torch.Tensor:
        """``func(observations)``."""
        return self.func(observations)


class FlattenObservation(ObservationWrapper):
    """Flatten each env's ``Box`` observation to one dimension: (N, *shape) -> (N, prod)."""

    def __init__(self, env: VectorEnv) -> None:
        super().__init__(env)
        space = self.env.single_observation_space
        if not isinstance(space, Box):
            raise TypeError(f"FlattenObservation supports Box observations, got {space}")
        self.single_observation_space = gym.spaces.flatten_space(space)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)

    def observations(self, observations: torch.Tensor) -> torch.Tensor:
        """Reshape to (N, -1)."""
        return observations.reshape(observations.shape[0], -1)


class NormalizeObservation(ObservationWrapper):
    """Normalise observations to zero mean and unit variance per component, as gymnasium.

    Statistics are updated from every observation returned (reset and step) and, in
    ``SAME_STEP`` mode, from the final observations of the episodes that ended, which are
    normalised too. A partial reset adds only the reset envs' observations. Observations
    are returned as float32 ``(obs - mean) / sqrt(var + epsilon)``.

    Args:
        env: A tensor vector env with a ``Box`` observation space.
        epsilon: Added to the variance (> 0).
    """

    def __init__(self, env: VectorEnv, epsilon: float = 1e-8) -> None:
        if not epsilon > 0:  # NaN included
            raise ValueError(f"epsilon must be > 0, got {epsilon}")
        super().__init__(env)
        shape = self.env.single_observation_space.shape
        self.single_observation_space = Box(-np.inf, np.inf, shape=shape, dtype=np.float32)
        self.observation_space = batch_space(self.single_observation_space, self.num_envs)
        self.obs_rms = RunningMeanStd(shape, self.device)
        self.epsilon = epsilon
        self.update_running_mean = True

    def _stats(self) -> dict[str, Any]:
        """The observation statistics."""
        return {"obs_rms": self.obs_rms.state_dict()}

    def _prepare_stats(self, stats: Any) -> Callable[[], None]:
        if not isinstance(stats, dict) or set(stats) != {"obs_rms"}:
            raise ValueError(
                f"NormalizeObservation stats must be {{'obs_rms': ...}}, got {stats!r:.80}"
            )
        return self.obs_rms._prepare_load(stats["obs_rms"], "NormalizeObservation obs_rms")

    def _normalize(self, obs: torch.Tensor) -> torch.Tensor:
        rms = self.obs_rms
        return ((obs.to(rms.dtype) - rms.mean) / torch.sqrt(rms.var + self.epsilon)).to(
            torch.float32
        )

    def observations(self, observations: torch.Tensor) -> torch.Tensor:
        """Update the statistics with the batch, then normalise it."""
        if self.update_running_mean:
            self.obs_rms.update(observations)
        return self._normalize(observations)

    def _on_reset(self, obs: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        if self.update_running_mean:
            self.obs_rms.update(obs, mask)
        return self._normalize(obs)

    def _on_step_same(
        self, obs: torch.Tensor, final: torch.Tensor, mask: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if self.update_running_mean:
            ones = torch.ones_like(mask)
            self.obs_rms.update(torch.cat((final, obs)), torch.cat((mask, ones)))
        return self._normalize(obs), self._normalize(final)


# -- reward wrappers ------------------------------------------------------------------------
class TransformReward(TensorWrapper):
    """Apply ``func`` to every batch of rewards (N,)."""

    def __init__(self, env: VectorEnv, func: Callable[[torch.Tensor], torch.Tensor]) -> None:
        super().__init__(env)
        self.func = func

    def step(self, actions: Any) -> Step:
        """Step and transform the reward."""
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        return obs, self.func(rewards), terminations, truncations, infos


class NormalizeReward(TensorWrapper):
    r"""Scale rewards by the running std of the discounted return, as gymnasium.

    Keeps the per-env discounted sum ``G <- gamma * (1 - terminated) * G + r`` and returns
    ``r / sqrt(Var[G] + epsilon)``. In both modes below, the autoreset step after an ending
    (``NEXT_STEP``/``DISABLED``) neither updates ``G`` nor the statistics. The reward keeps
    its dtype.

    * ``per_env=False`` (default): gymnasium 1.4's *vector* ``NormalizeReward``. One
      variance over all envs' returns; in ``SAME_STEP`` mode ``G`` restarts at 0 after every
      ending, and :meth:`reset` clears it.
    * ``per_env=True``: a vector env of gymnasium's *single-env* ``NormalizeReward`` (one
      wrapper per env, e.g. CleanRL's ``make_env`` in a ``SyncVectorEnv``; the single-env
      wrapper is unchanged from gymnasium 0.29 to 1.4). Each env has its own variance, and
      ``G`` is never restarted: it is multiplied by ``1 - terminated`` only, so after a
      *truncation* (a time limit, e.g. every Pendulum episode) it runs on into the next
      episode, and :meth:`reset` keeps it. For a continuing task this normalises by the
      spread of a steady-state discounted return instead of one that restarts at 0.

    Args:
        env: A tensor vector env.
        gamma: Discount of the return, in [0, 1].
        epsilon: Added to the variance (> 0).
        per_env: Mirror per-env single-env wrappers (see above) instead of the vector one.
    """

    def __init__(
        self, env: VectorEnv, gamma: float = 0.99, epsilon: float = 1e-8, per_env: bool = False
    ) -> None:
        if not 0 <= gamma <= 1:
            raise ValueError(f"gamma must be in [0, 1], got {gamma}")
        if not epsilon > 0:  # NaN included
            raise ValueError(f"epsilon must be > 0, got {epsilon}")
        super().__init__(env)
        self.gamma, self.epsilon, self.per_env = gamma, epsilon, per_env
        self.return_rms = RunningMeanStd((self.num_envs,) if per_env else (), self.device)
        self.accumulated_reward = torch.zeros(
            self.num_envs, dtype=self.return_rms.dtype, device=self.device
        )
        self._prev_dones = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        self.update_running_mean = True

    def _stats(self) -> dict[str, Any]:
        """The return statistics, the (N,) discounted returns and the previous dones."""
        return {
            "return_rms": self.return_rms.state_dict(),
            "accumulated_reward": self.accumulated_reward.clone(),
            "prev_dones": self._prev_dones.clone(),
        }

    def _prepare_stats(self, stats: Any) -> Callable[[], None]:
        if not isinstance(stats, dict) or "return_rms" not in stats:
            raise ValueError(f"NormalizeReward stats need 'return_rms', got {stats!r:.80}")
        apply_rms = self.return_rms._prepare_load(stats["return_rms"], "NormalizeReward return_rms")
        current = {"accumulated_reward": self.accumulated_reward, "prev_dones": self._prev_dones}
        rest = {k: v for k, v in stats.items() if k != "return_rms"}
        new = check_tensors(current, rest, "NormalizeReward stats")

        def apply() -> None:
            apply_rms()
            self.accumulated_reward, self._prev_dones = new["accumulated_reward"], new["prev_dones"]

        return apply

    def reset(
        self, *, seed: Any = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset the env and the accumulated returns (of the masked envs)."""
        mask = reset_mask_of(options, self.device)
        if mask is None:
            mask = torch.ones_like(self._prev_dones)
        if not self.per_env:  # the single-env wrapper keeps its return over a reset
            self.accumulated_reward = torch.where(mask, 0.0, self.accumulated_reward)
        self._prev_dones = self._prev_dones & ~mask
        return self.env.reset(seed=seed, options=options)

    def step(self, actions: Any) -> Step:
        """Step, update the return statistics and scale the reward."""
        obs, reward, terminated, truncated, info = self.env.step(actions)
        acc = self.accumulated_reward
        new = acc * self.gamma * (~terminated).to(acc.dtype) + reward.to(acc.dtype)
        if self.autoreset_mode is AutoresetMode.SAME_STEP:
            acc, active = new, None
        else:
            active = ~self._prev_dones
            acc = torch.where(active, new, acc)
        if self.update_running_mean:
            if self.per_env:  # one sample per env, each into its own statistics
                self.return_rms.update_each(acc, active)
            else:
                self.return_rms.update(acc, active)
        dones = terminated | truncated
        if self.autoreset_mode is AutoresetMode.SAME_STEP and not self.per_env:
            acc = torch.where(dones, 0.0, acc)
        self.accumulated_reward, self._prev_dones = acc, dones
        scale = torch.sqrt(self.return_rms.var + self.epsilon)
        return obs, (reward / scale).to(reward.dtype), terminated, truncated, info


# -- action wrappers ------------------------------------------------------------------------
class _AffineAction(TensorWrapper):
    """``env_action = clamp(scale * action + shift, low, high)`` with per-component tensors."""

    def __init__(self, env: VectorEnv) -> None:
        super().__init__(env)
        space = self.env.single_action_space
        if not isinstance(space, Box):
            raise TypeError(f"{type(self).__name__} needs a Box action space, got {space}")
        self._env_dtype = getattr(self.env.unwrapped, "dtype", None)
        if not isinstance(self._env_dtype, torch.dtype):
            self._env_dtype = getattr(torch, np.dtype(space.dtype).name)

    def _tensor(self, a: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.asarray(a, dtype=np.float64), device=self.device).to(
            self._env_dtype
        )

    def actions(self, actions: Any) -> torch.Tensor:
        """The env's actions for the wrapper's ``actions`` (N, *action_shape)."""
        raise NotImplementedError

    def step(self, actions: Any) -> Step:
        """Transform the actions and step."""
        if not isinstance(actions, torch.Tensor):
            actions = torch.as_tensor(np.asarray(actions))
        return self.env.step(self.actions(actions.to(self.device)))


class ClipAction(_AffineAction):
    """Clip actions to the env's ``Box`` bounds; the wrapper accepts any real action."""

    def __init__(self, env: VectorEnv) -> None:
        super().__init__(env)
        space = self.env.single_action_space
        self._low, self._high = self._tensor(space.low), self._tensor(space.high)
        self.single_action_space = Box(-np.inf, np.inf, space.shape, space.dtype)
        self.action_space = batch_space(self.single_action_space, self.num_envs)

    def actions(self, actions: torch.Tensor) -> torch.Tensor:
        """``clamp(actions, low, high)`` in the env's dtype."""
        return torch.clamp(actions.to(self._env_dtype), self._low, self._high)


class RescaleAction(_AffineAction):
    """Affinely map actions from ``[min_action, max_action]`` to the env's ``Box`` bounds.

    Args:
        env: A tensor vector env with a ``Box`` action space.
        min_action: Lower bound(s) of the new action space (scalar or array).
        max_action: Upper bound(s) of the new action space (scalar or array).
    """

    def __init__(self, env: VectorEnv, min_action: Any, max_action: Any) -> None:
        super().__init__(env)
        space = self.env.single_action_space
        new_space, _, backward = rescale_box(space, min_action, max_action)
        if np.any(new_space.low == new_space.high):
            raise ValueError(f"min_action {min_action} must be < max_action {max_action}")
        # `backward` (new -> env) is affine: backward(x) = slope * x + intercept
        zero = np.zeros(space.shape, dtype=np.float64)
        intercept = np.asarray(backward(zero), dtype=np.float64)
        slope = np.asarray(backward(zero + 1.0), dtype=np.float64) - intercept
        self._slope, self._intercept = self._tensor(slope), self._tensor(intercept)
        self.single_action_space = new_space
        self.action_space = batch_space(new_space, self.num_envs)

    def actions(self, actions: torch.Tensor) -> torch.Tensor:
        """``slope * actions + intercept`` in the env's dtype."""
        return self._slope * actions.to(self._env_dtype) + self._intercept


# -- array views ----------------------------------------------------------------------------
def _to_numpy(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, dict):
        out = {k: _to_numpy(v) for k, v in value.items()}
        # gymnasium adds a masked key only when at least one env set it
        for k in list(out):
            m = out.get(f"_{k}")
            if isinstance(m, np.ndarray) and m.dtype == np.bool_ and not m.any():
                del out[k], out[f"_{k}"]
        return out
    if isinstance(value, (list, tuple)):
        return type(value)(_to_numpy(v) for v in value)
    return value


def _to_torch(value: Any, device: torch.device) -> Any:
    if isinstance(value, np.ndarray) and value.dtype != object:
        return torch.from_numpy(np.ascontiguousarray(value)).to(device)
    if isinstance(value, (np.bool_, np.number)):
        return torch.as_tensor(value, device=device)
    if isinstance(value, dict):
        return {k: _to_torch(v, device) for k, v in value.items()}
    return value


class _NumpyView(VectorWrapper):
    """Numpy arrays out, numpy (or tensor) actions in; see :func:`to_numpy`."""

    def __init__(self, env: VectorEnv) -> None:
        super().__init__(env)
        self.device = device_of(env)

    def reset(
        self, *, seed: Any = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset; outputs as numpy arrays."""
        if options and isinstance(options.get("reset_mask"), np.ndarray):
            options = {**options, "reset_mask": torch.from_numpy(options["reset_mask"])}
        obs, info = self.env.reset(seed=seed, options=options)
        return _to_numpy(obs), _to_numpy(info)

    def step(self, actions: Any) -> Step:
        """Step with numpy actions; outputs as numpy arrays."""
        if not isinstance(actions, torch.Tensor):
            actions = torch.from_numpy(np.ascontiguousarray(actions))
        return _to_numpy(self.env.step(actions.to(self.device)))


class _TorchView(VectorWrapper):
    """Tensors out, tensor actions in, over a numpy vector env; see :func:`to_torch`."""

    def __init__(self, env: VectorEnv, device: str | torch.device = "cpu") -> None:
        device = as_device(device)  # before wrapping: a device torch cannot use raises
        super().__init__(env)
        self.device = device

    def reset(
        self, *, seed: Any = None, options: dict[str, Any] | None = None
    ) -> tuple[Any, dict[str, Any]]:
        """Reset; outputs as tensors on :attr:`device`."""
        if options and isinstance(options.get("reset_mask"), torch.Tensor):
            options = {**options, "reset_mask": options["reset_mask"].cpu().numpy()}
        obs, info = self.env.reset(seed=seed, options=options)
        return _to_torch(obs, self.device), _to_torch(info, self.device)

    def step(self, actions: Any) -> Step:
        """Step with tensor actions; outputs as tensors on :attr:`device`."""
        if isinstance(actions, torch.Tensor):
            actions = actions.detach().cpu().numpy()
        obs, rew, term, trunc, info = self.env.step(actions)
        d = self.device
        return (
            _to_torch(obs, d),
            _to_torch(np.asarray(rew), d),
            _to_torch(np.asarray(term), d),
            _to_torch(np.asarray(trunc), d),
            _to_torch(info, d),
        )


def to_numpy(env: VectorEnv) -> VectorEnv:
    """A numpy view of a tensor vector env, for loops written for gymnasium's numpy envs.

    Actions may be numpy arrays (or tensors); observations, rewards, flags and info come
    back as numpy arrays on the host. Masked info entries (``episode``/``_episode``,
    ``final_obs``/``_final_obs``, ...) are dropped on steps where their mask is all False,
    exactly as gymnasium adds them only when some env set them. This view synchronises with
    the device every step (it must, to return numpy); use the tensor env for speed.
    """
    return _NumpyView(env)


def to_torch(env: VectorEnv, device: str | torch.device = "cpu") -> VectorEnv:
    """A tensor view of a numpy vector env (e.g. gymnasium's ``SyncVectorEnv``).

    Like gymnasium's ``NumpyToTorch`` without its ``array-api-compat`` dependency: outputs
    (and info arrays) become tensors on ``device``, tensor actions are copied to numpy.
    Object arrays in info are passed through unchanged.

    Raises:
        ValueError: a ``device`` this torch cannot use (see
            :func:`~gpuvec_envs.core.arguments.as_device`).
    """
    return _TorchView(env, device)


def episode_stats(info: dict[str, Any], key: str = "episode") -> tuple[Any, Any, Any] | None:
    """``(r, l, mask)`` of the episodes that ended at this step, or ``None`` if none can have.

    Reads gymnasium's vector format (``info["episode"]``, ``info["_episode"]``) and, for a
    ``SAME_STEP`` ``SyncVectorEnv`` over single envs wrapped in gymnasium's
    ``RecordEpisodeStatistics``, the same entries under ``info["final_info"]``. Returns the
    full (N,) arrays and the (N,) bool mask without indexing them, so a tensor loop can
    store them and read them back to the host once per rollout.
    """
    for src in (info, info.get("final_info")):
        if isinstance(src, dict) and key in src and f"_{key}" in src:
            ep = src[key]
            mask = src[f"_{key}"]
            if isinstance(mask, torch.Tensor) and src is not info:
                mask = mask & info["_final_info"]
            return ep["r"], ep["l"], mask
    return None
