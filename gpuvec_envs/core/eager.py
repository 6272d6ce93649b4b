"""Eager host calls: where the shell's pure functions may take host-only shortcuts.

The shell runs its eager CPU calls inside :func:`host_eager`. There, and only for plain
CPU tensors outside any compiler trace (:func:`on_host`), code may use numpy and read
tensor values to skip work whose result is known (the RNG's hashes, an autoreset that
resets no env), as long as every output is bitwise what the branch-free torch form gives.
Traced and compiled code never enters the context, and keeps the torch form.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator

import torch

_HOST_EAGER = contextvars.ContextVar("gpuvec_host_eager", default=False)


@contextlib.contextmanager
def host_eager() -> Iterator[None]:
    """Within: :func:`on_host` holds for plain CPU tensors (for eager calls only)."""
    token = _HOST_EAGER.set(True)
    try:
        yield
    finally:
        _HOST_EAGER.reset(token)


def on_host(*xs: torch.Tensor) -> bool:
    """Whether host shortcuts may run on ``xs``.

    Inside :func:`host_eager`, plain CPU tensors (a fake or functional tensor is a
    subclass), and no compiler tracing.
    """
    return (
        not torch.compiler.is_compiling()  # first: dynamo cannot trace ContextVar.get
        and _HOST_EAGER.get()
        and all(type(x) is torch.Tensor and x.device.type == "cpu" for x in xs)
    )


def host_any(mask: torch.Tensor) -> bool | None:
    """``bool(mask.any())`` for a bool tensor on the host (:func:`on_host`), else None."""
    return bool(mask.any()) if on_host(mask) else None
