"""Batched rasteriser: filled polygons, circles and lines drawn into N frames at once.

Shared by the envs' ``render`` functions. Coordinates are those of gymnasium's pygame code
before its final vertical flip: pixels, ``x`` to the right and ``y`` up from the bottom
row, pixel ``(i, j)`` covering ``[i, i + 1) x [j, j + 1)``. Each shape is tested on a
fixed-size pixel window around it (its size a Python int from the shape's geometry), so the
cost grows with the shapes' area, not the frame's, and nothing waits on the device. No
anti-aliasing: a pixel takes the colour of the last shape that covers its sample point.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from gpuvec_envs.core.constants import table

Colour = tuple[int, int, int]
#: Sample point of a pixel, relative to its lower-left corner: its centre.
SAMPLE = 0.5
#: Polygons are grown by this much [px]: pygame's filled polygon and its outline also
#: cover pixels whose centre lies just outside the exact shape.
GROW = 0.5
#: Sample point of a pixel for one-pixel lines: pygame's anti-aliased lines weigh a pixel
#: by the line's distance to its lower-left corner.
LINE_SAMPLE = 0.0
#: Discs likewise [px].
CIRCLE_GROW = 0.5


def blank(height: int, width: int, colour: Colour, like: torch.Tensor) -> torch.Tensor:
    """(N, height, width, 3) uint8 frames filled with ``colour``; N and device of ``like`` (N, ...).

    The colour is a per-device constant (:func:`~gpuvec_envs.core.constants.table`): no host
    copy per frame.
    """
    rgb = table(colour, dtype=torch.uint8, like=like)
    return rgb.expand(like.shape[0], height, width, 3).clone()


def _window(
    frame: torch.Tensor, lo_x: torch.Tensor, lo_y: torch.Tensor, size: tuple[int, int]
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sample points and flat pixel indices of an on-screen window per frame.

    Args:
        frame: (N, H, W, 3) frames.
        lo_x: (N,) float, left edge of the region to cover [px].
        lo_y: (N,) float, bottom edge of the region to cover [px].
        size: ``(width, height)`` of the window [px]; the region must fit in it.

    Returns:
        ``(px (N, 1, w), py (N, h, 1), index (N, h, w))``: sample points in the shape's
        coordinates and indices into ``frame.view(N, H * W, 3)``. The window is shifted
        (not cropped) to stay inside the frame, so its indices are distinct.
    """
    height, width = frame.shape[1], frame.shape[2]
    w, h = min(size[0], width), min(size[1], height)
    dev = frame.device
    col0 = torch.clamp(torch.floor(lo_x).to(torch.int64), 0, width - w)
    row0 = torch.clamp(torch.floor(lo_y).to(torch.int64), 0, height - h)
    cols = col0[:, None] + torch.arange(w, device=dev)  # (N, w)
    ys = row0[:, None] + torch.arange(h, device=dev)  # (N, h), y up
    index = (height - 1 - ys)[:, :, None] * width + cols[:, None, :]
    px = (cols.to(lo_x.dtype) + SAMPLE)[:, None, :]
    py = (ys.to(lo_x.dtype) + SAMPLE)[:, :, None]
    return px, py, index


def _paint(frame: torch.Tensor, index: torch.Tensor, mask: torch.Tensor, colour: Colour) -> None:
    """Set ``frame``'s pixels at ``index`` (N, h, w) to ``colour`` where ``mask``, in place."""
    n, height, width, _ = frame.shape
    flat = frame.view(n, height * width, 3)
    k = index.shape[1] * index.shape[2]
    idx = index.reshape(n, k, 1).expand(n, k, 3)
    rgb = table(tuple(colour), dtype=torch.uint8, like=frame)
    new = torch.where(mask.reshape(n, k, 1), rgb, flat.gather(1, idx))
    flat.scatter_(1, idx, new)


def _shape(
    frame: torch.Tensor,
    lo_x: torch.Tensor,
    lo_y: torch.Tensor,
    size: tuple[int, int],
    inside: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
    colour: Colour,
) -> torch.Tensor:
    px, py, index = _window(frame, lo_x, lo_y, size)
    _paint(frame, index, inside(px, py), colour)
    return frame


def fill_polygon(
    frame: torch.Tensor, xs: torch.Tensor, ys: torch.Tensor, reach: float, colour: Colour
) -> torch.Tensor:
    """Fill a convex polygon in each frame, in place.

    Args:
        frame: (N, H, W, 3) uint8 frames.
        xs: (N, K) float vertex x [px], in order around the polygon (either direction).
        ys: (N, K) float vertex y [px].
        reach: Upper bound of the polygon's width and height [px].
        colour: RGB.

    Returns:
        ``frame``.
    """
    xs, ys = xs.to(torch.float32), ys.to(torch.float32)  # exact enough for pixel tests
    ex, ey = xs.roll(-1, 1) - xs, ys.roll(-1, 1) - ys  # (N, K) edges
    area2 = (xs * ys.roll(-1, 1) - xs.roll(-1, 1) * ys).sum(1, keepdim=True)
    # unit inward normal scale: the cross product below becomes a signed distance [px]
    scale = torch.where(area2 >= 0, 1.0, -1.0) / torch.sqrt(ex * ex + ey * ey).clamp_min(1e-12)
    edges = [
        tuple(t[:, k, None, None] for t in (xs, ys, ex, ey, scale)) for k in range(xs.shape[1])
    ]

    def inside(px: torch.Tensor, py: torch.Tensor) -> torch.Tensor:
        mask = None
        for x0, y0, dx, dy, sc in edges:  # loops over the K edges, not over envs
            edge = (dx * (py - y0) - dy * (px - x0)) * sc >= -GROW  # (N, h, w)
            mask = edge if mask is None else mask & edge
        return mask

    size = math.ceil(reach) + 2
    return _shape(frame, xs.min(1).values, ys.min(1).values, (size, size), inside, colour)


