"""Checking an :class:`~gpuvec_envs.core.env.EnvDef` against the rules of the contract.

:func:`check_env_def` runs an env's methods on a small batch and tests every rule the
compiled step depends on; it raises one :class:`EnvDefError` that lists each violation
with the method, the rule and, where the violation is a call, the source line:

* ``host-sync``: ``.item()``, ``bool()``/``if`` on a tensor, ``.tolist()``, ``.numpy()``...
  in ``reset``/``step``/``observation`` (seen by a torch function mode while they run).
* ``rng``: draws from torch's generators (``torch.rand``, ``bernoulli``, a
  ``torch.Generator``...), or a trajectory that differs between two runs with one seed.
* ``independence``: env i's step depends on the other envs or on the batch size (env i of
  N against env i of 2N, stepped from the same state).
* ``trace``: a data-dependent shape (``nonzero``, boolean indexing) or any other failure to
  trace the method with fake tensors (``make_fx``, as the compiled backend traces it).
* ``layout``/``reward``/``terminated``/``observation``/``render``/``spaces``: shapes,
  dtypes and devices against the declared spaces and the contract; states that change
  structure, shape or dtype; observations outside the observation space.
* ``purity``: a method that writes its input state in place or sets attributes on ``self``.
* ``raises``: a method raising on valid input (the exception and its line).
* ``compile``: the compiled backend failing (it would otherwise fall back to eager) or
  disagreeing with eager, step by step from the same state.
"""

from __future__ import annotations

import dataclasses
import os
import sysconfig
import traceback
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from gpuvec_envs.core.arguments import as_dtype
from gpuvec_envs.core.env import EnvDef, params_from_kwargs, step_output_problems
from gpuvec_envs.core.rng import RESET, STEP, Rng, keys_from_seeds
from gpuvec_envs.core.step import bool_observation
from gpuvec_envs.core.vector import GpuVecEnv
from gpuvec_envs.sdk.custom import env_def_instance

#: Tensor methods that read a value back to the host, and what to say about each.
_HOST_READS = {
    "item": "`.item()` reads a tensor value back to the host",
    "tolist": "`.tolist()` reads tensor values back to the host",
    "numpy": "`.numpy()` hands tensor values to numpy on the host",
    "__array__": "numpy conversion of a tensor reads it back to the host",
    "__bool__": (
        "`bool()` of a tensor: a Python `if`/`while`/`and`/`or`/`not`/`assert` on a tensor "
        "value (use torch.where or a mask)"
    ),
    "__int__": "`int()` of a tensor reads its value back to the host",
    "__float__": "`float()` of a tensor reads its value back to the host",
    "__index__": "a tensor used as a Python index/`range` bound reads its value back",
    "__repr__": "printing a tensor reads its values back to the host",
    "__format__": "formatting a tensor reads its values back to the host",
    "cpu": "`.cpu()` copies a tensor to the host",
}
#: Ops whose output shape is data-dependent only with a boolean index (the function monitor
#: flags those).
_STATIC_WITH_INT_INDEX = (torch.ops.aten.index.Tensor,)
_SKIP_DIRS = tuple(os.path.dirname(p) + os.sep for p in (torch.__file__, os.__file__)) + (
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "core") + os.sep,
    sysconfig.get_paths()["stdlib"] + os.sep,
)


@dataclasses.dataclass(frozen=True)
class Violation:
    """One broken rule.

    Attributes:
        method: The ``EnvDef`` method (or ``"shell"`` for whole-trajectory checks).
        rule: The rule's name (see the module docstring).
        message: What is wrong, and how to fix it where that is not obvious.
        where: ``"file:line in function: source"`` of the offending call, if known.
    """

    method: str
    rule: str
    message: str
    where: str | None = None

    def __str__(self) -> str:
        """``method [rule]: message (at where)``."""
        at = f"\n      at {self.where}" if self.where else ""
        return f"{self.method} [{self.rule}]: {self.message}{at}"


class EnvDefError(ValueError):
    """An env breaks one or more rules of the contract; ``violations`` lists each one."""

    def __init__(self, name: str, violations: list[Violation]) -> None:
        self.violations = tuple(violations)
        lines = [f"{name} breaks {len(violations)} rule(s) of the EnvDef contract:"]
        lines += [f"  - {v}" for v in violations]
        super().__init__("\n".join(lines))


