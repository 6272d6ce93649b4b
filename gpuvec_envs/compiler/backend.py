"""The backend that runs a pure function eagerly or through the first strategy that works."""

from __future__ import annotations

import functools
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from gpuvec_envs.compiler.options import CompilerOptions, resolve
from gpuvec_envs.compiler.report import CompileReport, Fallback
from gpuvec_envs.compiler.strategies import STRATEGIES, NoFallback, Request, Strategy

BACKENDS = ("auto", "eager", "compile")
_warned: set[tuple[str, str]] = set()


def warn_once(what: str, reason: str, stacklevel: int = 2) -> None:
    """A RuntimeWarning for ``what`` failing for ``reason``, once per process."""
    if (what, reason) in _warned:
        return
    _warned.add((what, reason))
    warnings.warn(f"gpuvec_envs compiler: {what} ({reason})", RuntimeWarning, stacklevel + 1)


class Backend:
    """Runs ``fn(*bound, *args)`` eagerly or as one compiled call.

    The ``compile`` backend compiles on the first call, for that call's shapes, strides,
    device and dtype, trying :data:`~gpuvec_envs.compiler.strategies.STRATEGIES` in order
    (CUDA graph, in-place state, flat call, ``torch.compile``, eager); :attr:`report` then
    says which one runs, what each pass did and why earlier strategies were not used. Later
    calls must pass arguments of the first call's exact structure, shapes, strides, dtypes
    and device (the env shell guarantees this).

    Args:
        fn: The pure function.
        bound: Leading (constant) arguments bound to it.
        backend: ``"eager"``, ``"compile"`` or ``"auto"``.
        tag: A name for this instance's compiled code.
        state_first: The first argument is a state that the call returns, with the same
            structure, as the first field of its output.
        cuda_graph: If given, overrides ``compiler.cuda_graph``.
        options: Inductor config values, added to ``compiler.inductor``.
        in_place: If given, overrides ``compiler.in_place``.
        compiler: The switches (a :class:`CompilerOptions` or a dict of overrides;
            default: from ``GPUVEC_COMPILER``).
        strategies: The strategies to try, in order.

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
        self.name = "eager" if backend == "eager" else "compile"
        self.kind = "eager"  # how calls run: eager, fused, cuda_graph or torch_compile
        #: How the first call was compiled; None before it (and for the eager backend).
        self.report: CompileReport | None = None
        self.strategies = tuple(strategies)
        self._fn = self.eager_fn
        self._raw, self._tag, self._bound = fn, tag, bound
        self._state_first = state_first
        self._compiled_once = self.name == "eager"

    def __call__(self, *args: Any) -> Any:
        """Call the function; the first compiled call compiles (and may fall back)."""
        if self._compiled_once:
            return self._fn(*args)
        self._compiled_once = True
        return self._compile(args)

    def _compile(self, args: tuple[Any, ...]) -> Any:
        request = Request(
            self.eager_fn, self._raw, self._bound, self._tag, args, self._state_first, self.options
        )
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
            except Exception as exc:  # noqa: BLE001 - try the next strategy
                if k == len(self.strategies) - 1:
                    raise
                reason = f"{type(exc).__name__}: {exc}".split("\n")[0][:500]
                fallbacks.append(Fallback(strategy.name, reason))
                later = [s.name for s in self.strategies[k + 1 :] if s.applies(request) is None]
                nxt = later[0] if later else "none"
                what = f"the {strategy.name} strategy failed; falling back to {nxt}"
                warn_once(what, reason, 4)
                continue
            break
        else:  # pragma: no cover - the last strategy (eager) always applies
            raise RuntimeError("no compile strategy applied")
        self._fn, self.kind = built.call, strategy.kind
        if strategy.name == "eager":
            self.name = "eager"
        for p in built.passes:
            if p.status == "failed":
                warn_once(f"pass {p.name} did not apply; the step runs without it", p.detail, 4)
        self.report = CompileReport(
            strategy=strategy.name,
            passes=tuple(built.passes),
            fallbacks=tuple(fallbacks),
            skipped=tuple(skipped),
            compile_seconds=time.perf_counter() - start,
            torch_version=torch.__version__,
            options=self.options.items(),
        )
        return built.out
