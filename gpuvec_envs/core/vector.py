"""The one generic vector-env shell every gpuvec environment runs in.

:class:`GpuVecEnv` is a :class:`gymnasium.vector.VectorEnv` over any :class:`EnvDef`. It owns
spaces, device, dtype, the time limit, the three gymnasium autoreset modes, seeding, input
validation and the pure step. A step is one pure function of the shell state and the action
(autoreset and RNG included), compiled as one graph on the ``compile`` backend by
:mod:`gpuvec_envs.compiler`; nothing in it loops over envs or waits on the device.
"""

from __future__ import annotations

import dataclasses
import importlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space
from torch.utils import _pytree as pytree

from gpuvec_envs.compiler import Backend, CompileReport, CompilerOptions, resolve, threads
from gpuvec_envs.core import checkpoint
from gpuvec_envs.core.allocator import retain_freed_memory
from gpuvec_envs.core.constants import traced
from gpuvec_envs.core.eager import host_any, host_eager
from gpuvec_envs.core.env import EnvDef, check_step_outputs, params_from_kwargs, select
from gpuvec_envs.core.finite import check_finite, finite_probe, named_leaves
from gpuvec_envs.core.rng import RESET, STEP, Rng, keys_from_seeds
from gpuvec_envs.viewer import HUMAN_MAX_ENVS, HumanWindow, tile

_MAX_SEED = 2**63


class ShellState(NamedTuple):
    """Everything the shell carries between steps, each with leading batch dimension N."""

    env: Any  # the env's own NamedTuple of (N, ...) tensors
    elapsed: torch.Tensor  # (N,) int32, simulation steps since the last reset
    counter: torch.Tensor  # (N,) int64, RNG draw counter
    key0: torch.Tensor  # (N,) int64, RNG key word (from the seed)
    key1: torch.Tensor  # (N,) int64, RNG key word (from the seed)
    # (N,) int32 0/1, NEXT_STEP: reset on the next step. int32, not uint8 or bool: inductor's
    # CPU code turns a uint8 flag into a float/int64 select mask slowly.
    needs_reset: torch.Tensor


class StepOut(NamedTuple):
    """Outputs of one pure step; flags are uint8 (0/1) and viewed as bool outside."""

    state: ShellState
    obs: torch.Tensor  # (N, *obs_shape)
    reward: torch.Tensor  # (N,) float
    terminated: torch.Tensor  # (N,) uint8
    truncated: torch.Tensor  # (N,) uint8
    final_obs: torch.Tensor | None  # SAME_STEP: (N, *obs_shape) obs before the autoreset
    # with StepConfig.check_finite: 0-dim float64, 0 if every float output is finite, else NaN
    probe: torch.Tensor | None = None


@dataclasses.dataclass(frozen=True)
class StepConfig:
    """Trace-time constants of a step function (hashable, part of every compiled graph)."""

    autoreset_mode: AutoresetMode
    max_episode_steps: int | None
    frame_skip: int
    dtype: torch.dtype
    check_finite: bool = False  # compute StepOut.probe (step() with validate=True)


def resolve_env_def(env_def: EnvDef | str) -> EnvDef:
    """Accept an :class:`EnvDef` instance or a ``"module:ClassName"`` string."""
    if isinstance(env_def, str):
        module, _, name = env_def.partition(":")
        env_def = getattr(importlib.import_module(module), name)()
    if not isinstance(env_def, EnvDef):
        raise TypeError(f"expected an EnvDef, got {type(env_def).__name__}")
    return env_def


def as_dtype(dtype: Any) -> torch.dtype:
    """Normalise ``torch.float32``, ``"float64"``, ``np.float32`` etc. to a float torch dtype."""
    if isinstance(dtype, str):
        dtype = getattr(torch, dtype, None)
    elif not isinstance(dtype, torch.dtype):
        try:
            dtype = getattr(torch, np.dtype(dtype).name)
        except TypeError:
            dtype = None
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be float32 or float64, got {dtype!r}")
    return dtype


def as_autoreset_mode(mode: str | AutoresetMode) -> AutoresetMode:
    """Accept an ``AutoresetMode``, its value (``"NextStep"``) or ``"next_step"`` (any case)."""
    if isinstance(mode, AutoresetMode):
        return mode
    key = str(mode).replace("_", "").replace("-", "").lower()
    for m in AutoresetMode:
        if m.value.lower() == key:
            return m
    names = [m.value for m in AutoresetMode]
    raise ValueError(f"autoreset_mode must be one of {names}, got {mode!r}")


def as_flag(mask: torch.Tensor) -> torch.Tensor:
    """Bool (N,) -> uint8 0/1, via int32.

    Inductor's CPU code stores a bool converted straight to uint8 one byte at a time (~10x
    slower than this vectorised path).
    """
    return mask.to(torch.int32).to(torch.uint8)


