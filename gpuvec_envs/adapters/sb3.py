"""Stable-Baselines3 adapter: a gpuvec vector env as an SB3 ``VecEnv``.

Replace ``make_vec_env("CartPole-v1", n_envs=8)`` with
``make_sb3_vec_env("gpuvec/CartPole-v1", n_envs=8)`` and keep the rest of an SB3 script,
SB3's ``VecEnv`` wrappers (``VecMonitor``, ``VecNormalize``, ``VecFrameStack``,
``VecVideoRecorder``) and callbacks included.

The contract is SB3's ``stable_baselines3/common/vec_env/base_vec_env.py`` as implemented by
``dummy_vec_env.py`` (SB3 2.x): ``reset()`` returns observations only and fills
``reset_infos``; ``step_wait()`` returns numpy ``(obs, rewards float32, dones bool, infos)``
with same-step autoreset, ``infos[i]["terminal_observation"]`` and
``infos[i]["TimeLimit.truncated"]`` for every finished env; ``seed()`` and ``set_options()``
take effect at the next ``reset()``.

How it differs from ``DummyVecEnv``, deliberately:

* Autoreset is the engine's own batched SAME_STEP mode; nothing loops over envs in Python
  except over the envs that finished this step.
* One device-to-host copy per step carries observations, final observations, rewards and
  both flags for the whole batch (on the CPU, the arrays are views of the step's tensors).
* ``"TimeLimit.truncated"`` is set in the infos of finished envs only (``DummyVecEnv`` also
  writes ``False`` into every unfinished env's info). SB3 reads it with
  ``info.get("TimeLimit.truncated", False)`` and only for finished envs, so the values it
  sees are identical; unfinished envs get an empty dict.
* The optional episode statistics (``monitor=True``, what ``make_vec_env``'s per-env
  ``Monitor`` gives) are kept as (N,) tensors updated inside the step's compiled call
  (:meth:`GpuVecEnv.fuse`, with the done flags and the float32 rewards), so neither
  ``VecMonitor``'s per-env Python loop nor any host-side array op is needed.
* Attributes and parameters are shared by the batch: ``get_attr`` returns the shared value
  for each requested index, ``set_attr`` must address every env.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode
from stable_baselines3.common.monitor import Monitor, ResultsWriter
from stable_baselines3.common.vec_env.base_vec_env import (
    VecEnv,
    VecEnvIndices,
    VecEnvObs,
    VecEnvStepReturn,
)

from gpuvec_envs.core import checkpoint
from gpuvec_envs.core.step import StepOut
from gpuvec_envs.core.vector import GpuVecEnv
from gpuvec_envs.registry import make_same_step

__all__ = ["SB3VecEnv", "make_sb3_vec_env"]

_OBS_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)
_ACTION_SPACES = (spaces.Box, spaces.Discrete, spaces.MultiDiscrete, spaces.MultiBinary)


def check_sb3_space(space: gym.Space, what: str, allowed: tuple[type, ...]) -> None:
    """Raise ``ValueError`` unless SB3 can use ``space`` as an env's ``what`` space.

    Args:
        space: One env's space.
        what: ``"observation"`` or ``"action"`` (for the message).
        allowed: The space types SB3 supports there.
    """
    if not isinstance(space, allowed):
        names = ", ".join(t.__name__ for t in allowed)
        raise ValueError(
            f"Stable-Baselines3 cannot use the {what} space {space}: the SB3 adapter supports "
            f"{names}"
        )
    start = getattr(space, "start", None)
    if isinstance(space, (spaces.Discrete, spaces.MultiDiscrete)) and np.any(start != 0):
        raise ValueError(
            f"Stable-Baselines3 cannot use the {what} space {space}: Discrete/MultiDiscrete "
            "spaces must start at 0"
        )


def check_host_readable(device: torch.device) -> None:
    """Raise ``ValueError`` unless tensors on ``device`` can be copied into host numpy arrays."""
    try:
        torch.zeros(1, device=device).cpu().numpy()
    except (RuntimeError, NotImplementedError, TypeError) as exc:
        raise ValueError(
            f"the env runs on device {device!s}, which Stable-Baselines3 cannot read: its "
            f"tensors cannot be copied to host numpy arrays ({type(exc).__name__}: {exc})"
        ) from exc


_NUMPY_DTYPES: dict[torch.dtype, np.dtype] = {
    t: np.dtype(n)
    for t, n in (
        (torch.bool, np.bool_),
        (torch.uint8, np.uint8),
        (torch.int8, np.int8),
        (torch.int16, np.int16),
        (torch.int32, np.int32),
        (torch.int64, np.int64),
        (torch.float16, np.float16),
        (torch.float32, np.float32),
        (torch.float64, np.float64),
    )
}


def numpy_dtype(dtype: torch.dtype) -> np.dtype:
    """The numpy dtype of a torch dtype.

    Raises:
        TypeError: a dtype numpy cannot hold (e.g. bfloat16).
    """
    out = _NUMPY_DTYPES.get(dtype)
    if out is None:
        raise TypeError(f"no numpy dtype for {dtype}")
    return out


def to_host(*tensors: torch.Tensor) -> list[np.ndarray]:
    """Copy tensors on one device to host numpy arrays in a single transfer.

    The tensors' bytes are concatenated on their device (largest item size first, so every
    block stays aligned), copied to the host with one ``.cpu()``, and split into
    C-contiguous numpy views of that one buffer. Shapes and dtypes are kept.

    Args:
        *tensors: Tensors of any shapes and numpy-representable dtypes, on one device.

    Returns:
        One numpy array per tensor, in the order given.
    """
    order = sorted(range(len(tensors)), key=lambda i: -tensors[i].element_size())
    blocks = [tensors[i].reshape(-1).contiguous().view(torch.uint8) for i in order]
    host = torch.cat(blocks).cpu().numpy()
    out: list[np.ndarray] = [None] * len(tensors)  # type: ignore[list-item]
    offset = 0
    for i, block in zip(order, blocks, strict=True):
        t = tensors[i]
        nbytes = block.numel()
        out[i] = host[offset : offset + nbytes].view(numpy_dtype(t.dtype)).reshape(t.shape)
        offset += nbytes
    return out


def step_outputs(
    out: StepOut, episode: tuple[torch.Tensor, ...]
) -> tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]:
    """Everything SB3's ``step_wait`` needs from a SAME_STEP step, inside the step's graph.

    Args:
        out: The step's outputs.
        episode: ``()``, or the running episode ``(return (N,) float64, length (N,) int64)``
            of every env (with ``monitor``).

    Returns:
        ``(episode, outputs)``: the new running episode (zero where an episode ended), and
        ``(obs (2, N, *obs_shape): [obs, final obs], flags (2, N) uint8: [done,
        truncated and not terminated], reward (N,) float32)`` followed, with ``episode``,
        by the return and length each env's episode reached at this step.
    """
    terminated, truncated = out.terminated != 0, out.truncated != 0
    done = terminated | truncated
    flags = torch.stack((done, truncated & ~terminated)).to(torch.uint8)
    outputs = (torch.stack((out.obs, out.final_obs)), flags, out.reward.to(torch.float32))
    if not episode:
        return episode, outputs
    ep_return = episode[0] + out.reward.to(episode[0].dtype)
    ep_length = episode[1] + 1
    restarted = (torch.where(done, 0.0, ep_return), torch.where(done, 0, ep_length))
    return restarted, (*outputs, ep_return, ep_length)


class SB3VecEnv(VecEnv):
    """A :class:`~gpuvec_envs.core.vector.GpuVecEnv` as a Stable-Baselines3 ``VecEnv``.

    Args:
        venv: The batched env, built with ``autoreset_mode="same_step"``. The adapter checks
            action values on the host and turns the engine's device-side value check
            (``venv.validate``) off, so that a step reads nothing back but its results.
        monitor: Add ``infos[i]["episode"] = {"r", "l", "t"}`` for every finished env, as
            SB3's ``Monitor`` wrapper does (``make_vec_env`` adds one to every env).
        monitor_file: With ``monitor``, also write each episode to this CSV file as
            ``Monitor`` does (``".monitor.csv"`` is appended unless present).

    Raises:
        ValueError: the env is not in SAME_STEP mode, a space SB3 cannot use, or a device
            whose tensors cannot be copied to host numpy arrays.

    Every step returns numpy arrays: obs (N, *obs_shape) of the observation space's dtype,
    rewards (N,) float32, dones (N,) bool, and a list of N info dicts.
    """

    def __init__(
        self, venv: GpuVecEnv, *, monitor: bool = False, monitor_file: str | None = None
    ) -> None:
        if not isinstance(venv, GpuVecEnv):
            if isinstance(getattr(venv, "unwrapped", None), GpuVecEnv):
                raise TypeError(
                    f"the SB3 adapter takes the engine's one-tensor observation, not a "
                    f"{type(venv).__name__} wrapper (e.g. MiniGrid's obs_mode='dict': use "
                    "obs_mode='image' or 'full')"
                )
            raise TypeError(f"expected a gpuvec GpuVecEnv, got {type(venv).__name__}")
        if venv.autoreset_mode is not AutoresetMode.SAME_STEP:
            raise ValueError(
                "the SB3 adapter needs a GpuVecEnv built with autoreset_mode='same_step' "
                f"(SB3 resets finished envs within the step); got {venv.autoreset_mode}"
            )
        check_sb3_space(venv.single_observation_space, "observation", _OBS_SPACES)
        check_sb3_space(venv.single_action_space, "action", _ACTION_SPACES)
        check_host_readable(venv.device)
        if monitor_file is not None and not monitor:
            raise ValueError("monitor_file needs monitor=True")
        venv.validate = False  # action values are checked here, on the host
        self.venv = venv
        self.render_mode = venv.render_mode  # read by VecEnv.__init__ through get_attr
        super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)
        self.metadata = {**venv.metadata, **self.metadata}
        self._actions: torch.Tensor | None = None
        self._monitor = monitor
        self._t_start = time.time()
        # running episode return and length per env, carried through the fused step
        self._episode: tuple[torch.Tensor, ...] = ()
        self._results_writer: ResultsWriter | None = None
        if monitor_file is not None:
            env_id = venv.spec.id if venv.spec is not None else type(venv.env_def).__name__
            self._results_writer = ResultsWriter(
                monitor_file, header={"t_start": self._t_start, "env_id": env_id}
            )
        space = self.action_space
        self._discrete_n = int(space.n) if isinstance(space, spaces.Discrete) else None
        # CPU tensors are read in place; other devices pack every output into one copy
        self._pack = venv.device.type != "cpu"
        # the step and all per-step array work below (flags, casts, episode statistics)
        self._fused_step = venv.fuse(step_outputs)

    # -- properties ---------------------------------------------------------------------
    @property
    def spec(self) -> Any:
        """The gymnasium ``EnvSpec`` of the wrapped env (``None`` if built directly)."""
        return self.venv.spec

    @property
    def device(self) -> torch.device:
        """Device the env runs on."""
        return self.venv.device

    # -- VecEnv API ---------------------------------------------------------------------
    def reset(self) -> VecEnvObs:
        """Reset every env with the seeds and options set since the last reset.

        Returns:
            Observations, shape (N, *obs_shape). ``reset_infos`` holds N empty dicts.
        """
        seed = self._seed_argument(self._seeds)
        groups = self._option_groups(self._options)
        obs_t, _ = self.venv.reset(seed=seed, options=groups[0][0] or None)
        n = self.num_envs
        for options, indices in groups[1:]:
            mask = torch.zeros(n, dtype=torch.bool)
            mask[indices] = True
            obs_t, _ = self.venv.reset(seed=seed, options={**options, "reset_mask": mask})
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{} for _ in range(n)]
        if self._monitor:
            dev = self.venv.device
            ret_dtype = torch.float32 if dev.type == "mps" else torch.float64
            self._episode = (
                torch.zeros(n, dtype=ret_dtype, device=dev),
                torch.zeros(n, dtype=torch.int64, device=dev),
            )
        (obs,) = self._to_numpy(obs_t)
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        """Check the actions on the host and hand them to the device.

        Args:
            actions: Shape (N, *action_shape) (a Discrete space also takes (N, 1)).

        Raises:
            ValueError: wrong shape, out-of-range discrete or non-finite continuous actions.
            TypeError: non-integer actions for a discrete space.
        """
        arr = np.asarray(actions.cpu() if isinstance(actions, torch.Tensor) else actions)
        n = self.num_envs
        if self._discrete_n is not None:
            if arr.shape == (n, 1):
                arr = arr.reshape(n)
            if arr.dtype.kind not in "iu":
                raise TypeError(f"{self.action_space} expects integer actions, got {arr.dtype}")
            # one reduction: viewed as unsigned, a negative action is a huge one
            if arr.shape == (n,) and n and arr.view(f"u{arr.itemsize}").max() >= self._discrete_n:
                i = int(np.flatnonzero((arr < 0) | (arr >= self._discrete_n))[0])
                raise ValueError(f"action {arr[i]} of env {i} is outside [0, {self._discrete_n})")
        elif arr.dtype.kind == "f" and not np.isfinite(arr).all():
            i = int(np.flatnonzero(~np.isfinite(arr.reshape(n, -1)).all(1))[0])
            raise ValueError(f"action of env {i} is not finite: {arr[i]}")
        self._actions = self.venv.prepare_action(arr)

    def step_wait(self) -> VecEnvStepReturn:
        """Step every env, autoresetting finished ones within the step.

        Returns:
            ``(obs, rewards, dones, infos)``: obs (N, *obs_shape), rewards (N,) float32,
            dones (N,) bool, infos a list of N dicts; a finished env's dict holds
            ``"terminal_observation"`` (its last observation before the reset),
            ``"TimeLimit.truncated"`` (truncated and not terminated) and, with ``monitor``,
            ``"episode"``. Other dicts are empty.
        """
        if self._actions is None:
            raise RuntimeError("call step_async() before step_wait()")
        self._episode, outputs = self._fused_step(self._episode, self._actions)
        self._actions = None
        obs_pair, flags, rewards, *episode = self._to_numpy(*outputs)
        if self.venv._coded_obs:  # a bool space's uint8 0/1 bytes, as bool
            obs_pair = obs_pair.view(np.bool_)
        obs, final_obs = obs_pair[0], obs_pair[1]
        dones, time_limit = flags.view(np.bool_)
        # SB3's contract: one dict per env; only finished envs' dicts get filled below
        infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]
        finished = dones.nonzero()[0]
        if finished.size:
            index = finished.tolist()
            limits = time_limit[finished].tolist()
            if self._monitor:
                self._add_episodes(finished, index, limits, final_obs, episode, infos)
            else:
                for i, limit in zip(index, limits, strict=True):
                    infos[i] = {"terminal_observation": final_obs[i], "TimeLimit.truncated": limit}
        return obs, rewards, dones, infos

    def close(self) -> None:
        """Close the env and the monitor file."""
        if self._results_writer is not None:
            self._results_writer.close()
            self._results_writer = None
        self.venv.close()

    def get_images(self) -> Sequence[np.ndarray | None]:
        """One RGB frame (H, W, 3) uint8 per env with ``render_mode="rgb_array"``."""
        if self.render_mode != "rgb_array":
            warnings.warn(
                f"The render mode is {self.render_mode}, but get_images() needs 'rgb_array'",
                stacklevel=2,
            )
            return [None] * self.num_envs
        frames = self.venv.render()
        return [None] * self.num_envs if frames is None else list(frames)

    def render(self, mode: str | None = None) -> np.ndarray | None:
        """Frames of all envs tiled into one image, as SB3's ``VecEnv.render``."""
        return super().render(mode=mode)

    # -- checkpoints -----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The env's checkpoint (:meth:`GpuVecEnv.state_dict`) plus the adapter's own state.

        That is the running episode return (N,) float64 and length (N,) int64 of
        ``monitor``, the time since the adapter started [s] (episode ``"t"``), and the
        seeds set by :meth:`seed` for the next reset. Reset options are not included.
        """
        return {
            "format_version": checkpoint.FORMAT_VERSION,
            "venv": self.venv.state_dict(),
            "monitor": self._monitor,
            "episode": [t.detach().clone() for t in self._episode],
            "elapsed_time": time.time() - self._t_start,
            "seeds": list(self._seeds),
        }

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> None:
        """Restore a :meth:`state_dict`; later steps are bitwise the saved adapter's.

        Raises:
            TypeError, ValueError: a checkpoint of another env or adapter configuration
                (see :meth:`GpuVecEnv.load_state_dict`); nothing is changed.
        """
        d = state_dict
        if not isinstance(d, dict):
            raise TypeError(f"a state dict must be a dict, got {type(d).__name__}")
        keys = {"format_version", "venv", "monitor", "episode", "elapsed_time", "seeds"}
        if set(d) != keys and (strict or not keys <= set(d)):
            raise ValueError(
                f"SB3VecEnv state dict: missing keys {sorted(keys - set(d))}, unexpected "
                f"keys {sorted(set(d) - keys)}"
            )
        if d["format_version"] != checkpoint.FORMAT_VERSION:
            raise ValueError(f"unsupported checkpoint format_version {d['format_version']!r}")
        apply = checkpoint.prepare_load(self.venv, d["venv"], strict)
        if d["monitor"] != self._monitor:
            raise ValueError(f"checkpoint has monitor={d['monitor']}, this adapter {self._monitor}")
        seeds = d["seeds"]
        if not isinstance(seeds, list) or len(seeds) != self.num_envs:
            raise ValueError(f"seeds must be a list of {self.num_envs} entries, got {seeds!r:.80}")
        if not isinstance(d["episode"], (list, tuple)):
            raise TypeError(f"episode must be a list, got {type(d['episode']).__name__}")
        episode = tuple(d["episode"])
        if episode:
            n, dev = self.num_envs, self.venv.device
            like = (torch.float32 if dev.type == "mps" else torch.float64, torch.int64)
            if len(episode) != 2 or not all(
                isinstance(t, torch.Tensor) and t.shape == (n,) and t.dtype == dt
                for t, dt in zip(episode, like, strict=True)
            ):
                raise ValueError(f"episode must be two (N,) tensors {like}, got {episode!r:.80}")
            episode = tuple(t.detach().to(dev, copy=True) for t in episode)
        elif self._monitor and d["venv"]["state"] is not None:
            raise ValueError("a monitored adapter's checkpoint after reset needs its episode")
        elapsed = d["elapsed_time"]
        if isinstance(elapsed, bool) or not isinstance(elapsed, (int, float)):
            raise TypeError(f"elapsed_time must be a number, got {type(elapsed).__name__}")
        apply()
        self._episode = episode
        self._t_start = time.time() - float(elapsed)
        self._seeds = list(seeds)
        self._actions = None

    # -- attributes and methods, shared by the batch --------------------------------------
    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """The value of a batch-wide attribute, once per requested env.

        Looks up env parameters first (``"params"`` or one of its fields, e.g.
        ``"masspole"``), then attributes of the :class:`GpuVecEnv`.

        Raises:
            AttributeError: neither a parameter nor an attribute of the env.
        """
        value = self._lookup(attr_name)
        return [value] * len(self._index_list(indices))

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        """Set a batch-wide attribute; ``indices`` must address every env.

        ``"params"`` (a params dataclass) or a params field replaces the env parameters
        (see :meth:`GpuVecEnv.set_params`; the compiled backend recompiles on the next
        step). Other names are set on the :class:`GpuVecEnv`.

        Raises:
            ValueError: ``indices`` leave some envs out (the batch shares its attributes).
        """
        self._check_all(indices, f"set_attr({attr_name!r})")
        if attr_name == "params":
            self.venv.set_params(value)
        elif attr_name in self._param_fields():
            self.venv.set_params(**{attr_name: value})
        else:
            setattr(self.venv, attr_name, value)

    def env_method(
        self,
        method_name: str,
        *method_args: Any,
        indices: VecEnvIndices = None,
        **method_kwargs: Any,
    ) -> list[Any]:
        """Call a method of the :class:`GpuVecEnv` once; its result is repeated per index.

        The call acts on the whole batch, so ``indices`` must address every env.
        """
        self._check_all(indices, f"env_method({method_name!r})")
        result = getattr(self.venv, method_name)(*method_args, **method_kwargs)
        return [result] * len(self._index_list(indices))

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None
    ) -> list[bool]:
        """Whether each env behaves as if wrapped in ``wrapper_class``.

        The built-in episode statistics count as SB3's ``Monitor`` and the engine's time
        limit as gymnasium's ``TimeLimit``; nothing else wraps the envs.
        """
        present: list[type] = []
        if self._monitor:
            present.append(Monitor)
        if self.venv.cfg.max_episode_steps is not None:
            present.append(gym.wrappers.TimeLimit)
        wrapped = any(issubclass(w, wrapper_class) for w in present)
        return [wrapped] * len(self._index_list(indices))

    def __repr__(self) -> str:
        """The wrapped env."""
        return f"SB3VecEnv({self.venv!r}, monitor={self._monitor})"

    # -- internals ----------------------------------------------------------------------
    def _to_numpy(self, *tensors: torch.Tensor) -> list[np.ndarray]:
        """Host arrays of a step's outputs: one packed copy, or views of fresh CPU tensors."""
        if self._pack:
            return to_host(*tensors)
        return [np.ascontiguousarray(t.numpy()) for t in tensors]  # no copy if contiguous

    def _add_episodes(
        self,
        finished: np.ndarray,
        index: list[int],
        limits: list[bool],
        final_obs: np.ndarray,
        episode: list[np.ndarray],
        infos: list[dict[str, Any]],
    ) -> None:
        """Fill the infos of the finished envs, ``"episode"`` (as ``Monitor``) included."""
        t = round(time.time() - self._t_start, 6)
        returns, lengths = (a[finished].tolist() for a in episode)
        for i, limit, r, length in zip(index, limits, returns, lengths, strict=True):
            infos[i] = {
                "terminal_observation": final_obs[i],
                "TimeLimit.truncated": limit,
                # Monitor's round(r, 6), skipped where it is the identity (integral r)
                "episode": {"r": r if r.is_integer() else round(r, 6), "l": length, "t": t},
            }
        if self._results_writer is not None:
            for i in index:
                self._results_writer.write_row(infos[i]["episode"])

    def _param_fields(self) -> set[str]:
        return set(type(self.venv.params).__dataclass_fields__)

    def _lookup(self, name: str) -> Any:
        if name == "params":
            return self.venv.params
        if name in self._param_fields():
            return getattr(self.venv.params, name)
        if name == "render_mode":
            return self.venv.render_mode
        return getattr(self.venv, name)

    def _index_list(self, indices: VecEnvIndices) -> list[int]:
        out = list(self._get_indices(indices))
        n = self.num_envs
        for i in out:
            if not -n <= i < n:
                raise IndexError(f"env index {i} out of range for {n} envs")
        return out

    def _check_all(self, indices: VecEnvIndices, what: str) -> None:
        if indices is None:
            return
        n = self.num_envs
        if {i % n for i in self._index_list(indices)} != set(range(n)):
            raise ValueError(
                f"{what} addresses only some envs, but a gpuvec batch shares its attributes "
                "and parameters: use indices=None"
            )

    def _seed_argument(self, seeds: list[int | None]) -> int | list[int | None] | None:
        """The engine's ``reset(seed=...)`` for SB3's per-env seed list."""
        if all(s is None for s in seeds):
            return None
        first = seeds[0]
        if first is not None and all(s == first + i for i, s in enumerate(seeds)):
            return int(first)
        return list(seeds)

    @staticmethod
    def _option_groups(options: list[dict[str, Any]]) -> list[tuple[dict[str, Any], list[int]]]:
        """Group env indices by equal reset options (usually one group)."""
        groups: list[tuple[dict[str, Any], list[int]]] = []
        for i, opts in enumerate(options):
            for g_opts, members in groups:
                try:
                    same = bool(g_opts == opts)
                except (ValueError, TypeError):  # e.g. arrays inside: treat as different
                    same = g_opts is opts
                if same:
                    members.append(i)
                    break
            else:
                groups.append((opts, [i]))
        return groups