def _location(frames: list[traceback.FrameSummary]) -> str | None:
    """The innermost frame outside torch, the stdlib and the engine, as text."""
    here = os.path.abspath(__file__)
    for f in reversed(frames):
        path = os.path.abspath(f.filename)
        if path == here or path.startswith(_SKIP_DIRS) or f.filename.startswith("<"):
            continue
        return f"{f.filename}:{f.lineno} in {f.name}: {(f.line or '').strip()}"
    return None


class _Report:
    """Violations collected so far, without duplicates of one (method, rule, where)."""

    def __init__(self) -> None:
        self.items: list[Violation] = []
        self._seen: set[tuple[str, str, str | None]] = set()

    def add(self, method: str, rule: str, message: str, where: str | None = None) -> None:
        key = (method, rule, where) if where else (method, rule, message)
        if key not in self._seen:
            self._seen.add(key)
            self.items.append(Violation(method, rule, message, where))

    def has(self, method: str) -> bool:
        return any(v.method == method for v in self.items)


class _FunctionMonitor(TorchFunctionMode):
    """Flags host reads (``.item()``, ``bool()``...) and boolean-mask indexing."""

    def __init__(self, report: _Report, method: str) -> None:
        super().__init__()
        self.report, self.method = report, method

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, D105
        name = getattr(func, "__name__", "")
        if name in _HOST_READS and not (name == "cpu" and args and not _on_device(args[0])):
            self.report.add(self.method, "host-sync", _HOST_READS[name], _here())
        elif name in ("__getitem__", "__setitem__") and len(args) > 1 and _bool_index(args[1]):
            what = "boolean-mask assignment" if name == "__setitem__" else "boolean-mask indexing"
            self.report.add(
                self.method,
                "trace",
                f"{what} has a data-dependent shape (use torch.where with the mask)",
                _here(),
            )
        return func(*args, **(kwargs or {}))


class _DispatchMonitor(TorchDispatchMode):
    """Flags draws from torch's generators, data-dependent shapes and other host reads."""

    def __init__(self, report: _Report, method: str) -> None:
        super().__init__()
        self.report, self.method = report, method

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, D105
        tags = func.tags
        if torch.Tag.nondeterministic_seeded in tags:
            self.report.add(
                self.method,
                "rng",
                f"`{func.overloadpacket.__name__}` draws from a torch generator; draw from "
                "the given Rng (rng.uniform, rng.randint, rng.bernoulli, rng.bits)",
                _here(),
            )
        elif torch.Tag.dynamic_output_shape in tags and func not in _STATIC_WITH_INT_INDEX:
            self.report.add(
                self.method,
                "trace",
                f"`{func.overloadpacket.__name__}` has a data-dependent output shape",
                _here(),
            )
        elif func is torch.ops.aten._local_scalar_dense.default:
            self.report.add(
                self.method, "host-sync", "a tensor value is read back to the host", _here()
            )
        return func(*args, **(kwargs or {}))


def _here() -> str | None:
    return _location(traceback.extract_stack()[:-2])


def _on_device(t: Any) -> bool:
    return isinstance(t, torch.Tensor) and t.device.type != "cpu"


def _bool_index(index: Any) -> bool:
    items = index if isinstance(index, tuple) else (index,)
    return any(isinstance(i, torch.Tensor) and i.dtype in (torch.bool, torch.uint8) for i in items)


class _Watch:
    """Context: one method call, monitored (``monitor``); exceptions are recorded, not raised."""

    def __init__(self, report: _Report, method: str, env_def: EnvDef, monitor: bool = True) -> None:
        self.report, self.method, self.env_def = report, method, env_def
        self.monitor = monitor
        self.failed = False

    def __enter__(self) -> _Watch:
        self._attrs = dict(vars(self.env_def))
        self._modes = (
            (_FunctionMonitor(self.report, self.method), _DispatchMonitor(self.report, self.method))
            if self.monitor
            else ()
        )
        for m in self._modes:
            m.__enter__()
        return self

    def __exit__(self, typ, exc, tb) -> bool:  # noqa: ANN001
        for m in reversed(self._modes):
            m.__exit__(None, None, None)
        if exc is not None:
            self.failed = True
            where = _location(traceback.extract_tb(tb))
            self.report.add(self.method, "raises", f"{typ.__name__}: {exc}", where)
        now = vars(self.env_def)
        changed = sorted(
            k for k in set(now) | set(self._attrs) if now.get(k) is not self._attrs.get(k)
        )
        if changed:
            self.report.add(
                self.method,
                "purity",
                f"sets attribute(s) {changed} on self; keep all state in the state tuple",
            )
        return exc is not None and isinstance(exc, Exception)


