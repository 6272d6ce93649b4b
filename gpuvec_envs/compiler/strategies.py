"""The compile strategies a :class:`~gpuvec_envs.compiler.backend.Backend` tries, in order.

Each strategy has a ``name``, the ``kind`` of call it makes, ``applies(request)`` (None
if it applies, else the reason it does not) and ``build(request)``, which compiles,
makes the first call and returns a :class:`Built`. The first strategy that applies and
builds runs every later call; a strategy that raises is a fallback (reported, warned
once), unless the error is a :class:`NoFallback`: the function itself rejected its
arguments, every strategy would fail alike, and the error reaches the caller at once.
To add a strategy, write a class with these four members and insert an instance into
:data:`STRATEGIES` (or pass a sequence to ``Backend(strategies=...)``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import types
from collections.abc import Callable
from typing import Any, NamedTuple, Protocol

import torch

from gpuvec_envs.compiler.cuda_graph import CudaGraphCall
from gpuvec_envs.compiler.flat import compile_flat, refuse_untrusted_cpu_code
from gpuvec_envs.compiler.inplace import InPlaceStateCall
from gpuvec_envs.compiler.kernels import Kernel
from gpuvec_envs.compiler.options import CompilerOptions
from gpuvec_envs.compiler.passes import eager_math
from gpuvec_envs.compiler.pytree import make_flattener, on_cuda, same_layout
from gpuvec_envs.compiler.report import PassResult


class InexactCompile(Exception):  # noqa: N818 - a signal, not an error
    """A compiled call would not compute the eager call's bits (raised before it runs).

    Raised for a :class:`Request` with ``exact=True``; the backend then runs the eager
    strategy, so that a run never switches between calls whose results differ.
    """


def check_exact(request: Request, passes: tuple[PassResult, ...]) -> None:
    """Raise :class:`InexactCompile` if ``request`` needs eager's bits and ``passes`` say no."""
    if request.exact and not eager_math.exact(passes):
        detail = next((p.detail for p in passes if p.name == eager_math.NAME), "")
        raise InexactCompile(detail)


class NoFallback(Exception):  # noqa: N818 - a mixin, not an error of its own
    """Mixin for errors of the compiled function itself, raised while it is traced.

    E.g. arguments that break the function's own rules: every strategy (eager included)
    would raise it, so the backend raises it at once instead of trying the next one.
    """


@dataclasses.dataclass(frozen=True)
class Request:
    """What to compile: ``fn(*bound, *args)`` for the first call's ``args``."""

    fn: Callable[..., Any]  # the function with ``bound`` applied
    raw: Callable[..., Any]  # the function itself
    bound: tuple[Any, ...]
    tag: str  # a name for this instance's compiled code
    args: tuple[Any, ...]  # the first call's arguments
    state_first: bool  # args[0] is a state returned, same structure, as output field 0
    options: CompilerOptions
    #: The compiled call must compute the eager call's bits (else InexactCompile).
    exact: bool = False


class Built(NamedTuple):
    """A strategy's result: the call for later calls and the first call's output."""

    call: Callable[..., Any]
    out: Any
    passes: tuple[PassResult, ...] = ()
    kernels: tuple[Kernel, ...] | None = None  # of the compiled graph, if known


class Strategy(Protocol):
    """One way of running the calls."""

    name: str
    kind: str  # what ``Backend.kind`` reports: fused, cuda_graph, torch_compile or eager

    def applies(self, request: Request) -> str | None:
        """None if this strategy is to be tried for ``request``, else why not."""
        ...

    def build(self, request: Request) -> Built:
        """Compile, make the first call, return the result (may raise)."""
        ...