def bool_observation(space: gym.Space) -> bool:
    """Whether an env with this single-env observation space may code it as uint8 0/1."""
    return isinstance(space, gym.spaces.Box) and space.dtype == np.bool_


def user_obs(obs: torch.Tensor, coded: bool) -> torch.Tensor:
    """An observation as users see it: uint8 0/1 of a bool space (``coded``) made bool.

    Eager code reinterprets the bytes (a free view); traced code compares them with 0
    (inductor before torch 2.13 cannot lower a view to bool).
    """
    if not coded or obs.dtype != torch.uint8:
        return obs
    return obs != 0 if traced(obs) else obs.view(torch.bool)


def pure_step(
    env_def: EnvDef, params: Any, cfg: StepConfig, state: ShellState, action: torch.Tensor
) -> StepOut:
    """One batched step with time limit, frame skip and autoreset; pure and branch-free.

    Args:
        env_def: The environment definition.
        params: Its params dataclass.
        cfg: Trace-time constants.
        state: Shell state, batch N.
        action: Shape (N, *action_shape), already validated and on the env's device.
    """
    env, elapsed, counter = state.env, state.elapsed, state.counter
    reward = terminated = truncated = None
    alive = None  # (N,) bool: still inside the episode during a frame skip
    for frame in range(cfg.frame_skip):
        rng = Rng(state.key0, state.key1, counter + frame, STEP)
        nxt, r, term = env_def.step(params, env, action, rng)
        check_step_outputs(env_def, r, term, elapsed.shape[0], elapsed.device)  # metadata only
        r = r.to(cfg.dtype)
        if alive is None:
            env, reward, terminated, elapsed = nxt, r, term, elapsed + 1
        else:
            env = select(alive, nxt, env)
            reward = reward + torch.where(alive, r, torch.zeros_like(r))
            terminated = terminated | (alive & term)
            elapsed = elapsed + alive.to(elapsed.dtype)
        if cfg.max_episode_steps is None:
            truncated = torch.zeros_like(terminated)
        else:
            truncated = elapsed >= cfg.max_episode_steps
        alive = ~(terminated | truncated)

    mode = cfg.autoreset_mode
    final_obs = None
    needs_reset = state.needs_reset
    if mode is AutoresetMode.DISABLED:
        obs = env_def.observation(params, env)
    else:
        # the envs that reset now; an eager host call that resets none skips the reset
        # (its draws feed nothing else), with the same outputs
        resets = needs_reset != 0 if mode is AutoresetMode.NEXT_STEP else terminated | truncated
        skip = host_any(resets) is False
        if not skip:
            rng = Rng(state.key0, state.key1, counter, RESET)
            fresh = env_def.reset(params, rng, cfg.dtype, None)
            zero = torch.zeros_like(elapsed)
        if mode is AutoresetMode.NEXT_STEP:
            if not skip:
                env = select(resets, fresh, env)
                reward = torch.where(resets, torch.zeros_like(reward), reward)
                terminated = terminated & ~resets
                truncated = truncated & ~resets
                elapsed = torch.where(resets, zero, elapsed)
            needs_reset = (terminated | truncated).to(torch.int32)
            obs = env_def.observation(params, env)
        else:  # SAME_STEP
            final_obs = env_def.observation(params, env)
            if skip:
                obs = final_obs.clone()
            else:
                env = select(resets, fresh, env)
                elapsed = torch.where(resets, zero, elapsed)
                obs = env_def.observation(params, env)
    new_state = ShellState(
        env, elapsed, counter + cfg.frame_skip, state.key0, state.key1, needs_reset
    )
    checked = (*pytree.tree_leaves(env), obs, reward, final_obs)
    return StepOut(
        new_state,
        obs,
        reward,
        as_flag(terminated),
        as_flag(truncated),
        final_obs,
        finite_probe(checked) if cfg.check_finite else None,
    )


def fused_post_step(
    env_def: EnvDef,
    params: Any,
    cfg: StepConfig,
    post: Callable[[StepOut, Any], tuple[Any, Any]],
    carry: tuple[ShellState, Any],
    action: torch.Tensor,
) -> tuple[tuple[ShellState, Any], Any]:
    """:func:`pure_step` followed by ``post(out, extra) -> (extra, result)`` (one graph).

    ``carry = (shell_state, extra)``; returns ``((new_shell_state, new_extra), result)``.
    """
    state, extra = carry
    out = pure_step(env_def, params, cfg, state, action)
    extra, result = post(out, extra)
    return (out.state, extra), result


def contiguous(tree: Any) -> Any:
    """Contiguous copies of a pytree's tensors (compiled steps are specialised on strides)."""
    return pytree.tree_map(lambda t: t.clone(memory_format=torch.contiguous_format), tree)


