"""The backend that runs a pure function eagerly or through the first strategy that works."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import logging
import os
import time
import warnings
import weakref
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from gpuvec_envs.compiler import warm
from gpuvec_envs.compiler.background import BackgroundBuild
from gpuvec_envs.compiler.flat import UntrustedCpuCode
from gpuvec_envs.compiler.options import CompilerOptions, resolve
from gpuvec_envs.compiler.pytree import on_cuda
from gpuvec_envs.compiler.report import CompileReport, Fallback
from gpuvec_envs.compiler.strategies import (
    STRATEGIES,
    Eager,
    InexactCompile,
    NoFallback,
    Request,
    Strategy,
)

_log = logging.getLogger(__name__)


class CompileError(RuntimeError):
    """A compile strategy failed under ``compiler_options={"strict": True}``."""


BACKENDS = ("auto", "eager", "compile", "background")
#: Seconds of eager calls after which the ``background`` backend starts compiling: a
#: function called only briefly (a test, a short script) is never compiled.
START_AFTER_S = 0.5
_warned: set[tuple[str, str]] = set()


def warn_once(what: str, reason: str, stacklevel: int = 2) -> None:
    """A RuntimeWarning for ``what`` failing for ``reason``, once per process."""
    if (what, reason) in _warned:
        return
    _warned.add((what, reason))
    warnings.warn(f"gpuvec_envs compiler: {what} ({reason})", RuntimeWarning, stacklevel + 1)


def _call_within(
    context: Callable[[], contextlib.AbstractContextManager[Any]],
    fn: Callable[..., Any],
    *args: Any,
) -> Any:
    """``fn(*args)`` inside ``context()``."""
    with context():
        return fn(*args)


def run_within(
    context: Callable[[], contextlib.AbstractContextManager[Any]], fn: Callable[..., Any]
) -> Callable[..., Any]:
    """``fn`` run inside ``context()`` at every call (picklable, as a Backend must be)."""
    return functools.partial(_call_within, context, fn)


#: The most CPUs at which eager env steps pause while their child compiles
#: (``yield_to_compile``). On 2 CPUs a caller stepping MinAtar Breakout (N=4096) eagerly
#: without pause slowed the child's compile from 22 s (caller idle) to 27 s; pausing as
#: long as each step ran, to 23 s.
YIELD_MAX_CPUS = 2


def available_cpus() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


class Backend:
    """Runs ``fn(*bound, *args)`` eagerly or as one compiled call.

    The ``compile`` backend compiles on the first call, for that call's shapes, strides,
    device and dtype, trying :data:`~gpuvec_envs.compiler.strategies.STRATEGIES` in order
    (CUDA graph, in-place state, flat call, ``torch.compile``, eager); :attr:`report` then
    says which one runs, what each pass did and why earlier strategies were not used. Later
    calls must pass arguments of the first call's exact structure, shapes, strides, dtypes
    and device (the env shell guarantees this).

    The ``background`` backend runs calls eagerly and, once they have taken
    :data:`START_AFTER_S` seconds, compiles the latest call's function and arguments in a
    child process, which fills inductor's on-disk cache
    (:mod:`~gpuvec_envs.compiler.background`; meanwhile eager calls leave one of the
    process's CPU threads to it); the first call after the child finishes builds the
    compiled call from the warm cache (seconds, on the caller's thread; on CUDA the CUDA
    graph is captured there too) and runs it. Switching changes no state a state-first call
    carries, and the switch point depends on timing, so ``auto``/``background`` switch only
    to a compiled call that computes the eager call's bits (the ``eager_math`` pass says so,
    :mod:`~gpuvec_envs.compiler.passes.eager_math`); one that would not is not used (the
    report's fallbacks say why) and the calls stay eager. ``auto`` is ``background``. On
    CUDA the child starts at the first call. With the ``warm_start`` switch (on by
    default), a CPU call that an earlier process compiled
    (:mod:`~gpuvec_envs.compiler.warm`) is built from the cache at the first call instead.

    A strategy that fails, and a background compile that fails, are reported in
    :attr:`report` and warned about (naming :attr:`label`) for every backend; with the
    ``strict`` option they raise :class:`CompileError` instead.

    Args:
        fn: The pure function.
        bound: Leading (constant) arguments bound to it.
        backend: ``"eager"``, ``"compile"``, ``"background"`` or ``"auto"``.
        tag: A name for this instance's compiled code.
        state_first: The first argument is a state that the call returns, with the same
            structure, as the first field of its output.
        cuda_graph: If given, overrides ``compiler.cuda_graph``.
        options: Inductor config values, added to ``compiler.inductor``.
        in_place: If given, overrides ``compiler.in_place``.
        compiler: The switches (a :class:`CompilerOptions` or a dict of overrides;
            default: from ``GPUVEC_COMPILER``).
        strategies: The strategies to try, in order.
        eager_context: A context manager factory that every eager call runs inside (the
            env shell's :func:`~gpuvec_envs.core.eager.host_eager`); never entered while
            tracing.
        yield_to_child: Eager calls made while this backend's child process compiles
            owe a pause as long as they ran, which the caller pays with :meth:`settle`
            (outside its own timing of the call); only with the ``yield_to_compile``
            switch on, on at most :data:`YIELD_MAX_CPUS` CPUs.
        label: What the warnings call this function (default: ``tag``), e.g. the env.

    Raises:
        ValueError: an unknown ``backend``.
        TypeError: bad ``compiler`` options.
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        bound: tuple[Any, ...],
        backend: str,
        tag: str,
        state_first: bool = False,
        cuda_graph: bool | None = None,
        options: Mapping[str, Any] | None = None,
        in_place: bool | None = None,
        compiler: CompilerOptions | Mapping[str, Any] | None = None,
        strategies: Sequence[Strategy] = STRATEGIES,
        eager_context: Callable[[], contextlib.AbstractContextManager[Any]] | None = None,
        yield_to_child: bool = False,
        label: str | None = None,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        opts = resolve(compiler)
        legacy: dict[str, Any] = {}
        if cuda_graph is not None:
            legacy["cuda_graph"] = cuda_graph
        if in_place is not None:
            legacy["in_place"] = in_place
        if options:
            legacy["inductor"] = {**opts.inductor, **options}
        self.options = opts.replace(legacy)
        self.eager_fn = functools.partial(fn, *bound)
        self.label = label or tag
        # what eager calls run (eager_fn itself is what the strategies trace)
        self._eager_call = (
            self.eager_fn if eager_context is None else run_within(eager_context, self.eager_fn)
        )
        #: The backend asked for; :attr:`name` is the one running now.
        self.mode = backend
        self.name = "compile" if backend == "compile" else "eager"
        self.kind = "eager"  # how calls run: eager, fused, cuda_graph or torch_compile
        #: How the call was compiled; None before that (and for the eager backend).
        self.report: CompileReport | None = None
        #: Calls run eagerly by the ``background``/``auto`` backend before the switch.
        self.eager_calls = 0
        self.strategies = tuple(strategies)
        self._fn = self._eager_call
        self._raw, self._tag, self._bound = fn, tag, bound
        self._state_first = state_first
        self._compiled_once = backend == "eager"
        self._eager_seconds = 0.0
        self._pending: BackgroundBuild | None = None
        self._compile_next = False  # compile at the next call (the job did not pickle)
        self._warm_key: str | None = None  # the marker name (compiler.warm), once known
        # the process's thread count: inductor's code generation reads it, and a compile
        # from inside a thread-limited call (ThreadControl) would build other code
        self._compile_threads = torch.get_num_threads()
        self._yield = (
            yield_to_child and self.options.yield_to_compile and available_cpus() <= YIELD_MAX_CPUS
        )
        self._owed_pause = 0.0

    @property
    def function(self) -> Callable[..., Any]:
        """The uncompiled function with its bound arguments: ``function(*args)``."""
        return functools.partial(self._raw, *self._bound)

    def __call__(self, *args: Any) -> Any:
        """Call the function; a compiled backend compiles (or switches) on its first calls."""
        if self._compiled_once:
            return self._fn(*args)
        cuda = self.eager_calls == 0 and on_cuda(args)
        if (
            self._compile_next
            or self.mode == "compile"
            or (self.eager_calls == 0 and not cuda and self._cache_is_warm(args))
        ):
            self._compiled_once = True
            self.name = "compile"
            out = self._adopt(self._compile(args))
            self._mark_warm(args)
            return out
        pending = self._pending
        if pending is not None and pending.done:
            return self._switch(pending, args)
        t0 = time.perf_counter()
        threads = torch.get_num_threads()
        if pending is not None and threads > 1:  # leave a core to the compile
            torch.set_num_threads(threads - 1)
            try:
                out = self._eager_call(*args)
            finally:
                torch.set_num_threads(threads)
        else:
            out = self._eager_call(*args)
        seconds = time.perf_counter() - t0
        self._eager_seconds += seconds
        self.eager_calls += 1
        if self._yield and pending is not None and pending.child_pid is not None:
            self._owed_pause += seconds  # leave the compile a share of the CPUs
        if pending is None and (cuda or self._eager_seconds >= START_AFTER_S):
            self.start_background(args)
        return out

    def settle(self) -> None:
        """Pause for what eager calls owe a running compile (``yield_to_child``)."""
        owed, self._owed_pause = self._owed_pause, 0.0
        if owed > 0.0:
            time.sleep(owed)

    def start_background(self, args: tuple[Any, ...]) -> None:
        """Start warming inductor's cache for ``args`` in a child process, if not started.

        A function that does not pickle is compiled at the next call instead (on the
        caller's thread, as the ``compile`` backend does).
        """
        if self._pending is not None or self._compiled_once:
            return
        job = WarmJob(
            self._raw,
            self._bound,
            self._tag,
            tuple(args),
            self._state_first,
            self.options,
            self._compile_threads,
        )
        try:
            self._pending = BackgroundBuild(job)
        except TypeError:
            self._compile_next = True
            warn_once(
                "the step does not pickle, so it cannot be compiled in a child process",
                "it compiles at the next call instead",
                3,
            )
            return
        weakref.finalize(self, self._pending.cancel)
        _log.info(
            "background compile of %s started after %d eager calls (%.2f s)",
            self._tag,
            self.eager_calls,
            self._eager_seconds,
        )

    def wait(self, timeout: float | None = None) -> bool:
        """Block until a background compile started by earlier calls has warmed the cache.

        The next call then builds the compiled call (seconds) and runs it, or, if the
        compile failed, runs eagerly for good. Returns whether nothing is pending any more.
        """
        pending = self._pending
        return pending is None or self._compiled_once or pending.wait(timeout)

    def cancel(self) -> None:
        """Stop a pending background compile; later calls stay eager."""
        pending = self._pending
        if pending is not None and not self._compiled_once:
            pending.cancel()
            self._compiled_once = True
            self.name, self._fn = "eager", self._eager_call

    def __getstate__(self) -> dict[str, Any]:
        """Copies (deepcopy, pickle) keep the compiled call but no pending compile."""
        state = dict(self.__dict__)
        if state["_pending"] is not None and not state["_compiled_once"]:
            state["_eager_seconds"] = 0.0
        state["_pending"] = None
        return state

    def _switch(self, pending: BackgroundBuild, args: tuple[Any, ...]) -> Any:
        """Build the compiled call from the warm cache and run it (or stay eager)."""
        self._compiled_once = True
        reason = None if pending.ok else pending.note
        if reason is None:
            try:
                built = self._compile(args)
            except CompileError:
                raise
            except Exception as exc:  # noqa: BLE001 - the eager calls go on
                reason = f"{type(exc).__name__}: {exc}".split("\n")[0][:500]
        if reason is not None:
            what = "the background compile failed; the calls stay eager"
            if self.options.strict:
                self._compiled_once = False
                raise CompileError(f"{self.label}: {what} ({reason})")
            self._warn(what, reason, 4)
            self.name, self.kind = "eager", "eager"
            self.report = CompileReport(
                strategy="eager",
                passes=(),
                fallbacks=(Fallback("background", reason),),
                skipped=(),
                compile_seconds=0.0,
                torch_version=torch.__version__,
                options=self.options.items(),
                background=pending.note,
                eager_calls=self.eager_calls,
            )
            return self._eager_call(*args)
        out = self._adopt(built)
        self._mark_warm(args)
        self.report = dataclasses.replace(
            self.report, background=pending.note, eager_calls=self.eager_calls
        )
        _log.info(
            "%s runs compiled (%s) after %d eager calls; build from the warm cache %.1f s",
            self._tag,
            self.kind,
            self.eager_calls,
            self.report.compile_seconds,
        )
        return out

    def _warn(self, what: str, reason: str, stacklevel: int) -> None:
        """A RuntimeWarning naming this backend's :attr:`label` (one per backend and cause)."""
        message = f"gpuvec_envs compiler: {self.label}: {what} ({reason})"
        warnings.warn(message, RuntimeWarning, stacklevel + 1)

    def _cache_is_warm(self, args: tuple[Any, ...]) -> bool:
        """Whether an earlier process compiled this call into inductor's cache (CPU only)."""
        if not self.options.warm_start:
            return False
        self._warm_key = self._call_key(args)
        return warm.is_warm(self._warm_key)

    def _mark_warm(self, args: tuple[Any, ...]) -> None:
        """Record a CPU call that compiled (see :mod:`~gpuvec_envs.compiler.warm`)."""
        if not self.options.warm_start or self.kind == "eager" or on_cuda(args):
            return
        warm.mark_warm(self._warm_key if self._warm_key is not None else self._call_key(args))

    def _call_key(self, args: tuple[Any, ...]) -> str | None:
        """The warm-start marker of this call (:func:`~gpuvec_envs.compiler.warm.call_key`)."""
        settings = self._warm_settings()
        return warm.call_key(self._raw, self._bound, args, settings, self.options.dynamic_batch)

    def _warm_settings(self) -> tuple[Any, ...]:
        """What besides the function and its arguments decides the compiled code."""
        return (self.options.items(), self._compile_threads)

    def _adopt(self, built: tuple[Callable[..., Any], Strategy, CompileReport, Any]) -> Any:
        """Run later calls through a :meth:`_compile` result; return its first output."""
        call, strategy, report, out = built
        if strategy.name == "eager":
            call = self._eager_call
        self._fn, self.kind, self.report = call, strategy.kind, report
        self.name = "eager" if strategy.name == "eager" else "compile"
        for p in report.passes:
            if p.status == "failed":
                warn_once(f"pass {p.name} did not apply; the step runs without it", p.detail, 5)
        return out

    def _compile(
        self, args: tuple[Any, ...]
    ) -> tuple[Callable[..., Any], Strategy, CompileReport, Any]:
        """Try the strategies for ``args``; return (call, strategy, report, first output)."""
        # ``auto``/``background`` switch from eager calls to compiled ones (or start with
        # compiled ones when the cache is warm): only to calls that compute eager's bits
        exact = self.mode in ("auto", "background")
        request = Request(
            self.eager_fn,
            self._raw,
            self._bound,
            self._tag,
            args,
            self._state_first,
            self.options,
            exact,
        )
        threads = torch.get_num_threads()
        torch.set_num_threads(self._compile_threads)
        try:
            return self._try_strategies(request)
        finally:
            torch.set_num_threads(threads)

    def _try_strategies(
        self, request: Request
    ) -> tuple[Callable[..., Any], Strategy, CompileReport, Any]:
        start = time.perf_counter()
        fallbacks: list[Fallback] = []
        skipped: list[Fallback] = []
        for k, strategy in enumerate(self.strategies):
            why = strategy.applies(request)
            if why is not None:
                skipped.append(Fallback(strategy.name, why))
                continue
            try:
                built = strategy.build(request)
            except NoFallback:  # the function's own error: no strategy would do better
                self._compiled_once = False
                raise
            except (InexactCompile, UntrustedCpuCode) as exc:  # stay eager for good
                reason = f"compiled calls would not equal eager ones ({exc}); calls stay eager"
                fallbacks.append(Fallback(strategy.name, reason))
                self._warn(f"the {strategy.name} strategy is not used", reason, 5)
                strategy = next((s for s in self.strategies if s.name == "eager"), Eager())
                built = strategy.build(request)
                break
            except Exception as exc:  # noqa: BLE001 - try the next strategy
                if k == len(self.strategies) - 1:
                    raise
                reason = f"{type(exc).__name__}: {exc}".split("\n")[0][:500]
                fallbacks.append(Fallback(strategy.name, reason))
                later = [s.name for s in self.strategies[k + 1 :] if s.applies(request) is None]
                nxt = later[0] if later else "none"
                what = f"the {strategy.name} strategy failed; falling back to {nxt}"
                if self.options.strict:
                    self._compiled_once = False  # the next call tries (and raises) again
                    raise CompileError(f"{self.label}: {what} ({reason})") from exc
                self._warn(what, reason, 5)
                continue
            break
        else:  # pragma: no cover - the last strategy (eager) always applies
            raise RuntimeError("no compile strategy applied")
        report = CompileReport(
            strategy=strategy.name,
            passes=tuple(built.passes),
            fallbacks=tuple(fallbacks),
            skipped=tuple(skipped),
            compile_seconds=time.perf_counter() - start,
            torch_version=torch.__version__,
            options=self.options.items(),
            kernels=built.kernels,
        )
        return built.call, strategy, report, built.out


@dataclasses.dataclass
class WarmJob:
    """What a child process compiles: ``Backend(fn, bound, "compile", ...)(*args)``."""

    fn: Callable[..., Any]
    bound: tuple[Any, ...]
    tag: str
    args: tuple[Any, ...]
    state_first: bool
    options: Any  # CompilerOptions
    threads: int  # torch.get_num_threads() of the parent (inductor's codegen reads it)

    def __call__(self) -> None:
        """Compile (in the child process)."""
        torch.set_num_threads(self.threads)
        backend = Backend(
            self.fn,
            self.bound,
            "compile",
            self.tag,
            state_first=self.state_first,
            compiler=self.options,
        )
        backend(*self.args)
