"""``sin`` and ``cos`` from IEEE-rounded ``+ - * round where``: the same bits eager and compiled.

``torch.sin``/``torch.cos`` are not one function: eager CPU kernels, inductor's vectorised
C++ (SLEEF through ``at::vec``) and its scalar loop tails (libm) each round differently in
the last bit (torch 2.13, AVX-512: 21 % of float32 and 1.7 % of float64 sines differ
between eager and compiled), and CUDA has two more (ATen's and Triton's). A chaotic env
turns one such bit into whole units within a few hundred steps, so a trajectory would
depend on the backend and on when the background compile lands. These functions use only
operations that IEEE 754 rounds exactly (add, subtract, multiply, round to integer,
select), which every path computes alike (inductor's C++ is built with
``-ffp-contract=off``, so no multiply-add is fused); they fuse into compiled steps like
any other arithmetic.

float64 follows musl's ``sin``/``cos`` (fdlibm's kernels on ``[-pi/4, pi/4]``, the
three-part Cody-Waite reduction of ``__rem_pio2``, always all three rounds): under 1 ulp
for ``|x| < 2**20 * pi / 2`` (beyond, the reduction loses bits). float32 follows Cephes'
``sinf``/``cosf`` (three-part reduction, degree-7 and degree-8 kernels): within 2 ulp for
``|x| < 8192``. ``sin(+-0)`` is ``+0``; ``inf`` and ``nan`` give ``nan``.
"""

from __future__ import annotations

import math

import torch

# musl __rem_pio2: pi/2 in 33-bit pieces (products with |n| < 2**20 are exact) and tails
_F64_PIO2 = (
    (1.57079632673412561417e00, 6.07710050650619224932e-11),
    (6.07710050630396597660e-11, 2.02226624879595063154e-21),
    (2.02226624871116645580e-21, 8.47842766036889956997e-32),
)
# musl __sin / __cos kernels
_S1, _S2, _S3 = -1.66666666666666324348e-01, 8.33333333332248946124e-03, -1.98412698298579493134e-04
_S4, _S5, _S6 = 2.75573137070700676789e-06, -2.50507602534068634195e-08, 1.58969099521155010221e-10
_C1, _C2, _C3 = 4.16666666666666019037e-02, -1.38888888888741095749e-03, 2.48015872894767294178e-05
_C4, _C5, _C6 = -2.75573143513906633035e-07, 2.08757232129817482790e-09, -1.13596475577881948265e-11
# Cephes sinf/cosf: pi/2 in three float32 pieces (the first two multiply exactly)
_F32_PIO2 = (1.5703125, 4.837512969970703125e-4, 7.54978995489188216e-8)
_SF = (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)
_CF = (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)


def _reduce(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor | None]:
    """``x = q pi/2 + y0 (+ y1)``, ``|y0| <~ pi/4``; returns ``(q mod 4 as a float, y0, y1)``.

    ``y1`` is the float64 reduction's tail (None in float32).
    """
    n = torch.round(x * (2.0 / math.pi))
    quadrant = n - 4.0 * torch.floor(n * 0.25)  # 0, 1, 2 or 3 (exact)
    if x.dtype != torch.float64:
        p1, p2, p3 = _F32_PIO2
        return quadrant, ((x - n * p1) - n * p2) - n * p3, None
    (p1, _), (p2, _), (p3, p3t) = _F64_PIO2
    r1 = x - n * p1  # exact: n p1 is, and within a factor 2 of x (Sterbenz)
    w2 = n * p2
    r2 = r1 - w2
    w3 = n * p3
    r3 = r2 - w3
    # what the two rounded subtractions lost, and the last piece of pi/2
    w = n * p3t - (((r1 - r2) - w2) + ((r2 - r3) - w3))
    y0 = r3 - w
    return quadrant, y0, (r3 - y0) - w


def _kernels(y0: torch.Tensor, y1: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sin, cos)`` of ``y0 + y1`` for ``|y0| <~ pi/4``."""
    z = y0 * y0
    if y1 is None:
        s = ((_SF[0] * z + _SF[1]) * z + _SF[2]) * z * y0 + y0
        c = ((_CF[0] * z + _CF[1]) * z + _CF[2]) * z * z - 0.5 * z + 1.0
        return s, c
    w = z * z
    r = _S2 + z * (_S3 + z * _S4) + z * w * (_S5 + z * _S6)
    v = z * y0
    s = y0 - ((z * (0.5 * y1 - v * r) - y1) - v * _S1)
    r = z * (_C1 + z * (_C2 + z * _C3)) + w * w * (_C4 + z * (_C5 + z * _C6))
    hz = 0.5 * z
    w = 1.0 - hz
    c = w + (((1.0 - w) - hz) + (z * r - y0 * y1))
    return s, c


def sincos(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sin x, cos x)`` of a float32 or float64 tensor ``x`` [rad]; each of ``x``'s shape."""
    quadrant, y0, y1 = _reduce(x)
    s, c = _kernels(y0, y1)
    # quadrant 1: (c, -s), 2: (-s, -c), 3: (-c, s). Each mask is one comparison: inductor's
    # float64 C++ turns ``mask | mask`` into casts between double and int32 vector masks,
    # which made this function ~5x slower in float64 (float32 alike either way).
    swap = quadrant - 2.0 * torch.floor(quadrant * 0.5) != 0.0  # quadrant 1 or 3
    sin_abs, cos_abs = torch.where(swap, c, s), torch.where(swap, s, c)
    sin = torch.where(quadrant >= 2.0, -sin_abs, sin_abs)
    cos = torch.where(torch.abs(quadrant - 1.5) < 1.0, -cos_abs, cos_abs)  # quadrant 1 or 2
    return sin, cos


def sin(x: torch.Tensor) -> torch.Tensor:
    """``sin x`` [rad] (:func:`sincos`'s first output); ``x``'s shape."""
    return sincos(x)[0]


def cos(x: torch.Tensor) -> torch.Tensor:
    """``cos x`` [rad] (:func:`sincos`'s second output); ``x``'s shape."""
    return sincos(x)[1]
