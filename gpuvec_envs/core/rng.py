"""Counter-based random numbers from integer tensor ops.

Every env carries a 64-bit key (two 32-bit words derived from its seed) and a step
counter. A draw is a hash of ``(key, counter, domain, stream)``, so env ``i``'s random
stream depends only on its own seed and how many steps it has taken: never on
``num_envs``, the device or the backend. Only int64 add/xor/shift/and and products that
stay below 2**63 are used, so eager, compiled, CPU and CUDA results are bitwise equal.
Uniform floats carry 24 random bits, exact in float32 and float64 alike.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable

import torch

MASK32 = 0xFFFFFFFF
_M1 = 0x7FEB352D
_M2 = 0x846CA68B
_SEED_SALT = 0x9E3779B9

#: Domains keep step-time and reset-time draws of the same counter apart.
STEP = 0x51ED270B
RESET = 0x2545F491


#: How :func:`hash32` multiplies on the CPU: ``"auto"`` (shifts and adds where the CPU's
#: vector ISA has no 64-bit integer multiply, i.e. below AVX-512), ``"shift"`` or ``"mul"``.
#: From ``GPUVEC_RNG_MULTIPLY``; read when a step is traced. Both give the same bits.
RNG_MULTIPLY = os.environ.get("GPUVEC_RNG_MULTIPLY", "auto")
# Read once: the vector ISA is fixed for the process, and dynamo cannot trace the query.
_CPU_CAPABILITY = torch.backends.cpu.get_cpu_capability()


@functools.cache
def _signed_digits(c: int) -> tuple[tuple[int, int], ...]:
    """``c >= 0`` as ``sum(d * 2**k)`` with digits ``d`` in {-1, 1} (non-adjacent form)."""
    out, k = [], 0
    while c:
        if c & 1:
            d = 2 - (c & 3)  # +1 or -1, so that the next digit is 0
            out.append((k, d))
            c -= d
        c >>= 1
        k += 1
    return tuple(out)


def _times(x: torch.Tensor, c: int, shifts: bool) -> torch.Tensor:
    """``x * c`` for a constant ``0 <= c < 2**16`` and ``0 <= x < 2**32`` (exact in int64)."""
    if not shifts or c == 0:
        return x * c
    acc = None
    for k, d in _signed_digits(c):
        term = x << k if k else x
        if acc is None:
            acc = term if d > 0 else -term
        else:
            acc = acc + term if d > 0 else acc - term
    return acc


def _use_shifts(x: torch.Tensor) -> bool:
    """Whether :func:`_mul32` multiplies by shifts and adds (see :data:`RNG_MULTIPLY`).

    ATen's AVX2 vector type has no 64-bit multiply and multiplies lane by lane in scalar
    code; shifts and adds of int64 vectors are single instructions there.
    """
    if RNG_MULTIPLY in ("shift", "mul"):
        return RNG_MULTIPLY == "shift" and x.device.type == "cpu"
    if RNG_MULTIPLY != "auto":
        raise ValueError(f"GPUVEC_RNG_MULTIPLY must be auto, shift or mul, got {RNG_MULTIPLY!r}")
    return x.device.type == "cpu" and not _CPU_CAPABILITY.startswith("AVX512")


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """``(x * c) mod 2**32`` for ``0 <= x < 2**32`` without int64 overflow.

    ``c`` is split in 16-bit halves so every product stays below 2**49: signed overflow is
    undefined behaviour in the C++ and CUDA code that inductor generates, so it is avoided.
    Each product is a multiply or, on CPUs without a vector 64-bit multiply, a few shifts
    and adds of the same value (:func:`_use_shifts`).
    """
    shifts = _use_shifts(x)
    lo = _times(x, c & 0xFFFF, shifts)
    hi = (_times(x, c >> 16, shifts) & 0xFFFF) << 16
    return (lo + hi) & MASK32


def _to_float(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """int64 ``x`` in ``[0, 2**24)`` as ``dtype`` (exact either way).

    Below AVX-512 through int32: AVX2 converts int32 lanes to floats in one instruction but
    has no int64 conversion, which its vector code emulates lane by lane.
    """
    if _use_shifts(x):
        x = x.to(torch.int32)
    return x.to(dtype)


def hash32(x: torch.Tensor) -> torch.Tensor:
    """Bijective 32-bit integer hash ("lowbias32") of int64 values in ``[0, 2**32)``."""
    x = x ^ (x >> 16)
    x = _mul32(x, _M1)
    x = x ^ (x >> 15)
    x = _mul32(x, _M2)
    return x ^ (x >> 16)


def hash32_int(x: int) -> int:
    """:func:`hash32` of one Python int in ``[0, 2**32)`` (for trace-time constants)."""
    x ^= x >> 16
    x = (x * _M1) & MASK32
    x ^= x >> 15
    x = (x * _M2) & MASK32
    return x ^ (x >> 16)


def stream_constant(k: int) -> int:
    """``hash32(2k + 1)``: the constant that stream ``k`` of every draw is xored with."""
    return hash32_int((2 * k + 1) & MASK32)


def keys_from_seeds(seeds: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Map int64 seeds in ``[0, 2**63)`` (shape (N,)) to two int64 key words in ``[0, 2**32)``.

    The map is a bijection, so distinct seeds give distinct keys.
    """
    lo = seeds & MASK32
    hi = (seeds >> 32) & MASK32
    key1 = hash32(hi ^ _SEED_SALT)
    key0 = hash32(lo ^ key1)
    return key0, key1


