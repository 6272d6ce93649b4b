"""Guard-free compiled calls of pure tensor functions (:func:`compile_flat`).

``torch.compile`` re-checks its guards (shapes, strides, every constant it read) and
rebuilds pytrees on every call, which costs tens of microseconds: more than the physics of
thousands of envs. :func:`compile_flat` compiles a pure function once for one set of
example inputs, the way inductor does behind ``torch.compile`` (an aten graph traced by
``make_fx``, then ``compile_fx``), and returns a plain callable: the arguments are
flattened by generated code, the generated kernel runs, the outputs are rebuilt by
generated code. No guards are evaluated, so the caller must pass inputs of exactly the
example's structure, shapes, strides, dtypes and device.

Compilation patches process-wide state (inductor's config, the C++ kernel hook) for its
duration only, under :data:`COMPILE_LOCK`, so compiles from several threads run one at a
time.
"""

from __future__ import annotations

import collections
import contextlib
import copyreg
import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import torch

from gpuvec_envs.compiler.kernels import kernels_of
from gpuvec_envs.compiler.options import WIDE_FUSION, CompilerOptions
from gpuvec_envs.compiler.passes import cpp_schedule, eager_math, isa_probe, wrapping
from gpuvec_envs.compiler.passes.cpp_schedule import ScheduleLog, scheduled_cpp_kernels
from gpuvec_envs.compiler.passes.direct_call import direct_call
from gpuvec_envs.compiler.pytree import (
    batch_size,
    leaf_paths,
    make_flattener,
    make_unflattener,
    rebuild,
)
from gpuvec_envs.compiler.report import PassResult

E = TypeVar("E", bound=BaseException)

#: Held while a compilation has torch patched; compiles from other threads wait for it.
COMPILE_LOCK = threading.RLock()


class StopCompile(Exception):  # noqa: N818 - a signal, not an error
    """Raised by a patched inductor stage to end a compile early (never a reason to retry)."""


def carried(exc: BaseException | None, cls: type[E]) -> E | None:
    """The ``cls`` exception ``exc`` is or wraps (inductor wraps errors of its stages)."""
    seen: set[int] = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, cls):
            return exc
        seen.add(id(exc))
        exc = getattr(exc, "inner_exception", None) or exc.__cause__ or exc.__context__
    return None


#: Number of graphs compiled by :func:`compile_flat` in this process (for tests and stats).
compiled_graphs = 0

#: ``dynamic_batch`` calls compiled in this process, by their key (:func:`_memo_key`): a
#: new ``num_envs`` of the same step reuses the call instead of tracing it again.
_DYNAMIC_CALLS: collections.OrderedDict[str, Callable[..., Any]] = collections.OrderedDict()
#: Calls kept in :data:`_DYNAMIC_CALLS` (the least recently used goes first).
DYNAMIC_CALLS_KEPT = 32


def _memo_key(
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    inductor_options: dict[str, Any],
    compiler: CompilerOptions,
) -> str | None:
    """What a ``dynamic_batch`` call is for, whatever the batch size; None if unknown."""
    from gpuvec_envs.compiler import warm

    settings = (compiler.items(), sorted(inductor_options.items()), torch.get_num_threads())
    return warm.call_key(fn, (), args, settings, dynamic_batch=True)


#: The first torch release whose inductor builds AVX2 code that computes eager's values:
#: before it, ``torch.where(x != 0, (x & 15) - 1, -9)`` on int32 came out wrong in every
#: vectorized lane (torch 2.11.0, plain ``torch.compile`` too; right on 2.13.0 and 2.14.1).
AVX2_TRUSTED_FROM = (2, 13)


class UntrustedCpuCode(RuntimeError):
    """Inductor's C++ on this host is known not to compute eager's values: callers stay eager."""


def untrusted_cpu_code(leaves: list[Any]) -> str | None:
    """Why inductor's C++ for these tensors would not compute eager's values, or None.

    Only a CPU graph (no CUDA tensor among ``leaves``) under an ATen capability of AVX2
    (``ATEN_CPU_CAPABILITY=avx2`` or a CPU without AVX-512) on a torch before
    :data:`AVX2_TRUSTED_FROM`.
    """
    devices = {t.device.type for t in leaves if isinstance(t, torch.Tensor)}
    if "cpu" not in devices or "cuda" in devices:
        return None
    if torch.backends.cpu.get_cpu_capability() != "AVX2":
        return None
    if torch.torch_version.TorchVersion(torch.__version__) >= AVX2_TRUSTED_FROM:
        return None
    return (
        f"torch {torch.__version__}'s inductor computes some int32 selects wrongly in AVX2 "
        "code (fixed in torch 2.13); CPU steps run eagerly here: use torch >= 2.13 to compile"
    )


