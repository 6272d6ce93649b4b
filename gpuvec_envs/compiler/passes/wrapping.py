"""Wrapping int32 products in CPU kernels: one multiply where three 16-bit ones stood.

Signed overflow is undefined in C++, so a pure function that needs an int32 product
modulo 2**32 (the RNG's hash, :func:`gpuvec_envs.core.rng._mul32`) builds it from 16-bit
halves whose products never overflow: three multiplies and about nine other operations
per product. g++'s ``-fwrapv`` defines signed overflow as wrapping, and then one int32
multiply gives the same bits. While :func:`~gpuvec_envs.compiler.flat.compile_flat`
traces a CPU graph with the ``wrapping_mul`` switch on, :func:`product_log` returns a log
(such functions then emit the single multiply and count it), and every C++ kernel built
meanwhile gets ``-fwrapv`` (:func:`wrapv_kernels` hooks inductor's
``CppPythonBindingsCodeCache.load_pybinding_async``, which takes extra compiler flags).
Where the hook cannot be installed, nothing is traced with the single multiply.

Vectorised kernels multiply with ``Vectorized<int32_t>::operator*`` (``vpmulld``, which
wraps); the flag covers the scalar code of a kernel that does not vectorise. Dynamo traces
(``torch.compile``) never see the log: they keep the 16-bit form.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import inspect
import sys
from collections.abc import Iterator

import torch

#: The g++/clang flag that makes signed integer overflow wrap.
FLAG = "-fwrapv"


@dataclasses.dataclass
class WrapLog:
    """What one compilation did: products traced as single multiplies, kernels flagged."""

    products: int = 0
    kernels: int = 0


_LOG: contextvars.ContextVar[WrapLog | None] = contextvars.ContextVar(
    "gpuvec_wrapping_products", default=None
)


def product_log() -> WrapLog | None:
    """The log of the trace in progress if its int32 products may wrap, else ``None``.

    ``None`` inside dynamo, which cannot read a context variable and whose kernels are
    built without the flag.
    """
    if torch.compiler.is_compiling():
        return None
    return _LOG.get()


@contextlib.contextmanager
def wrapping_products(log: WrapLog) -> Iterator[WrapLog]:
    """While active (this thread), :func:`product_log` returns ``log``."""
    token = _LOG.set(log)
    try:
        yield log
    finally:
        _LOG.reset(token)


@contextlib.contextmanager
def wrapv_kernels(log: WrapLog) -> Iterator[str | None]:
    """While active, C++ kernels built through inductor's Python bindings get :data:`FLAG`.

    Yields ``None`` when hooked, else why not (a torch without the hook point); restores
    the original on exit. Callers serialise entries (the patch is process-wide).
    """
    if sys.platform == "win32":
        yield f"{FLAG} is a GCC/Clang flag (inductor builds with MSVC on Windows)"
        return
    try:
        from torch._inductor.codecache import CppPythonBindingsCodeCache as cache
    except ImportError:
        yield "torch has no CppPythonBindingsCodeCache"
        return
    original = cache.__dict__.get("load_pybinding_async")
    if not isinstance(original, classmethod):
        yield "CppPythonBindingsCodeCache.load_pybinding_async is not a classmethod"
        return
    signature = inspect.signature(original.__func__)
    if "extra_flags" not in signature.parameters:
        yield "load_pybinding_async takes no extra_flags"
        return

    def load_pybinding_async(cls, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN202
        bound = signature.bind(cls, *args, **kwargs)
        flags = tuple(bound.arguments.get("extra_flags", ()))
        if FLAG not in flags:
            bound.arguments["extra_flags"] = (*flags, FLAG)
        log.kernels += 1
        return original.__func__(*bound.args, **bound.kwargs)

    cache.load_pybinding_async = classmethod(load_pybinding_async)
    try:
        yield None
    finally:
        cache.load_pybinding_async = original
