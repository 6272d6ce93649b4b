"""Run an ID's compiled CUDA step on the CPU under Triton's interpreter, against CPU eager.

Usage (a CUDA build of torch with Triton, e.g. ``/work/main/.venv-torch2110``; no GPU)::

    python tools/triton_interpret.py ENV_ID [ENV_ID ...] [--steps 300] [--num-envs 64]
        [--mode NextStep|SameStep] [--max-episode-steps K] [--float64] [--in-place] [--config I]

For each ID: the step is lowered for device ``"cuda"`` on fake tensors
(:mod:`gpuvec_envs.compiler.fake_cuda`, as ``tools/kernel_table.py``), the generated module
(wrapper and Triton kernels) is executed on CPU tensors with ``TRITON_INTERPRET=1``, and
``--steps`` steps with random actions are compared bitwise with the CPU eager step from the
same state (each step starts from the eager state). Checks beyond the interpreter's own:

* every load and store a kernel makes under its mask must fall inside a tensor that the
  wrapper passed it (each tensor sits between guard bytes, so a near miss lands in none);
* ``tl.device_assert`` runs (inductor's bounds checks of indirect indices), without
  Triton's integer overflow sanitizer (the RNG hashes wrap on purpose);
* no two programs (blocks) of one launch touch an address that one of them stores (the
  interpreter runs them one after the other, a GPU at once);
* buffers the wrapper allocates are filled with 0xA5 bytes, so a read before a write shows
  as a mismatch.

Prints the kernels, then one line per ID: ``ok`` or the first failure with the kernel and
its source line. Exit status 1 if any ID fails. ``--config I`` runs the I-th autotuning
config of each kernel (default 0, inductor's own choice in interpret mode; -1: each step the
next one, as a GPU's autotuning may pick any).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import linecache
import os
import sys
import time
import traceback
import types
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # this checkout's package
# before Triton is imported: inductor's helpers (triton_helpers) must be interpreted kernels
os.environ["TRITON_INTERPRET"] = "1"

import gymnasium as gym  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
from torch.utils import _pytree as pytree  # noqa: E402

import gpuvec_envs  # noqa: E402, F401 - registers the IDs
from gpuvec_envs.compiler import fake_cuda, flat  # noqa: E402
from gpuvec_envs.compiler.pytree import make_flattener  # noqa: E402
from gpuvec_envs.core.step import pure_step  # noqa: E402

GUARD = 4096  # bytes before and after every tensor
FILL = 0xA5  # byte of fresh buffers


class OutOfBounds(RuntimeError):
    """A kernel loaded or stored outside every tensor it was given."""


class Race(RuntimeError):
    """Two programs of one launch touched one address, one of them writing it."""


@dataclasses.dataclass
class Memory:
    """The guarded allocations of one step: valid byte ranges, and the tensors alive."""

    starts: list[int] = dataclasses.field(default_factory=list)
    ends: list[int] = dataclasses.field(default_factory=list)
    alive: list[torch.Tensor] = dataclasses.field(default_factory=list)
    kernel: str = ""
    reads: list[tuple[np.ndarray, int]] = dataclasses.field(default_factory=list)
    writes: list[tuple[np.ndarray, int]] = dataclasses.field(default_factory=list)

    def empty(self, size: Any, stride: Any, dtype: torch.dtype) -> torch.Tensor:
        """``empty_strided`` on the CPU between guard bytes, filled with :data:`FILL`."""
        item = torch.empty((), dtype=dtype).element_size()
        numel = 1 + sum((s - 1) * st for s, st in zip(size, stride, strict=True) if s > 0)
        nbytes = 0 if 0 in tuple(size) else numel * item
        base = torch.full((nbytes + 2 * GUARD,), FILL, dtype=torch.uint8)
        body = base[GUARD : GUARD + nbytes] if nbytes else base[GUARD : GUARD + item]
        out = body.view(dtype).as_strided(tuple(size), tuple(stride))
        self.alive.append(base)
        self.starts.append(body.data_ptr())
        self.ends.append(body.data_ptr() + nbytes)
        return out

    def copy(self, t: torch.Tensor) -> torch.Tensor:
        """``t`` copied into a guarded tensor of its layout."""
        return self.empty(t.shape, t.stride(), t.dtype).copy_(t)

    def check(
        self, ptrs: np.ndarray, mask: np.ndarray, itemsize: int, what: str, program: int
    ) -> None:
        """Raise :class:`OutOfBounds` if an active address is outside every valid range."""
        addr = ptrs[np.broadcast_to(mask, ptrs.shape)].astype(np.int64)
        if addr.size == 0:
            return
        (self.reads if what == "load" else self.writes).append((addr, program))
        order = np.argsort(self.starts)
        starts, ends = np.asarray(self.starts)[order], np.asarray(self.ends)[order]
        i = np.searchsorted(starts, addr, side="right") - 1
        ok = (i >= 0) & (addr + itemsize <= ends[np.maximum(i, 0)])
        if not ok.all():
            bad = addr[~ok]
            j = np.abs(starts[:, None] - bad[None, :]).min(1).argmin()
            raise OutOfBounds(
                f"{what} of {bad.size} elements outside every tensor (kernel {self.kernel}); "
                f"first at {int(bad[0] - starts[j]):+d} bytes from the start of a tensor of "
                f"{int(ends[j] - starts[j])} bytes"
            )

    def races(self) -> None:
        """Raise :class:`Race` if the launch just run has a race between its programs."""
        reads, writes = self.reads[:], self.writes[:]
        self.reads.clear(), self.writes.clear()
        if not writes:
            return
        w_addr = np.concatenate([a for a, _ in writes])
        w_prog = np.concatenate([np.full(a.size, p) for a, p in writes])
        order = np.lexsort((w_prog, w_addr))
        w_addr, w_prog = w_addr[order], w_prog[order]
        same = w_addr[1:] == w_addr[:-1]
        if (same & (w_prog[1:] != w_prog[:-1])).any():
            raise Race(f"kernel {self.kernel}: an address stored by two programs")
        for addr, prog in reads:
            i = np.clip(np.searchsorted(w_addr, addr), 0, w_addr.size - 1)
            hit = (w_addr[i] == addr) & (w_prog[i] != prog)
            if hit.any():
                raise Race(
                    f"kernel {self.kernel}: program {prog} loads {int(hit.sum())} elements "
                    f"that program {int(w_prog[i][hit][0])} stores"
                )


MEMORY = Memory()


def _checked_builder() -> None:
    """Bounds-check the interpreter's loads and stores; run device asserts, no overflow checks."""
    from triton.runtime import interpreter as interp

    builder = interp.interpreter_builder
    builder.options = dataclasses.replace(builder.options, debug=True, sanitize_overflow=False)
    cls = type(builder)
    load, store = cls.create_masked_load, cls.create_masked_store

    def program(self: Any) -> int:
        x, y, z = self.grid_idx
        return (z * self.grid_dim[1] + y) * self.grid_dim[0] + x

    def masked_load(self: Any, ptrs: Any, mask: Any, *args: Any) -> Any:
        item = interp._get_np_dtype(ptrs.get_element_ty()).itemsize
        MEMORY.check(ptrs.data, mask.data, item, "load", program(self))
        return load(self, ptrs, mask, *args)

    def masked_store(self: Any, ptrs: Any, value: Any, mask: Any, *args: Any) -> Any:
        MEMORY.check(ptrs.data, mask.data, value.data.dtype.itemsize, "store", program(self))
        return store(self, ptrs, value, mask, *args)

    cls.create_masked_load, cls.create_masked_store = masked_load, masked_store