def refuse_untrusted_cpu_code(leaves: list[Any]) -> None:
    """Raise :class:`UntrustedCpuCode` where :func:`untrusted_cpu_code` names a reason.

    Fake tensors (the CUDA lowering) build no code and pass.
    """
    from torch._guards import detect_fake_mode

    why = untrusted_cpu_code(leaves) if detect_fake_mode(leaves) is None else None
    if why is not None:
        raise UntrustedCpuCode(why)


def compile_flat(
    fn: Callable[..., Any],
    example_args: tuple[Any, ...],
    size_asserts: bool = True,
    options: dict[str, Any] | None = None,
    *,
    compiler: CompilerOptions | None = None,
    memo_as: Any = None,
) -> Callable[..., Any]:
    """Compile the pure function ``fn`` once for ``example_args``; return a guard-free call.

    ``fn`` must take and return pytrees of tensors, tuples/NamedTuples and ``None`` only,
    and be free of data-dependent Python control flow; in-place updates of its inputs are
    written back to them. The compiled code goes to inductor's on-disk FX graph cache, so
    another process compiling the same graph loads it in seconds.

    Args:
        fn: The pure function.
        example_args: Example arguments (their structure, shapes, strides, dtypes and
            device are those of every later call).
        size_asserts: Keep inductor's per-call check of every input's shape and strides;
            ``False`` for callers that guarantee them.
        options: Inductor config values set while compiling (added to
            ``compiler.inductor``).
        compiler: Switches of the passes (default: :func:`~gpuvec_envs.compiler.options.
            resolve`'s).
        memo_as: What identifies ``fn`` for reuse (default: ``fn`` itself, pickled): with
            ``dynamic_batch``, a call compiled in this process for the same function and
            arguments but another batch size is returned instead of tracing anew.

    Returns:
        ``call(*args)``, with attributes ``flatten``, ``unflatten``, ``flat`` (the call of
        the flat leaves) and ``passes`` (a :class:`~gpuvec_envs.compiler.report.PassResult`
        per pass).

    Raises:
        UntrustedCpuCode: CPU tensors on a host and torch where inductor's C++ is known to
            compute other values than eager (:func:`untrusted_cpu_code`).
        Exception: whatever tracing or inductor raise; callers fall back to other backends.
    """
    from torch._guards import detect_fake_mode

    from gpuvec_envs.compiler.options import resolve

    compiler = compiler if compiler is not None else resolve()
    flatten = make_flattener(example_args)
    leaves = list(flatten(*example_args))
    refuse_untrusted_cpu_code(leaves)
    batch = batch_size(leaves) if compiler.dynamic_batch else None
    inductor_options = {
        **compiler.inductor_config(),
        **(options or {}),
        # torch 2.14.1 binds a dynamic size's symbol in the size asserts only
        "size_asserts": size_asserts or batch is not None,
    }
    memo = None
    if batch is not None and detect_fake_mode(leaves) is None:
        memo = _memo_key(
            fn if memo_as is None else memo_as, example_args, inductor_options, compiler
        )
        with COMPILE_LOCK:
            if memo is not None and memo in _DYNAMIC_CALLS:
                _DYNAMIC_CALLS.move_to_end(memo)
                return _DYNAMIC_CALLS[memo]
    sizes = [len(leaf_paths(a)) for a in example_args]
    captured: dict[str, Any] = {}

    def flat_fn(*flat: torch.Tensor) -> tuple[torch.Tensor, ...]:
        args, pos = [], 0
        for example, size in zip(example_args, sizes, strict=True):
            args.append(rebuild(example, iter(flat[pos : pos + size])))
            pos += size
        out = fn(*args)
        captured["structure"] = out
        return tuple(eval(p, {"out": out}) for p in leaf_paths(out, "out"))  # noqa: S307

    log, wrap_log, probe_log = ScheduleLog(), wrapping.WrapLog(), isa_probe.ProbeLog()
    math_log = eager_math.EagerMathLog()
    with COMPILE_LOCK, stable_cache_keys():
        try:
            compiled, inner, inputs, wrap_skipped, dynamic = _compile(
                flat_fn,
                leaves,
                inductor_options,
                compiler,
                log,
                wrap_log,
                probe_log,
                batch,
                math_log,
            )
        except Exception as exc:
            if batch is None or carried(exc, StopCompile) is not None:
                raise
            # an op without symbolic sizes (in tracing or lowering): compile the one size
            log, wrap_log, probe_log = ScheduleLog(), wrapping.WrapLog(), isa_probe.ProbeLog()
            math_log = eager_math.EagerMathLog()
            inductor_options["size_asserts"] = size_asserts
            compiled, inner, inputs, wrap_skipped, _ = _compile(
                flat_fn,
                leaves,
                inductor_options,
                compiler,
                log,
                wrap_log,
                probe_log,
                math_log=math_log,
            )
            dynamic = PassResult("dynamic_batch", "failed", _first_line(exc))
    cpp_wrapper = bool(inductor_options.get("cpp_wrapper"))
    call_flat, passes = direct_call(
        compiled,
        inner,
        inputs,
        len(leaves),
        enabled=compiler.direct_call,
        # the lean wrapper keeps scratch buffers of the example's sizes between calls
        lean=compiler.lean_wrapper and not cpp_wrapper and dynamic.status != "applied",
    )
    passes.append(_schedule_result(compiler, log, leaves))
    passes.append(_vec_paths_result(compiler, log, leaves))
    if cpp_wrapper:
        passes = [_cpp_wrapper_result(p, compiler) for p in passes]
    passes.append(_wrapping_result(wrap_skipped, wrap_log))
    passes.append(_isa_probe_result(compiler, probe_log, leaves))
    passes.append(_wide_fusion_result(compiler, inductor_options))
    passes.append(dynamic)
    passes.append(math_log.result(compiler.eager_math))
    unflatten = make_unflattener(captured.pop("structure"))
    global compiled_graphs
    compiled_graphs += 1

    def call(*args: Any) -> Any:
        return unflatten(call_flat(*flatten(*args)))

    call.flatten = flatten  # type: ignore[attr-defined]
    call.unflatten = unflatten  # type: ignore[attr-defined]
    call.flat = call_flat  # type: ignore[attr-defined]
    call.passes = tuple(passes)  # type: ignore[attr-defined]
    call.kernels = kernels_of(inner.get("code"))  # type: ignore[attr-defined]
    if memo is not None and dynamic.status == "applied":
        with COMPILE_LOCK:
            _DYNAMIC_CALLS[memo] = call
            while len(_DYNAMIC_CALLS) > DYNAMIC_CALLS_KEPT:
                _DYNAMIC_CALLS.popitem(last=False)
    return call


