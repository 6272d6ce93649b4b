"""TorchRL adapter: a gpuvec vector env as a batched ``torchrl.envs.EnvBase``.

Replace ``GymEnv("CartPole-v1", num_envs=8)`` with
``make_torchrl_env("gpuvec/CartPole-v1", 8)`` and keep the rest of a TorchRL script:
collectors, transforms (``StepCounter``, ``RewardSum``, ``ObservationNorm``, ``VecNorm``...),
losses and replay buffers. The env is one TorchRL env of ``batch_size=[N]`` on the gpuvec
env's device; the batch is the parallelism, so no ``ParallelEnv`` is needed.

The contract is TorchRL 0.14's ``torchrl/envs/common.py`` (``EnvBase``) as ``GymEnv``
implements it (``torchrl/envs/libs/gym.py``):

* Specs follow ``GymEnv``'s mapping of gymnasium spaces: a ``Box`` observation is
  ``"observation"`` (``Bounded``, or ``Unbounded`` when its bounds are infinite or span its
  dtype), a ``Dict`` observation (MiniGrid's ``obs_mode="dict"``) gives one entry per key;
  ``Discrete`` spaces are ``OneHot`` (default) or ``Categorical``
  (``categorical_action_encoding=True``), ``MultiBinary`` is ``Binary``; the reward is
  ``(N, 1)``, and ``done``, ``terminated`` and ``truncated`` are ``(N, 1)`` bool.
* ``reset()`` resets every env; a ``"_reset"`` entry (bool, ``(N,)`` or ``(N, 1)``) resets
  only those envs, as TorchRL's collectors and ``rollout`` do after an episode ends.
* ``set_seed(s)`` seeds env ``i`` with ``s + i`` at the next full reset, as
  ``GpuVecEnv.reset(seed=s)``; each env's stream depends only on its seed.
* ``state_dict()`` / ``load_state_dict()`` hold an exact checkpoint (under the module's
  ``"_extra_state"`` key); after loading, every step is bitwise the saved env's.

How it works: the gpuvec env runs in its ``SAME_STEP`` autoreset mode, so one compiled call
(:meth:`GpuVecEnv.fuse`) steps every env, resets the finished ones and returns both their
last observation (the transition's ``"next"`` observation) and their first observation of
the new episode. The ``_reset`` that TorchRL sends for the finished envs then only hands
back the observations computed by that step: no second pass over the batch, no Python loop
over envs, and no value read back to the host in ``_step``. One-hot actions are decoded to
indices in that compiled call too (its ``pre``), so they add no op of their own.
``_reset`` reads one flag back: whether the mask names envs that did not just finish (a
``"_reset"`` mask of your own); those go through the engine's masked reset
(``reset_mask``), which runs eagerly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from tensordict import TensorDict, TensorDictBase
from torchrl.data import Binary, Bounded, Categorical, Composite, OneHot, TensorSpec, Unbounded
from torchrl.envs import EnvBase

from gpuvec_envs.core import checkpoint
from gpuvec_envs.core.step import StepOut, bool_observation, user_obs
from gpuvec_envs.core.vector import GpuVecEnv
from gpuvec_envs.core.wrapper import StructuredObservation
from gpuvec_envs.registry import make_same_step

__all__ = ["TorchRLEnv", "make_torchrl_env"]

_DONE_KEYS = ("done", "terminated", "truncated")

#: Skip TorchRL's ``EnvBase._step_proc_data`` on the adapter's own, already complete step
#: output (:meth:`TorchRLEnv._step_proc_data`). Depends on TorchRL calling that hook from
#: ``EnvBase.step`` (0.14); ``False`` runs TorchRL's version every step.
LEAN_STEP = True

#: A TensorDict without the per-entry checks (~20 µs a call): the adapter's entries have the
#: batch size and device by construction. tensordict's private constructor, which TorchRL
#: itself uses; the public one where a tensordict release lacks it.
_tensordict = getattr(TensorDict, "_new_unsafe", TensorDict)


@dataclasses.dataclass(frozen=True)
class _Entry:
    """One observation entry: its TorchRL spec of one env and how a batch is encoded."""

    spec: TensorSpec
    encode: Callable[[torch.Tensor], torch.Tensor]  # (N, *space_shape) -> (N, *spec_shape)


def _identity(x: torch.Tensor) -> torch.Tensor:
    return x


def _one_hot(n: int) -> Callable[[torch.Tensor], torch.Tensor]:
    """(N,) indices -> (N, n) int64 one-hot, without ``F.one_hot``'s range check (a sync)."""

    def encode(x: torch.Tensor) -> torch.Tensor:
        classes = torch.arange(n, device=x.device)
        return (x.unsqueeze(-1) == classes).to(torch.int64)

    return encode


