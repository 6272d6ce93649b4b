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


def columns(*cols: torch.Tensor) -> torch.Tensor:
    """(N, k) view of k (N,) tensors, stored column by column (strides (1, N)).

    Compiled steps write k contiguous rows with vector stores; an (N, k) row-major
    observation would be written element by element.
    """
    return torch.stack(cols, dim=0).T