class Rng:
    """Random draws of one batch of envs at one counter value.

    Each call to :meth:`bits` (and the helpers built on it) consumes the next streams, so
    a pure function that draws in a fixed order gets the same numbers eager or compiled.

    Args:
        key0: Shape (N,), int64 key word.
        key1: Shape (N,), int64 key word.
        counter: Shape (N,), int64 per-env draw counter (only its low 32 bits are used).
        domain: :data:`STEP` or :data:`RESET`.
    """

    def __init__(
        self, key0: torch.Tensor, key1: torch.Tensor, counter: torch.Tensor, domain: int
    ) -> None:
        self._base = hash32(hash32((counter & MASK32) ^ key1 ^ domain) ^ key0)
        self._next = 0

    @property
    def num_envs(self) -> int:
        """Batch size N."""
        return self._base.shape[0]

    @property
    def device(self) -> torch.device:
        """Device of the draws."""
        return self._base.device

    def _draw(
        self, shape: tuple[int, ...], word: Callable[[torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        """``word(bits)`` of the next streams, shape (N, *shape).

        Stream ``k``'s bits are ``hash32(base ^ hash32(2k + 1))``, computed as one broadcast
        (N, count) hash against trace-time constants. (Building each stream as its own (N,)
        column vectorised no better and cost ~7 s of compile time per column.)
        """
        count = 1
        for s in shape:
            count *= s
        first = self._next
        self._next += count
        consts = [stream_constant(k) for k in range(first, first + count)]
        streams = torch.tensor(consts, dtype=torch.int64, device=self.device)
        out = word(hash32(self._base[:, None] ^ streams[None, :]))
        return out.reshape(self.num_envs, *shape)

    def bits(self, *shape: int) -> torch.Tensor:
        """Shape (N, *shape) int64 uniform in ``[0, 2**32)``."""
        return self._draw(shape, lambda b: b)

    def uniform(
        self,
        *shape: int,
        low: float | torch.Tensor = 0.0,
        high: float | torch.Tensor = 1.0,
        dtype: torch.dtype = torch.float32,
    ) -> torch.Tensor:
        """Shape (N, *shape) floats uniform in ``[low, high)`` (24 random bits)."""
        if isinstance(low, torch.Tensor) or isinstance(high, torch.Tensor):
            unit = _to_float(self.bits(*shape) >> 8, dtype) * (1.0 / (1 << 24))
            return low + (high - low) * unit
        return self._draw(
            shape, lambda b: low + (high - low) * (_to_float(b >> 8, dtype) * (1.0 / (1 << 24)))
        )

    def randint(self, high: int, *shape: int) -> torch.Tensor:
        """Shape (N, *shape) int64 uniform in ``[0, high)``, ``0 < high < 2**31``."""
        return self._draw(shape, lambda b: (b * high) >> 32)

    def bernoulli(self, p: float, *shape: int) -> torch.Tensor:
        """Shape (N, *shape) bool: exactly ``uniform(*shape) < p`` of the same draws.

        An integer test on the uniform's 24 bits (``k / 2**24 < p`` iff
        ``k < ceil(p * 2**24)``), so no float compare is needed and the result does not
        depend on the float dtype.
        """
        threshold = math.ceil(p * (1 << 24))
        return self._draw(shape, lambda b: (b >> 8) < threshold)