def check_env_def(
    env_def: type[EnvDef] | EnvDef | str,
    *,
    num_envs: int = 8,
    steps: int = 32,
    params: Any = None,
    dtype: torch.dtype = torch.float32,
    device: str | torch.device = "cpu",
    seed: int = 0,
    trace: bool = True,
    compiled: bool = True,
) -> None:
    """Test an env against every rule of the :class:`EnvDef` contract.

    Runs ``reset``/``step``/``observation`` once under monitors (and, with ``trace``,
    traces them with fake tensors); if they pass, runs ``steps`` steps of the shell
    (SAME_STEP autoreset, seeded, fixed random actions) three times eagerly (twice with
    ``num_envs`` envs, once with ``2 * num_envs``) and, with ``compiled``, once on the
    compiled backend from the same states.

    Args:
        env_def: An ``EnvDef`` subclass, instance or ``"module:Class"``.
        num_envs: Batch size N of the runs.
        steps: Steps per run.
        params: The env parameters (default: ``params_type()``).
        dtype: Simulation float dtype (``torch.float32``, ``"float64"``...).
        device: Torch device of the runs.
        seed: Seed of the runs and of the sampled actions.
        trace: Also trace each method with fake tensors (seconds for a large step).
        compiled: Also compare the compiled backend with eager (compiles one graph).

    Raises:
        TypeError: ``env_def`` is not an ``EnvDef``, or ``params`` not its params type.
        ValueError: ``num_envs`` or ``steps`` is not a positive int, or a bad ``dtype``.
        EnvDefError: listing every violation found.
    """
    for name, value in (("num_envs", num_envs), ("steps", steps)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    report = _Report()
    try:
        env_def = env_def_instance(env_def)
    except TypeError as exc:
        if isinstance(env_def, type) and issubclass(env_def, EnvDef):
            raise EnvDefError(env_def.__name__, [Violation("class", "contract", str(exc))]) from exc
        raise
    name = type(env_def).__name__
    params = params_from_kwargs(env_def.params_type, params, {})
    device, dtype = torch.device(device), as_dtype(dtype)
    spaces = _check_spaces(env_def, params, dtype, report)
    if spaces is not None:
        state = _check_methods(
            env_def, params, dtype, device, num_envs, seed, spaces, trace, report
        )
        if state is not None and not report.items:  # the shell needs working methods
            try:
                _check_runs(env_def, params, dtype, device, num_envs, steps, seed, compiled, report)
            except Exception as exc:  # noqa: BLE001 - a failing run is a violation
                where = _location(traceback.extract_tb(exc.__traceback__))
                report.add("shell", "raises", f"{type(exc).__name__}: {exc}", where)
    if report.items:
        raise EnvDefError(name, report.items)


def _check_spaces(
    env_def: EnvDef, params: Any, dtype: torch.dtype, report: _Report
) -> tuple[gym.Space, gym.Space] | None:
    """The two single spaces, or ``None`` after recording why they are unusable."""
    spaces = []
    for method in ("observation_space", "action_space"):
        with _Watch(report, method, env_def) as w:
            space = getattr(env_def, method)(params, dtype)
        if w.failed:
            return None
        if not isinstance(space, gym.Space):
            report.add(method, "spaces", f"returned {type(space).__name__}, not a gymnasium Space")
            return None
        spaces.append(space)
    obs_space, act_space = spaces
    np_dtype = np.dtype(torch.empty(0, dtype=dtype).numpy().dtype)
    if isinstance(act_space, gym.spaces.Box):
        if act_space.dtype != np_dtype:
            report.add(
                "action_space",
                "spaces",
                f"a Box action space must have the simulation dtype {np_dtype}, got "
                f"{act_space.dtype}",
            )
    elif not isinstance(act_space, gym.spaces.Discrete):
        report.add(
            "action_space", "spaces", f"must be Discrete or Box, got {type(act_space).__name__}"
        )
    if obs_space.shape is None or obs_space.dtype is None:
        report.add("observation_space", "spaces", f"{obs_space} has no fixed shape and dtype")
    modes = env_def.metadata.get("render_modes", []) if isinstance(env_def.metadata, dict) else None
    if not isinstance(modes, (list, tuple)):
        report.add("metadata", "render", "metadata must be a dict with a 'render_modes' list")
    elif ("rgb_array" in modes) != (type(env_def).render is not EnvDef.render):
        report.add(
            "render",
            "render",
            "metadata['render_modes'] lists 'rgb_array' if and only if render is implemented",
        )
    return None if report.items else (obs_space, act_space)


def _layout(tree: Any) -> tuple[Any, list[tuple[Any, ...]]]:
    leaves, spec = pytree.tree_flatten(tree)
    return spec, [
        (tuple(t.shape), t.dtype, t.device) if isinstance(t, torch.Tensor) else type(t)
        for t in leaves
    ]


def _field_names(tree: Any, prefix: str = "") -> Iterator[str]:
    if isinstance(tree, tuple) and hasattr(type(tree), "_fields"):
        for f, v in zip(tree._fields, tree, strict=True):
            yield from _field_names(v, f"{prefix}{f}.")
    elif isinstance(tree, (tuple, list)):
        for i, v in enumerate(tree):
            yield from _field_names(v, f"{prefix}{i}.")
    else:
        yield prefix.rstrip(".") or "state"


def _check_state(method: str, state: Any, n: int, device: torch.device, report: _Report) -> bool:
    """A state must be a (nested) NamedTuple of (N, ...) tensors on ``device``."""
    if not isinstance(state, tuple):
        report.add(method, "layout", f"must return a NamedTuple state, got {type(state).__name__}")
        return False
    ok = True
    for field, leaf in zip(_field_names(state), pytree.tree_leaves(state), strict=True):
        if not isinstance(leaf, torch.Tensor):
            report.add(
                method,
                "layout",
                f"state field {field!r} is a {type(leaf).__name__}, not a tensor (a Python "
                "value is a trace-time constant: it cannot change from step to step)",
            )
            ok = False
        elif leaf.dim() == 0 or leaf.shape[0] != n or leaf.device != device:
            report.add(
                method,
                "layout",
                f"state field {field!r} has shape {tuple(leaf.shape)} on {leaf.device}; "
                f"expected leading dimension N={n} on {device}",
            )
            ok = False
    return ok


def _compare_layout(method: str, what: str, ref: Any, got: Any, report: _Report) -> None:
    (rs, rl), (gs, gl) = _layout(ref), _layout(got)
    if rs != gs:
        report.add(method, "layout", f"{what} has another structure: {gs} instead of {rs}")
        return
    for field, a, b in zip(_field_names(ref), rl, gl, strict=True):
        if a != b:
            report.add(
                method,
                "layout",
                f"{what}: field {field!r} is {_fmt(b)} instead of {_fmt(a)} (a state field "
                "must keep its shape and dtype: cast or reshape back)",
            )


def _fmt(layout: Any) -> str:
    if isinstance(layout, tuple):
        shape, dt, dev = layout
        return f"{shape} {dt} on {dev}"
    return str(layout)


def _check_methods(
    env_def: EnvDef,
    params: Any,
    dtype: torch.dtype,
    device: torch.device,
    n: int,
    seed: int,
    spaces: tuple[gym.Space, gym.Space],
    trace: bool,
    report: _Report,
) -> Any:
    """Run each method once under the monitors and fake tracing; the reset state or None."""
    obs_space, act_space = spaces
    key0, key1 = keys_from_seeds(torch.arange(seed, seed + n, dtype=torch.int64, device=device))
    counter = torch.zeros(n, dtype=torch.int64, device=device)
    with _Watch(report, "reset", env_def) as w:
        state = env_def.reset(params, Rng(key0, key1, counter, RESET), dtype, None)
    if w.failed or not _check_state("reset", state, n, device, report):
        return None
    with _Watch(report, "observation", env_def) as w:
        obs = env_def.observation(params, state)
    if not w.failed:
        _check_obs_layout(obs, obs_space, n, device, report)
    action = _actions(act_space, n, 1, seed, device, dtype)[0]
    before = [t.clone() for t in pytree.tree_leaves(state)]
    with _Watch(report, "step", env_def) as w:
        out = env_def.step(params, state, action, Rng(key0, key1, counter + 1, STEP))
    if w.failed:
        return None
    for field, a, b in zip(_field_names(state), before, pytree.tree_leaves(state), strict=True):
        if not torch.equal(a, b):
            report.add("step", "purity", f"writes its input state in place (field {field!r})")
    if not (isinstance(out, tuple) and len(out) == 3):
        report.add("step", "layout", "must return (next_state, reward, terminated)")
        return None
    nxt, reward, terminated = out
    if _check_state("step", nxt, n, device, report):
        _compare_layout("step", "the returned state", state, nxt, report)
    _check_flat("step", "reward", reward, n, device, report)
    _check_flat("step", "terminated", terminated, n, device, report)
    if "rgb_array" in env_def.metadata.get("render_modes", []):
        with _Watch(report, "render", env_def, monitor=False) as w:  # not part of the step
            frames = env_def.render(params, state)
        if not w.failed and not (
            isinstance(frames, torch.Tensor)
            and frames.dim() == 4
            and frames.shape[0] == n
            and frames.shape[3] == 3
            and frames.dtype == torch.uint8
            and frames.device == device
        ):
            got = _describe(frames)
            report.add("render", "render", f"must return (N, H, W, 3) uint8 on {device}, got {got}")
    if trace:
        _trace_methods(env_def, params, dtype, state, action, (key0, key1, counter), report)
    return state


def _describe(t: Any) -> str:
    if isinstance(t, torch.Tensor):
        return f"{tuple(t.shape)} {t.dtype} on {t.device}"
    return type(t).__name__


def _check_flat(method: str, what: str, t: Any, n: int, device: torch.device, r: _Report) -> None:
    """``reward``: (N,) real, not bool; ``terminated``: (N,) bool; both on ``device``."""
    for _, message in step_output_problems(what, t, n, device):
        r.add(method, what, message)


def _check_obs_layout(
    obs: Any, space: gym.Space, n: int, device: torch.device, report: _Report
) -> None:
    expect = (n, *space.shape)
    if not isinstance(obs, torch.Tensor):
        report.add("observation", "observation", f"must return a tensor, got {type(obs).__name__}")
        return
    want = _torch_dtype(space.dtype)
    coded = bool_observation(space) and obs.dtype == torch.uint8  # 0/1 bytes of a bool space
    if tuple(obs.shape) != expect or not (obs.dtype == want or coded) or obs.device != device:
        report.add(
            "observation",
            "observation",
            f"must be {expect} {want} on {device} (from {space}), got {_describe(obs)}",
        )
    elif coded and bool(((obs != 0) & (obs != 1)).any()):
        report.add("observation", "observation", "uint8 bytes of a bool space must be 0 or 1")


def _torch_dtype(np_dtype: np.dtype) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dtype=np_dtype)).dtype