def _compile(
    flat_fn: Callable[..., Any],
    leaves: list[torch.Tensor],
    inductor_options: dict[str, Any],
    compiler: CompilerOptions,
    log: ScheduleLog,
    wrap_log: wrapping.WrapLog,
    probe_log: isa_probe.ProbeLog,
    batch: int | None = None,
    math_log: eager_math.EagerMathLog | None = None,
) -> tuple[Callable[..., Any], dict[str, Any], list[torch.Tensor], PassResult | None, PassResult]:
    """Trace and compile.

    ``leaves`` may be fake tensors (of a ``FakeTensorMode`` with a shape env and static
    shapes): then nothing runs for real (:mod:`~gpuvec_envs.compiler.fake_cuda`). With a
    ``batch`` size, the leading dimension of the leaves of that size is traced as a symbol
    (``dynamic_batch``).

    Returns AOT autograd's call, inductor's output, all inputs, the ``wrapping_mul``
    pass's result if it did not apply (``None`` if it did) and the ``dynamic_batch``
    pass's result. ``math_log`` receives what the ``eager_math`` pass found and did.
    """
    from torch._dynamo.utils import counters
    from torch._guards import detect_fake_mode
    from torch._inductor.compile_fx import compile_fx, compile_fx_inner
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    # A tracing context with a shape env lets inductor's FX graph cache keep the compiled
    # code on disk (without one it bypasses the cache and every process compiles anew).
    given = detect_fake_mode(leaves)
    dynamic = PassResult("dynamic_batch", "off")
    fake_mode = given or FakeTensorMode(shape_env=ShapeEnv(), static_shapes=batch is None)
    traced = leaves if batch is None else _batch_fakes(fake_mode, leaves, batch, given)
    inner: dict[str, Any] = {}

    def inner_compile(gm: torch.fx.GraphModule, example_inputs: Any, **kwargs: Any) -> Any:
        out = compile_fx_inner(gm, example_inputs, **kwargs)
        inner.update(code=out, arity=len(example_inputs))
        return out

    schedule = (
        scheduled_cpp_kernels(log, compiler.cpp_schedule, compiler.vec_paths)
        if compiler.cpp_schedule or compiler.vec_paths
        else contextlib.nullcontext()
    )
    stack = contextlib.ExitStack()
    if compiler.isa_probe and _on_cpu(leaves):
        stack.enter_context(isa_probe.picked_only(probe_log))
    wrap_skipped = _wrapping_skipped(compiler, leaves)
    if wrap_skipped is None:  # kernels flagged first: no product may wrap without the flag
        why = stack.enter_context(wrapping.wrapv_kernels(wrap_log))
        if why is not None:
            wrap_skipped = PassResult("wrapping_mul", "failed", why)
    with stack, torch.no_grad(), torch._guards.tracing(torch._guards.TracingContext(fake_mode)):
        products = wrapping.wrapping_products(wrap_log) if wrap_skipped is None else None
        with products or contextlib.nullcontext():
            graph, dynamic = _trace(flat_fn, leaves, traced, fake_mode, batch, dynamic)
        device = graph_device(leaves)
        math_log = math_log if math_log is not None else eager_math.EagerMathLog()
        math_log.routable, math_log.unfixed = eager_math.graph_ops(graph)
        cuda_config: dict[str, Any] = {}
        if compiler.eager_math and device is not None and device.type == "cuda":
            math_log.cuda = True
            math_log.divisions = eager_math.eager_reciprocals(graph)
            cuda_config, math_log.missing = eager_math.cuda_config()
        _place_constants(graph, device, fake_mode if given else None)
        check_no_host_copies(graph, device)
        _lift_scan_constants(graph)
        # Constants become inputs, so that AOT autograd adds none and the generated code
        # can be called directly; not around higher-order ops (inductor's C++ ``scan``
        # then crashes at run time).
        loops = any(isinstance(n.target, torch._ops.HigherOrderOperator) for n in graph.graph.nodes)
        constants = [] if loops else _lift_constants(graph)
        inputs = [*leaves, *constants]
        # Static example inputs: from real ones, AOT autograd gives every dimension a symbol,
        # and one that no op specialises (the batch size of an elementwise step) compiles to
        # kernels taking their sizes at run time (torch 2.14.1 then binds those symbols only
        # in the size asserts: a NameError with size_asserts=False).
        fake_inputs = [fake_mode.from_tensor(t, static_shapes=True) for t in inputs]
        if dynamic.status == "applied":
            fake_inputs[: len(leaves)] = traced
        lift = inductor_options.get("max_fusion_size") == WIDE_FUSION
        with (
            torch._inductor.config.patch({**inductor_options, **cuda_config}),
            _no_autograd_cache(),
            schedule,
            _any_fusion_distance(lift),
            contextlib.ExitStack() as routing,
        ):
            if compiler.eager_math and math_log.routable:
                math_log.why_not = routing.enter_context(eager_math.eager_kernels(math_log))
            hits = counters["inductor"]["fxgraph_cache_hit"]
            compiled = compile_fx(graph, fake_inputs, inner_compile=inner_compile)
            math_log.cached = counters["inductor"]["fxgraph_cache_hit"] > hits
    return compiled, inner, inputs, wrap_skipped, dynamic


