"""Counter-based random numbers from integer tensor ops.

Every env carries a 64-bit key (two 32-bit words derived from its seed) and a step
counter. A draw is a hash of ``(key, counter, domain, stream)``, so env ``i``'s random
stream depends only on its own seed and how many steps it has taken: never on
``num_envs``, the device or the backend. The hash runs on int32 lanes with xor, and,
shifts and products that never overflow (in CPU kernels built with ``-fwrapv``: single
wrapping products, :func:`_mul32`), so eager, compiled, CPU and CUDA results are bitwise
equal. Uniform floats carry 24 random bits, exact in float32 and float64 alike.

Eager CPU calls (inside :func:`gpuvec_envs.core.eager.host_eager`) compute the same
hashes with numpy's uint32 arithmetic (wrapping multiply, logical shift): about nine array
operations instead of ~35 small torch ops per hash, which decides the speed of an eager
step at small N.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from gpuvec_envs.compiler.passes import wrapping
from gpuvec_envs.core.constants import table
from gpuvec_envs.core.eager import on_host

MASK32 = 0xFFFFFFFF
_M1 = 0x7FEB352D
_M2 = 0x846CA68B
_SEED_SALT = 0x9E3779B9

#: Domains keep step-time and reset-time draws of the same counter apart.
STEP = 0x51ED270B
RESET = 0x2545F491


def _signed(c: int, bits: int) -> int:
    """The signed ``bits``-bit integer whose two's-complement bits are ``c``."""
    return c - (1 << bits) if c >> (bits - 1) & 1 else c


def to_bits32(x: torch.Tensor) -> torch.Tensor:
    """int64 values (only their low 32 bits are read) as int32 tensors of the same bits."""
    return (((x & MASK32) ^ 0x80000000) - 0x80000000).to(torch.int32)


def from_bits32(x: torch.Tensor) -> torch.Tensor:
    """int32 bits as int64 values in ``[0, 2**32)`` (the inverse of :func:`to_bits32`)."""
    return x.to(torch.int64) & MASK32


def _srl(x: torch.Tensor, k: int) -> torch.Tensor:
    """Logical right shift of int32 bits by ``0 < k < 32``."""
    return (x >> k) & ((1 << (32 - k)) - 1)


def below(bits: torch.Tensor, p: float) -> torch.Tensor:
    """Bool ``uniform < p`` for int32 bits, as an int32 compare of their 24 top bits.

    ``k / 2**24 < p`` iff ``k < ceil(p * 2**24)``; no float, the shape of ``bits``.
    """
    return _srl(bits, 8) < math.ceil(p * (1 << 24))


def scale(bits: torch.Tensor, high: int | torch.Tensor) -> torch.Tensor:
    """int32 ``(bits * high) >> 32``, uniform in ``[0, high)``, for int32 bits.

    ``0 < high < 2**15``, an int or an int32 tensor; computed on the 16-bit halves of
    ``bits`` so every product fits int32.
    """
    return (_srl(bits, 16) * high + ((bits & 0xFFFF) * high >> 16)) >> 16


def _mul32(x: torch.Tensor, c: int) -> torch.Tensor:
    """Bits of ``(x * c) mod 2**32`` for int32 bits ``x`` and a constant ``0 <= c < 2**32``.

    Schoolbook on 16-bit halves, with each constant half taken as a signed 16-bit number,
    so that every product and sum stays inside int32: signed overflow is undefined in the
    C++ and CUDA code that inductor generates, and int32 lanes are twice as many per
    vector as int64 ones (AVX2 also has no int64 multiply). One int32 multiply (the same
    bits) in a CPU graph whose kernels are built with ``-fwrapv``
    (:mod:`gpuvec_envs.compiler.passes.wrapping`).
    """
    log = wrapping.product_log()
    if log is not None:
        log.products += 1
        return x * _signed(c, 32)
    c_lo, c_hi = _signed(c & 0xFFFF, 16), _signed(c >> 16, 16)
    x_lo, x_hi = x & 0xFFFF, _srl(x, 16)
    low = x_lo * c_lo  # the product by c's true low half, less x_lo * 2**16 if c_lo < 0
    carry = low >> 16
    if c_lo < 0:
        carry = carry + x_lo
    mid = ((x_hi * c_lo) & 0xFFFF) + ((x_lo * c_hi) & 0xFFFF) + carry
    return (low & 0xFFFF) | ((mid & 0xFFFF) << 16)


def _hash_np(x: np.ndarray) -> np.ndarray:
    """:func:`_hash_bits` on a uint32 array (numpy's uint32 products wrap modulo 2**32)."""
    x = x ^ (x >> np.uint32(16))
    x *= np.uint32(_M1)
    x ^= x >> np.uint32(15)
    x *= np.uint32(_M2)
    x ^= x >> np.uint32(16)
    return x