def _trace_methods(
    env_def: EnvDef,
    params: Any,
    dtype: torch.dtype,
    state: Any,
    action: torch.Tensor,
    keys: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    report: _Report,
) -> None:
    """Trace each method with fake tensors, as the compiled backend does (``make_fx``)."""
    from torch.fx.experimental.proxy_tensor import make_fx

    leaves, spec = pytree.tree_flatten(state)

    def reset(k0, k1, c):  # noqa: ANN001, ANN202
        return pytree.tree_leaves(env_def.reset(params, Rng(k0, k1, c, RESET), dtype, None))

    def step(k0, k1, c, a, *flat):  # noqa: ANN001, ANN202
        s = pytree.tree_unflatten(list(flat), spec)
        return pytree.tree_leaves(env_def.step(params, s, a, Rng(k0, k1, c, STEP)))

    def observation(*flat):  # noqa: ANN001, ANN202
        return env_def.observation(params, pytree.tree_unflatten(list(flat), spec))

    calls: list[tuple[str, Callable[..., Any], tuple[torch.Tensor, ...]]] = [
        ("reset", reset, keys),
        ("step", step, (*keys, action, *leaves)),
        ("observation", observation, tuple(leaves)),
    ]
    for method, fn, args in calls:
        if report.has(method):
            continue  # the monitors already say what a trace would stumble on
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                make_fx(fn, tracing_mode="fake")(*args)
        except Exception as exc:  # noqa: BLE001 - any failure to trace is the violation
            where = _location(traceback.extract_tb(exc.__traceback__))
            first = str(exc).strip().split("\n")[0]
            report.add(method, "trace", f"cannot be traced ({type(exc).__name__}: {first})", where)


