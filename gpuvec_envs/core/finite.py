"""Detection of NaN/inf in a batch of env states and step outputs.

One test decides whether anything is non-finite (:func:`finite_probe`, which a compiled
step computes inside its own kernel), read back with one host sync; only then is the first
faulty env and field located.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import torch


def named_leaves(tree: Any, prefix: str) -> Iterator[tuple[str, torch.Tensor]]:
    """``(dotted field name, tensor)`` for each tensor of a (nested) NamedTuple.

    Plain tuples inside are named by position (``state.enemies.x.0``).
    """
    if isinstance(tree, torch.Tensor):
        yield prefix, tree
    elif tree is not None:
        names = getattr(tree, "_fields", None) or [str(i) for i in range(len(tree))]
        for name, value in zip(names, tree, strict=True):
            yield from named_leaves(value, f"{prefix}.{name}")


def finite_probe(tensors: Iterable[torch.Tensor | None]) -> torch.Tensor:
    """0-dim float64: 0 if every float tensor given holds only finite values, else NaN.

    ``x * 0`` is 0 for finite ``x`` and NaN for NaN/inf, so the sum cannot overflow (each
    is taken in its tensor's own dtype: a float64 one would halve the vector lanes) and
    fuses into the step that produced the tensors. ``None`` and integer tensors are skipped.
    """
    sums = [
        (t * 0).sum().to(torch.float64) for t in tensors if t is not None and t.is_floating_point()
    ]
    return torch.stack(sums).sum() if sums else torch.zeros((), dtype=torch.float64)


def first_nonfinite(fields: Iterable[tuple[str, torch.Tensor]]) -> tuple[int, str] | None:
    """The first env index and field name holding a NaN or inf, or ``None``.

    Args:
        fields: ``(name, tensor)`` pairs, each tensor of shape (N, ...); integer tensors
            are skipped. Fields are searched in the order given.

    Returns:
        ``(env_index, name)`` of the first field with a non-finite value (the lowest env
        index in it), or ``None`` when every value is finite.
    """
    floats = [(name, t) for name, t in fields if t.is_floating_point()]
    if not floats:
        return None
    if bool(finite_probe(t for _, t in floats) == 0):
        return None
    for name, t in floats:
        bad = ~torch.isfinite(t.reshape(t.shape[0], -1)).all(1)
        if bool(bad.any()):
            return int(bad.to(torch.uint8).argmax()), name
    return None


def check_finite(fields: Iterable[tuple[str, torch.Tensor]], when: str) -> None:
    """Raise ``FloatingPointError`` naming the env and field of the first NaN/inf.

    Args:
        fields: As :func:`first_nonfinite`.
        when: What produced the values (for the message), e.g. ``"step"``.
    """
    found = first_nonfinite(fields)
    if found is not None:
        env, name = found
        raise FloatingPointError(
            f"{when} produced a non-finite value (NaN or inf) in {name} of env {env}; "
            f"reset it with reset(options={{'reset_mask': mask}}) or check the env's "
            "params and dynamics"
        )