def _low32_np(x: torch.Tensor) -> np.ndarray:
    """The low 32 bits of an int64 CPU tensor as a uint32 array."""
    return x.numpy().astype(np.uint32)


@functools.lru_cache(maxsize=256)
def _stream_constants(first: int, count: int) -> np.ndarray:
    """Read-only uint32 ``hash32(2k + 1)`` for streams ``first .. first + count - 1``."""
    out = np.array([stream_constant(k) for k in range(first, first + count)], np.uint32)
    out.setflags(write=False)
    return out


def _signed_stream_constants(first: int, count: int, width: int = 0) -> list[int]:
    """Signed int32 :func:`stream_constant` of streams ``first ..``, zeros up to ``width``."""
    out = [_signed(stream_constant(k), 32) for k in range(first, first + count)]
    return out + [0] * (width - count)


def _hash_bits(x: torch.Tensor) -> torch.Tensor:
    """:func:`hash32` on int32 bits (what every draw computes)."""
    x = x ^ _srl(x, 16)
    x = _mul32(x, _M1)
    x = x ^ _srl(x, 15)
    x = _mul32(x, _M2)
    return x ^ _srl(x, 16)


def hash32(x: torch.Tensor) -> torch.Tensor:
    """Bijective 32-bit integer hash ("lowbias32") of int64 values in ``[0, 2**32)``."""
    return from_bits32(_hash_bits(to_bits32(x)))


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


_INV1 = 0x43021123  # inverse multipliers of lowbias32 (hash32)
_INV2 = 0x1D69E2A5


def _mul32_int64(x: torch.Tensor, c: int) -> torch.Tensor:
    """``(x * c) mod 2**32`` for int64 ``x`` in ``[0, 2**32)``; no product leaves int64."""
    return (x * (c & 0xFFFF) + (((x * (c >> 16)) & 0xFFFF) << 16)) & MASK32


def _unhash32(x: torch.Tensor) -> torch.Tensor:
    """The inverse of :func:`hash32` on int64 values in ``[0, 2**32)``."""
    x = x ^ (x >> 16)
    x = _mul32_int64(x, _INV1)
    x = x ^ (x >> 15) ^ (x >> 30)
    x = _mul32_int64(x, _INV2)
    return x ^ (x >> 16)