def _trace(
    flat_fn: Callable[..., Any],
    leaves: list[torch.Tensor],
    traced: list[torch.Tensor],
    fake_mode: Any,
    batch: int | None,
    dynamic: PassResult,
) -> tuple[torch.fx.GraphModule, PassResult]:
    """``make_fx``'s graph of ``flat_fn``: of ``traced`` (symbolic batch) if that works."""
    from torch.fx.experimental.proxy_tensor import make_fx

    if batch is not None:
        aten = torch.ops.aten
        # ``__rshift__``/``__lshift__``'s meta functions cannot broadcast a symbolic size
        # (``bitwise_*_shift``'s can; inductor lowers both pairs to the same code), and
        # ``constant_pad_nd``'s fixes the size it pads (an indexed read keeps it)
        table = {
            aten.__rshift__.Tensor: aten.bitwise_right_shift.Tensor,
            aten.__lshift__.Tensor: aten.bitwise_left_shift.Tensor,
            aten.constant_pad_nd.default: _pad_by_index,
        }
        with _quiet("torch._subclasses.fake_tensor"):  # it logs a failed meta's traceback
            graph = make_fx(flat_fn, decomposition_table=table, tracing_mode="fake")(*traced)
        dynamic = _dynamic_result(fake_mode, traced, batch)
        if dynamic.status == "applied":
            return graph, dynamic
    return make_fx(flat_fn, tracing_mode="fake")(*leaves), dynamic


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    """Silence the logger ``name`` below CRITICAL for the duration."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(level)


def _pad_by_index(x: torch.Tensor, pad: list[int], value: float = 0.0) -> torch.Tensor:
    """``constant_pad_nd`` as an indexed read and a select (pointwise: it fuses)."""
    for i in range(len(pad) // 2):
        dim, (left, right) = x.dim() - 1 - i, pad[2 * i : 2 * i + 2]
        width = x.shape[dim]
        idx = torch.arange(-left, width + right, device=x.device)
        inside = ((idx >= 0) & (idx < width)).view(-1, *[1] * (x.dim() - 1 - dim))
        picked = x.index_select(dim, idx.clamp(0, width - 1))
        x = torch.where(inside, picked, torch.full((), value, dtype=x.dtype, device=x.device))
    return x


def _first_line(exc: BaseException) -> str:
    """``Type: first line of the message`` (at most 300 characters)."""
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]


def _batch_fakes(
    fake_mode: Any, leaves: list[torch.Tensor], batch: int, given: Any
) -> list[torch.Tensor]:
    """Fakes of ``leaves`` whose leading dimension is one symbol where its size is ``batch``.

    ``given``: the leaves are fake tensors of that mode already (a fake GPU); contiguous
    ones of the batch size are made again with the symbol.
    """
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import DimDynamic, StatelessSymbolicContext

    if given is None:  # a symbol each, made one by the step's own operations
        out = []
        for t in leaves:
            dims = [DimDynamic.STATIC] * t.dim()
            if t.dim() > 0 and t.shape[0] == batch:
                dims[0] = DimDynamic.DYNAMIC
            ctx = StatelessSymbolicContext(dims)
            out.append(fake_mode.from_tensor(t, symbolic_context=ctx))
        return out
    env, source = fake_mode.shape_env, ConstantSource("gpuvec_batch")
    symbol = env.create_symbol(batch, source, dynamic_dim=DimDynamic.DYNAMIC)
    n = env.create_symintnode(symbol, hint=batch, source=source)
    out = []
    for t in leaves:
        if t.dim() > 0 and t.shape[0] == batch and t.is_contiguous():
            with fake_mode:
                out.append(torch.empty((n, *t.shape[1:]), dtype=t.dtype, device=t.device))
        else:
            out.append(t)
    return out


def _dynamic_result(fake_mode: Any, traced: list[torch.Tensor], batch: int) -> PassResult:
    """Whether the traced graph kept the batch size a symbol (``dynamic_batch``)."""
    env = fake_mode.shape_env
    sizes = [t.shape[0] for t in traced if t.dim() > 0 and isinstance(t.shape[0], torch.SymInt)]
    if not sizes:
        return PassResult("dynamic_batch", "failed", f"no input of batch size {batch}")
    if all(env.replace(s.node.expr).is_number for s in sizes):
        why = f"the traced function fixed the batch size to {batch} (e.g. int() of a size)"
        return PassResult("dynamic_batch", "failed", why)
    return PassResult("dynamic_batch", "applied", f"any batch size; traced at {batch}")


def graph_device(leaves: list[torch.Tensor]) -> torch.device | None:
    """The one device every leaf is on, or None (no leaves, or several devices)."""
    devices = {t.device for t in leaves}
    return devices.pop() if len(devices) == 1 else None


def _place_constants(
    gm: torch.fx.GraphModule, device: torch.device | None, fake_mode: Any = None
) -> int:
    """Copy the host constants that the graph copies to its device onto it, once.

    ``torch.tensor(values, device=d)`` traces as a host constant and a copy to ``d`` at
    every call: on CUDA a copy from pageable memory and a host synchronisation per step,
    and inside a CUDA graph a copy that the replay does not redo from the constant. Each
    such copy of a constant is made here, at compile time (as a fake tensor under
    ``fake_mode``), and the graph reads the device constant instead. Returns their number.
    """
    if device is None or device.type == "cpu":
        return 0
    aten = torch.ops.aten
    placed = 0
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not aten._to_copy.default:
            continue
        src = node.args[0]
        if src.op == "call_function" and src.target is aten.lift_fresh_copy.default:
            src = src.args[0]
        to = node.kwargs.get("device")
        if src.op != "get_attr" or to is None or torch.device(to) != device:
            continue
        value = getattr(gm, src.target)
        if not isinstance(value, torch.Tensor) or value.device.type != "cpu":
            continue
        kwargs = dict(node.kwargs)
        if fake_mode is None:
            on_device = aten._to_copy.default(value, **kwargs)
        else:  # no real device: a fake tensor of the copy's layout
            with fake_mode:
                on_device = torch.empty_strided(
                    value.shape,
                    value.stride(),
                    dtype=kwargs.get("dtype") or value.dtype,
                    device=device,
                )
        name = f"_gpuvec_device_constant_{placed}"
        gm.register_buffer(name, on_device)
        with gm.graph.inserting_before(node):
            attr = gm.graph.get_attr(name)
        attr.meta = dict(node.meta)
        node.replace_all_uses_with(attr)
        gm.graph.erase_node(node)
        placed += 1
    if placed:
        gm.graph.eliminate_dead_code()
        # the host originals no longer read: else AOT autograd lifts them as graph inputs
        used = {n.target for n in gm.graph.nodes if n.op == "get_attr"}
        for name in [b for b, _ in gm.named_buffers() if b not in used and "." not in b]:
            del gm._buffers[name]
        for name in [k for k, v in vars(gm).items() if isinstance(v, torch.Tensor)]:
            if name not in used:
                delattr(gm, name)
        gm.recompile()
    return placed


class HostCopyError(RuntimeError):
    """A graph of a device copies host data to it at every call (see :func:`_place_constants`)."""


def check_no_host_copies(gm: torch.fx.GraphModule, device: torch.device | None) -> None:
    """Raise :class:`HostCopyError` if the graph of ``device`` copies host tensors to it.

    Such a copy is a host synchronisation per call (from pageable memory), and a CUDA graph
    replays it without reading the host tensor again. After :func:`_place_constants`
    none should be left; what is left was computed on the host inside the traced function.
    """
    if device is None or device.type == "cpu":
        return
    copies = []
    for node in gm.graph.nodes:
        if node.op != "call_function" or "copy" not in str(node.target):
            continue
        out, src = node.meta.get("val"), [a.meta.get("val") for a in node.all_input_nodes]
        host = [s for s in src if isinstance(s, torch.Tensor) and s.device.type == "cpu"]
        if host and isinstance(out, torch.Tensor) and out.device == device:
            copies.append(f"{node.target}({host[0].dtype} {tuple(host[0].shape)})")
    if copies:
        raise HostCopyError(
            f"the {device} graph copies host tensors to the device at every call: "
            f"{', '.join(copies[:5])}; build them on the device (e.g. "
            "gpuvec_envs.core.constants.table)"
        )


def _wrapping_skipped(compiler: CompilerOptions, leaves: list[torch.Tensor]) -> PassResult | None:
    """The ``wrapping_mul`` pass's result if it is not tried for these inputs, else None."""
    if not compiler.wrapping_mul:
        return PassResult("wrapping_mul", "off")
    if not _on_cpu(leaves):
        return PassResult("wrapping_mul", "not_needed", "not a CPU graph")
    return None


