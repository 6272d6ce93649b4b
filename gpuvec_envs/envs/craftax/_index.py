"""jax's indexing rules for traced indices, for the places craftax indexes off the map.

craftax reads and writes cells at computed positions that can leave the map (the cell in
front of a player on the border, a mob's slot far away). jax first wraps a negative index
once (``i + size`` where ``i < 0``); then a read (gather) clamps into ``[0, size)`` and a
write (scatter) is dropped when out of range. These helpers apply the same rules to batched
``(N, H, W)`` grids, so positions off the map behave exactly as in craftax.
"""

from __future__ import annotations

import torch


def wrap(i: torch.Tensor, size: int) -> torch.Tensor:
    """Normalise negative indices as jax does: ``i + size`` where ``i < 0`` (once)."""
    return torch.where(i < 0, i + size, i)


def get_cell(grid: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
    """``grid[n, pos[n, 0], pos[n, 1]]`` with jax's read rules (wrap once, then clamp).

    Args:
        grid: ``(N, H, W)`` any dtype.
        pos: ``(N, 2)`` int64 positions, possibly off the grid.

    Returns:
        ``(N,)`` values.
    """
    n, h, w = grid.shape
    r = wrap(pos[:, 0], h).clamp(0, h - 1)
    c = wrap(pos[:, 1], w).clamp(0, w - 1)
    return grid.reshape(n, h * w).gather(1, (r * w + c)[:, None])[:, 0]


def set_cell(
    grid: torch.Tensor, pos: torch.Tensor, value: torch.Tensor, where: torch.Tensor | None = None
) -> torch.Tensor:
    """``grid.at[pos].set(value)`` per env with jax's write rules (wrap once, drop if off).

    Args:
        grid: ``(N, H, W)``.
        pos: ``(N, 2)`` int64 positions.
        value: ``(N,)`` values (cast to ``grid``'s dtype).
        where: Optional ``(N,)`` bool; False leaves the env's grid unchanged.

    Returns:
        The new ``(N, H, W)`` grid (``grid`` itself is not modified).
    """
    n, h, w = grid.shape
    r = wrap(pos[:, 0], h)
    c = wrap(pos[:, 1], w)
    ok = (r >= 0) & (r < h) & (c >= 0) & (c < w)
    if where is not None:
        ok = ok & where
    flat = (r.clamp(0, h - 1) * w + c.clamp(0, w - 1))[:, None]
    g = grid.reshape(n, h * w)
    old = g.gather(1, flat)[:, 0]
    new = torch.where(ok, value.to(grid.dtype), old)
    return g.scatter(1, flat, new[:, None]).reshape(n, h, w)