def _one_hot_index(action: torch.Tensor) -> torch.Tensor:
    """(N, n) int64 one-hot rows -> (N,) int64 indices: ``sum_j j * action[:, j]``, clamped.

    Pure and traceable: the adapter fuses it into the compiled step (:meth:`GpuVecEnv.fuse`'s
    ``pre``), where it costs no eager op; run eagerly it is a few column ops, several times
    faster than ``argmax(-1)`` over a short last dimension. Rows that are not one-hot give
    an index of no meaning but within ``[0, n)``; ``validate=True`` rejects them first.
    """
    n = action.shape[-1]
    index = torch.zeros_like(action[:, 0]) if n == 1 else action[:, 1]
    for j in range(2, n):
        index = index + action[:, j] * j
    return index.clamp(0, n - 1)


def _entry(space: gym.Space, device: torch.device, categorical: bool, where: str) -> _Entry:
    """The TorchRL spec (one env, no batch dimension) of a gymnasium leaf space.

    Raises:
        ValueError: a space the adapter does not map (``MultiDiscrete``, ``Tuple``, ...) or a
            ``Discrete`` space that does not start at 0.
    """
    if isinstance(space, spaces.Box):
        dtype = getattr(torch, np.dtype(space.dtype).name)
        low = torch.as_tensor(space.low, dtype=dtype, device=device)
        high = torch.as_tensor(space.high, dtype=dtype, device=device)
        shape = space.shape or (1,)  # GymEnv gives a 0-d Box one element
        encode = _identity if space.shape else (lambda x: x.unsqueeze(-1))
        if dtype.is_floating_point:
            lowest, highest = torch.finfo(dtype).min, torch.finfo(dtype).max
        elif dtype == torch.bool:
            lowest, highest = False, True
        else:
            lowest, highest = torch.iinfo(dtype).min, torch.iinfo(dtype).max
        infinite = (
            bool(low.isinf().all() and high.isinf().all()) if dtype.is_floating_point else False
        )
        full_range = bool((low == lowest).all() and (high == highest).all())
        if infinite or full_range:  # GymEnv's rule for an unbounded Box
            return _Entry(Unbounded(shape, device=device, dtype=dtype), encode)
        return _Entry(Bounded(low, high, shape, device=device, dtype=dtype), encode)
    if isinstance(space, spaces.Discrete):
        if int(space.start) != 0:
            raise ValueError(f"TorchRL cannot use the {where} space {space}: it must start at 0")
        n = int(space.n)
        if categorical:
            return _Entry(Categorical(n, device=device, dtype=torch.int64), _identity)
        return _Entry(OneHot(n, device=device, dtype=torch.int64), _one_hot(n))
    if isinstance(space, spaces.MultiBinary):
        dtype = getattr(torch, np.dtype(space.dtype).name)
        return _Entry(Binary(shape=space.shape, device=device, dtype=dtype), _identity)
    raise ValueError(
        f"the TorchRL adapter cannot map the {where} space {space}: it supports Box, Discrete, "
        "MultiBinary and (observations) a Dict of these"
    )


def _packed_outputs(out: StepOut, extra: tuple[()]) -> tuple[tuple[()], tuple[torch.Tensor, ...]]:
    """What :meth:`TorchRLEnv._step` needs from a SAME_STEP step, inside the step's graph.

    Returns:
        ``(extra, (next_obs, reset_obs, reward, done, terminated, truncated))``: the
        observation each env reached (N, *obs_shape; before the autoreset), the observation
        after it (N, *obs_shape; a new episode's first for the envs that finished), the
        reward (N, 1), and the flags (N, 1) uint8 0/1 (viewed as bool outside the step):
        already in TorchRL's shapes, so no reshaping op follows the step. (Bool outputs made
        inductor's CPU step ~4x slower; a stacked (3, N, 1) output became a separate cat.)
    """
    flags = (out.terminated | out.truncated, out.terminated, out.truncated)
    return extra, (
        out.final_obs,
        out.obs,
        out.reward.unsqueeze(-1),
        *(f.unsqueeze(-1) for f in flags),
    )