def _on_cpu(leaves: list[torch.Tensor]) -> bool:
    """Whether the graph runs on the CPU (every input there)."""
    return bool(leaves) and all(t.device.type == "cpu" for t in leaves)


def _memory_format(name: str) -> torch.memory_format:
    """``torch.<name>``: how :func:`stable_cache_keys` pickles a memory format."""
    return getattr(torch, name)


def _reduce_memory_format(fmt: torch.memory_format) -> tuple[Any, tuple[str]]:
    return _memory_format, (str(fmt).rsplit(".", 1)[-1],)


@contextlib.contextmanager
def stable_cache_keys() -> Iterator[None]:
    """Make inductor's FX graph cache key independent of the process's import order.

    A ``torch.memory_format`` pickles by reference to the first module in ``sys.modules``
    that reaches it as ``torch.<name>``; in a script that imports gymnasium before torch
    that is ``__mp_main__``, in the background compile's child ``torch._utils``, so the
    caller missed the cache its child had just filled and compiled again. While this is
    active, memory formats pickle by name.
    """
    table = copyreg.dispatch_table
    had = torch.memory_format in table
    old = table.get(torch.memory_format)
    table[torch.memory_format] = _reduce_memory_format
    try:
        yield
    finally:
        if had:
            table[torch.memory_format] = old
        else:
            del table[torch.memory_format]