def _actions(
    space: gym.Space, n: int, steps: int, seed: int, device: torch.device, dtype: torch.dtype
) -> list[torch.Tensor]:
    """``steps`` fixed random actions of shape (n, *space.shape) in the space."""
    gen = np.random.default_rng(seed)
    if isinstance(space, gym.spaces.Discrete):
        a = gen.integers(space.start, space.start + space.n, size=(steps, n), dtype=np.int64)
        return [torch.from_numpy(x).to(device) for x in a]
    low = np.where(np.isfinite(space.low), space.low, -1.0)
    high = np.where(np.isfinite(space.high), space.high, 1.0)
    a = gen.uniform(low, high, size=(steps, n, *space.shape))
    return [torch.from_numpy(x).to(device=device, dtype=dtype) for x in a]


@dataclasses.dataclass
class _Record:
    """One step of a shell run: what was stepped from, and what came out."""

    before: Any  # env state before the step
    obs: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_obs: torch.Tensor
    after: Any  # env state after the step (and the autoreset)


def _run(
    env: GpuVecEnv, actions: list[torch.Tensor], seed: int, inject: list[Any] | None = None
) -> list[_Record]:
    """Step ``env`` from ``reset(seed)``; with ``inject``, set the env state before each step."""
    obs, _ = env.reset(seed=seed)
    records = []
    for k, a in enumerate(actions):
        if inject is not None:
            env.set_env_state(inject[k])
        before = env.state.env
        obs, r, term, trunc, info = env.step(a)
        records.append(
            _Record(
                before,
                obs.clone(),
                r.clone(),
                term.clone(),
                trunc.clone(),
                info["final_obs"].clone(),
                env.state.env,
            )
        )
    return records