class GpuVecEnv(gym.vector.VectorEnv):
    """A batch of ``num_envs`` copies of one env, stepped as tensors on one device.

    Args:
        env_def: The environment (an :class:`EnvDef` or ``"module:Class"``).
        num_envs: Batch size N.
        device: Torch device of all state and outputs.
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
            rewards and stopping at the first termination or truncation.
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
        frame_skip: int = 1,
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
        self.device = torch.device(device)
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
        self._step_cfg = dataclasses.replace(self.cfg, check_finite=bool(validate))
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
            ``(obs, {})`` with obs of shape (N, *obs_shape) for all envs.
        """
        options = dict(options or {})
        mask = self._reset_mask(options.pop("reset_mask", None))
        seeds = self._seed_tensor(seed)
        n, dev = self.num_envs, self.device
        old = self._state
        if old is None or seeds is not None:
            if seeds is None:
                seeds = self._seed_tensor(int(np.random.SeedSequence().entropy % (_MAX_SEED - n)))
            key0, key1 = keys_from_seeds(seeds)
            counter = torch.zeros(n, dtype=torch.int64, device=dev)
            if old is not None and mask is not None:
                key0 = torch.where(mask, key0, old.key0)
                key1 = torch.where(mask, key1, old.key1)
                counter = torch.where(mask, counter, old.counter)
        else:
            key0, key1, counter = old.key0, old.key1, old.counter
        rng = Rng(key0, key1, counter, RESET)
        fresh = contiguous(self.env_def.reset(self.params, rng, self.dtype, options or None))
        zeros = torch.zeros(n, dtype=torch.int32, device=dev)
        state = ShellState(fresh, zeros, counter + 1, key0, key1, zeros.clone())
        if old is not None and mask is not None:
            state = select(mask, state, old)
        self._state = state
        obs = self.env_def.observation(self.params, state.env)
        if self.validate:
            self._check_outputs("reset", obs)
        if self._window is not None:
            self.render()
        return self._user_obs(obs), {}

    def step(
        self, actions: Any
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, dict[str, Any]]:
        """Step all envs with ``actions`` of shape (N, *action_shape).

        Returns:
            ``(obs, reward, terminated, truncated, info)`` on the env's device: obs
            (N, *obs_shape), reward (N,) float, flags (N,) bool. In SAME_STEP mode ``info``
            holds ``final_obs`` (N, *obs_shape; the pre-reset obs) with mask ``_final_obs``,
            and ``final_info`` ({}) with mask ``_final_info``.
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
        self._state = out.state
        if self.validate and (out.probe is None or out.probe.item() != 0):  # NaN: not finite
            self._check_outputs("step", out.obs, out.reward, out.final_obs)
        terminated = out.terminated.view(torch.bool)
        truncated = out.truncated.view(torch.bool)
        info: dict[str, Any] = {}
        if out.final_obs is not None:
            done = terminated | truncated
            info = {
                "final_obs": self._user_obs(out.final_obs),
                "_final_obs": done,
                "final_info": {},
                "_final_info": done,
            }
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
        self, post: Callable[[StepOut, Any], tuple[Any, Any]]
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
        """
        backend: Backend | None = None
        built_for: Any = None
        control = threads.ThreadControl(self.num_threads)

        def fused(extra: Any, action: torch.Tensor) -> tuple[Any, Any]:
            nonlocal backend, built_for
            if self._state is None:
                raise RuntimeError("call reset() before step()")
            if backend is None or built_for is not self.params:
                bound = (self.env_def, self.params, self.cfg, post)
                choice = self._backend_choice
                backend = self._backend(fused_post_step, bound, choice, f"_{id(post):x}")
                built_for = self.params
            (self._state, extra), result = control(backend, (self._state, extra), action)
            backend.settle()
            return extra, result

        return fused

    def render(self, indices: Sequence[int] | None = None) -> tuple[np.ndarray, ...] | None:
        """RGB frames (H, W, 3) uint8 of every env, or of ``indices``, in ``rgb_array`` mode.

        Frames are rasterised as one batch on the env's device, then copied to the host (for
        the tensor batch without a copy, see :meth:`render_frames`). In ``human`` mode the
        frames of ``indices`` (default: the first :data:`~gpuvec_envs.viewer.HUMAN_MAX_ENVS`
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
            index = self._render_index(indices)
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
        else:
            t = self._action_tensor(actions)
        if self.validate:
            with self._threads.scope():
                self._check_action_values(t)
        return t

    def _action_tensor(self, actions: Any) -> torch.Tensor:
        """``actions`` as a contiguous tensor of the action dtype on the env's device.

        Checks dtype kind, shape and device (not values); raises as :meth:`prepare_action`.
        """
        if isinstance(actions, torch.Tensor):
            t = actions
        else:
            arr = np.asarray(actions)
            if arr.dtype == object or arr.dtype.kind not in "biuf":
                raise TypeError(f"actions must be numeric, got numpy dtype {arr.dtype}")
            t = torch.from_numpy(np.ascontiguousarray(arr))
        discrete = self._action_dtype == torch.int64
        if t.dtype == torch.bool or t.is_complex() or (discrete and t.is_floating_point()):
            kind = "integer" if discrete else "real"
            raise TypeError(f"{self.single_action_space} expects {kind} actions, got {t.dtype}")
        if tuple(t.shape) != self._action_shape:
            raise ValueError(f"actions must have shape {self._action_shape}, got {tuple(t.shape)}")
        if t.device != self.device:
            try:
                t = t.to(self.device)
            except (RuntimeError, NotImplementedError) as exc:
                raise ValueError(
                    f"cannot move actions from {t.device} to {self.device}: {exc}"
                ) from exc
        return t.to(self._action_dtype).contiguous()

    def _check_action_values(self, t: torch.Tensor) -> None:
        # one pass over the actions and one read-back; the first bad env only on failure
        space = self.single_action_space
        if isinstance(space, gym.spaces.Discrete):
            low, high = int(space.start), int(space.start + space.n)
            lo, hi = torch.stack(torch.aminmax(t)).tolist()
            if low <= lo and hi < high:
                return
            bad, what = (t < low) | (t >= high), f"outside [{low}, {high})"
        else:
            if bool(torch.isfinite(t).all()):
                return
            bad, what = ~torch.isfinite(t).reshape(self.num_envs, -1).all(1), "not finite"
        first = int(bad.to(torch.uint8).argmax())
        raise ValueError(f"action {t[first].cpu().numpy()} of env {first} is {what}")

    def _seed_tensor(self, seed: int | Sequence[int | None] | None) -> torch.Tensor | None:
        if seed is None:
            return None
        n = self.num_envs
        if isinstance(seed, (int, np.integer)) and not isinstance(seed, bool):
            seed = int(seed)
            if not 0 <= seed <= _MAX_SEED - n:
                raise ValueError(f"seed must be in [0, 2**63 - num_envs], got {seed}")
            return torch.arange(seed, seed + n, dtype=torch.int64, device=self.device)
        if isinstance(seed, (list, tuple, np.ndarray, torch.Tensor)):
            seeds = list(seed.cpu().numpy() if isinstance(seed, torch.Tensor) else seed)
            if len(seeds) != n:
                raise ValueError(f"a seed list must have num_envs={n} entries, got {len(seeds)}")
            entropy = np.random.SeedSequence().entropy
            out = []
            for i, s in enumerate(seeds):
                if s is None:
                    s = (entropy + i) % _MAX_SEED
                if isinstance(s, bool) or not isinstance(s, (int, np.integer)):
                    raise ValueError(f"seed {i} must be an int or None, got {s!r}")
                if not 0 <= s < _MAX_SEED:
                    raise ValueError(f"seed {i} must be an int in [0, 2**63) or None, got {s!r}")
                out.append(int(s))
            return torch.tensor(out, dtype=torch.int64, device=self.device)
        raise TypeError(f"seed must be an int, a list of ints or None, got {type(seed).__name__}")

    def _render_index(self, indices: Sequence[int] | torch.Tensor) -> torch.Tensor:
        """``indices`` as a 1-D int64 tensor on the device, checked to lie in ``[0, N)``."""
        if isinstance(indices, torch.Tensor):
            t = indices
        else:
            values = list(indices)
            if any(isinstance(i, bool) or not isinstance(i, (int, np.integer)) for i in values):
                raise TypeError(f"render indices must be ints, got {values!r}")
            t = torch.tensor(values, dtype=torch.int64)
        if t.dtype != torch.int64 or t.dim() != 1:
            raise TypeError(f"render indices must be a 1-D int64 tensor, got {t.dtype} {t.dim()}-D")
        if t.numel() and bool(((t < 0) | (t >= self.num_envs)).any()):
            raise ValueError(f"render indices must lie in [0, {self.num_envs}), got {t.tolist()}")
        return t.to(self.device)

    def _reset_mask(self, mask: Any) -> torch.Tensor | None:
        if mask is None:
            return None
        if self._state is None:
            raise RuntimeError("call reset() without reset_mask first")
        t = mask if isinstance(mask, torch.Tensor) else torch.as_tensor(np.asarray(mask))
        if t.dtype != torch.bool:
            raise TypeError(f"options['reset_mask'] must be bool, got {t.dtype}")
        if tuple(t.shape) != (self.num_envs,):
            raise ValueError(
                f"options['reset_mask'] must have shape ({self.num_envs},), got {tuple(t.shape)}"
            )
        return t.to(self.device)
