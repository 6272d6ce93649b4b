"""How a step is built: the shell state, trace-time config and the pure batched step.

:func:`pure_step` is one pure function of the shell state and the action (time limit, frame
skip, autoreset and RNG included) that the :class:`~gpuvec_envs.core.vector.GpuVecEnv`
shell compiles as one graph; nothing in it loops over envs or waits on the device.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from torch.utils import _pytree as pytree

from gpuvec_envs.core.constants import traced
from gpuvec_envs.core.eager import host_any
from gpuvec_envs.core.env import EnvDef, check_step_outputs, select
from gpuvec_envs.core.finite import finite_probe
from gpuvec_envs.core.rng import RESET, STEP, Rng


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
    info: dict[str, torch.Tensor] | None = None  # EnvDef.info of the returned state
    final_info: dict[str, torch.Tensor] | None = None  # SAME_STEP: EnvDef.info before reset
    # the values of EnvDef.episode_info (a tuple: the compiler's pytrees hold no dicts) of the
    # state before the autoreset, or None
    episode: tuple[torch.Tensor, ...] | None = None
    # with StepConfig.reset_outside: (N,) bool, the envs :func:`reset_rows` resets now
    resets: torch.Tensor | None = None


@dataclasses.dataclass(frozen=True)
class StepConfig:
    """Trace-time constants of a step function (hashable, part of every compiled graph)."""

    autoreset_mode: AutoresetMode
    max_episode_steps: int | None
    frame_skip: int
    dtype: torch.dtype
    check_finite: bool = False  # compute StepOut.probe (step() with validate=True)
    # leave the autoreset to :func:`reset_rows` after the step (EnvDef.costly_reset)
    reset_outside: bool = False


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
    final_obs = final_info = None
    needs_reset = state.needs_reset
    episode = env_def.episode_info(params, env)
    episode = tuple(episode.values()) if episode else None
    pending = None
    if mode is AutoresetMode.DISABLED:
        obs = env_def.observation(params, env)
    elif cfg.reset_outside:  # flags and obs before the reset; reset_rows finishes the step
        pending = needs_reset != 0 if mode is AutoresetMode.NEXT_STEP else terminated | truncated
        obs = env_def.observation(params, env)
        if mode is AutoresetMode.NEXT_STEP:
            needs_reset = (terminated | truncated).to(torch.int32)
        else:
            final_obs = obs
            final_info = env_def.info(params, env)
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
            final_info = env_def.info(params, env)
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
        env_def.info(params, env),
        final_info,
        episode,
        pending,
    )


def reset_rows(env_def: EnvDef, params: Any, cfg: StepConfig, out: StepOut) -> StepOut:
    """Finish a :attr:`StepConfig.reset_outside` step: reset only the envs in ``out.resets``.

    Runs eagerly after the step (it reads the mask back: one host synchronisation) and
    builds new states for those envs only, from the draws they would have had inside the
    step (each env's draws depend only on its own key and counter), so every output equals
    the in-step autoreset's bit for bit. The state's tensors are updated in place.

    Returns:
        ``out`` with the reset envs' state, observation, flags and (``NEXT_STEP``) reward
        replaced, and ``resets`` None.
    """
    idx = out.resets.nonzero().squeeze(1)
    st = out.state
    obs = out.obs
    if idx.numel():
        counter = st.counter[idx] - cfg.frame_skip  # the counter of the step's draws
        rng = Rng(st.key0[idx], st.key1[idx], counter, RESET)
        fresh = env_def.reset(params, rng, cfg.dtype, None)
        env = pytree.tree_map(lambda a, b: a.index_copy(0, idx, b), st.env, fresh)
        st = st._replace(env=env, elapsed=st.elapsed.index_fill(0, idx, 0))
        obs = obs.index_copy(0, idx, env_def.observation(params, fresh))
    elif out.final_obs is not None:
        obs = obs.clone()  # final_obs and obs are distinct tensors
    info = out.info
    if info is not None and idx.numel():  # the terms of the states returned
        fresh_info = env_def.info(params, fresh)
        info = {k: v.index_copy(0, idx, fresh_info[k]) for k, v in info.items()}
    out = out._replace(state=st, obs=obs, resets=None, info=info)
    if cfg.autoreset_mode is AutoresetMode.NEXT_STEP and idx.numel():
        out = out._replace(
            state=st._replace(needs_reset=st.needs_reset.index_fill(0, idx, 0)),
            reward=out.reward.index_fill(0, idx, 0),
            terminated=out.terminated.index_fill(0, idx, 0),
            truncated=out.truncated.index_fill(0, idx, 0),
        )
    return out


def fused_post_step(
    env_def: EnvDef,
    params: Any,
    cfg: StepConfig,
    post: Callable[[StepOut, Any], tuple[Any, Any]],
    pre: Callable[[torch.Tensor], torch.Tensor] | None,
    carry: tuple[ShellState, Any],
    action: torch.Tensor,
) -> tuple[tuple[ShellState, Any], Any]:
    """``pre(action)``, :func:`pure_step` and ``post(out, extra) -> (extra, result)`` (one graph).

    ``carry = (shell_state, extra)``; returns ``((new_shell_state, new_extra), result)``.
    ``pre`` (``None``: none) maps the caller's action encoding to the engine's.
    """
    state, extra = carry
    if pre is not None:
        action = pre(action)
    out = pure_step(env_def, params, cfg, state, action)
    extra, result = post(out, extra)
    return (out.state, extra), result


def contiguous(tree: Any) -> Any:
    """Contiguous copies of a pytree's tensors (compiled steps are specialised on strides)."""
    return pytree.tree_map(lambda t: t.clone(memory_format=torch.contiguous_format), tree)