def _check_runs(
    env_def: EnvDef,
    params: Any,
    dtype: torch.dtype,
    device: torch.device,
    n: int,
    steps: int,
    seed: int,
    compiled: bool,
    report: _Report,
) -> None:
    """Whole-trajectory rules: observations in space, determinism, batch independence, compile."""

    def make(num: int, backend: str = "eager") -> GpuVecEnv:
        return GpuVecEnv(
            env_def,
            num,
            device=device,
            dtype=dtype,
            backend=backend,
            params=params,
            autoreset_mode=AutoresetMode.SAME_STEP,
        )

    actions2 = _actions(make(1).single_action_space, 2 * n, steps, seed, device, dtype)
    actions = [a[:n] for a in actions2]
    rng_state = torch.random.get_rng_state()
    first = _run(make(n), actions, seed)
    if not torch.equal(rng_state, torch.random.get_rng_state()):
        report.add("shell", "rng", "the run advanced torch's global generator; use the given Rng")
    space = make(1).single_observation_space
    outside = None
    for k, rec in enumerate(first):
        for what, obs in (("observation", rec.obs), ("final observation", rec.final_obs)):
            bad = _outside(space, obs)
            if bad is not None and outside is None:
                outside = f"{what} of env {bad[0]} after step {k + 1}: {bad[1]}"
        if not torch.isfinite(rec.reward.double()).all():
            report.add("step", "reward", f"reward is not finite after step {k + 1}")
    if outside is not None:
        report.add("observation", "observation", outside)
    second = _run(make(n), actions, seed)
    diff = _first_difference(first, second, exact=True)
    if diff:
        report.add(
            "shell",
            "rng",
            f"two runs with seed {seed} differ ({diff}): draw only from the given Rng",
        )
    # env i of 2N stepped from env i of N's states must step as it does in a batch of N
    filler = make(2 * n)
    filler.reset(seed=seed)
    extra = filler.state.env
    inject = [pytree.tree_map(lambda a, b: torch.cat([a, b[n:]]), r.before, extra) for r in first]
    wide = _run(make(2 * n), actions2, seed, inject)
    narrowed = [
        _Record(
            *(pytree.tree_map(lambda t: t[:n], getattr(w, f.name)) for f in dataclasses.fields(w))
        )
        for w in wide
    ]
    diff = _first_difference(first, narrowed, exact=False)
    if diff:
        report.add(
            "shell",
            "independence",
            f"env i's step depends on the other envs or the batch size ({n} envs against "
            f"{2 * n}: {diff}); compute each env from its own row, draw from the given Rng",
        )
    if compiled:
        _check_compiled(make, n, actions, seed, first, report)


