"""glibc's float32 ``sinf`` / ``cosf``, the functions XLA:CPU calls for ``jnp.sin``/``jnp.cos``.

XLA:CPU lowers a float32 ``sin``/``cos`` to calls of the C library's ``sinf``/``cosf``
(glibc >= 2.28: the ARM optimized-routines algorithm, ``sysdeps/ieee754/flt-32/s_sinf.c``,
``s_cosf.c``, ``sincosf.h``, ``sincosf_data.c``). Those are not correctly rounded (about
1.3% of float32 angles in ``[0, 2 pi)`` differ from ``round(cos(x))``), so craftax's
Perlin gradients and light level are reproduced here with the same double-precision
algorithm: range reduction by ``round(x * 2/pi)``, the same polynomials, one final rounding
to float32. Checked equal on all 2**23 angles ``6.2831855f * k * 2**-23`` that jax's
``2 * pi * uniform`` produces (tests/test_craftax.py).

Domain: ``|x| < 120`` (glibc's fast path; craftax's angles lie in ``[0, 2 pi)`` and its light
level's in ``[0.3 pi, 1.3 pi]``); larger inputs are outside the mirrored algorithm.
Every operation is a single IEEE double op (no fused multiply-add), as in glibc's builds.
"""

from __future__ import annotations

import numpy as np
import torch

_h = float.fromhex
_PIO4 = _h("0x1.921FB54442D18p-1")  # pi/4, the threshold compared in float32 (top 12 bits)
_HPI_INV = _h("0x1.45F306DC9C883p+23")  # 2/pi * 2**24
_HPI = _h("0x1.921FB54442D18p0")  # pi/2
# cosine polynomial of table 0; table 1 (quadrants 2, 3) negates it
_C = (
    1.0,
    -_h("0x1.ffffffd0c621cp-2"),
    _h("0x1.55553e1068f19p-5"),
    -_h("0x1.6c087e89a359dp-10"),
    _h("0x1.99343027bf8c3p-16"),
)
_S = (-_h("0x1.555545995a603p-3"), _h("0x1.1107605230bc4p-7"), -_h("0x1.994eb3774cf24p-13"))


def _abstop12(x: torch.Tensor) -> torch.Tensor:
    """``(bits(x) >> 20) & 0x7ff`` of float32 ``x``: sign-less exponent and 3 mantissa bits."""
    return (x.view(torch.int32) >> 20) & 0x7FF


@torch.compiler.assume_constant_result
def _top12(v: float) -> int:
    """``abstop12`` of the float32 rounding of a Python float (a trace-time constant)."""
    return int((np.array(v, dtype=np.float32).view(np.int32) >> 20) & 0x7FF)


@torch.compiler.assume_constant_result
def round32(x: float) -> float:
    """A Python float rounded to float32 (a trace-time constant: dynamo calls it as is)."""
    return float(np.float32(x))


def _poly(x: torch.Tensor, x2: torch.Tensor, odd: torch.Tensor, neg: torch.Tensor) -> torch.Tensor:
    """The sine polynomial where ``odd`` is False, else the cosine's (glibc's ``sinf_poly``).

    ``neg`` selects table 1 (cosine coefficients negated). All float64.
    """
    x3 = x * x2
    s1 = _S[1] + x2 * _S[2]
    x7 = x3 * x2
    s = x + x3 * _S[0]
    sin = s + x7 * s1
    sign = torch.where(neg, -1.0, 1.0).to(torch.float64)
    x4 = x2 * x2
    c2 = sign * _C[3] + x2 * (sign * _C[4])
    c1 = sign * _C[0] + x2 * (sign * _C[1])
    x6 = x4 * x2
    c = c1 + x4 * (sign * _C[2])
    cos = c + x6 * c2
    return torch.where(odd, cos, sin)


def sincosf(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """The ``sinf(x)`` and ``cosf(x)`` of glibc for float32 ``x`` with ``|x| < 120``.

    Args:
        x: float32 tensor, any shape.

    Returns:
        ``(sin, cos)``, float32 tensors of the shape of ``x``.
    """
    top = _abstop12(x)
    xd = x.to(torch.float64)
    small = top < _top12(_PIO4)
    tiny = top < _top12(2.0**-12)
    # reduce_fast without TOINT_INTRINSICS (x86-64): the quadrant sits in bits 24..31
    r = xd * _HPI_INV
    n = (r.to(torch.int64) + 0x800000) >> 24
    xr = xd - n.to(torch.float64) * _HPI
    quadrant_sign = torch.where(((n & 3) == 1) | ((n & 3) == 2), -1.0, 1.0).to(torch.float64)
    neg = (n & 2) != 0
    xs = xr * quadrant_sign
    xr2 = xr * xr
    odd = (n & 1) == 1
    false = torch.zeros_like(odd)
    x2 = xd * xd
    sin_big = _poly(xs, xr2, odd, neg)
    cos_big = _poly(xs, xr2, ~odd, neg)
    sin_small = torch.where(tiny, xd, _poly(xd, x2, false, false))
    cos_small = torch.where(tiny, 1.0, _poly(xd, x2, ~false, false).to(torch.float64))
    sin = torch.where(small, sin_small, sin_big)
    cos = torch.where(small, cos_small, cos_big)
    return sin.to(torch.float32), cos.to(torch.float32)


def fma32(
    a: torch.Tensor | float, b: torch.Tensor | float, c: torch.Tensor | float
) -> torch.Tensor:
    """float32 ``a * b + c`` with one rounding, as XLA:CPU's fused multiply-add computes it.

    The product of two float32 values is exact in float64 and the sum is rounded there, then
    to float32; that differs from a true fused rounding only when the float64 sum lands
    exactly halfway between two float32 values while not being exact (not seen in the
    parity tests).

    Args:
        a: float32 tensor or a float32-representable number; likewise ``b`` and ``c``.
        b: See ``a``.
        c: See ``a``.

    Returns:
        float32 tensor of the broadcast shape.
    """

    def d(x: torch.Tensor | float) -> torch.Tensor | float:
        return x.to(torch.float64) if isinstance(x, torch.Tensor) else float(x)

    out = d(a) * d(b) + d(c)
    return torch.as_tensor(out).to(torch.float32)