def _hooked_pass_result(
    name: str,
    on: bool,
    errors: list[str],
    changed: int,
    unchanged_why: str,
    log: ScheduleLog,
    leaves: list[torch.Tensor],
) -> PassResult | None:
    """A C++ source pass's outcome, or None if it changed sites (the caller says which)."""
    if not on:
        return PassResult(name, "off")
    if not log.hooked:
        return PassResult(name, "failed", "torch has no AsyncCompile.cpp_pybinding to hook")
    if errors:
        return PassResult(name, "failed", f"kernel left unchanged: {errors[0]}")
    if log.kernels == 0:
        on_cpu = any(t.device.type == "cpu" for t in leaves)
        return PassResult(name, "not_needed" if not on_cpu else "failed", "no C++ kernel built")
    return None if changed else PassResult(name, "not_needed", unchanged_why)


def _schedule_result(
    compiler: CompilerOptions, log: ScheduleLog, leaves: list[torch.Tensor]
) -> PassResult:
    """The cpp_schedule pass's outcome from its log."""
    why = f"no loop body with more than {cpp_schedule.MIN_ACCESSES} loads and stores"
    out = _hooked_pass_result(
        "cpp_schedule", compiler.cpp_schedule, log.errors, log.blocks, why, log, leaves
    )
    if out is not None:
        return out
    detail = f"{log.blocks} loop bodies in {log.kernels} kernels"
    if log.unknown_aliases:
        detail += f"; buffers treated as one, alias map unknown ({log.unknown_aliases[0]})"
    return PassResult("cpp_schedule", "applied", detail)


