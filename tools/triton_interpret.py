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

import gpuvec_envs  # noqa: E402, F401 - registers the IDs
from gpuvec_envs.compiler import fake_cuda, flat  # noqa: E402
from gpuvec_envs.compiler.pytree import leaf_paths, make_flattener  # noqa: E402
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


def _leaves(tree: Any) -> list[torch.Tensor]:
    return [eval(p, {"t": tree}) for p in leaf_paths(tree)]  # noqa: S307 - our own paths


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
    fn = functools.partial(pure_step, env.env_def, env.params, env._step_cfg)
    action = env._example_action()
    flatten_state = make_flattener((env.state,))
    traced = _in_place(fn, flatten_state) if args.in_place else fn
    start = time.perf_counter()
    low = lower(traced, (env.state, action), env.compiler_options)
    call, kernels = load(low.source, args.config)
    print(f"{env_id}: lowered in {time.perf_counter() - start:.0f} s, {len(kernels)} kernels")
    for k in kernels:
        name, n = k.inductor_meta.get("kernel_name"), len(k.all_configs)
        print(f"  {name}: {[c.kwargs for c in k.all_configs]}")
    flatten = make_flattener((env.state, action))
    gen = torch.Generator().manual_seed(args.seed)
    n_actions = int(env.single_action_space.n)
    state, step = env.state, -1
    start = time.perf_counter()
    try:
        for step in range(args.steps):
            if args.config < 0:  # every config in turn
                for k in kernels:
                    k.configs = [k.all_configs[step % len(k.all_configs)]]
            action = torch.randint(0, n_actions, action.shape, generator=gen, dtype=action.dtype)
            want = fn(state, action)
            MEMORY.starts.clear(), MEMORY.ends.clear(), MEMORY.alive.clear()
            inputs = [*low.before, *flatten(state, action), *low.after]
            if len(inputs) != low.n_inputs:
                raise RuntimeError(f"{len(inputs)} inputs for a call of {low.n_inputs}")
            copies = [MEMORY.copy(t) for t in inputs]
            got = list(call(list(copies)))
            expect = _leaves(want)
            if args.in_place:  # the state comes back in the input tensors
                n = len(flatten_state(state))
                first = len(low.before)
                got = copies[first : first + n] + got
                expect = expect[:n] + _leaves(want[1:])
            for i, (g, w) in enumerate(zip(got, expect, strict=True)):
                if g.dtype != w.dtype or not torch.equal(g, w):
                    bad = (g != w).reshape(g.shape[0], -1).any(1).nonzero().flatten()
                    print(f"  FAIL step {step}: output {i} differs in envs {bad.tolist()[:8]}")
                    return False
            state = want.state if hasattr(want, "state") else want[0]
    except Exception as exc:  # noqa: BLE001 - the failure is the finding
        print(f"  FAIL step {step}: kernel {MEMORY.kernel}: {type(exc).__name__}: {exc}")
        print(f"    {_where(exc)}")
        return False
    print(f"  ok: {args.steps} steps bitwise equal ({time.perf_counter() - start:.0f} s)")
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