@dataclasses.dataclass
class _AdapterState:
    """What the adapter carries between calls (a plain object: ``nn.Module``'s setattr is slow)."""

    seed: int | None = None  # set_seed's seed, applied at the next full reset
    # (N,) bool: envs the last step reset (SAME_STEP) that TorchRL has not reset yet
    pending: torch.Tensor | None = None
    # (N, *obs_shape): the last step's observations after its autoreset, handed out once
    reset_obs: torch.Tensor | None = None


class TorchRLEnv(EnvBase):
    """A :class:`~gpuvec_envs.core.vector.GpuVecEnv` as a TorchRL env of ``batch_size=[N]``.

    Args:
        venv: The batched env, built with ``autoreset_mode="same_step"``, or a
            :class:`~gpuvec_envs.core.wrapper.StructuredObservation` over one (MiniGrid's
            ``obs_mode="dict"``). Its ``validate`` setting decides the value checks: with
            ``True`` every step reads back whether the actions are in range (and one-hot)
            and whether the outputs are finite; with ``False`` nothing is read back.
            Shapes, dtypes and devices are always checked (no read-back).
        categorical_action_encoding: ``Discrete`` actions and observation entries as
            ``Categorical`` integers (N,) instead of ``OneHot`` (N, n), as ``GymEnv``'s
            argument of the same name. ``OneHot`` actions are decoded to indices inside
            the compiled step (no eager op): both encodings cost the same per step.

    Raises:
        TypeError: not a gpuvec env.
        ValueError: not in SAME_STEP mode, or a space the adapter does not map.

    A step's ``"next"`` entries: the observation keys (``"observation"`` (N, *obs_shape),
    or a ``Dict`` space's keys), ``"reward"`` (N, 1) of the env's float dtype, and
    ``"done"``, ``"terminated"``, ``"truncated"`` (N, 1) bool.
    """

    def __init__(self, venv: Any, *, categorical_action_encoding: bool = False) -> None:
        view = None
        if isinstance(venv, StructuredObservation) and isinstance(venv.env, GpuVecEnv):
            view, venv = venv.view, venv.env
        if not isinstance(venv, GpuVecEnv):
            raise TypeError(
                f"expected a gpuvec GpuVecEnv (optionally in StructuredObservation), got "
                f"{type(venv).__name__}"
            )
        if venv.autoreset_mode is not AutoresetMode.SAME_STEP:
            raise ValueError(
                "the TorchRL adapter needs a GpuVecEnv built with autoreset_mode='same_step' "
                f"(its step resets finished envs for TorchRL's '_reset'); got {venv.autoreset_mode}"
            )
        n = venv.num_envs
        super().__init__(device=venv.device, batch_size=torch.Size([n]))
        device = self.device  # with its index ("cuda:0" for "cuda")
        self.venv = venv
        self.categorical_action_encoding = categorical_action_encoding
        self._view = view
        # a bool space's observation may come from the step as uint8 0/1 (viewed as bool)
        self._coded_obs = bool_observation(venv.single_observation_space)
        obs_space = venv.single_observation_space if view is None else view.space
        if isinstance(obs_space, spaces.Dict):
            leaves = dict(obs_space.spaces)
        else:
            leaves = {"observation": obs_space}
        self._obs_entries = {
            key: _entry(space, device, categorical_action_encoding, f"observation {key!r}")
            for key, space in leaves.items()
        }
        act = _entry(venv.single_action_space, device, categorical_action_encoding, "action")
        self._one_hot_actions = isinstance(act.spec, OneHot)
        self._one_hot_shape = (n, *act.spec.shape)  # (N, n) when one-hot
        self.full_observation_spec = Composite(
            {k: e.spec.expand(n, *e.spec.shape) for k, e in self._obs_entries.items()},
            shape=(n,),
            device=device,
        )
        self.full_action_spec = Composite(
            action=act.spec.expand(n, *act.spec.shape), shape=(n,), device=device
        )
        self.full_reward_spec = Composite(
            reward=Unbounded((n, 1), device=device, dtype=venv.dtype), shape=(n,), device=device
        )
        self.full_done_spec = Composite(
            {k: Categorical(2, (n, 1), device=device, dtype=torch.bool) for k in _DONE_KEYS},
            shape=(n,),
            device=device,
        )
        # one-hot actions are decoded inside the compiled step
        self._fused_step = venv.fuse(
            _packed_outputs, _one_hot_index if self._one_hot_actions else None
        )
        self._carry = _AdapterState()

    # -- EnvBase ------------------------------------------------------------------------
    def _step(self, tensordict: TensorDictBase) -> TensorDictBase:
        """Step every env with ``tensordict["action"]``.

        Args:
            tensordict: Holds ``"action"``: (N, n) one-hot or (N,) integers for a
                ``Discrete`` space, (N, *action_shape) otherwise.

        Returns:
            The ``"next"`` entries (see the class docstring).

        Raises:
            NotImplementedError: a ``"_step"`` mask that leaves some envs out (the batch
                steps together).
            TypeError, ValueError: a bad action (shape, dtype, device; with ``validate``,
                values).
        """
        partial = tensordict.get("_step", None)
        if partial is not None and not bool(partial.all()):
            raise NotImplementedError(
                "a gpuvec env steps all its envs together; '_step' masks (rollout with "
                "break_when_all_done=True) are not supported: use break_when_any_done or "
                "a collector"
            )
        action = tensordict.get("action", None)
        if action is None:
            raise KeyError("the tensordict has no 'action' entry")
        if self._one_hot_actions:
            action = self._one_hot_action(action)
        else:
            action = self.venv.prepare_action(action)
        _, (next_obs, reset_obs, reward, *flags) = self._fused_step((), action)
        source = self._observations(next_obs)
        source["reward"] = reward
        for key, flag in zip(_DONE_KEYS, flags, strict=True):
            source[key] = flag.view(torch.bool)
        self._carry.pending = source["done"].view(self.venv.num_envs)  # read by the next _reset
        self._carry.reset_obs = reset_obs
        return _tensordict(source, batch_size=self.batch_size, device=self.device)

    def _step_proc_data(self, next_tensordict_out: TensorDictBase) -> TensorDictBase:
        """TorchRL's post-step shape completion, skipped where :meth:`_step` makes it moot.

        ``EnvBase.step`` calls this hook on :meth:`_step`'s output to reshape the reward to
        its spec and to fill missing done keys (~40 µs of Python a step). :meth:`_step`
        already gives every key in its spec's shape and dtype, so with :data:`LEAN_STEP`
        (default) the output is returned as it is; TorchRL's ``run_type_checks`` still runs
        TorchRL's own version.
        """
        if LEAN_STEP and not self.run_type_checks:
            return next_tensordict_out
        return super()._step_proc_data(next_tensordict_out)

    def _reset(self, tensordict: TensorDictBase | None = None, **kwargs: Any) -> TensorDictBase:
        """Reset every env, or those in ``tensordict["_reset"]`` (bool, (N,) or (N, 1)).

        Envs the last step finished were reset by that step already; their observations
        are handed back without work. Other envs in the mask go through the engine's
        masked reset (``GpuVecEnv.reset(options={"reset_mask": ...})``).

        Returns:
            The observation entries of every env and ``done``/``terminated``/``truncated``
            (N, 1) False (TorchRL keeps the entries of envs outside ``"_reset"``).

        Raises:
            TypeError, ValueError: a ``"_reset"`` that is not bool or not N entries.
        """
        if kwargs:
            raise TypeError(f"unexpected reset arguments {sorted(kwargs)}")
        mask = None if tensordict is None else tensordict.get("_reset", None)
        if mask is None:
            obs, _ = self.venv.reset(seed=self._carry.seed)
            self._carry.seed = None
            self._carry.pending = torch.zeros(self.batch_size, dtype=torch.bool, device=self.device)
        else:
            mask = self._reset_mask(mask)
            pending = self._carry.pending
            # on bools, a > b is a & ~b: the envs in the mask that the last step did not reset
            forced = mask if pending is None else mask > pending
            self._carry.pending = None if pending is None else pending > mask
            obs = self._carry.reset_obs
            # read back only while a step's autoreset observations are at hand
            if obs is None or bool(forced.any()):
                obs, _ = self.venv.reset(options={"reset_mask": forced})
        self._carry.reset_obs = None  # handed out once: TorchRL may write into what it receives
        source = self._observations(obs)
        flags = torch.zeros(
            (len(_DONE_KEYS), *self.batch_size, 1), dtype=torch.bool, device=self.device
        )
        source.update(zip(_DONE_KEYS, flags.unbind(0), strict=True))
        return _tensordict(source, batch_size=self.batch_size, device=self.device)

    def _set_seed(self, seed: int | None) -> None:
        """Seed env ``i`` with ``seed + i`` at the next full reset (``None``: fresh entropy)."""
        self._carry.seed = seed

    def to(self, device: str | torch.device) -> TorchRLEnv:
        """``self`` on its own device; a gpuvec env cannot move (make it on ``device``).

        Raises:
            ValueError: another device.
        """
        target = torch.device(device)
        if target.type != self.device.type or target.index not in (None, self.device.index):
            raise ValueError(
                f"this env runs on {self.venv.device}; make it with device={str(device)!r} "
                "instead of moving it"
            )
        return self

    def close(self, *, raise_if_closed: bool = True) -> None:
        """Close the gpuvec env (stops any background compile)."""
        self.venv.close()
        super().close(raise_if_closed=raise_if_closed)

    # -- checkpoints (nn.Module's state_dict/load_state_dict) ----------------------------
    def get_extra_state(self) -> dict[str, Any]:
        """The env's checkpoint, stored by ``state_dict()`` under ``"_extra_state"``.

        That is the engine's :meth:`GpuVecEnv.state_dict` plus the adapter's own state: the
        seed set for the next reset, and between a step and TorchRL's reset, the envs that
        step reset ((N,) bool) and their observations (N, *obs_shape).
        """
        return {
            "format_version": checkpoint.FORMAT_VERSION,
            "venv": self.venv.state_dict(),
            "seed": self._carry.seed,
            "pending": None if self._carry.pending is None else self._carry.pending.clone(),
            "reset_obs": None if self._carry.reset_obs is None else self._carry.reset_obs.clone(),
        }

    def set_extra_state(self, state: Any) -> None:
        """Restore :meth:`get_extra_state` (``load_state_dict``); checks everything first.

        Raises:
            TypeError, ValueError: a checkpoint of another env or configuration (see
                :meth:`GpuVecEnv.load_state_dict`); nothing is changed.
        """
        keys = {"format_version", "venv", "seed", "pending", "reset_obs"}
        if not isinstance(state, Mapping) or set(state) != keys:
            got = sorted(state) if isinstance(state, Mapping) else type(state).__name__
            raise ValueError(f"TorchRLEnv state: expected keys {sorted(keys)}, got {got}")
        if state["format_version"] != checkpoint.FORMAT_VERSION:
            raise ValueError(f"unsupported checkpoint format_version {state['format_version']!r}")
        apply = checkpoint.prepare_load(self.venv, state["venv"], True)
        seed = state["seed"]
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"TorchRLEnv state 'seed' must be an int or None, got {seed!r:.80}")
        n = self.venv.num_envs
        obs_shape = (n, *self.venv.single_observation_space.shape)
        expected = {"pending": ((n,), torch.bool), "reset_obs": (obs_shape, None)}
        tensors = {}
        for key, (shape, dtype) in expected.items():
            t = state[key]
            if t is not None and not (
                isinstance(t, torch.Tensor)
                and tuple(t.shape) == shape
                and (dtype is None or t.dtype == dtype)
            ):
                raise ValueError(
                    f"TorchRLEnv state {key!r}: expected {shape} or None, got {t!r:.80}"
                )
            tensors[key] = None if t is None else t.to(self.venv.device, copy=True)
        apply()
        self._carry.seed = state["seed"]
        self._carry.pending, self._carry.reset_obs = tensors["pending"], tensors["reset_obs"]

    def __repr__(self) -> str:
        """The wrapped env and the batch size."""
        return f"TorchRLEnv({self.venv!r}, batch_size={list(self.batch_size)})"

    # -- internals ----------------------------------------------------------------------
    def _one_hot_action(self, action: Any) -> torch.Tensor:
        """TorchRL's one-hot actions (N, n) as the fused step takes them: int64, contiguous.

        No copy for an int64 contiguous tensor on the env's device (what the ``OneHot``
        spec gives); other real dtypes (bool, floats) and devices are converted.

        Raises:
            TypeError: complex or non-numeric actions.
            ValueError: a shape other than (N, n), a device it cannot be moved from; with
                ``validate``, a row that is not one-hot.
        """
        shape = self._one_hot_shape
        if (
            type(action) is torch.Tensor
            and action.dtype is torch.int64
            and action.shape == shape
            and action.device == self.device
            and action.is_contiguous()
            and not self.venv.validate
        ):  # what the OneHot spec gives: nothing to convert or check
            return action
        if not isinstance(action, torch.Tensor):
            arr = np.asarray(action)
            if arr.dtype == object or arr.dtype.kind not in "biuf":
                raise TypeError(f"one-hot actions must be numeric, got numpy dtype {arr.dtype}")
            action = torch.from_numpy(np.ascontiguousarray(arr))
        if tuple(action.shape) != shape:
            raise ValueError(
                f"one-hot actions must have shape {shape}, got "
                f"{tuple(action.shape)} (categorical_action_encoding=True takes (N,) integers)"
            )
        if action.is_complex():
            raise TypeError(f"one-hot actions must be real, got {action.dtype}")
        if action.device != self.device:
            try:
                action = action.to(self.device)
            except (RuntimeError, NotImplementedError) as exc:
                raise ValueError(
                    f"cannot move actions from {action.device} to {self.device}: {exc}"
                ) from exc
        if self.venv.validate:
            ok = ((action == 0) | (action == 1)).all() & (action.sum(-1) == 1).all()
            if not bool(ok):
                bad = ~(((action == 0) | (action == 1)).all(-1) & (action.sum(-1) == 1))
                first = int(bad.to(torch.uint8).argmax())
                raise ValueError(f"action {action[first].tolist()} of env {first} is not one-hot")
        return action.to(torch.int64).contiguous()  # no copy when it is already so

    def _observations(self, obs: torch.Tensor) -> dict[str, torch.Tensor]:
        """The observation entries of a batch of packed observations (N, *obs_shape)."""
        obs = user_obs(obs, self._coded_obs)
        if self._view is None:
            return {"observation": self._obs_entries["observation"].encode(obs)}
        parts = self._view.split(obs)
        return {key: e.encode(parts[key]) for key, e in self._obs_entries.items()}

    def _reset_mask(self, mask: torch.Tensor) -> torch.Tensor:
        """TorchRL's ``"_reset"`` as the engine's (N,) bool mask on the env's device."""
        n = self.venv.num_envs
        if mask.dtype != torch.bool:
            raise TypeError(f"'_reset' must be bool, got {mask.dtype}")
        if tuple(mask.shape) not in ((n,), (n, 1)):
            raise ValueError(
                f"'_reset' must have shape ({n},) or ({n}, 1), got {tuple(mask.shape)}"
            )
        return mask.reshape(n).to(self.venv.device)