def make_sb3_vec_env(
    env_id: str,
    n_envs: int = 1,
    seed: int | None = None,
    device: str | torch.device = "cpu",
    env_kwargs: dict[str, Any] | None = None,
    *,
    backend: str = "auto",
    monitor: bool = True,
    monitor_dir: str | None = None,
) -> SB3VecEnv:
    """Make a batched gpuvec env for Stable-Baselines3, as SB3's ``make_vec_env`` does.

    ``make_vec_env("CartPole-v1", n_envs=8, seed=0)`` becomes
    ``make_sb3_vec_env("gpuvec/CartPole-v1", n_envs=8, seed=0)``.

    Args:
        env_id: A gpuvec ID, with or without the ``gpuvec/`` namespace, or an ID
            registered with :func:`gpuvec_envs.register`.
        n_envs: Number of envs in the batch.
        seed: Seeds env ``i`` with ``seed + i`` at the first ``reset()`` (as
            ``make_vec_env``) and seeds the action space; ``None``: random.
        device: Torch device the envs run on (SB3 gets numpy arrays either way).
        env_kwargs: Further :class:`GpuVecEnv` keywords: env parameters, ``dtype``,
            ``max_episode_steps``, ``frame_skip``, ``render_mode``...
        backend: ``"auto"``/``"compile"`` (one ``torch.compile`` graph per step) or
            ``"eager"`` (no compile time; slower steps).
        monitor: Episode statistics in ``infos[i]["episode"]``, as the ``Monitor`` wrapper
            that ``make_vec_env`` adds to every env.
        monitor_dir: With ``monitor``, write episodes to ``<monitor_dir>/0.monitor.csv``
            (readable by SB3's ``load_results``).

    Returns:
        The env as an SB3 ``VecEnv``.
    """
    kwargs = dict(env_kwargs or {})
    kwargs.setdefault("backend", backend)
    venv = make_same_step(env_id, n_envs, device, "SB3", validate=False, **kwargs)
    monitor_file = None
    if monitor_dir is not None:
        os.makedirs(monitor_dir, exist_ok=True)
        monitor_file = os.path.join(monitor_dir, "0")
    env = SB3VecEnv(venv, monitor=monitor, monitor_file=monitor_file)
    if seed is not None:
        env.seed(seed)
        env.action_space.seed(seed)
    return env