#: libdevice functions (NVIDIA's device math library, which inductor calls for float64
#: transcendentals) as numpy functions: Triton's interpreter has none of them (the stubs of
#: ``triton/language/extra/libdevice.py`` return None, and its builder refuses
#: ``create_extern_elementwise``), so a float64 kernel could not run without this.
LIBDEVICE_NUMPY: dict[str, Callable[..., np.ndarray]] = {
    **{
        name: getattr(np, name)
        for name in (
            "sin cos tan sinh cosh tanh exp exp2 expm1 log log2 log10 log1p sqrt floor ceil "
            "trunc rint fmod nextafter isnan isinf signbit hypot copysign"
        ).split()
    },
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "atan2": np.arctan2,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "pow": np.power,
    "rsqrt": lambda x: 1 / np.sqrt(x),
    "isfinited": np.isfinite,
    "isinfd": np.isinf,
    "nearbyint": np.rint,
}


class _Libdevice(types.ModuleType):
    """``libdevice`` for interpreted kernels: :data:`LIBDEVICE_NUMPY` on the blocks' data."""

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name not in LIBDEVICE_NUMPY:
            raise NotImplementedError(f"libdevice.{name} has no numpy stand-in here")
        op = LIBDEVICE_NUMPY[name]

        def call(*args: Any) -> Any:
            from triton import language as tl
            from triton.runtime.interpreter import TensorHandle

            tensors = [a for a in args if isinstance(a, tl.core.tensor)]
            data = [a.handle.data if isinstance(a, tl.core.tensor) else a for a in args]
            out = np.asarray(op(*data))
            like = tensors[0]
            if out.dtype == np.bool_:
                ty = like.type.with_element_ty(tl.int1) if like.type.is_block() else tl.int1
                return tl.core.tensor(TensorHandle(out, tl.int1), ty)
            out = out.astype(like.handle.data.dtype, copy=False)
            return tl.core.tensor(TensorHandle(out, like.handle.dtype.scalar), like.type)

        return call