def make_torchrl_env(
    env_id: str,
    num_envs: int,
    device: str | torch.device = "cpu",
    *,
    categorical_action_encoding: bool = False,
    validate: bool = False,
    **make_vec_kwargs: Any,
) -> TorchRLEnv:
    """Make a batched gpuvec env for TorchRL, as ``GymEnv(env_id, num_envs=N)`` would.

    ``GymEnv("CartPole-v1", num_envs=8, device="cuda")`` becomes
    ``make_torchrl_env("gpuvec/CartPole-v1", 8, device="cuda")``.

    Args:
        env_id: A gpuvec ID, with or without the ``gpuvec/`` namespace, or an ID
            registered with :func:`gpuvec_envs.register`.
        num_envs: Batch size N (the env's ``batch_size=[N]``).
        device: Torch device the envs run on; all specs and outputs live there.
        categorical_action_encoding: ``Discrete`` spaces as ``Categorical`` integers (N,)
            instead of ``OneHot`` (N, n) (``GymEnv``'s default).
        validate: Check action values (range, NaN, one-hot) and that outputs are finite,
            reading a flag back from the device every step. Off by default, so that a step
            never waits on the device; shapes, dtypes and devices are always checked.
        **make_vec_kwargs: Further ``gymnasium.make_vec`` / :class:`GpuVecEnv` keywords:
            env parameters, ``dtype``, ``max_episode_steps``, ``backend``, ``frame_skip``,
            ``obs_mode`` (MiniGrid), ...

    Returns:
        The env as a TorchRL ``EnvBase``.

    Raises:
        ValueError: an ``autoreset_mode`` other than SAME_STEP (the adapter needs it).
    """
    venv = make_same_step(
        env_id, num_envs, device, "the TorchRL adapter", validate=validate, **make_vec_kwargs
    )
    return TorchRLEnv(venv, categorical_action_encoding=categorical_action_encoding)