def fill_circle(
    frame: torch.Tensor, cx: torch.Tensor, cy: torch.Tensor, radius: int, colour: Colour
) -> torch.Tensor:
    """Fill the disc around pixel ``(cx, cy)``, as pygame's ``gfxdraw.filled_circle``, in place.

    ``cx``, ``cy``: (N,) float holding integer pixel coordinates (gymnasium truncates them);
    ``radius`` [px]. A pixel is filled when its centre lies within ``radius + CIRCLE_GROW``
    of the centre pixel's centre.
    """
    r = radius + CIRCLE_GROW
    ox, oy = cx.to(torch.float32) + SAMPLE, cy.to(torch.float32) + SAMPLE

    def inside(px: torch.Tensor, py: torch.Tensor) -> torch.Tensor:
        return (px - ox[:, None, None]).square() + (py - oy[:, None, None]).square() <= r * r

    size = 2 * math.ceil(r) + 2
    return _shape(frame, ox - r, oy - r, (size, size), inside, colour)


def fill_box(
    frame: torch.Tensor,
    x0: torch.Tensor,
    y0: torch.Tensor,
    width: int,
    height: int,
    colour: Colour,
) -> torch.Tensor:
    """Fill pixels ``x0 .. x0 + width`` by ``y0 .. y0 + height`` (inclusive), in place.

    As pygame's ``gfxdraw.box``/``hline``/``vline`` with integer end points; ``x0``, ``y0``
    are (N,) int64 [px] (the lower-left pixel), ``width``/``height`` >= 0 [px].
    """
    lo_x, lo_y = x0.to(torch.float64), y0.to(torch.float64)

    def inside(px: torch.Tensor, py: torch.Tensor) -> torch.Tensor:
        dx = torch.floor(px - lo_x[:, None, None])
        dy = torch.floor(py - lo_y[:, None, None])
        return (dx >= 0) & (dx <= width) & (dy >= 0) & (dy <= height)

    return _shape(frame, lo_x, lo_y, (width + 1, height + 1), inside, colour)


def rotated_rect(
    left: float,
    right: float,
    bottom: float,
    top: float,
    angle: torch.Tensor,
    ox: torch.Tensor,
    oy: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Corners of a rectangle rotated by ``angle`` then moved by ``(ox, oy)``, as gymnasium.

    The corners ``(l, b), (l, t), (r, t), (r, b)`` [px] are rotated counter-clockwise by
    ``angle`` (N,) [rad] (pygame's ``Vector2.rotate_rad``) and offset by ``ox``, ``oy``
    (N,) [px]. Returns ``(xs, ys)``, each (N, 4) float.
    """
    cx = table((left, left, right, right), dtype=angle.dtype, like=angle)
    cy = table((bottom, top, top, bottom), dtype=angle.dtype, like=angle)
    cos, sin = torch.cos(angle)[:, None], torch.sin(angle)[:, None]
    return cx * cos - cy * sin + ox[:, None], cx * sin + cy * cos + oy[:, None]


def polyline_mask(height: int, width: int, xs: torch.Tensor, ys: torch.Tensor) -> torch.Tensor:
    """(height, width) bool frame mask (row 0 at the top) of a one-pixel polyline.

    For static scenery drawn once. Along each segment between consecutive points ``xs``,
    ``ys`` (each (K,) float [px], y up) one pixel per column (per row for a steep segment)
    is set: the one whose centre is nearest the line, as a Bresenham or Wu line's core.
    """
    dev = xs.device
    px = torch.arange(width, device=dev, dtype=xs.dtype)[None, :] + LINE_SAMPLE
    py = (height - 1 - torch.arange(height, device=dev, dtype=xs.dtype))[:, None] + LINE_SAMPLE
    mask = torch.zeros(height, width, dtype=torch.bool, device=dev)
    for k in range(xs.shape[0] - 1):  # loops over segments of one picture, not over envs
        ax, ay, bx, by = (float(v) for v in (xs[k], ys[k], xs[k + 1], ys[k + 1]))
        if abs(bx - ax) >= abs(by - ay):  # one pixel per column
            u, v, ua, va, ub, vb = px, py, ax, ay, bx, by
        else:  # one pixel per row
            u, v, ua, va, ub, vb = py, px, ay, ax, by, bx
        lo, hi = min(ua, ub), max(ua, ub)
        t = (u - ua) / (ub - ua) if ub != ua else torch.zeros_like(u)
        mask |= (u >= lo) & (u < hi) & ((v - (va + t * (vb - va))).abs() <= 0.5)
    return mask


def paint_mask(frame: torch.Tensor, mask: torch.Tensor, colour: Colour) -> torch.Tensor:
    """Set pixels of (N, H, W, 3) ``frame`` to ``colour`` where (H, W) ``mask``, in place."""
    rgb = table(tuple(colour), dtype=torch.uint8, like=frame)
    frame[:, mask] = rgb
    return frame
