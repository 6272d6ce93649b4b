"""Fused rollout collection: a torch policy and a :class:`GpuVecEnv` for T steps.

:class:`RolloutCollector` runs ``policy(obs)`` and the env's pure step for ``num_steps``
steps and writes observations, actions, rewards, flags and the policy's other outputs
(log-probs, values, ...) into preallocated ``(T, N, ...)`` tensors. The whole T-step
rollout is one compiled call (policy and env step as the body of a ``scan`` loop that runs
in inductor's C++ wrapper on the CPU); on CUDA it is captured once in a CUDA graph and every
later :meth:`RolloutCollector.collect` is one graph replay. A plain loop of the policy and
the env's own step runs while the scan compiles, where it cannot be built, and where it was
timed faster on the first rollouts (at large N on the CPU, inductor's loop allocating every
intermediate anew at each step can cost more than the per-call overhead it saves). The
buffers hold exactly what a hand-written loop of ``action = policy(obs)`` and
``env.step(action)`` would give (``obs[t]`` is the observation ``actions[t]`` was chosen
from), and the env's state advances as if it had been stepped.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import logging
import statistics
import time
import warnings
import weakref
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from gpuvec_envs import compiler
from gpuvec_envs.compiler import threads, warm
from gpuvec_envs.compiler.background import BackgroundBuild
from gpuvec_envs.compiler.strategies import fresh_function
from gpuvec_envs.core.step import ShellState, pure_step, user_obs
from gpuvec_envs.core.vector import GpuVecEnv

_log = logging.getLogger(__name__)

#: torch 2.11's C++ wrapper cannot generate scan's loop (``codegen_subgraph_prefix`` asserts
#: on the loop's inputs); before 2.13 the scan keeps inductor's Python wrapper (the
#: collector's ``reason`` says so).
CPP_WRAPPER_SCAN = torch.torch_version.TorchVersion(torch.__version__) >= (2, 13)
PYTHON_WRAPPER_WHY = f"Python wrapper: torch {torch.__version__}'s C++ wrapper cannot build scan"
#: Inductor options of the scan rollout. The C++ wrapper runs scan's loop in C++ (a Python
#: wrapper would re-enter Python for every step); marking ``scan`` cacheable lets the FX
#: graph cache (whose key includes the loop body's code) keep the compiled rollout across
#: processes, so a later process loads it instead of compiling it again.
SCAN_INDUCTOR_OPTIONS = {
    "cpp_wrapper": CPP_WRAPPER_SCAN,
    "unsafe_marked_cacheable_functions": {"torch.ops.higher_order.scan": "gpuvec-rollout-1"},
    **threads.inductor_options(),
}
# Names of the compiled rollouts' code objects: the name is part of the cache key, so it is
# a per-process counter (equal from run to run), not an id().
_SCAN_TAGS = itertools.count()


class Rollout(NamedTuple):
    """Buffers of one rollout (all on the env's device; T steps, N envs)."""

    obs: torch.Tensor  # (T, N, *obs_shape): observation each action was chosen from
    actions: torch.Tensor  # (T, N, *action_shape)
    rewards: torch.Tensor  # (T, N) float
    terminated: torch.Tensor  # (T, N) bool
    truncated: torch.Tensor  # (T, N) bool
    extras: dict[str, torch.Tensor]  # (T, N, ...) each: the policy's other outputs
    next_obs: torch.Tensor  # (N, *obs_shape): observation after the last step


def _policy_module(policy: Callable[..., Any]) -> torch.nn.Module | None:
    """The module whose weights ``policy`` reads: itself, or the owner of a bound method."""
    if isinstance(policy, torch.nn.Module):
        return policy
    owner = getattr(policy, "__self__", None)
    return owner if isinstance(owner, torch.nn.Module) else None


class _ForeignTensors(TorchDispatchMode):
    """Finds the tensors an eager call reads that it neither made nor was given as known.

    While active, every aten op's tensor arguments are checked against the storages of
    ``known`` tensors (the policy's input, parameters and buffers) and of every tensor an op
    made during the call; the others (a plain attribute ``self.W``, a module-level tensor
    the forward closes over) are recorded in :attr:`found` as ``(shape, dtype)``, once each.
    """

    def __init__(self, known: list[torch.Tensor]) -> None:
        super().__init__()
        self._seen = {_storage(t) for t in known}
        self.found: list[tuple[tuple[int, ...], torch.dtype]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204
        for t in tree_leaves((args, kwargs)):
            if isinstance(t, torch.Tensor) and _storage(t) not in self._seen:
                self._seen.add(_storage(t))
                self.found.append((tuple(t.shape), t.dtype))
        out = func(*args, **(kwargs or {}))
        self._seen.update(_storage(t) for t in tree_leaves(out) if isinstance(t, torch.Tensor))
        return out


def _storage(t: torch.Tensor) -> tuple[str, int]:
    """What identifies a tensor's memory (views share it): device and storage address."""
    return str(t.device), t.untyped_storage().data_ptr()


def _split(out: Any) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    """A policy output: a tensor (the action) or a dict with ``"action"`` and extras."""
    if isinstance(out, torch.Tensor):
        return out, {}
    if isinstance(out, dict) and "action" in out:
        return out["action"], {k: v for k, v in out.items() if k != "action"}
    raise TypeError("a policy must return an action tensor or a dict with key 'action'")


def _policy_step(
    policy: Callable[[torch.Tensor], Any],
    step: Callable[[ShellState, torch.Tensor], Any],
    action_dtype: torch.dtype,
    coded_obs: bool,
    state: ShellState,
    obs: torch.Tensor,
) -> tuple[Any, ...]:
    """One policy call (on the observation as users see it, :func:`user_obs`) and one step.

    Returns:
        ``(state, next_obs, action, reward, terminated, truncated, extras)``; flags uint8,
        observations as the env computes them.
    """
    action, extras = _split(policy(user_obs(obs, coded_obs)))
    action = action.to(action_dtype)
    out = step(state, action)
    return out.state, out.obs, action, out.reward, out.terminated, out.truncated, extras


@dataclasses.dataclass
class _ScanJob:
    """What a child process compiles for a collector: its scan, on a fresh eager env."""

    env_def: Any
    params: Any
    cfg: Any  # StepConfig
    num_envs: int
    device: str
    policy: Callable[[torch.Tensor], Any]
    num_steps: int
    threads: int

    def __call__(self) -> None:
        """Compile (in the child process)."""
        torch.set_num_threads(self.threads)
        cfg = self.cfg
        env = GpuVecEnv(
            self.env_def,
            self.num_envs,
            device=self.device,
            dtype=cfg.dtype,
            max_episode_steps=cfg.max_episode_steps,
            autoreset_mode=cfg.autoreset_mode,
            frame_skip=cfg.frame_skip,
            backend="eager",
            validate=False,
            params=self.params,
        )
        env.reset(seed=0)
        RolloutCollector(env, self.policy, self.num_steps, backend="compile", scan=True).collect()


class RolloutCollector:
    """Collect ``num_steps`` steps of ``policy`` in ``env`` into preallocated buffers.

    One design: the whole T-step rollout (policy and env step) is one compiled program, a
    ``scan``, replayed from one CUDA graph on CUDA; a plain loop of ``policy(obs)`` and the
    env's own step runs where that program is not built (yet), or where it measured slower.
    :attr:`kind` says which path the last rollout took and :attr:`reason` why; a scan or
    graph that fails warns once and the loop takes over.

    Args:
        env: The vector env (reset before the first :meth:`collect`). Its autoreset mode,
            time limit and frame skip apply.
        policy: ``policy(obs) -> action`` or ``-> {"action": ..., "log_prob": ..., ...}``:
            an ``nn.Module`` or any callable of tensors; obs shape (N, *obs_shape); actions
            shape (N, *action_shape), cast to the env's action dtype (int64 for discrete
            spaces). It must not synchronise with the host.
        num_steps: Rollout length T.
        backend: ``"auto"`` (default), ``"compile"`` or ``"eager"``. ``compile`` builds
            the compiled rollout at the first :meth:`collect`. ``auto`` on the CPU does
            not wait for the compiler: rollouts run the loop (the env's step switches to
            its compiled form when that is ready, see ``GpuVecEnv``'s ``backend``) while a
            child process compiles the scan, which is then built from the warm cache
            (seconds). On CUDA ``auto`` is ``compile``. ``eager`` compiles nothing: the
            loop of the policy and the env's step (as the env was built).
        cuda_graph: On CUDA, capture the whole T-step rollout in one CUDA graph (not for
            an env built with the compiler option ``cuda_graph`` off, such as MuJoCo's).
        scan: Off CUDA graphs: ``True`` always runs the scan; ``False`` always the loop;
            ``"auto"`` (default) runs each on the first :attr:`TRIALS` rollouts after one
            untimed each, alternately, and keeps the faster for good (the scan pays where
            per-call overhead dominates, small N; inductor's loop allocates its
            intermediates anew at every step, which can cost more at large N).
        num_threads: CPU threads of the compiled scan (default: the env's
            ``num_threads``; see :mod:`gpuvec_envs.compiler.threads`).

    Actions are not validated (the hot path never reads back from the device).
    With ``scan="auto"`` the path is chosen by timing, and the policy then runs compiled
    (inside the scan) or eagerly: their float results can differ in the last bit, so for
    bitwise reproducible rollouts pass ``scan=True`` or ``False``.
    """

    #: Timed rollouts of each path before ``scan="auto"`` decides (after one untimed each).
    TRIALS = 3

    def __init__(
        self,
        env: GpuVecEnv,
        policy: Callable[[torch.Tensor], Any],
        num_steps: int,
        *,
        backend: str = "auto",
        cuda_graph: bool = True,
        scan: bool | str = "auto",
        num_threads: int | str | None = None,
    ) -> None:
        if not isinstance(num_steps, int) or num_steps < 1:
            raise ValueError(f"num_steps must be a positive int, got {num_steps!r}")
        if backend not in ("auto", "compile", "eager"):
            raise ValueError(f"backend must be 'auto', 'compile' or 'eager', got {backend!r}")
        if scan not in (True, False, "auto"):
            raise ValueError(f"scan must be True, False or 'auto', got {scan!r}")
        self.env = getattr(env, "unwrapped", env)
        if not isinstance(self.env, GpuVecEnv):
            raise TypeError(f"expected a GpuVecEnv, got {type(env).__name__}")
        if self.env.env_def.observation_view(self.env.params) is not None:
            raise ValueError(
                "RolloutCollector collects the engine's one-tensor observation; this env "
                "returns a structured one (e.g. MiniGrid's obs_mode='dict': use 'image')"
            )
        self.policy = policy
        self.num_steps = num_steps
        self.backend = backend
        cuda = self.env.device.type == "cuda"
        # an env whose step must not be captured (compiler option cuda_graph off, e.g. the
        # MuJoCo family's Warp engine) runs its rollouts without a CUDA graph too
        env_graphs = self.env.compiler_options.cuda_graph
        self.use_cuda_graph = cuda_graph and cuda and backend != "eager" and env_graphs
        # build the scan off the caller's path (CPU, scan="auto")
        self._background = backend == "auto" and not cuda
        self._scan_choice = scan
        self._threads = threads.ThreadControl(
            self.env.num_threads if num_threads is None else num_threads
        )
        self._clock = time.perf_counter
        self._scan_build: BackgroundBuild | None = None
        self.buffers: Rollout | None = None
        #: Why a module policy is traced by dynamo (it reads tensors other than its
        #: weights), found by the first policy call; None: traced with its weights as inputs.
        self._lifted: str | None = None
        self._start_over()

    def _start_over(self) -> None:
        """Forget the built rollout functions: they bind the env's current params."""
        if self._scan_build is not None:
            self._scan_build.cancel()
        self._scan_build = None
        e = self.env
        self._params = e.params
        self._trial_times: dict[str, list[float]] = {"scan": [], "env_step": []}
        self._env_step = functools.partial(pure_step, e.env_def, e.params, e.cfg)
        self._fused_env_step: Callable[..., Any] | None = None
        self._graph: torch.cuda.CUDAGraph | None = None
        self._scan_fn: Callable[..., Any] | None = None
        #: The path every rollout takes from now on, or None while ``scan="auto"`` decides.
        self._path: str | None
        if self.use_cuda_graph:
            self._path, self.reason = "cuda_graph", "CUDA: the rollout replays one CUDA graph"
        elif self.backend == "eager" or self._scan_choice is False:
            why = "backend='eager'" if self.backend == "eager" else "scan=False"
            self._path, self.reason = "env_step", f"{why}: the policy and the env's step"
        elif self._scan_choice is True:
            self._path, self.reason = "scan", "scan=True: the rollout is one compiled scan"
            if not CPP_WRAPPER_SCAN:
                self.reason = f"{self.reason} ({PYTHON_WRAPPER_WHY})"
        else:
            self._path, self.reason = None, "scan='auto': the scan is being built and timed"
        #: How the last rollout ran: ``"scan"``, ``"env_step"`` (the loop) or ``"cuda_graph"``.
        self.kind = "env_step"

    # -- public ------------------------------------------------------------------------
    def collect(self) -> Rollout:
        """Run T steps from the env's current state; return the (reused) buffers.

        The returned tensors are overwritten by the next call; clone them to keep them.
        """
        env = self.env
        if env.params is not self._params:  # set_params: build for the new ones
            self._start_over()
        state = env.state
        obs = env._current_obs()  # kept from the last rollout if the state is still its end
        if self.buffers is None:
            self._allocate(state, obs)
        if self._path == "cuda_graph":
            try:
                out = self._collect_graphed(state, obs)
                self.kind = "cuda_graph"
                return out
            except Exception as exc:  # noqa: BLE001 - the loop takes over
                self._graph = None
                why = f"the CUDA graph rollout failed ({type(exc).__name__}: {exc})"
                self._fall_back(why, stacklevel=3)
        if self._path is not None:
            return self._collect_path(self._path, state, obs)
        if self._scan_fn is None and self._background and not self._scan_ready(state, obs):
            return self._collect_path("env_step", state, obs)  # the scan is compiling
        if self._background and self._env_step_pending():
            return self._collect_path("scan", state, obs)  # untimed: the env step compiles
        return self._collect_trial(state, obs)

    def wait_compiled(self, timeout: float | None = None) -> bool:
        """Wait until the env's step and (with ``scan="auto"``) the scan are compiled.

        Starts whatever compile has not started yet, so that it can be called right after
        construction (after the env's ``reset()``; before it, it returns True at once).
        Returns False on timeout.
        """
        deadline = None if timeout is None else time.monotonic() + timeout

        def left() -> float | None:
            return None if deadline is None else max(0.0, deadline - time.monotonic())

        env = self.env
        if not env.wait_compiled(left()):
            return False
        if env.params is not self._params:
            self._start_over()
        if self._background and self._path is None and env._state is not None:
            state = env.state
            obs = env._current_obs()
            if self.buffers is None:
                self._allocate(state, obs)
            self._start_scan_build()
            if self._scan_build is not None and not self._scan_build.wait(left()):
                return False
            self._scan_ready(state, obs)
        return True

    # -- internals ---------------------------------------------------------------------
    def _scan_ready(self, state: ShellState, obs: torch.Tensor) -> bool:
        """Whether the scan is built (``backend="auto"``, ``scan="auto"``).

        A child process compiles the scan (:class:`_ScanJob`) first, before the env's own
        step (what runs, and what is fastest at small N, comes first), which warms
        inductor's cache; when it is done the scan is built here from the cache. A failure
        keeps the env-step loop.
        """
        if self._scan_build is None:
            if self._scan_is_warm(state, obs):
                try:
                    self._scan_fn = self._build_scan_fn(state, obs)
                    _log.info("rollout scan built from the warm cache at the first collect")
                    return True
                except Exception:  # noqa: BLE001 - a stale marker: compile as if cold
                    self._scan_fn = None
            self._start_scan_build()
            if self._scan_build is None:  # the policy does not pickle
                return False
        build = self._scan_build
        if not build.done:
            return False
        reason = build.note
        if build.ok:
            try:
                t0 = time.perf_counter()
                self._scan_fn = self._build_scan_fn(state, obs)
                _log.info(
                    "rollout scan ready (%s; build from the warm cache %.1f s)",
                    build.note,
                    time.perf_counter() - t0,
                )
                return True
            except Exception as exc:  # noqa: BLE001 - the env-step loop goes on
                reason = f"{type(exc).__name__}: {exc}"
        self._fall_back(f"the rollout's scan failed ({reason})", stacklevel=4)
        return False

    def _scan_key(self, state: ShellState, obs: torch.Tensor) -> str | None:
        """The scan's warm-start marker name (:mod:`~gpuvec_envs.compiler.warm`).

        The policy (an ``nn.Module`` or its method; None for other callables) enters by
        its class and its weights' names, shapes and dtypes, not their values: they change
        from run to run, and the scan reads them as inputs.
        """
        env = self.env
        module = _policy_module(self.policy)
        if module is None or self._lifted:  # compiled by torch.compile: never marked
            return None
        tensors = [*module.named_parameters(), *module.named_buffers()]
        weights = tuple((k, tuple(v.shape), str(v.dtype)) for k, v in tensors)
        method = getattr(self.policy, "__name__", None)
        bound = (env.env_def, env.params, env.cfg, type(module), weights, method, self.num_steps)
        settings = (env.compiler_options.items(), torch.get_num_threads(), "rollout scan")
        return warm.call_key(_ScanJob, bound, (state, obs), settings)

    def _scan_is_warm(self, state: ShellState, obs: torch.Tensor) -> bool:
        """Whether an earlier process compiled this collector's scan (``warm_start``)."""
        return self.env.compiler_options.warm_start and warm.is_warm(self._scan_key(state, obs))

    def _env_step_pending(self) -> bool:
        """Whether the env's own step still waits for its background compile.

        Starts that compile if it had not started: the trial would otherwise time the scan
        against eager steps for good.
        """
        env = self.env
        step = env._step
        if step.mode not in ("auto", "background") or step.report is not None:
            return False
        step.start_background((env.state, env._example_action()))
        return not step.wait(0)

    def _fall_back(self, reason: str, stacklevel: int = 4) -> None:
        """Collect with the loop from now on, and warn once naming ``reason``.

        ``stacklevel`` points the warning at the caller of :meth:`collect`.
        """
        warnings.warn(
            f"{reason}; the rollout runs as a loop of the policy and the env's step",
            RuntimeWarning,
            stacklevel=stacklevel,
        )
        self._path, self.reason = "env_step", f"fallback: {reason}"

    def _start_scan_build(self) -> None:
        if self._scan_build is not None or self._path is not None:
            return
        env = self.env
        job = _ScanJob(
            env.env_def,
            env.params,
            env.cfg,
            env.num_envs,
            str(env.device),
            self.policy,
            self.num_steps,
            torch.get_num_threads(),
        )
        try:
            self._scan_build = BackgroundBuild(job)
        except TypeError:
            self._fall_back("the rollout's scan cannot be built (the policy does not pickle)", 5)
            return
        weakref.finalize(self, self._scan_build.cancel)  # a dropped collector stops its child

    def _collect_trial(self, state: ShellState, obs: torch.Tensor) -> Rollout:
        """``scan="auto"``: run the scan and the loop in turn, timed; then keep the faster."""
        times = self._trial_times
        path = "env_step" if len(times["env_step"]) < len(times["scan"]) else "scan"
        t0 = self._clock()
        out = self._collect_path(path, state, obs, stacklevel=5)
        if self._path is not None:  # the scan failed: the loop is kept
            return out
        times[path].append(self._clock() - t0)
        if min(len(v) for v in times.values()) > self.TRIALS:  # the first of each untimed
            scan_s, step_s = (statistics.median(times[k][1:]) for k in ("scan", "env_step"))
            self._path = "scan" if scan_s <= step_s else "env_step"
            fast, slow = sorted((scan_s, step_s))
            self.reason = (
                f"scan='auto': {self._path} measured {slow / max(fast, 1e-9):.2f}x faster "
                f"(median of {self.TRIALS} rollouts each)"
            )
            if self._path == "scan" and not CPP_WRAPPER_SCAN:
                self.reason = f"{self.reason} ({PYTHON_WRAPPER_WHY})"
            _log.info("rollout: %s", self.reason)
        return out

    def _collect_path(
        self, path: str, state: ShellState, obs: torch.Tensor, stacklevel: int = 4
    ) -> Rollout:
        """One rollout of ``path`` (``"scan"`` or ``"env_step"``).

        A scan that raises (its build, its call, or a recompile at it) leaves the env's
        state as it was; the loop is then kept for good, with one warning, and collects
        this rollout.
        """
        if path == "scan":
            try:
                out = self._collect_scan(state, obs)
                self.kind = "scan"
                return out
            except Exception as exc:  # noqa: BLE001 - the loop goes on
                self._scan_fn = None
                self._fall_back(
                    f"the rollout's scan failed ({type(exc).__name__}: {exc})", stacklevel
                )
        out = self._collect_env_step(obs)
        self.kind = "env_step"
        return out

    def _collect_env_step(self, obs: torch.Tensor) -> Rollout:
        """A loop of ``policy(obs)`` and the env's own step (its backend and threads).

        Starts from the current state and its observation ``obs`` (computed by
        :meth:`collect`).
        """
        env = self.env
        step, control = env._step, env._threads
        state = env._state
        b, flags, dtype = self.buffers, self._flags, env._action_dtype
        with torch.no_grad():
            for t in range(self.num_steps):
                self._raw_obs[t].copy_(obs)
                action, extras = _split(self.policy(env._user_obs(obs)))
                b.actions[t].copy_(action)
                out = control(step, state, b.actions[t].to(dtype))
                step.settle()
                b.rewards[t].copy_(out.reward)
                flags[0, t].copy_(out.terminated)
                flags[1, t].copy_(out.truncated)
                for k, v in extras.items():
                    b.extras[k][t].copy_(v)
                state, obs = out.state, out.obs
        self._raw_next_obs.copy_(obs)
        env._set_state(state, obs)
        return b

    def _allocate(self, state: ShellState, obs: torch.Tensor) -> None:
        """Preallocate the buffers from one eager policy call on the current obs."""
        t = self.num_steps
        env = self.env
        user = env._user_obs(obs)
        module = _policy_module(self.policy)
        if module is None or self.use_cuda_graph or self._path == "env_step":
            with torch.no_grad():
                action, extras = _split(self.policy(user))
        else:  # which tensors the scan's trace must lift besides the weights
            probe = _ForeignTensors([user, *module.parameters(), *module.buffers()])
            with torch.no_grad(), probe:
                action, extras = _split(self.policy(user))
            if probe.found:
                listed = ", ".join(f"{shape} {dtype}" for shape, dtype in probe.found[:4])
                more = ", ..." if len(probe.found) > 4 else ""
                self._lifted = (
                    f"the policy reads {len(probe.found)} tensor(s) that are neither "
                    f"parameters nor buffers ({listed}{more}): traced by dynamo, which lifts "
                    "them as inputs"
                )
        dev = env.device
        n = env.num_envs
        act_shape = tuple(env.single_action_space.shape)
        if tuple(action.shape) != (n, *act_shape):
            raise ValueError(
                f"policy actions must have shape {(n, *act_shape)}, got {tuple(action.shape)}"
            )
        self._flags = torch.zeros(2, t, n, dtype=torch.uint8, device=dev)
        # observations as the env computes them; the buffers show them as users see them
        self._raw_obs = torch.empty((t, *obs.shape), dtype=obs.dtype, device=dev)
        self._raw_next_obs = torch.empty_like(obs)
        self.buffers = Rollout(
            obs=env._user_obs(self._raw_obs),
            actions=torch.empty((t, n, *act_shape), dtype=env._action_dtype, device=dev),
            rewards=torch.empty((t, n), dtype=env.dtype, device=dev),
            terminated=self._flags[0].view(torch.bool),
            truncated=self._flags[1].view(torch.bool),
            extras={
                k: torch.empty((t, *v.shape), dtype=v.dtype, device=dev) for k, v in extras.items()
            },
            next_obs=env._user_obs(self._raw_next_obs),
        )

    def _env_step_fn(
        self, example_state: ShellState, example_action: torch.Tensor
    ) -> Callable[..., Any]:
        """The env step used inside the rollout: the guard-free fused call when possible."""
        if self._fused_env_step is None:
            self._fused_env_step = self._env_step
            if self.backend != "eager":
                try:
                    self._fused_env_step = compiler.compile_flat(
                        self._env_step, (example_state, example_action)
                    )
                except Exception as exc:  # noqa: BLE001 - eager env step inside the graph
                    why = f"compiling the env step failed ({type(exc).__name__}: {exc})"
                    warnings.warn(
                        f"{why}; the rollout's CUDA graph captures the eager step",
                        RuntimeWarning,
                        stacklevel=5,
                    )
                    self.reason = f"CUDA graph of the eager env step: {why}"
        return self._fused_env_step

    def _write(self, t: int, obs: torch.Tensor, out: tuple[Any, ...]) -> None:
        b = self.buffers
        _, _, action, reward, term, trunc, extras = out
        self._raw_obs[t].copy_(obs)
        b.actions[t].copy_(action)
        b.rewards[t].copy_(reward)
        self._flags[0, t].copy_(term)
        self._flags[1, t].copy_(trunc)
        for k, v in extras.items():
            b.extras[k][t].copy_(v)

    def _collect_scan(self, state: ShellState, obs: torch.Tensor) -> Rollout:
        """The whole rollout as one compiled call; its stacked outputs fill the buffers."""
        if self._scan_fn is None:
            self._scan_fn = self._build_scan_fn(state, obs)
        b = self.buffers
        with torch.no_grad():
            leaves, next_obs, ys = self._threads(self._scan_fn, self._flatten(state), obs)
        o, action, reward, term, trunc, extras = ys
        for dst, src in ((self._raw_obs, o), (b.actions, action), (b.rewards, reward)):
            dst.copy_(src)
        self._flags[0].copy_(term)
        self._flags[1].copy_(trunc)
        for k, v in extras.items():
            b.extras[k].copy_(v)
        self._raw_next_obs.copy_(next_obs)
        self.env._set_state(self._unflatten_state(leaves), next_obs)
        return b

    def _scan_body(self, state: ShellState) -> Callable[..., Any]:
        """``body(state_leaves, obs) -> (state_leaves, next_obs, (obs, action, ...))``."""
        self._flatten = compiler.make_flattener((state,))
        self._unflatten_state = compiler.make_unflattener(state)
        step = functools.partial(
            _policy_step, self.policy, self._env_step, self.env._action_dtype, self.env._coded_obs
        )
        flatten, unflatten = self._flatten, self._unflatten_state

        def scan_body(leaves: Any, obs: torch.Tensor) -> tuple[Any, ...]:
            """One step -> ``(state leaves, next_obs, (obs, action, ..., extras))``."""
            new_state, next_obs, action, reward, term, trunc, extras = step(unflatten(leaves), obs)
            # scan's carry and outputs must not alias its inputs (key words pass through)
            new_leaves = tuple(t.clone() for t in flatten(new_state))
            return new_leaves, next_obs, (obs.clone(), action, reward, term, trunc, extras)

        return scan_body

    def _build_scan_fn(self, state: ShellState, obs: torch.Tensor) -> Callable[..., Any]:
        """``f(state_leaves, obs) -> (state_leaves, next_obs, stacked step outputs)``.

        A policy that is an ``nn.Module`` (or a method of one) and reads no tensor but its
        input, parameters and buffers is traced with its parameters and buffers as inputs,
        straight to inductor (no dynamo: a process that finds the rollout in inductor's
        cache starts ~1 s sooner); any other callable, and a module that reads other
        tensors (a plain attribute, a closed-over tensor), goes through dynamo, which lifts
        every tensor it reads as an input (in-place updates are seen; a replaced tensor
        recompiles), and dynamo's graph through :func:`~gpuvec_envs.compiler.compile_flat`
        (which passes the loop body's constants in as loop inputs: inductor's C++ scan
        cannot declare them).
        """
        scan_body = self._scan_body(state)
        module = _policy_module(self.policy)
        if module is None or self._lifted:
            if self._lifted and self._lifted not in self.reason:
                self.reason = f"{self.reason} ({self._lifted})"
                _log.info("rollout scan: %s", self._lifted)
            return self._build_dynamo_scan(scan_body)  # compiles at its first call
        fn = self._build_flat_scan(scan_body, module, state, obs)
        if self.env.device.type == "cpu" and self.env.compiler_options.warm_start:
            warm.mark_warm(self._scan_key(state, obs))
        return fn

    def _build_flat_scan(
        self,
        scan_body: Callable[..., Any],
        module: torch.nn.Module,
        state: ShellState,
        obs: torch.Tensor,
    ) -> Callable[..., Any]:
        rollout, weights, xs, split = self._flat_scan(scan_body, module, state)
        args = (weights(), self._flatten(state), obs, xs)
        compiled = compiler.compile_flat(rollout, args, options=SCAN_INDUCTOR_OPTIONS)

        def call(leaves: Any, o: torch.Tensor) -> tuple[Any, ...]:
            return split(compiled(weights(), leaves, o, xs))

        return call

    def _flat_scan(
        self, scan_body: Callable[..., Any], module: torch.nn.Module, state: ShellState
    ) -> tuple[Callable[..., Any], Callable[[], tuple[torch.Tensor, ...]], torch.Tensor, Any]:
        """The scan rollout as one pure function, with what it is called with.

        Returns ``(rollout, weights, xs, split)``: ``rollout(weights(), state_leaves, obs,
        xs)`` runs T steps (T = ``len(xs)``); ``split(out)`` unpacks its result into
        ``(state_leaves, next_obs, (obs, action, reward, terminated, truncated, extras))``.
        """
        from torch._higher_order_ops.scan import scan_op
        from torch.nn.utils.stateless import _reparametrize_module

        names = [n for n, _ in module.named_parameters()] + [n for n, _ in module.named_buffers()]

        def weights() -> tuple[torch.Tensor, ...]:  # aliases: in-place updates are seen
            return tuple(t.detach() for t in (*module.parameters(), *module.buffers()))

        n_leaves = len(self._flatten(state))
        keys = list(self.buffers.extras)

        def body(*args: torch.Tensor) -> tuple[torch.Tensor, ...]:
            leaves, o, w = args[:n_leaves], args[n_leaves], args[n_leaves + 2 :]
            with _reparametrize_module(module, dict(zip(names, w, strict=True))):
                new_leaves, next_obs, ys = scan_body(leaves, o)
            *ys, extras = ys
            return (*new_leaves, next_obs, *ys, *(extras[k] for k in keys))

        def rollout(w: Any, leaves: Any, o: torch.Tensor, xs: torch.Tensor) -> Any:
            return tuple(scan_op(body, [*leaves, o], [xs], additional_inputs=tuple(w)))

        def split(out: tuple[torch.Tensor, ...]) -> tuple[Any, ...]:
            ys = out[n_leaves + 1 :]
            extras = dict(zip(keys, ys[5:], strict=True))
            return out[:n_leaves], out[n_leaves], (*ys[:5], extras)

        xs = torch.zeros(self.num_steps, 1, device=self.env.device)  # scan's length
        return rollout, weights, xs, split

    def _build_dynamo_scan(self, scan_body: Callable[..., Any]) -> Callable[..., Any]:
        from torch._higher_order_ops import scan

        xs = torch.zeros(self.num_steps, 1, device=self.env.device)  # scan's length

        def body(carry: Any, _x: torch.Tensor) -> tuple[Any, Any]:
            new_leaves, next_obs, ys = scan_body(*carry)
            return (new_leaves, next_obs), ys

        def rollout(leaves: Any, obs: torch.Tensor, xs: torch.Tensor) -> tuple[Any, ...]:
            (leaves, obs), ys = scan(body, (leaves, obs), xs)
            return leaves, obs, ys

        def backend(gm: torch.fx.GraphModule, example_inputs: list[torch.Tensor]) -> Any:
            return compiler.compile_flat(gm, tuple(example_inputs), options=SCAN_INDUCTOR_OPTIONS)

        compiled = torch.compile(
            fresh_function(rollout, f"{type(self.env.env_def).__name__}_{next(_SCAN_TAGS)}"),
            fullgraph=True,
            dynamic=False,
            backend=backend,
        )
        return lambda leaves, obs: compiled(leaves, obs, xs)

    def _collect_graphed(self, state: ShellState, obs: torch.Tensor) -> Rollout:
        """CUDA: capture the T-step rollout once, then one graph replay per call."""
        if self._graph is None:
            self._capture(state, obs)
        flat = self._flatten(state)
        for buf, t in zip(self._static_state, flat, strict=True):
            if t is not buf:
                buf.copy_(t)
        self._static_obs.copy_(obs)
        self._graph.replay()
        self.env._state = self._unflatten_state(tuple(self._static_state))
        return self.buffers

    def _capture(self, state: ShellState, obs: torch.Tensor) -> None:
        with torch.no_grad():
            action, _ = _split(self.policy(self.env._user_obs(obs)))
            env_step = self._env_step_fn(state, action.to(self.env._action_dtype))
        self._flatten = compiler.make_flattener((state,))
        self._unflatten_state = compiler.make_unflattener(state)
        self._static_state = [t.clone() for t in self._flatten(state)]
        self._static_obs = obs.clone()
        e = self.env
        step = functools.partial(_policy_step, self.policy, env_step, e._action_dtype, e._coded_obs)

        def run() -> None:
            s = self._unflatten_state(tuple(self._static_state))
            o = self._static_obs
            for t in range(self.num_steps):
                out = step(s, o)
                self._write(t, o, out)
                s, o = out[0], out[1]
            self._raw_next_obs.copy_(o)
            for buf, t in zip(self._static_state, self._flatten(s), strict=True):
                buf.copy_(t)
            self._static_obs.copy_(o)

        saved = [t.clone() for t in self._static_state], self._static_obs.clone()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.no_grad(), torch.cuda.stream(side):
            run()  # warm-up outside the graph
        torch.cuda.current_stream().wait_stream(side)
        for buf, t in zip(self._static_state, saved[0], strict=True):
            buf.copy_(t)
        self._static_obs.copy_(saved[1])
        graph = torch.cuda.CUDAGraph()
        with torch.no_grad(), torch.cuda.graph(graph):
            run()
        self._graph = graph


def scan_rollout_example(
    env: GpuVecEnv, policy: torch.nn.Module, num_steps: int
) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    """The pure T-step rollout a collector compiles as one scan, and example arguments.

    For checks of the compiled rollout (e.g. lowering it for CUDA without a GPU,
    :mod:`gpuvec_envs.compiler.fake_cuda`); ``env`` is reset.
    """
    collector = RolloutCollector(env, policy, num_steps, backend="compile", scan=True)
    state, obs = env.state, env._current_obs()
    collector._allocate(state, obs)
    rollout, weights, xs, _ = collector._flat_scan(collector._scan_body(state), policy, state)
    return rollout, (weights(), collector._flatten(state), obs, xs)


def rollout_episode_stats(
    rewards: torch.Tensor, dones: torch.Tensor, carry: tuple[torch.Tensor, torch.Tensor]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor]]:
    """Episode returns and lengths of a whole (T, N) rollout at once (SAME_STEP autoreset).

    For a :class:`Rollout` of a ``SAME_STEP`` env, with ``dones = terminated | truncated``
    (in ``NEXT_STEP`` mode the autoreset step would count as the next episode's first).
    What ``RecordEpisodeStatistics`` reports step by step, from the rollout's buffers in a
    few tensor ops: an episode ends at step ``t`` of env ``n`` where ``dones[t, n]``; its
    return sums the rewards since the previous ending (or since the rollout's start plus
    the carried partial return). ``carry`` = (return float64 (N,), length int64 (N,)) of
    the episodes still running at the rollout's start; the new carry is returned.

    Returns:
        ``(ep_returns (T, N) float64, ep_lengths (T, N) int64, mask (T, N) bool, carry)``,
        zero where ``mask`` is False.
    """
    t_len = rewards.shape[0]
    carry_r, carry_l = carry
    steps = torch.arange(t_len, device=rewards.device)[:, None]  # (T, 1)
    cum = carry_r + torch.cumsum(rewards.to(torch.float64), dim=0)  # return since the carry
    last = torch.cummax(torch.where(dones, steps, -1), dim=0).values  # last ending <= t
    prev = torch.cat((torch.full_like(last[:1], -1), last[:-1]))  # last ending < t
    base = torch.where(prev >= 0, torch.gather(cum, 0, prev.clamp_min(0)), 0.0)
    lengths = torch.where(prev >= 0, steps - prev, steps + 1 + carry_l)
    ep_r = torch.where(dones, cum - base, 0.0)
    ep_l = torch.where(dones, lengths, 0)
    end = last[-1]
    carry_r = cum[-1] - torch.where(end >= 0, cum.gather(0, end.clamp_min(0)[None])[0], 0.0)
    carry_l = torch.where(end >= 0, t_len - 1 - end, carry_l + t_len)
    return ep_r, ep_l, dones, (carry_r, carry_l)