def _vec_paths_result(
    compiler: CompilerOptions, log: ScheduleLog, leaves: list[torch.Tensor]
) -> PassResult:
    """The vec_paths pass's outcome from its log."""
    why = "no counted vector load, uint8 conversion or int32 range"
    out = _hooked_pass_result(
        "vec_paths", compiler.vec_paths, log.vec_errors, log.vec_sites, why, log, leaves
    )
    detail = f"{log.vec_sites} calls in {log.kernels} kernels"
    return out if out is not None else PassResult("vec_paths", "applied", detail)


#: Why the passes on the Python wrapper and on separately built kernels skip a graph
#: compiled with inductor's C++ wrapper (the rollout scan, a ``cpp_wrapper`` option).
CPP_WRAPPER_WHY = "not run on C++-wrapper graphs (kernels built inside the wrapper)"


def _cpp_wrapper_result(result: PassResult, compiler: CompilerOptions) -> PassResult:
    """``result`` for a C++-wrapper graph: the three passes that do not see one say why."""
    if result.name not in ("lean_wrapper", "cpp_schedule", "vec_paths"):
        return result
    if not getattr(compiler, result.name) or result.status == "applied":
        return result
    return PassResult(result.name, "off", CPP_WRAPPER_WHY)


def _wrapping_result(skipped: PassResult | None, log: wrapping.WrapLog) -> PassResult:
    """The wrapping_mul pass's outcome: ``skipped`` if it did not apply, else what it did."""
    if skipped is not None:
        return skipped
    if log.products == 0:
        return PassResult("wrapping_mul", "not_needed", "no int32 product traced")
    detail = f"{log.products} products; {wrapping.FLAG} on {log.kernels} kernels"
    return PassResult("wrapping_mul", "applied", detail)


def _isa_probe_result(
    compiler: CompilerOptions, log: isa_probe.ProbeLog, leaves: list[torch.Tensor]
) -> PassResult:
    """The isa_probe pass's outcome: the ISA probed alone, or why inductor probed them all."""
    if not compiler.isa_probe:
        return PassResult("isa_probe", "off")
    if not _on_cpu(leaves):
        return PassResult("isa_probe", "not_needed", "not a CPU graph")
    if log.status is None:
        return PassResult("isa_probe", "not_needed", "inductor did not ask for the ISA list")
    return PassResult("isa_probe", log.status, log.detail)


#: The method of inductor's scheduler that refuses to fuse nodes over 64 apart.
_DISTANCE_RULE = "are_long_distant_nodes"


@contextlib.contextmanager
def _any_fusion_distance(on: bool) -> Iterator[None]:
    """While ``on``, inductor's scheduler fuses nodes however far apart (where it has the rule)."""
    from torch._inductor.scheduler import Scheduler

    if not on or not hasattr(Scheduler, _DISTANCE_RULE):
        yield
        return
    with patched(Scheduler, _DISTANCE_RULE, lambda self, node1, node2: False):
        yield


@contextlib.contextmanager
def patched(target: Any, name: str, value: Any) -> Iterator[None]:
    """``target.name = value`` inside the block (restored after, or deleted if new)."""
    missing = object()
    old = target.__dict__.get(name, missing) if isinstance(target, type) else missing
    if old is missing:
        old = getattr(target, name, missing)
    setattr(target, name, value)
    try:
        yield
    finally:
        if old is missing:
            delattr(target, name)
        else:
            setattr(target, name, old)