class _Cuda:
    """What the generated wrapper calls of ``torch.cuda``: nothing to do on the CPU."""

    @staticmethod
    def _DeviceGuard(index: int) -> contextlib.AbstractContextManager[None]:  # noqa: N802
        return contextlib.nullcontext()

    @staticmethod
    def set_device(index: int) -> None:
        return None


class _Torch(types.ModuleType):
    """``torch`` for the wrapper, with :class:`_Cuda` as ``torch.cuda``."""

    cuda = _Cuda

    def __getattr__(self, name: str) -> Any:
        return getattr(torch, name)


@dataclasses.dataclass
class Lowered:
    """The generated module's source and the real values of its leading and trailing inputs."""

    source: str
    before: list[torch.Tensor]  # AOT autograd's lifted buffers (host constants)
    after: list[torch.Tensor]  # the graph's lifted constants
    n_inputs: int


@contextlib.contextmanager
def _patched(target: Any, name: str, value: Any) -> Iterator[None]:
    old = getattr(target, name)
    setattr(target, name, value)
    try:
        yield
    finally:
        setattr(target, name, old)


def lower(fn: Callable[..., Any], example: tuple[Any, ...], compiler: Any) -> Lowered:
    """:func:`fake_cuda.lower`, keeping the host values of the device constants it lifts."""
    import torch._inductor.compile_fx as cfx

    host: dict[int, torch.Tensor] = {}  # id of a fake device constant -> its host value
    seen: dict[str, Any] = {}
    place, lift, inner = (
        flat._place_constants,
        flat._lift_constants,
        cfx.compile_fx_inner,
    )

    def placed(gm: torch.fx.GraphModule, device: Any, fake_mode: Any = None) -> int:
        copies = {}
        for node in gm.graph.nodes:
            if node.op == "call_function" and node.target is torch.ops.aten._to_copy.default:
                src = node.args[0]
                if (
                    src.op == "call_function"
                    and src.target is torch.ops.aten.lift_fresh_copy.default
                ):
                    src = src.args[0]
                if src.op == "get_attr":
                    value = getattr(gm, src.target)
                    copies[id(node.meta.get("val"))] = value.to(
                        node.kwargs.get("dtype") or value.dtype
                    )
        out = place(gm, device, fake_mode)
        for node in gm.graph.nodes:
            if node.op == "get_attr" and id(node.meta.get("val")) in copies:
                host[id(getattr(gm, node.target))] = copies[id(node.meta["val"])]
        return out

    def lifted(gm: torch.fx.GraphModule) -> list[torch.Tensor]:
        values = lift(gm)
        seen["after"] = [host.get(id(v), v) for v in values]
        seen["before"] = [*gm.parameters(), *gm.buffers()]
        return values

    def compiled(gm: Any, example_inputs: Any, **kwargs: Any) -> Any:
        seen["n_inputs"] = len(example_inputs)
        return inner(gm, example_inputs, **kwargs)

    with (
        _patched(flat, "_place_constants", placed),
        _patched(flat, "_lift_constants", lifted),
        _patched(cfx, "compile_fx_inner", compiled),
    ):
        low = fake_cuda.lower(fn, example, compiler=compiler)
    before = [t.detach().cpu() for t in seen["before"]]
    after = [t.detach().cpu() for t in seen["after"]]
    return Lowered(low.source, before, after, seen["n_inputs"])