def _check_compiled(
    make: Callable[..., GpuVecEnv],
    n: int,
    actions: list[torch.Tensor],
    seed: int,
    eager: list[_Record],
    report: _Report,
) -> None:
    env = make(n, "compile")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            got = _run(env, actions, seed, [rec.before for rec in eager])
        except Exception as exc:  # noqa: BLE001
            report.add("shell", "compile", f"the compiled step raised {type(exc).__name__}: {exc}")
            return
    if env.backend != "compile":
        why = "; ".join(str(w.message) for w in caught) or "unknown reason"
        report.add("shell", "compile", f"the step does not compile (would run eager): {why}")
        return
    diff = _first_difference(eager, got, exact=False)
    if diff:
        report.add("shell", "compile", f"compiled and eager steps differ ({diff})")


def _outside(space: gym.Space, obs: torch.Tensor) -> tuple[int, str] | None:
    """First env whose observation is outside ``space``, with a description, or ``None``."""
    arr = obs.cpu().numpy()
    if isinstance(space, gym.spaces.Box):
        flat = arr.reshape(arr.shape[0], -1)
        low, high = space.low.reshape(-1), space.high.reshape(-1)
        ok = (flat >= low) & (flat <= high)
        bad = np.flatnonzero(~ok.all(axis=1))
        if bad.size:
            i = int(bad[0])
            j = int(np.flatnonzero(~ok[i])[0])
            index = np.unravel_index(j, space.shape)
            return i, (
                f"element {tuple(int(x) for x in index)} = {flat[i, j]} is outside "
                f"[{low[j]}, {high[j]}] of {space}"
            )
        return None
    for i, row in enumerate(arr):
        if not space.contains(row):
            return i, f"{row} is outside {space}"
    return None


def _first_difference(a: list[_Record], b: list[_Record], exact: bool) -> str | None:
    """The first field of the first step at which two runs differ, as text."""
    for k, (ra, rb) in enumerate(zip(a, b, strict=True)):
        for f in ("obs", "reward", "terminated", "truncated", "final_obs", "after"):
            xa, xb = getattr(ra, f), getattr(rb, f)
            names = list(_field_names(xa)) if f == "after" else [f]
            for name, ta, tb in zip(
                names, pytree.tree_leaves(xa), pytree.tree_leaves(xb), strict=True
            ):
                if not _close(ta, tb, exact):
                    where = f"state field {name!r}" if f == "after" else name
                    return f"{where} at step {k + 1}"
    return None


def _close(a: torch.Tensor, b: torch.Tensor, exact: bool) -> bool:
    """Equal shapes and dtypes, and values bitwise (``exact``) or to float tolerance."""
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if not a.is_floating_point():
        return torch.equal(a, b)
    rtol, atol = (0.0, 0.0) if exact else _TOLERANCE.get(a.dtype, (1e-4, 1e-5))
    return bool(torch.allclose(a, b, rtol=rtol, atol=atol, equal_nan=True))


#: (rtol, atol) of eager against compiled and of batch sizes: one step from one state.
_TOLERANCE = {torch.float64: (1e-9, 1e-12), torch.float32: (1e-4, 1e-5)}
