"""float32 ``sin`` and ``cos`` from IEEE-rounded ``+ - * round where``: the same bits everywhere.

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

float32 follows Cephes' ``sinf``/``cosf`` (three-part reduction, degree-7 and degree-8
kernels): within 2 ulp for ``|x| < 8192``. ``sin(+-0)`` is ``+0``; ``inf`` and ``nan`` give
``nan``. float64, the dtype of parity with the references, uses ``torch.sin``/``torch.cos``
(which agree with libm's, and so with gymnasium's, where tested): the compiler's
``eager_math`` pass has a compiled step call the same ATen kernels, so eager and compiled
steps still agree bitwise, at the cost of an unfused call per function.
"""

from __future__ import annotations

import math

import torch

# Cephes sinf/cosf: pi/2 in three float32 pieces (the first two multiply exactly)
_F32_PIO2 = (1.5703125, 4.837512969970703125e-4, 7.54978995489188216e-8)
_SF = (-1.9515295891e-4, 8.3321608736e-3, -1.6666654611e-1)
_CF = (2.443315711809948e-5, -1.388731625493765e-3, 4.166664568298827e-2)


def _reduce(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 ``x = q pi/2 + y``, ``|y| <~ pi/4``; returns ``(q mod 4 as a float, y)``."""
    n = torch.round(x * (2.0 / math.pi))
    quadrant = n - 4.0 * torch.floor(n * 0.25)  # 0, 1, 2 or 3 (exact)
    p1, p2, p3 = _F32_PIO2
    return quadrant, ((x - n * p1) - n * p2) - n * p3


def _kernels(y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """float32 ``(sin, cos)`` of ``y`` for ``|y| <~ pi/4``."""
    z = y * y
    s = ((_SF[0] * z + _SF[1]) * z + _SF[2]) * z * y + y
    c = ((_CF[0] * z + _CF[1]) * z + _CF[2]) * z * z - 0.5 * z + 1.0
    return s, c


def sincos(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(sin x, cos x)`` of a float32 or float64 tensor ``x`` [rad]; each of ``x``'s shape."""
    if x.dtype == torch.float64:
        return torch.sin(x), torch.cos(x)
    quadrant, y = _reduce(x)
    s, c = _kernels(y)
    # quadrant 1: (c, -s), 2: (-s, -c), 3: (-c, s); each mask is one comparison
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