def load(source: str, config: int) -> tuple[Callable[[list[torch.Tensor]], Any], list[Any]]:
    """Execute the generated module for the interpreter; return its ``call`` and kernels."""
    import torch._inductor.runtime.triton_helpers as helpers
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    path = Path(f"/tmp/gpuvec_interpret_{os.getpid()}.py")
    path.write_text(source)
    ns: dict[str, Any] = {"__name__": "gpuvec_interpreted", "__file__": str(path)}
    with fake_cuda.fake_gpu(), _patched(helpers, "set_driver_to_gpu", lambda: None):
        exec(compile(source, str(path), "exec"), ns)  # noqa: S102 - inductor's own output
    kernels = [v for v in ns.values() if isinstance(v, CachingAutotuner)]
    for k in kernels:
        k.all_configs = k.configs
        k.configs = [k.configs[max(0, min(config, len(k.configs) - 1))]]
        k.run = _named(k.run, k.inductor_meta.get("kernel_name", k.fn.__name__))
        k.fn.fn.__globals__["libdevice"] = _Libdevice("libdevice")
    ns.update(
        empty_strided_cuda=MEMORY.empty,
        empty_strided=MEMORY.empty,
        get_raw_stream=lambda index: 0,
        torch=_Torch("torch"),
        device=lambda *a, **k: torch.device("cpu"),
    )
    _checked_builder()
    return ns["call"], kernels


def _named(run: Callable[..., Any], name: str) -> Callable[..., Any]:
    @functools.wraps(run)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        MEMORY.kernel = name
        MEMORY.reads.clear(), MEMORY.writes.clear()
        out = run(*args, **kwargs)
        MEMORY.races()
        return out

    return wrapped


def _where(exc: BaseException) -> str:
    """The kernel source lines in an exception's tracebacks (innermost last)."""
    lines, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        for fr in traceback.extract_tb(exc.__traceback__):
            if "torchinductor" in fr.filename or "gpuvec_interpret" in fr.filename:
                text = (fr.line or linecache.getline(fr.filename, fr.lineno)).strip()
                lines.append(f"{fr.filename}:{fr.lineno} ({fr.name}): {text}")
        exc = exc.__cause__ or exc.__context__
    return "\n    ".join(dict.fromkeys(lines))


