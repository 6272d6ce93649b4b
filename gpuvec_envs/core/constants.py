"""Constant tables of trace-time values on an env's device, with no host copy per step.

``torch.tensor(values, device="cuda")`` copies host memory to the GPU each time it runs: in an
eager CUDA step that is a copy and a host synchronisation per call. :func:`table` builds each
table once per device (on CUDA from pinned memory, without a synchronisation) and hands out
the same tensor at every later eager call. Inside a compiler trace it returns the plain
``torch.tensor`` form, which the trace records as a constant and the compiler places on the
graph's device once (:func:`gpuvec_envs.compiler.flat.compile_flat`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Sequence
from typing import Any

import torch

Values = Sequence[int] | Sequence[float] | Sequence[Sequence[int]]


def traced(like: torch.Tensor) -> bool:
    """Whether code runs inside a compiler trace (dynamo, or ``make_fx`` on ``like``).

    ``make_fx`` hands traced code fake (or functional) tensors, subclasses of
    ``torch.Tensor``; eager code gets plain tensors.
    """
    return torch.compiler.is_compiling() or type(like) is not torch.Tensor


@functools.lru_cache(maxsize=1024)
def _values(make: Callable[..., Values] | tuple[Any, ...], args: tuple[Hashable, ...]) -> Values:
    """``make(*args)``, or ``make`` itself for a literal tuple of values (computed once)."""
    return make if isinstance(make, tuple) else make(*args)


@functools.lru_cache(maxsize=1024)
def _built(
    make: Callable[..., Values] | tuple[Any, ...],
    args: tuple[Hashable, ...],
    dtype: torch.dtype,
    device: torch.device,
) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The table on ``device``, and the pinned host tensor its copy reads (kept alive)."""
    host = torch.tensor(_values(make, args), dtype=dtype)
    if device.type == "cuda":
        pinned = host.pin_memory()
        return pinned.to(device, non_blocking=True), pinned
    return host.to(device), None


def table(
    make: Callable[..., Values] | tuple[Any, ...],
    *args: Hashable,
    dtype: torch.dtype,
    like: torch.Tensor,
) -> torch.Tensor:
    """A constant tensor of ``make(*args)`` (or of the literal tuple ``make``) on ``like``'s device.

    Eager calls share one tensor per (table, dtype, device): do not write into it. In a
    trace (:func:`traced`) it is ``torch.tensor(values, dtype=dtype, device=like.device)``.

    Args:
        make: A function of hashable ``args`` returning a (nested) sequence of numbers, or
            a tuple of the values themselves.
        *args: Its arguments (part of the cache key).
        dtype: The tensor's dtype.
        like: A tensor of the calling code: the device, and whether it is being traced.
    """
    if traced(like):
        return torch.tensor(_values(make, args), dtype=dtype, device=like.device)
    return _built(make, args, dtype, like.device)[0]
