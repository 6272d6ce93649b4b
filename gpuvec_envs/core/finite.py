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

    ``x * 0`` is 0 for finite ``x`` and NaN for NaN/inf, so the sums cannot overflow. The
    tensors of shape (N, ...) are summed per env first, in their own dtypes, and then once
    over the envs: the per-env sums fuse into the loop of the step that produced the
    tensors (one reduction per tensor over the whole batch cost CartPole's N=65536 step
    twice as much). ``None`` and integer tensors are skipped.
    """
    floats = [t for t in tensors if t is not None and t.is_floating_point()]
    n = floats[0].shape[0] if floats and floats[0].dim() else None
    per_env: torch.Tensor | None = None
    total = torch.zeros((), dtype=torch.float64, device=floats[0].device if floats else None)
    for t in floats:
        zero = t * 0
        if n is not None and zero.dim() and zero.shape[0] == n:
            s = zero.reshape(n, -1).sum(1)
            per_env = s if per_env is None else per_env + s
        else:
            total = total + zero.sum().to(torch.float64)
    if per_env is not None:
        total = total + per_env.sum().to(torch.float64)
    return total


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