class FlatCall:
    """A guard-free flat call (:func:`~gpuvec_envs.compiler.flat.compile_flat`)."""

    name, kind = "flat_call", "fused"

    def applies(self, request: Request) -> str | None:  # noqa: D102
        return None if request.options.flat_call else "switched off (flat_call=0)"

    def build(self, request: Request) -> Built:  # noqa: D102
        # A state-first call's inputs are the shell's own tensors (its previous outputs,
        # checked actions), so inductor's per-call shape/stride asserts are redundant;
        # a state that comes back with another layout than it went in keeps them.
        fn, args, options = request.fn, request.args, request.options
        call = compile_flat(fn, args, size_asserts=not request.state_first, compiler=options)
        check_exact(request, call.passes)
        out = call(*args)
        if request.state_first and not same_layout(args[0], out[0]):
            call = compile_flat(fn, args, compiler=options)
        return Built(call, out, call.passes, call.kernels)


class CudaGraph:
    """A flat call on CUDA, replayed from a CUDA graph (the state in its static buffers)."""

    name, kind = "cuda_graph", "cuda_graph"

    def applies(self, request: Request) -> str | None:  # noqa: D102
        if not (request.options.flat_call and request.options.cuda_graph):
            return "switched off"
        return None if on_cuda(request.args) else "not on CUDA"

    def build(self, request: Request) -> Built:  # noqa: D102
        flat = FlatCall().build(request)
        args = request.args
        n = len(make_flattener(args[:1])(args[0])) if request.state_first else 0
        graphed = CudaGraphCall(flat.call, args, {i: i for i in range(n)})
        return Built(graphed, flat.out, flat.passes, flat.kernels)


class InPlaceState:
    """A flat call that writes a state-first call's new state into the state's buffers."""

    name, kind = "in_place_state", "fused"

    def applies(self, request: Request) -> str | None:  # noqa: D102
        opts = request.options
        if not request.state_first:
            return "not a state-first call"
        if not (opts.flat_call and opts.in_place):
            return "switched off"
        if opts.cuda_graph and on_cuda(request.args):
            return "the CUDA graph keeps the state in its static buffers"
        return None

    def build(self, request: Request) -> Built:  # noqa: D102
        call = InPlaceStateCall(request.fn, request.args, compiler=request.options)
        check_exact(request, call.passes)
        return Built(call, call(*request.args), call.passes, call.kernels)


class TorchCompile:
    """``torch.compile(fullgraph=True, dynamic=False)`` with its guards."""

    name, kind = "torch_compile", "torch_compile"

    def applies(self, request: Request) -> str | None:  # noqa: D102
        return None

    def build(self, request: Request) -> Built:  # noqa: D102
        if request.exact:  # dynamo's graph is not seen before it runs
            raise InexactCompile("torch.compile's graph is not checked for eager_math")
        refuse_untrusted_cpu_code(list(make_flattener(request.args)(*request.args)))
        compiled = torch.compile(
            fresh_function(request.raw, request.tag),
            fullgraph=True,
            dynamic=False,
            options=request.options.inductor_config() or None,
        )
        call = functools.partial(compiled, *request.bound)
        log = eager_math.EagerMathLog()
        with contextlib.ExitStack() as stack:
            if request.options.eager_math:  # dynamo compiles at the first call
                log.why_not = stack.enter_context(eager_math.eager_kernels(log))
            out = call(*request.args)
        # the graph's operations are not known here, only what was routed
        log.routable = list(log.routed)
        return Built(call, out, (log.result(request.options.eager_math),))


class Eager:
    """The function as it is."""

    name, kind = "eager", "eager"

    def applies(self, request: Request) -> str | None:  # noqa: D102
        return None

    def build(self, request: Request) -> Built:  # noqa: D102
        return Built(request.fn, request.fn(*request.args))


#: The strategies of the ``compile`` backend, in the order they are tried.
STRATEGIES: tuple[Strategy, ...] = (
    CudaGraph(),
    InPlaceState(),
    FlatCall(),
    TorchCompile(),
    Eager(),
)


def fresh_function(fn: Callable[..., Any], tag: str) -> Callable[..., Any]:
    """Copy ``fn`` with a code object of its own.

    Dynamo caches compiled graphs per code object, so without this every env instance would
    add entries to one shared cache and, past the recompile limit, run eager.
    """
    code = fn.__code__.replace(co_name=f"{fn.__code__.co_name}_{tag}")
    return types.FunctionType(code, fn.__globals__, code.co_name, fn.__defaults__, fn.__closure__)