def seeds_from_keys(key0: torch.Tensor, key1: torch.Tensor) -> torch.Tensor:
    """The seeds whose :func:`keys_from_seeds` are ``(key0, key1)``: int64, shape of the keys.

    For envs whose randomness follows a reference's own seeding (a JAX key made from the
    seed, as Craftax): :attr:`Rng.key0`/:attr:`Rng.key1` give the keys of each env.
    """
    hi = _unhash32(key1) ^ _SEED_SALT
    lo = _unhash32(key0) ^ key1
    return (hi << 32) | lo


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
        self._next = 0
        #: The (N,) int64 key words and draw counter the draws come from (for an env that
        #: derives its own reference stream from them: :func:`seeds_from_keys`).
        self.key0, self.key1, self.counter = key0, key1, counter
        if on_host(counter, key0, key1):
            inner = _hash_np(_low32_np(counter) ^ _low32_np(key1) ^ np.uint32(domain))
            base = _hash_np(inner ^ _low32_np(key0))
            self._base = torch.from_numpy(base.view(np.int32))  # (N,) int32 bits
            return
        inner = _hash_bits(to_bits32(counter ^ key1 ^ domain))
        self._base = _hash_bits(inner ^ to_bits32(key0))  # (N,) int32 bits

    @property
    def num_envs(self) -> int:
        """Batch size N."""
        return self._base.shape[0]

    @property
    def device(self) -> torch.device:
        """Device of the draws."""
        return self._base.device

    def _draw(
        self,
        shape: tuple[int, ...],
        word: Callable[[torch.Tensor], torch.Tensor],
        width: int = 0,
    ) -> torch.Tensor:
        """``word(bits)`` of the next streams (int32 bits), shape (N, *shape).

        Stream ``k``'s bits are ``hash32(base ^ hash32(2k + 1))``, computed as one broadcast
        (N, count) hash against a constant table of the ``hash32(2k + 1)`` (built once per
        device, :func:`~gpuvec_envs.core.constants.table`), or against a Python int for one
        stream. (Building each stream as its own (N,) column vectorised no better and cost
        ~7 s of compile time per column.) ``width > count`` (a 1-D draw only) adds columns of
        unspecified bits up to ``width``, from the same table padded with zeros.
        """
        count = 1
        for s in shape:
            count *= s
        first = self._next
        self._next += count
        if width > count:
            shape = (width,)
        if on_host(self._base):  # numpy: never inside a trace (dynamo would trace it)
            consts = _stream_constants(first, count)
            if width > count:
                consts = np.concatenate([consts, np.zeros(width - count, np.uint32)])
            bits = _hash_np(self._base.numpy().view(np.uint32)[:, None] ^ consts[None, :])
            out = word(torch.from_numpy(bits.view(np.int32)))
            return out.reshape(self.num_envs, *shape)
        if width > count:
            streams = table(
                _signed_stream_constants, first, count, width, dtype=torch.int32, like=self._base
            )
            out = word(_hash_bits(self._base[:, None] ^ streams[None, :]))
            return out.reshape(self.num_envs, width)
        if count == 1:  # a constant of the code, not a tensor: nothing to copy or lift
            out = word(_hash_bits(self._base ^ _signed(stream_constant(first), 32)))
            return out.reshape(self.num_envs, *shape)
        streams = table(_signed_stream_constants, first, count, dtype=torch.int32, like=self._base)
        out = word(_hash_bits(self._base[:, None] ^ streams[None, :]))
        return out.reshape(self.num_envs, *shape)

    def constant(self, make: Any, *args: Any, dtype: torch.dtype) -> torch.Tensor:
        """A constant table on the draws' device: :func:`~gpuvec_envs.core.constants.table`.

        No random draw; for reset code, which has no other tensor before its first draw.
        """
        return table(make, *args, dtype=dtype, like=self._base)

    def columns(self, k: int, kind: str = "bits", **kwargs: Any) -> tuple[torch.Tensor, ...]:
        """The ``k`` columns of ``self.<kind>(k, **kwargs)``, as ``k`` (N,) draws.

        ``kind`` is ``"bits"``, ``"bits32"`` or ``"uniform"``; the streams and values
        are the same. For draws used column by column: inductor vectorises an (N, k) draw
        along its inner dimension of size k and leaves the rest of a fused step in a
        per-env scalar loop.
        """
        if kind not in ("bits", "bits32", "uniform"):
            raise ValueError(f"kind must be 'bits', 'bits32' or 'uniform', got {kind!r}")
        draw = getattr(self, kind)
        scalars = not any(isinstance(v, torch.Tensor) for v in kwargs.values())
        if scalars and on_host(self._base):  # eager: one (N, k) draw, split (same values)
            return tuple(draw(k, **kwargs).t().contiguous().unbind(0))
        return tuple(draw(**kwargs) for _ in range(k))

    def bits(self, *shape: int) -> torch.Tensor:
        """Shape (N, *shape) int64 uniform in ``[0, 2**32)``."""
        return self._draw(shape, from_bits32)

    def bits_padded(self, count: int, width: int) -> torch.Tensor:
        """(N, width) int64: ``bits(count)`` in the first columns, unspecified bits after.

        ``0 < count <= width``. For draws laid along an axis of ``width`` (a grid's cells):
        padding an (N, count) draw instead makes inductor store the draw for the pad to read.
        """
        if not 0 < count <= width:
            raise ValueError(f"need 0 < count <= width, got count={count}, width={width}")
        return self._draw((count,), from_bits32, width)

    def bits32(self, *shape: int) -> torch.Tensor:
        """The draws of :meth:`bits` as int32 tensors of the same 32 bits.

        For :func:`below` and :func:`scale`: int32 lanes, no int64 multiply.
        """
        return self._draw(shape, lambda b: b)

    def uniform(
        self,
        *shape: int,
        low: float | torch.Tensor = 0.0,
        high: float | torch.Tensor = 1.0,
        dtype: torch.dtype = torch.float32,
    ) -> torch.Tensor:
        """Shape (N, *shape) floats uniform in ``[low, high)`` (24 random bits)."""
        unit = self._draw(shape, lambda b: _srl(b, 8).to(dtype) * (1.0 / (1 << 24)))
        return low + (high - low) * unit

    def randint(self, high: int, *shape: int) -> torch.Tensor:
        """Shape (N, *shape) int64 uniform in ``[0, high)``, ``0 < high < 2**31``.

        ``(bits * high) >> 32``; for ``high < 2**15`` computed in int32 as
        ``(hi * high + ((lo * high) >> 16)) >> 16`` over the 16-bit halves (same value).
        """
        if high < 1 << 15:
            return self._draw(shape, lambda b: scale(b, high).to(torch.int64))
        return self._draw(shape, lambda b: (from_bits32(b) * high) >> 32)

    def bernoulli(self, p: float, *shape: int) -> torch.Tensor:
        """Shape (N, *shape) bool: exactly ``uniform(*shape) < p`` of the same draws.

        The integer test of :func:`below`, so the result does not depend on the float dtype.
        """
        return self._draw(shape, lambda b: below(b, p))
