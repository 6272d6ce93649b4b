"""Small helpers shared by env modules (no env logic)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from gymnasium.envs.classic_control.utils import maybe_parse_reset_bounds


def numpy_dtype(dtype: torch.dtype) -> type[np.floating]:
    """The numpy float type of a torch float dtype (for gymnasium spaces)."""
    return np.float64 if dtype == torch.float64 else np.float32


def reset_bounds(options: dict[str, Any] | None, low: float, high: float) -> tuple[float, float]:
    """``options["low"]``/``options["high"]`` or the defaults, checked as gymnasium does."""
    return maybe_parse_reset_bounds(options, low, high)


def round32(x: torch.Tensor) -> torch.Tensor:
    """``x`` rounded to float32, kept in its dtype; same shape.

    A double negation in float32 sits between the casts: inductor before torch 2.13 removes
    a direct float64 -> float32 -> float64 chain of casts from compiled code (its
    ``pointless_convert``), and the rounding with it.
    """
    return x.to(torch.float32).neg().neg().to(x.dtype)


def columns(*cols: torch.Tensor) -> torch.Tensor:
    """(N, k) view of k (N,) tensors, stored column by column (strides (1, N)).

    Compiled steps write k contiguous rows with vector stores; an (N, k) row-major
    observation would be written element by element.
    """
    return torch.stack(cols, dim=0).T