def _in_place(fn: Callable[..., Any], flatten_state: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` writing its new state into the state's tensors, as ``InPlaceStateCall`` traces it."""

    def inplace(state: Any, *rest: Any) -> Any:
        out = fn(state, *rest)
        for buf, value in zip(flatten_state(state), flatten_state(out[0]), strict=True):
            buf.copy_(value)
        return type(out)(None, *out[1:])

    return inplace


def _named_leaves(tree: Any, name: str = "") -> list[tuple[str, torch.Tensor]]:
    """The tensor leaves of a tree of NamedTuples, tuples and None, with dotted names."""
    if tree is None:
        return []
    if isinstance(tree, torch.Tensor):
        return [(name.lstrip("."), tree)]
    fields = getattr(tree, "_fields", None)
    out: list[tuple[str, torch.Tensor]] = []
    for i, sub in enumerate(tree):
        out += _named_leaves(sub, f"{name}.{fields[i]}" if fields else f"{name}[{i}]")
    return out


def column_scale(want: torch.Tensor) -> torch.Tensor:
    """The largest magnitude of each element position over the batch: ``(1, ...)``.

    Floats are held to their value's precision or to this scale's, whichever is larger: a
    sum that cancels to near zero (a velocity crossing zero) carries the rounding of its
    terms, which are of the order of the column's values, not of the small result.
    """
    if not want.dtype.is_floating_point or want.dim() == 0:
        return torch.zeros(())
    w = want.double().abs().nan_to_num(0.0, 0.0, 0.0)
    return w.amax(0, keepdim=True)


def ulps(got: torch.Tensor, want: torch.Tensor, scale: torch.Tensor | None = None) -> torch.Tensor:
    """Elementwise difference in units of the dtype's epsilon (float64 result).

    ``|got - want| / (eps * max(|got|, |want|, scale))``, ``scale`` from
    :func:`column_scale`: 0 where both are equal (NaN included), inf where one is NaN or
    infinite and the other not. Integer and bool tensors: 0 where equal, inf where not.
    """
    if not (got.dtype.is_floating_point and want.dtype == got.dtype):
        return torch.where(got == want, 0.0, torch.inf).double()
    g, w = got.double(), want.double()
    same = (g == w) | (g.isnan() & w.isnan())
    big = torch.maximum(g.abs(), w.abs())
    if scale is not None:
        big = torch.maximum(big, scale)
    err = ((g - w).abs() / (big * torch.finfo(got.dtype).eps)).nan_to_num(torch.inf)
    return torch.where(same, 0.0, err)


def _rows(t: torch.Tensor, n: int) -> torch.Tensor:
    """(n, -1) view of a batched output, or (1, -1) of one that is not batched."""
    return t.reshape(n, -1) if t.dim() and t.shape[0] == n else t.reshape(1, -1)


@dataclasses.dataclass
class Tally:
    """Largest differences seen, per output name, over a run."""

    ulps: dict[str, float] = dataclasses.field(default_factory=dict)
    absolute: dict[str, float] = dataclasses.field(default_factory=dict)
    differing: dict[str, int] = dataclasses.field(default_factory=dict)
    compared: int = 0
    excused: list[str] = dataclasses.field(default_factory=list)

    def add(self, name: str, got: torch.Tensor, want: torch.Tensor, u: torch.Tensor) -> None:
        """Record one output's comparison (``u``: :func:`ulps` of it)."""
        n = int((u > 0).sum())
        self.differing[name] = self.differing.get(name, 0) + n
        if n and got.dtype.is_floating_point:
            finite = u[u.isfinite()]
            if finite.numel():
                self.ulps[name] = max(self.ulps.get(name, 0.0), float(finite.max()))
            diff = (got.double() - want.double()).abs()
            diff = diff[diff.isfinite()]
            if diff.numel():
                self.absolute[name] = max(self.absolute.get(name, 0.0), float(diff.max()))

    def largest(self) -> str:
        """One line: the largest difference in ulps and in absolute value, with its output."""
        if not any(self.differing.values()):
            return "bitwise equal"
        out = []
        if self.ulps:
            name = max(self.ulps, key=self.ulps.__getitem__)
            out.append(f"largest {self.ulps[name]:.2f} ulps ({name})")
        if self.absolute:
            name = max(self.absolute, key=self.absolute.__getitem__)
            out.append(f"largest absolute {self.absolute[name]:.3g} ({name})")
        diff = {k: v for k, v in self.differing.items() if v}
        out.append(f"elements differing {diff}")
        return ", ".join(out)


def _perturbed(tree: Any, i: int, k: int, rel: float, gen: torch.Generator) -> Any:
    """Env ``i``'s row of every leaf of ``tree``, repeated ``k`` times, floats perturbed.

    Float leaves are multiplied by ``1 + rel * u`` (``u`` uniform in [-1, 1]; row 0 is left
    as it is).
    """

    def one(t: torch.Tensor | None) -> torch.Tensor | None:
        if t is None or t.dim() == 0:
            return t
        rows = t[i : i + 1].expand(k, *t.shape[1:]).clone()
        if t.dtype.is_floating_point:
            u = torch.rand(rows.shape, generator=gen, dtype=torch.float64) * 2 - 1
            u[0] = 0
            rows = (rows.double() * (1 + rel * u)).to(t.dtype)
        return rows

    return pytree.tree_map(one, tree)


def _excused(
    fn: Callable[..., Any],
    state: Any,
    action: torch.Tensor,
    i: int,
    got_rows: list[torch.Tensor],
    scales: list[torch.Tensor],
    tol: float,
    dtype: torch.dtype,
    gen: torch.Generator,
    k: int = 256,
) -> bool:
    """Whether env ``i``'s kernel outputs are an eager step's from a state ``tol`` ulps away.

    ``k`` perturbed copies of env ``i``'s state and action (float leaves within ``tol`` ulps)
    are stepped eagerly; one of them must give the kernel's discrete outputs exactly and its
    floats within ``2 * tol`` ulps. This is how a discrete output may differ: a float input
    within rounding of a threshold (a pole angle one rounding from the termination angle).
    """
    rel = tol * torch.finfo(dtype).eps
    cand = fn(_perturbed(state, i, k, rel, gen), _perturbed(action, i, k, rel, gen))
    ok = torch.ones(k, dtype=torch.bool)
    for g, sc, (_, c) in zip(got_rows, scales, _named_leaves(cand), strict=True):
        if c.dim() == 0 or c.shape[0] != k:  # not batched (the finiteness probe)
            continue
        sc = sc.reshape(1, -1) if sc.dim() else sc
        c = _rows(c, k)
        ok &= (ulps(g.expand_as(c), c, sc) <= 2 * tol).all(1)
    return bool(ok.any())


def _random_action(space: gym.Space, like: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    """A batch of random actions of ``space`` shaped and typed as ``like``."""
    if isinstance(space, gym.spaces.Discrete):
        lo = int(space.start)
        return torch.randint(lo, lo + int(space.n), like.shape, generator=gen, dtype=like.dtype)
    if isinstance(space, gym.spaces.Box):
        low = torch.as_tensor(space.low, dtype=torch.float64)
        high = torch.as_tensor(space.high, dtype=torch.float64)
        u = torch.rand(like.shape, generator=gen, dtype=torch.float64)
        return (low + (high - low) * u).to(like.dtype)
    raise NotImplementedError(f"random actions of {space}")


def check(env_id: str, args: argparse.Namespace) -> bool:
    """Lower, interpret and compare ``args.steps`` steps of ``env_id``; print; True if ok."""
    kwargs: dict[str, Any] = {}
    if args.max_episode_steps:
        kwargs["max_episode_steps"] = args.max_episode_steps
    if args.float64:
        kwargs["dtype"] = torch.float64
    env = gym.make_vec(
        env_id,
        num_envs=args.num_envs,
        device="cpu",
        backend="eager",
        validate=False,
        autoreset_mode=args.mode,
        **kwargs,
    ).unwrapped
    env.reset(seed=args.seed)
    dtype = env._step_cfg.dtype
    fn = functools.partial(pure_step, env.env_def, env.params, env._step_cfg)
    action = env._example_action()
    flatten_state = make_flattener((env.state,))
    traced = _in_place(fn, flatten_state) if args.in_place else fn
    start = time.perf_counter()
    # Triton kernels only: eager_math would leave float64 sin/cos to ATen's own CUDA
    # kernels (extern calls the interpreter cannot run; tests/test_reproducibility.py -m
    # cuda checks them on a GPU), so here they are lowered to Triton (libdevice) as well
    options = env.compiler_options.replace({"eager_math": False})
    low = lower(traced, (env.state, action), options)
    call, kernels = load(low.source, args.config)
    print(f"{env_id}: lowered in {time.perf_counter() - start:.0f} s, {len(kernels)} kernels")
    for k in kernels:
        name = k.inductor_meta.get("kernel_name")
        print(f"  {name}: {[c.kwargs for c in k.all_configs]}")
    flatten = make_flattener((env.state, action))
    gen = torch.Generator().manual_seed(args.seed)
    replay_gen = torch.Generator().manual_seed(args.seed + 1)
    n = args.num_envs
    tally = Tally()
    state, step = env.state, -1
    start = time.perf_counter()
    try:
        for step in range(args.steps):
            if args.config < 0:  # every config in turn
                for k in kernels:
                    k.configs = [k.all_configs[step % len(k.all_configs)]]
            action = _random_action(env.single_action_space, action, gen)
            want = fn(state, action)
            MEMORY.starts.clear(), MEMORY.ends.clear(), MEMORY.alive.clear()
            inputs = [*low.before, *flatten(state, action), *low.after]
            if len(inputs) != low.n_inputs:
                raise RuntimeError(f"{len(inputs)} inputs for a call of {low.n_inputs}")
            copies = [MEMORY.copy(t) for t in inputs]
            got = list(call(list(copies)))
            expect = _named_leaves(want)
            if args.in_place:  # the state comes back in the input tensors
                m = len(flatten_state(state))
                first = len(low.before)
                got = copies[first : first + m] + got
                expect = expect[:m] + _named_leaves(want[1:])
            bad = torch.zeros(n, dtype=torch.bool)
            scales = [column_scale(w) for _, w in expect]
            diffs = []
            for g, sc, (name, w) in zip(got, scales, expect, strict=True):
                if g.dtype != w.dtype or g.shape != w.shape:
                    print(
                        f"  FAIL step {step}: {name} is {g.dtype}{tuple(g.shape)}, "
                        f"eager {w.dtype}{tuple(w.shape)}"
                    )
                    return False
                u = ulps(g, w, sc if g.dim() and g.shape[0] == n else None)
                diffs.append(u)
                tally.add(name, g, w, u)
                rows = _rows(u, n)
                limit = args.ulps if g.dtype.is_floating_point else 0
                rows_bad = (rows > limit).any(1)
                bad |= rows_bad if rows.shape[0] == n else rows_bad.expand(n)
            tally.compared += 1
            for i in bad.nonzero().flatten().tolist():
                got_rows = [_rows(g, n)[i if _rows(g, n).shape[0] == n else 0] for g in got]
                discrete = any(
                    not g.dtype.is_floating_point
                    and not torch.equal(_rows(g, n)[i], _rows(w, n)[i])
                    for g, (_, w) in zip(got, expect, strict=True)
                    if _rows(g, n).shape[0] == n
                )
                if discrete and _excused(
                    fn, state, action, i, got_rows, scales, args.ulps, dtype, replay_gen
                ):
                    tally.excused.append(f"step {step} env {i}")
                    continue
                names = [
                    name
                    for g, u, (name, _) in zip(got, diffs, expect, strict=True)
                    if _rows(u, n).shape[0] == n
                    and (_rows(u, n)[i] > (args.ulps if g.dtype.is_floating_point else 0)).any()
                ]
                print(
                    f"  FAIL step {step}: env {i} differs in {names} "
                    f"(tolerance {args.ulps} ulps for floats, 0 for the rest)"
                )
                print(f"    so far: {tally.largest()}")
                return False
            state = want.state if hasattr(want, "state") else want[0]
    except Exception as exc:  # noqa: BLE001 - the failure is the finding
        print(f"  FAIL step {step}: kernel {MEMORY.kernel}: {type(exc).__name__}: {exc}")
        print(f"    {_where(exc)}")
        return False
    seconds = time.perf_counter() - start
    excused = (
        f"; {len(tally.excused)} excused at a threshold: {tally.excused}" if tally.excused else ""
    )
    print(
        f"  ok: {args.steps} steps, {dtype}, floats within {args.ulps} ulps, discrete "
        f"outputs equal{excused}; {tally.largest()} ({seconds:.0f} s)"
    )
    return True


def main() -> int:
    """Check every ID; exit 1 if one fails."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("env_ids", nargs="+")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--num-envs", type=int, default=64)
    p.add_argument("--mode", default="NextStep", help="autoreset mode")
    p.add_argument("--max-episode-steps", type=int, default=0, help="0: the ID's own")
    p.add_argument("--float64", action="store_true", help="float64 rewards (tests/test_cuda)")
    p.add_argument("--in-place", action="store_true", help="the in_place_state call's graph")
    p.add_argument(
        "--config",
        type=int,
        default=0,
        help="autotuning config of each kernel (-1: step i runs config i % n)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--ulps",
        type=float,
        default=4.0,
        help="float tolerance: |kernel - eager| <= ULPS * eps * max(|kernel|, |eager|)",
    )
    args = p.parse_args()
    warnings.filterwarnings("ignore", category=DeprecationWarning)
    why = fake_cuda.unavailable()
    if why is not None:
        print(f"needs a CUDA build of torch with Triton: {why}", file=sys.stderr)
        return 2
    print(f"torch {torch.__version__}, N={args.num_envs}, {args.mode}, {args.steps} steps")
    ids = [i if i.startswith("gpuvec/") else f"gpuvec/{i}" for i in args.env_ids]
    failed = [i for i in ids if not check(i, args)]
    print(f"failed: {failed or 'none'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