def _wide_fusion_result(compiler: CompilerOptions, inductor_options: dict[str, Any]) -> PassResult:
    """The wide_fusion switch's outcome: inductor's fusion cap and distance rule of this graph."""
    from torch._inductor.scheduler import Scheduler

    cap = inductor_options.get("max_fusion_size", torch._inductor.config.max_fusion_size)
    if not compiler.wide_fusion:
        return PassResult("wide_fusion", "off", f"max_fusion_size {cap}")
    if cap != WIDE_FUSION:
        return PassResult("wide_fusion", "off", f"max_fusion_size {cap} set by inductor options")
    if not hasattr(Scheduler, _DISTANCE_RULE):
        why = f"max_fusion_size {cap}; this inductor has no distance rule ({_DISTANCE_RULE})"
        return PassResult("wide_fusion", "applied", why)
    return PassResult("wide_fusion", "applied", f"max_fusion_size {cap}, any distance")


def _no_autograd_cache() -> Any:
    """Turn AOT autograd's cache off (a hit would skip ``inner_compile``), where it exists."""
    from torch._functorch import config

    if hasattr(config, "enable_autograd_cache"):
        return config.patch(enable_autograd_cache=False)
    return contextlib.nullcontext()


def _lift_constants(gm: torch.fx.GraphModule) -> list[torch.Tensor]:
    """Make the graph's tensor constants trailing inputs; return their values in order."""
    last = [n for n in gm.graph.nodes if n.op == "placeholder"][-1]
    lifted: dict[str, torch.fx.Node] = {}
    values = []
    for node in list(gm.graph.nodes):
        if node.op != "get_attr":
            continue
        if node.target not in lifted:
            value = getattr(gm, node.target)
            if not isinstance(value, torch.Tensor):
                continue
            with gm.graph.inserting_after(last):
                last = gm.graph.placeholder(f"lifted_constant_{len(values)}")
            last.meta = dict(node.meta)
            lifted[node.target] = last
            values.append(value)
        node.replace_all_uses_with(lifted[node.target])
        gm.graph.erase_node(node)
    for name in lifted:  # AOT autograd would lift every remaining buffer as an input
        gm._buffers.pop(name, None)
        if hasattr(gm, name):
            delattr(gm, name)
    gm.recompile()
    return values


def _lift_scan_constants(gm: torch.fx.GraphModule) -> None:
    """Pass the tensor constants of ``scan`` loop bodies in as the loop's inputs.

    ``make_fx`` stores a tensor made while tracing (``torch.tensor([...])`` of constants)
    as an attribute of the graph that uses it; inside a ``scan`` body such an attribute
    breaks AOT autograd's functionalisation of the loop. Each one becomes an extra
    ``additional_inputs`` operand of the scan, read from the outer graph.
    """
    for node in list(gm.graph.nodes):
        if node.op != "call_function" or node.target is not torch.ops.higher_order.scan:
            continue
        body_attr, init, xs, extra = node.args
        body = getattr(gm, body_attr.target)
        consts = [n for n in body.graph.nodes if n.op == "get_attr"]
        if not consts:
            continue
        last = [n for n in body.graph.nodes if n.op == "placeholder"][-1]
        new_extra = list(extra)
        for i, const in enumerate(consts):
            value = getattr(body, const.target)
            with body.graph.inserting_after(last):
                ph = body.graph.placeholder(f"lifted_const_{i}")
            ph.meta = dict(const.meta)
            last = ph
            for user in list(const.users):  # lift_fresh_copy -> detach_: the value itself
                if user.target is torch.ops.aten.lift_fresh_copy.default:
                    for u in list(user.users):
                        if u.target is torch.ops.aten.detach_.default:
                            u.replace_all_uses_with(ph)
                            body.graph.erase_node(u)
                    user.replace_all_uses_with(ph)
                    body.graph.erase_node(user)
            const.replace_all_uses_with(ph)
            body.graph.erase_node(const)
            name = f"{body_attr.target}_const_{i}"
            gm.register_buffer(name, value)
            with gm.graph.inserting_before(node):
                attr = gm.graph.get_attr(name)
                outer = gm.graph.call_function(torch.ops.aten.lift_fresh_copy.default, (attr,))
            attr.meta, outer.meta = dict(const.meta), dict(ph.meta)
            new_extra.append(outer)
        body.recompile()
        node.args = (body_attr, init, xs, tuple(new_extra))
    gm.recompile()
