"""The one generic vector-env shell every gpuvec environment runs in: what users call.

:class:`GpuVecEnv` is a :class:`gymnasium.vector.VectorEnv` over any :class:`EnvDef`. It owns
spaces, device, dtype, the time limit, the three gymnasium autoreset modes, seeding,
backends and rendering; it checks what users pass with :mod:`gpuvec_envs.core.arguments`
and steps with :func:`gpuvec_envs.core.step.pure_step`, compiled as one graph by
:mod:`gpuvec_envs.compiler`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space
from torch.utils import _pytree as pytree

from gpuvec_envs.compiler import Backend, CompileReport, CompilerOptions, resolve, threads
from gpuvec_envs.core import checkpoint
from gpuvec_envs.core.allocator import retain_freed_memory
from gpuvec_envs.core.arguments import (
    _MAX_SEED,
    action_tensor,
    as_autoreset_mode,
    as_device,
    as_dtype,
    check_action_values,
    env_indices,
    reset_mask_tensor,
    resolve_env_def,
    seed_tensor,
)
from gpuvec_envs.core.eager import host_eager
from gpuvec_envs.core.env import EnvDef, params_from_kwargs, select
from gpuvec_envs.core.finite import check_finite, named_leaves
from gpuvec_envs.core.rng import RESET, Rng, keys_from_seeds
from gpuvec_envs.core.step import (
    ShellState,
    StepConfig,
    StepOut,
    bool_observation,
    contiguous,
    fused_post_step,
    pure_step,
    reset_rows,
    user_obs,
)
from gpuvec_envs.render.viewer import HUMAN_MAX_ENVS, HumanWindow, tile


class GpuVecEnv(gym.vector.VectorEnv):
    """A batch of ``num_envs`` copies of one env, stepped as tensors on one device.

    Args:
        env_def: The environment (an :class:`EnvDef` or ``"module:Class"``).
        num_envs: Batch size N.
        device: Torch device of all state and outputs; one torch cannot use (no CUDA
            build, no GPU visible, an index past the last GPU, an unknown string) is a
            ``ValueError`` here.
        dtype: Float dtype of the simulation state, observations and rewards.
        max_episode_steps: Truncate episodes after this many simulation steps (``None``:
            never).
        autoreset_mode: gymnasium's ``NEXT_STEP`` (default), ``SAME_STEP`` or ``DISABLED``.
        backend: ``"auto"`` (default), ``"compile"``, ``"background"`` or ``"eager"``.
            ``compile`` compiles the step at the first ``step()`` (seconds to a minute on
            a cold inductor cache) and is bitwise reproducible per seed. ``background``
            steps eagerly at first and compiles off the caller's path, then switches
            (the state carries over exactly; float results can differ from the eager
            steps' in the last bit, at a timing-dependent step; on CUDA the switch also
            captures the CUDA graph). ``auto`` is ``background``. See docs/performance.md.
        validate: Check every action's shape, dtype, device and values (range, NaN), and
            that every step and reset leaves state, reward and observations finite
            (``FloatingPointError`` naming the env and field otherwise). The value checks
            read two values back from the device per step; ``False`` skips them (see
            :meth:`check_finite`).
        frame_skip: Repeat each action this many simulation steps inside one step, summing
            rewards and stopping at the first termination or truncation (default 1). An
            env whose params have a ``frame_skip`` field (MuJoCo's physics substeps per
            step, as gymnasium's ``frame_skip`` there) takes it as that parameter instead.
        render_mode: ``None`` or a mode in the env's ``metadata["render_modes"]``.
        num_threads: CPU threads of each step: ``"auto"`` (default: all of
            ``torch.get_num_threads()``, fewer while calls run far slower than their calm
            time, as when another process holds a core) or a positive int. Results do not
            depend on it (:mod:`gpuvec_envs.compiler.threads`).
        params: The env's params dataclass; its fields may also be given as keywords.
        compiler_options: Switches of the compiled backend: a dict of overrides or a
            :class:`~gpuvec_envs.compiler.CompilerOptions` (see docs/compiler.md; the
            defaults come from the ``GPUVEC_COMPILER`` environment variable).
        **param_kwargs: Env parameters (fields of the params dataclass).

    Raises:
        TypeError: on an unknown keyword argument or compiler option.
        ValueError: on a malformed ``GPUVEC_COMPILER``.
    """

    def __init__(
        self,
        env_def: EnvDef | str,
        num_envs: int = 1,
        *,
        device: str | torch.device = "cpu",
        dtype: Any = torch.float32,
        max_episode_steps: int | None = None,
        autoreset_mode: str | AutoresetMode = AutoresetMode.NEXT_STEP,
        backend: str = "auto",
        validate: bool = True,
        frame_skip: int | None = None,
        render_mode: str | None = None,
        num_threads: int | str = "auto",
        params: Any = None,
        compiler_options: CompilerOptions | Mapping[str, Any] | None = None,
        **param_kwargs: Any,
    ) -> None:
        self.compiler_options = resolve(compiler_options)
        self.env_def = resolve_env_def(env_def)
        self.num_threads = threads.check_num_threads(num_threads)
        self._threads = threads.ThreadControl(self.num_threads)
        if frame_skip is not None and _own_frame_skip(self.env_def):
            param_kwargs["frame_skip"], frame_skip = frame_skip, None
        frame_skip = 1 if frame_skip is None else frame_skip
        self.params = params_from_kwargs(self.env_def.params_type, params, param_kwargs)
        if not isinstance(num_envs, int) or isinstance(num_envs, bool) or num_envs < 1:
            raise ValueError(f"num_envs must be a positive int, got {num_envs!r}")
        if max_episode_steps is not None and (
            not isinstance(max_episode_steps, int) or not 1 <= max_episode_steps < 2**31
        ):
            raise ValueError(
                f"max_episode_steps must be an int in [1, 2**31) or None, got {max_episode_steps!r}"
            )
        if not isinstance(frame_skip, int) or frame_skip < 1:
            raise ValueError(f"frame_skip must be a positive int, got {frame_skip!r}")
        modes = self.env_def.metadata.get("render_modes", [])
        if render_mode is not None and render_mode not in modes:
            raise ValueError(f"render_mode {render_mode!r} not in {modes}")
        self.num_envs = num_envs
        self.device = as_device(device)
        if self.device.type == "cpu" and self.compiler_options.retain_memory:
            retain_freed_memory()  # fresh step outputs must not page-fault every step
        self.dtype = as_dtype(dtype)
        self.autoreset_mode = as_autoreset_mode(autoreset_mode)
        self.validate = validate
        self.render_mode = render_mode
        self._window: HumanWindow | None = None
        if render_mode == "human":  # fails here, not at the first step, without pygame
            fps = self.env_def.metadata.get("render_fps")
            self._window = HumanWindow(f"gpuvec {type(self.env_def).__name__}", fps)
        self.cfg = StepConfig(self.autoreset_mode, max_episode_steps, frame_skip, self.dtype)
        # the step() graph also computes the finite probe that validate reads
        # costly resets (EnvDef.costly_reset) run after the step, for the envs that reset only
        self._reset_outside = bool(self.env_def.costly_reset) and (
            self.autoreset_mode is not AutoresetMode.DISABLED
        )
        self._step_cfg = dataclasses.replace(
            self.cfg, check_finite=bool(validate), reset_outside=self._reset_outside
        )
        self.metadata = {**self.env_def.metadata, "autoreset_mode": self.autoreset_mode}

        self.single_observation_space = self.env_def.observation_space(self.params, self.dtype)
        # a bool space's observation may come as uint8 0/1 (EnvDef.observation), made bool here
        self._coded_obs = bool_observation(self.single_observation_space)
        self.single_action_space = self.env_def.action_space(self.params, self.dtype)
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._action_shape = (num_envs, *self.single_action_space.shape)
        discrete = isinstance(self.single_action_space, gym.spaces.Discrete)
        self._action_dtype = torch.int64 if discrete else self.dtype
        # the numpy dtype of actions a CPU env takes as they are (see prepare_action)
        self._ready_numpy_dtype: np.dtype | None = None
        if self.device.type == "cpu":
            self._ready_numpy_dtype = torch.empty(0, dtype=self._action_dtype).numpy().dtype

        self._backend_choice = backend
        self._step = self._backend(pure_step, (self.env_def, self.params, self._step_cfg), backend)
        # steps of earlier params, so that set_params back to them reuses their graphs
        self._steps_by_params: dict[Any, Backend] = {}
        self._state: ShellState | None = None
        self._episode_names: tuple[str, ...] | None = None  # EnvDef.episode_info's keys

    # -- properties ---------------------------------------------------------------------
    @property
    def _state(self) -> ShellState | None:
        """The current shell state (compiled steps write the next one into its tensors)."""
        return self._state_value

    @_state.setter
    def _state(self, value: ShellState | None) -> None:
        self._state_value = value
        self._obs_of_state: torch.Tensor | None = None  # any new state drops its obs

    def _set_state(self, state: ShellState, obs: torch.Tensor) -> None:
        """Set the state with its observation (N, *obs_shape), for :meth:`_current_obs`.

        Only for an ``obs`` that no caller holds: a caller could change it in place.
        """
        self._state = state
        self._obs_of_state = obs

    def _user_obs(self, obs: torch.Tensor) -> torch.Tensor:
        """``obs`` as :meth:`step` returns it (:func:`user_obs`)."""
        return user_obs(obs, self._coded_obs)

    def _current_obs(self) -> torch.Tensor:
        """The observation (N, *obs_shape) of the current state, computed unless set along.

        As the env computes it (a bool space's may be uint8: see :meth:`_user_obs`).
        """
        obs = self._obs_of_state
        if obs is None:
            obs = self.env_def.observation(self.params, self._state.env)
        return obs

    def _backend(
        self, fn: Callable[..., Any], bound: tuple[Any, ...], backend: str, suffix: str = ""
    ) -> Backend:
        """A state-first :class:`Backend` of a step function, with the env's compiler options."""
        tag = f"{type(self.env_def).__name__}_{id(self):x}{suffix}"
        return Backend(
            fn,
            bound,
            backend,
            tag,
            state_first=True,
            compiler=self.compiler_options,
            options=threads.inductor_options(),
            eager_context=host_eager,
            yield_to_child=True,  # paid by settle(), after ThreadControl's timing
            label=f"{type(self.env_def).__name__} env {id(self):x} "
            f"(num_envs={self.num_envs}, {self.device})",
        )

    @property
    def backend(self) -> str:
        """How steps run now: ``"eager"`` or ``"compile"``.

        With ``backend="auto"``/``"background"`` on the CPU this is ``"eager"`` until the
        compiled step takes over (see :meth:`wait_compiled`).
        """
        return self._step.name

    def wait_compiled(self, timeout: float | None = None) -> bool:
        """Wait for a background compile of the step to finish (``timeout`` s at most).

        With ``backend="auto"`` or ``"background"``, steps run eagerly until the compiled
        step is ready; this starts the compile if the eager steps had not yet run long
        enough to start it, waits for it and builds the compiled call, so that every later
        ``step()`` runs compiled (or, if the compile failed, eagerly for good). Returns
        False on timeout; True at once for the ``compile`` and ``eager`` backends and
        before the first ``reset()``.
        """
        step = self._step
        if step.mode in ("compile", "eager") or self._state is None or step.report is not None:
            return True
        if step.eager_calls == 0:  # the first step decides CPU/CUDA; run it on a copy
            step(contiguous(self._state), self._example_action())
        step.start_background((self._state, self._example_action()))
        if not step.wait(timeout):
            return False
        if step.report is None:  # build the compiled call now, on a copy of the state
            step(contiguous(self._state), self._example_action())
        return True

    def _example_action(self) -> torch.Tensor:
        """Zeros of the action shape, dtype and device (an argument for compiling)."""
        return torch.zeros(self._action_shape, dtype=self._action_dtype, device=self.device)

    @property
    def compile_report(self) -> CompileReport | None:
        """How the step was compiled: strategy, passes, fallbacks, seconds.

        None before the first compiled step (and on the eager backend).
        """
        return self._step.report

    @property
    def state(self) -> ShellState:
        """A copy of the current shell state (to change it, see :meth:`set_env_state`).

        A copy, because compiled steps write the next state into the current one's tensors.
        """
        if self._state is None:
            raise RuntimeError("call reset() before reading the state")
        return contiguous(self._state)

    def set_env_state(self, env_state: Any) -> None:
        """Overwrite the env's physical state (the env's own NamedTuple of (N, ...) tensors).

        Used for state injection (parity tests, curricula); counters and keys are kept.
        """
        if self._state is None:
            raise RuntimeError("call reset() before setting the state")
        ref = self._state.env
        for name, new, old in zip(ref._fields, env_state, ref, strict=True):
            # Nested NamedTuples (e.g. MinAtar's game state) are checked leaf by leaf.
            for a, b in zip(pytree.tree_leaves(new), pytree.tree_leaves(old), strict=True):
                if a.shape != b.shape or a.dtype != b.dtype or a.device != b.device:
                    raise ValueError(
                        f"state field {name!r}: expected {tuple(b.shape)} {b.dtype} on "
                        f"{b.device}, got {tuple(a.shape)} {a.dtype} on {a.device}"
                    )
        self._state = self._state._replace(env=contiguous(type(ref)(*env_state)))

    def set_params(self, params: Any = None, **param_kwargs: Any) -> None:
        """Replace the env parameters (a params dataclass and/or changed fields as keywords).

        Takes effect from the next step or reset; the compiled backend compiles a new graph
        (or reuses the one of the last few params set before).
        Spaces keep their type, shape and dtype; their bounds follow the new parameters.

        Raises:
            TypeError: on an unknown field.
            ValueError: when the new parameters change a space's type, shape or dtype.
        """
        new = params_from_kwargs(
            self.env_def.params_type, self.params if params is None else params, param_kwargs
        )
        obs_space = self.env_def.observation_space(new, self.dtype)
        act_space = self.env_def.action_space(new, self.dtype)
        pairs = ((self.single_observation_space, obs_space), (self.single_action_space, act_space))
        for old, sp in pairs:
            if type(old) is not type(sp) or old.shape != sp.shape or old.dtype != sp.dtype:
                raise ValueError(f"new params change a space from {old} to {sp}")
        self.single_observation_space, self.single_action_space = obs_space, act_space
        self.observation_space = batch_space(obs_space, self.num_envs)
        self.action_space = batch_space(act_space, self.num_envs)
        cache = self._steps_by_params
        cache[self.params] = self._step
        while len(cache) > 4:  # bounded: each holds a compiled graph and its buffers
            del cache[next(iter(cache))]
        self.params = new
        self._obs_of_state = None  # the observation may depend on the params
        step = cache.pop(new, None)
        if step is None:
            step = self._backend(
                pure_step, (self.env_def, new, self._step_cfg), self._backend_choice
            )
        self._step = step

    # -- gymnasium API ------------------------------------------------------------------
    def reset(
        self,
        *,
        seed: int | Sequence[int | None] | None = None,
        options: dict[str, Any] | None = None,
    ) -> tuple[torch.Tensor, dict[str, Any]]:
        """Reset all envs, or those in ``options["reset_mask"]`` (bool, shape (N,)).

        ``seed=s`` seeds env i with ``s + i``; a list gives one seed (or ``None``) per env.
        Other options go to the env's reset sampler.

        Returns:
            ``(obs, info)`` with obs of shape (N, *obs_shape) for all envs; ``info`` holds
            the env's terms (:meth:`EnvDef.info`), if any.
        """
        options = dict(options or {})
        mask = self._reset_mask(options.pop("reset_mask", None))
        seeds = seed_tensor(seed, self.num_envs, self.device)
        n, dev = self.num_envs, self.device
        old = self._state
        if old is None or seeds is not None:
            if seeds is None:
                seeds = seed_tensor(
                    int(np.random.SeedSequence().entropy % (_MAX_SEED - n)), n, self.device
                )
            key0, key1 = keys_from_seeds(seeds)
            counter = torch.zeros(n, dtype=torch.int64, device=dev)
            if old is not None and mask is not None:
                key0 = torch.where(mask, key0, old.key0)
                key1 = torch.where(mask, key1, old.key1)
                counter = torch.where(mask, counter, old.counter)
        else:
            key0, key1, counter = old.key0, old.key1, old.counter
        zeros = torch.zeros(n, dtype=torch.int32, device=dev)
        if self.env_def.costly_reset and old is not None and mask is not None:
            idx = mask.nonzero().squeeze(1)  # build the masked envs' states only
            rng = Rng(key0[idx], key1[idx], counter[idx], RESET)
            part = self.env_def.reset(self.params, rng, self.dtype, options or None)
            fresh = pytree.tree_map(lambda a, b: a.index_copy(0, idx, b), old.env, part)
        else:
            rng = Rng(key0, key1, counter, RESET)
            fresh = self.env_def.reset(self.params, rng, self.dtype, options or None)
        state = ShellState(contiguous(fresh), zeros, counter + 1, key0, key1, zeros.clone())
        if old is not None and mask is not None:
            state = select(mask, state, old)
        self._state = state
        obs = self.env_def.observation(self.params, state.env)
        if self.validate:
            self._check_outputs("reset", obs)
        if self._window is not None:
            self.render()
        return self._user_obs(obs), dict(self.env_def.info(self.params, state.env) or {})

    def step(
        self, actions: Any
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step all envs with ``actions`` of shape (N, *action_shape).

        Returns:
            ``(obs, reward, terminated, truncated, info)`` on the env's device: obs
            (N, *obs_shape), reward (N,) float, flags (N,) bool. ``info`` holds the env's
            terms of the returned states (:meth:`EnvDef.info`, e.g. reward terms), if any.
            In SAME_STEP mode it also holds ``final_obs`` (N, *obs_shape; the pre-reset
            obs) with mask ``_final_obs``, and ``final_info`` (the env's terms of the
            pre-reset states, each with a ``_<key>`` mask of the envs that ended; ``{}``
            for an env without terms) with mask ``_final_info``.
        """
        # the checks and flags run with the step's thread count too: their parallel ops
        # would otherwise wait for a thread on a busy core
        out = self._threads(self._step_all, actions)
        self._step.settle()
        if self._window is not None:
            self.render()
        return out

    def _step_all(
        self, actions: Any
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """:meth:`step` but the rendering."""
        action = self.prepare_action(actions)
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        out = self._step(self._state, action)
        if out.resets is not None:
            with host_eager():
                out = reset_rows(self.env_def, self.params, self._step_cfg, out)
        self._state = out.state
        if self.validate and (out.probe is None or out.probe.item() != 0):  # NaN: not finite
            self._check_outputs("step", out.obs, out.reward, out.final_obs)
        terminated = out.terminated.view(torch.bool)
        truncated = out.truncated.view(torch.bool)
        info: dict[str, Any] = dict(out.info or {})
        done = terminated | truncated if out.final_obs is not None or out.episode else None
        if out.final_obs is not None:
            final_info: dict[str, Any] = {}
            for key, value in (out.final_info or {}).items():
                final_info[key] = value
                final_info[f"_{key}"] = done
            info.update(
                final_obs=self._user_obs(out.final_obs),
                _final_obs=done,
                final_info=final_info,
                _final_info=done,
            )
        if out.episode:
            if self._episode_names is None:  # the env's static keys, once
                self._episode_names = tuple(self.env_def.episode_info(self.params, out.state.env))
            for name, value in zip(self._episode_names, out.episode, strict=True):
                info[name] = value
                info["_" + name] = done
        return self._user_obs(out.obs), out.reward, terminated, truncated, info

    # -- checkpoints and numerical faults -------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """Everything later steps depend on, as cloned tensors and plain values.

        Holds the env identity (EnvDef class, registered ID), params, batch size, dtype,
        device, autoreset mode, time limit, frame skip and format version, and the shell
        state (the env's state, step counters, RNG keys and counters, pending resets); see
        :func:`gpuvec_envs.core.checkpoint.env_state_dict`. It pickles and loads with
        ``torch.load(..., weights_only=True)``.
        """
        return checkpoint.env_state_dict(self)

    def load_state_dict(self, state_dict: dict[str, Any], strict: bool = True) -> None:
        """Restore a :meth:`state_dict` (from any device) into this env.

        Every later step is then bitwise the one the saved env would have taken.

        Raises:
            TypeError, ValueError: another env, ``num_envs``, dtype, autoreset mode, time
                limit or frame skip, missing keys, wrong tensors (see
                :func:`gpuvec_envs.core.checkpoint.prepare_load`); the env is unchanged.
        """
        checkpoint.prepare_load(self, state_dict, strict)()

    def check_finite(self) -> None:
        """Raise ``FloatingPointError`` naming the first env and state field with NaN/inf.

        ``validate=True`` runs this after every step and reset; with ``validate=False``,
        call it when wanted (it reads one value back from the device).
        """
        if self._state is not None:
            check_finite(named_leaves(self._state.env, "state"), "the env")

    def _check_outputs(self, when: str, obs: torch.Tensor, *more: torch.Tensor | None) -> None:
        fields = [*named_leaves(self._state.env, "state"), ("obs", obs)]
        named = zip(("reward", "final_obs"), more, strict=False)
        fields += [(n, t) for n, t in named if t is not None]
        check_finite(fields, when)

    def fuse(
        self,
        post: Callable[[StepOut, Any], tuple[Any, Any]],
        pre: Callable[[torch.Tensor], torch.Tensor] | None = None,
    ) -> Callable[[Any, torch.Tensor], tuple[Any, Any]]:
        """A step with ``post`` applied to its outputs inside the same compiled call.

        For adapters whose per-step bookkeeping (flags, casts, running episode statistics)
        would otherwise be several small host-side ops: ``post(out, extra) -> (extra,
        result)`` is a pure function of the step's :class:`StepOut` and of a carried pytree
        ``extra`` of (N, ...) tensors owned by the caller. The returned function
        ``f(extra, action) -> (extra, result)`` takes an action :meth:`prepare_action` has
        returned, advances the env as :meth:`step` does, and runs on this env's
        backend (recompiled if the params change). ``extra`` must keep its structure,
        shapes, dtypes and strides from call to call.

        ``pre(action) -> action``, if given, runs first in the same call: a pure map from the
        caller's action encoding (e.g. TorchRL's one-hot (N, n)) to the engine's, so the
        decode costs no eager op. ``f`` then takes what ``pre`` takes, on this env's device,
        contiguous and with the same shape and dtype at every call; its output must be
        what :meth:`prepare_action` returns (it is not checked).
        """
        backend: Backend | None = None
        built_for: Any = None
        control = threads.ThreadControl(self.num_threads)

        def fused(extra: Any, action: torch.Tensor) -> tuple[Any, Any]:
            nonlocal backend, built_for
            if self._state is None:
                raise RuntimeError("call reset() before step()")
            if backend is None or built_for is not self.params:
                bound = (self.env_def, self.params, self.cfg, post, pre)
                choice = self._backend_choice
                suffix = f"_{id(post):x}" + ("" if pre is None else f"_{id(pre):x}")
                backend = self._backend(fused_post_step, bound, choice, suffix)
                built_for = self.params
            (self._state, extra), result = control(backend, (self._state, extra), action)
            backend.settle()
            return extra, result

        return fused

    def render(self, indices: Sequence[int] | None = None) -> tuple[np.ndarray, ...] | None:
        """RGB frames (H, W, 3) uint8 of every env, or of ``indices``, in ``rgb_array`` mode.

        Frames are rasterised as one batch on the env's device, then copied to the host (for
        the tensor batch without a copy, see :meth:`render_frames`). In ``human`` mode the
        frames of ``indices`` (default: the first :data:`~gpuvec_envs.render.viewer.HUMAN_MAX_ENVS`
        envs) are shown tiled in a pygame window, and ``None`` is returned.
        """
        if self.render_mode is None or self._state is None:
            return None
        if self._window is not None:
            shown = range(min(self.num_envs, HUMAN_MAX_ENVS)) if indices is None else indices
            self._window.show(tile(self.render_frames(shown)).cpu().numpy())
            return None
        return tuple(self.render_frames(indices).cpu().numpy())

    def render_frames(self, indices: Sequence[int] | torch.Tensor | None = None) -> torch.Tensor:
        """RGB frames of the current states as one (M, H, W, 3) uint8 tensor on the device.

        Works in any ``render_mode`` of an env that renders; nothing is copied to the host.

        Args:
            indices: Envs to draw (M of them, in this order, repeats allowed): ints, or an
                int64 tensor; ``None`` draws all N.

        Raises:
            NotImplementedError: the env has no ``rgb_array`` rendering.
            RuntimeError: before the first ``reset``.
            TypeError, ValueError: ``indices`` that are not integers in ``[0, N)``.
        """
        if "rgb_array" not in self.env_def.metadata.get("render_modes", []):
            raise NotImplementedError(f"{type(self.env_def).__name__} does not render")
        if self._state is None:
            raise RuntimeError("call reset() before render_frames()")
        state = self._state.env
        if indices is not None:
            index = env_indices(indices, self.num_envs, self.device)
            state = pytree.tree_map(lambda t: t[index], state)
        return self.env_def.render(self.params, state)

    def close_extras(self, **kwargs: Any) -> None:
        """Stop background compiles and close the ``human`` window, if any."""
        for step in (self._step, *self._steps_by_params.values()):
            step.cancel()
        if self._window is not None:
            self._window.close()

    def __repr__(self) -> str:
        """Name, batch size, device and backend."""
        name = self.spec.id if self.spec is not None else type(self.env_def).__name__
        return (
            f"GpuVecEnv({name}, num_envs={self.num_envs}, device={self.device}, "
            f"backend={self.backend})"
        )

    # -- internals ----------------------------------------------------------------------
    def prepare_action(self, actions: Any) -> torch.Tensor:
        """Convert ``actions`` to a tensor on the env's device and check it.

        Raises:
            TypeError: wrong dtype kind (e.g. floats for a discrete space).
            ValueError: wrong shape, a device it cannot be moved from, out-of-range or
                non-finite values (values only when ``validate``).
        """
        if (
            type(actions) is np.ndarray
            and actions.dtype == self._ready_numpy_dtype
            and actions.shape == self._action_shape
            and actions.flags.c_contiguous
        ):  # a CPU env's own dtype, shape and layout: nothing to convert or check but values
            t = torch.from_numpy(actions)
        elif (
            type(actions) is torch.Tensor
            and actions.dtype is self._action_dtype
            and actions.shape == self._action_shape
            and actions.device == self.device
            and actions.is_contiguous()
        ):  # the same for a tensor (a policy's output): a few µs less per step
            t = actions
        else:
            t = action_tensor(
                actions,
                self.single_action_space,
                self._action_dtype,
                self._action_shape,
                self.device,
            )
        if self.validate:
            with self._threads.scope():
                self._check_action_values(t)
        return t

    def _check_action_values(self, t: torch.Tensor) -> None:
        check_action_values(t, self.single_action_space)

    def _reset_mask(self, mask: Any) -> torch.Tensor | None:
        if mask is None:
            return None
        if self._state is None:
            raise RuntimeError("call reset() without reset_mask first")
        return reset_mask_tensor(mask, self.num_envs, self.device)


def _own_frame_skip(env_def: EnvDef) -> bool:
    """Whether the env's params take ``frame_skip`` themselves (see :class:`GpuVecEnv`)."""
    return any(f.name == "frame_skip" for f in dataclasses.fields(env_def.params_type))
