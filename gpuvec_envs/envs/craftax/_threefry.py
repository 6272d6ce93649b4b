"""JAX's threefry2x32 random numbers as batched torch integer ops.

Mirrors ``jax/_src/random/threefry2x32.py`` and ``jax/_src/random/core.py`` (jax 0.10.2)
under jax's default configuration: ``jax_threefry_partitionable=True`` (the default since
jax 0.5) and ``jax_enable_x64=False``. Every function takes a batch of raw keys: an int64
tensor of shape ``(..., 2)`` whose words hold uint32 values in ``[0, 2**32)`` (what
``jax.random.key_data`` returns, or a legacy ``PRNGKey``), and returns, for each key, what the
jax function returns for that key, bit for bit; leading batch dims are kept in front.

uint32 arithmetic runs on int64 lanes whose low 32 bits are the word (masked where a
value is read whole), so CPU and CUDA, eager and compiled agree. The hash itself
(:func:`threefry2x32`) is one custom operation, ``gpuvec::threefry2x32``: a compiled step
does not trace its ~130 integer operations (that made the whole step too large for
inductor), and it runs as one compiled kernel (switch: :data:`COMPILED_KERNEL`).

What jax computes, written out (all words uint32):

- ``threefry2x32(k, (x0, x1))``: Threefry-2x32 with 20 rounds (5 groups of 4, key
  injection after each group, rotations ``13 15 26 6 / 17 29 16 24``).
- ``PRNGKey(s)``: ``(0, s mod 2**32)`` (with x64 disabled the seed is a 32-bit integer).
- ``split(k, n)[i]`` = ``threefry2x32(k, (0, i))``; ``fold_in(k, d)`` = ``split(k, d + 1)[d]``.
- ``random_bits(k, shape)`` (32 bits): for the flat index ``i`` of each element,
  ``y0 ^ y1`` where ``(y0, y1) = threefry2x32(k, (i >> 32, i & 0xFFFFFFFF))``.
- ``uniform``: ``bits >> 9 | 0x3F800000`` read as float32, minus 1, times
  ``maxval - minval``, plus ``minval`` (one fused multiply-add on XLA:CPU), at least
  ``minval``.
- ``randint``: ``k1, k2 = split(k)``; ``hi, lo`` = random_bits of each;
  ``((hi % span) * m + lo % span) % span`` with ``m = (2**16 % span)**2 % span`` in wrapping
  uint32 arithmetic, plus ``minval``.
- ``choice`` without ``p``: ``randint(k, shape, 0, n)``; with ``p`` (replace=True):
  ``c = cumsum(p)`` (XLA:CPU's order, :func:`cumsum_xla_cpu`), ``r = c[-1] * (1 - uniform)``,
  the first index with ``c >= r``.
- ``permutation(k, n)``: ``ceil(3 ln n / ln(2**32 - 1))`` rounds of ``k, sub = split(k)``
  and a stable sort of the current order by ``random_bits(sub, (n,))``.
"""

from __future__ import annotations

import functools
import math
import os
import warnings
from collections.abc import Callable, Sequence

import numpy as np
import torch

MASK32 = 0xFFFFFFFF
_PARITY = 0x1BD11BDA
_ROTATIONS = ((13, 15, 26, 6), (17, 29, 16, 24))


#: Run :func:`threefry2x32` as one compiled kernel per device (built by inductor at the
#: first call on that device, one build for every length: ~80 s on a cold inductor cache,
#: ~15 s on a warm one, which that call waits for); ``False``: as torch operations. Off
#: unless ``GPUVEC_CRAFTAX_HASH_KERNEL=1``: no step waits for a compiler by default.
COMPILED_KERNEL = os.environ.get("GPUVEC_CRAFTAX_HASH_KERNEL", "0") == "1"
#: The kernels built so far, by device; None where the build failed (torch operations run).
_KERNELS: dict[torch.device, Callable[..., tuple[torch.Tensor, torch.Tensor]] | None] = {}
#: Length of the example the kernel is traced at (a length that no operation specialises).
_EXAMPLE_LENGTH = 64


def _mul32(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``(a * b) mod 2**32`` for int64 ``a, b`` in ``[0, 2**32)``, without int64 overflow."""
    return (a * (b & 0xFFFF) + (((a * (b >> 16)) & 0xFFFF) << 16)) & MASK32


def threefry2x32(
    k0: torch.Tensor, k1: torch.Tensor, x0: torch.Tensor, x1: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Threefry-2x32 hash of counters ``(x0, x1)`` under key ``(k0, k1)``, as jax computes it.

    One operation (``gpuvec::threefry2x32``) that a compiled step calls as it is, without
    tracing its ~130 integer operations; it runs :data:`COMPILED_KERNEL`'s one-kernel build
    or, switched off or where the build failed (with a warning), :func:`threefry2x32_ops`.

    Args:
        k0: Key word 0, int64 in ``[0, 2**32)``, broadcastable with the others.
        k1: Key word 1, same.
        x0: Counter word 0, same.
        x1: Counter word 1, same.

    Returns:
        ``(y0, y1)``: int64 in ``[0, 2**32)`` of the broadcast shape.
    """
    return torch.ops.gpuvec.threefry2x32(k0, k1, x0, x1)


def threefry2x32_ops(
    k0: torch.Tensor,
    k1: torch.Tensor,
    x0: torch.Tensor,
    x1: torch.Tensor,
    wrap: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """:func:`threefry2x32` as torch integer operations.

    uint32 words live in the low 32 bits of int64 lanes. With ``wrap`` the masks are
    deferred (6 operations a round): additions, xors and left shifts carry the low 32 bits
    through whatever the high bits hold and however the int64 sum wraps around (ATen's CPU
    and CUDA integer kernels wrap); only the right shift of a rotation reads a masked word,
    and the outputs are masked. Without ``wrap`` every word is masked after each addition,
    so that no int64 value exceeds ``2**35`` (no overflow for a code generator to assume
    away; 7 operations a round). Both give the same bits.

    Args:
        k0: Key word 0, int64 in ``[0, 2**32)``, broadcastable with the others.
        k1: Key word 1, same.
        x0: Counter word 0, same.
        x1: Counter word 1, same.
        wrap: Defer the masks (fewer operations; relies on wrapping int64 additions).

    Returns:
        ``(y0, y1)``: int64 in ``[0, 2**32)`` of the broadcast shape.
    """
    ks = (k0, k1, k0 ^ k1 ^ _PARITY)
    x0 = x0 + ks[0]
    x1 = x1 + ks[1]
    if not wrap:
        x0, x1 = x0 & MASK32, x1 & MASK32
    for group in range(5):
        for r in _ROTATIONS[group % 2]:
            x0 = x0 + x1
            if wrap:
                x1 = ((x1 << r) | ((x1 & MASK32) >> (32 - r))) ^ x0
            else:
                x0 = x0 & MASK32
                x1 = (((x1 << r) & MASK32) | (x1 >> (32 - r))) ^ x0
        x0 = x0 + ks[(group + 1) % 3]
        x1 = x1 + (ks[(group + 2) % 3] + (group + 1))
        if not wrap:
            x0, x1 = x0 & MASK32, x1 & MASK32
    return x0 & MASK32, x1 & MASK32


def _kernel(device: torch.device) -> Callable[..., tuple[torch.Tensor, torch.Tensor]] | None:
    """The compiled :func:`threefry2x32_ops` of four int64 ``(n,)`` words on ``device``.

    Built at the first call per device (inductor's on-disk cache makes later processes'
    builds fast), for every ``n``; None, with a warning, where the build fails.
    """
    if device in _KERNELS:
        return _KERNELS[device]
    from gpuvec_envs.compiler.flat import compile_flat
    from gpuvec_envs.compiler.options import resolve

    # four distinct tensors: a tracer takes one tensor passed twice for one input
    words = tuple(torch.zeros(_EXAMPLE_LENGTH, dtype=torch.int64, device=device) for _ in range(4))
    kernel = None
    try:
        call = compile_flat(
            functools.partial(threefry2x32_ops, wrap=False),
            words,
            compiler=resolve({"dynamic_batch": True}),
            memo_as="gpuvec_envs.envs.craftax._threefry.threefry2x32_ops",
        )
        dynamic = next(p for p in call.passes if p.name == "dynamic_batch")
        if dynamic.status != "applied":
            raise RuntimeError(f"the kernel serves one length only ({dynamic})")
        kernel = call.flat
    except Exception as exc:  # noqa: BLE001 - any build failure falls back, loudly
        warnings.warn(
            f"gpuvec::threefry2x32: the compiled kernel for {device} could not be built "
            f"({type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}); "
            "threefry2x32 runs as torch operations there (slower, same bits)",
            RuntimeWarning,
            stacklevel=4,
        )
    _KERNELS[device] = kernel
    return kernel


def _threefry2x32_impl(
    k0: torch.Tensor, k1: torch.Tensor, x0: torch.Tensor, x1: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``gpuvec::threefry2x32`` on real tensors: the kernel, or the torch operations."""
    if not k0.dtype == k1.dtype == x0.dtype == x1.dtype == torch.int64:
        raise TypeError(
            f"threefry2x32 takes int64 words, got {k0.dtype}, {k1.dtype}, {x0.dtype}, {x1.dtype}"
        )
    kernel = _kernel(x0.device) if COMPILED_KERNEL else None
    if kernel is None:
        return threefry2x32_ops(k0, k1, x0, x1)  # fresh tensors of the broadcast shape
    words = torch.broadcast_tensors(k0, k1, x0, x1)
    shape = words[0].shape
    if words[0].numel() < 2:  # a length the kernel specialises (0, 1): not worth a build
        return threefry2x32_ops(k0, k1, x0, x1)
    y0, y1 = kernel(*(w.contiguous().view(-1) for w in words))
    return y0.view(shape), y1.view(shape)


def _threefry2x32_fake(
    k0: torch.Tensor, k1: torch.Tensor, x0: torch.Tensor, x1: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``gpuvec::threefry2x32``'s output shapes and dtypes."""
    shape = torch.broadcast_shapes(k0.shape, k1.shape, x0.shape, x1.shape)
    return x0.new_empty(shape, dtype=torch.int64), x0.new_empty(shape, dtype=torch.int64)


# A plain operator (not ``torch.library.custom_op``, whose Python wrappers cost ~100 us a
# call, more than the kernel): no autograd (integer words), one implementation for every
# device, a fake implementation for tracers.
_LIB = torch.library.Library("gpuvec", "FRAGMENT")
_LIB.define("threefry2x32(Tensor k0, Tensor k1, Tensor x0, Tensor x1) -> (Tensor, Tensor)")
_LIB.impl("threefry2x32", _threefry2x32_impl, "CompositeExplicitAutograd")
torch.library.register_fake("gpuvec::threefry2x32", _threefry2x32_fake, lib=_LIB)


def prng_key(seed: torch.Tensor) -> torch.Tensor:
    """``jax.random.PRNGKey(seed)`` for each seed (x64 disabled: the seed's low 32 bits).

    Args:
        seed: Integer tensor of any shape ``S`` (negative seeds wrap like int32).

    Returns:
        Keys, int64 of shape ``(*S, 2)``: ``(0, seed mod 2**32)``.
    """
    seed = seed.to(torch.int64) & MASK32
    return torch.stack((torch.zeros_like(seed), seed), dim=-1)


def split(key: torch.Tensor, num: int = 2) -> torch.Tensor:
    """``jax.random.split(key, num)`` per key.

    Args:
        key: Keys, int64 ``(..., 2)``.
        num: Number of new keys.

    Returns:
        int64 ``(..., num, 2)``; ``out[..., i, :]`` is the ``i``-th key of the split.
    """
    i = torch.arange(num, dtype=torch.int64, device=key.device)
    y0, y1 = threefry2x32(key[..., 0, None], key[..., 1, None], torch.zeros_like(i), i)
    return torch.stack((y0, y1), dim=-1)


def split2(key: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``rng, sub = jax.random.split(rng)``: the two keys, each int64 ``(..., 2)``."""
    keys = split(key, 2)
    return keys[..., 0, :], keys[..., 1, :]


def fold_in(key: torch.Tensor, data: int | torch.Tensor) -> torch.Tensor:
    """``jax.random.fold_in(key, data)`` per key.

    Args:
        key: Keys, int64 ``(..., 2)``.
        data: A uint32 value (int or int tensor broadcastable with ``key[..., 0]``).

    Returns:
        int64 ``(..., 2)``.
    """
    data = torch.as_tensor(data, dtype=torch.int64, device=key.device) & MASK32
    y0, y1 = threefry2x32(key[..., 0], key[..., 1], torch.zeros_like(data), data)
    return torch.stack((y0, y1), dim=-1)


def random_bits(key: torch.Tensor, shape: Sequence[int]) -> torch.Tensor:
    """``jax.random.bits(key, shape)`` (uint32) per key.

    Args:
        key: Keys, int64 ``(..., 2)``.
        shape: The per-key sample shape.

    Returns:
        int64 ``(..., *shape)`` in ``[0, 2**32)``.
    """
    shape = tuple(shape)
    size = math.prod(shape)
    i = torch.arange(size, dtype=torch.int64, device=key.device)
    batch = key.shape[:-1]
    k0 = key[..., 0].reshape(*batch, 1)
    k1 = key[..., 1].reshape(*batch, 1)
    y0, y1 = threefry2x32(k0, k1, i >> 32, i & MASK32)
    return (y0 ^ y1).reshape(*batch, *shape)


def bits_to_unit_float(bits: torch.Tensor) -> torch.Tensor:
    """uint32 bits (int64) to float32 in ``[0, 1)`` as jax's ``uniform`` makes them."""
    f = ((bits >> 9) | 0x3F800000).to(torch.int32).view(torch.float32)
    return f - 1.0


def uniform(
    key: torch.Tensor,
    shape: Sequence[int] = (),
    minval: float | torch.Tensor = 0.0,
    maxval: float | torch.Tensor = 1.0,
) -> torch.Tensor:
    """``jax.random.uniform(key, shape, float32, minval, maxval)`` per key.

    Args:
        key: Keys, int64 ``(..., 2)``.
        shape: The per-key sample shape.
        minval: Lower bound (float32 after conversion), broadcastable with the result.
        maxval: Upper bound, same.

    Returns:
        float32 ``(..., *shape)``.
    """
    f = bits_to_unit_float(random_bits(key, shape))
    lo = torch.as_tensor(minval, dtype=torch.float32, device=key.device)
    hi = torch.as_tensor(maxval, dtype=torch.float32, device=key.device)
    # XLA fuses ``f * (hi - lo) + lo`` into one fused multiply-add: the product is exact in
    # float64 and the sum is rounded once there (then to float32; a tie from that double
    # rounding would need a sum beyond 53 bits exactly halfway between two float32 values)
    span = (hi - lo).to(torch.float64)
    out = (f.to(torch.float64) * span + lo.to(torch.float64)).to(torch.float32)
    return torch.maximum(lo, out)


def randint(
    key: torch.Tensor,
    shape: Sequence[int],
    minval: int | torch.Tensor,
    maxval: int | torch.Tensor,
) -> torch.Tensor:
    """``jax.random.randint(key, shape, minval, maxval)`` (int32) per key.

    Args:
        key: Keys, int64 ``(..., 2)``.
        shape: The per-key sample shape.
        minval: Inclusive lower bound (int32 range), int or tensor broadcastable with the
            result.
        maxval: Exclusive upper bound, same; ``maxval <= minval`` gives ``minval``.

    Returns:
        int64 ``(..., *shape)`` holding jax's int32 values.
    """
    k1, k2 = split2(key)
    higher = random_bits(k1, shape)
    lower = random_bits(k2, shape)
    lo = torch.as_tensor(minval, dtype=torch.int64, device=key.device)
    hi = torch.as_tensor(maxval, dtype=torch.int64, device=key.device)
    span = torch.where(hi <= lo, torch.ones_like(hi - lo), (hi - lo) & MASK32)
    multiplier = ((65536 % span) ** 2 & MASK32) % span
    offset = (_mul32(higher % span, multiplier) + lower % span) & MASK32
    out = lo + offset % span
    # back to int32's wrap-around
    return ((out + 2**31) & MASK32) - 2**31


def choice(
    key: torch.Tensor,
    n: int,
    shape: Sequence[int] = (),
    p: torch.Tensor | None = None,
) -> torch.Tensor:
    """``jax.random.choice(key, n, shape, replace=True, p=p)`` (indices) per key.

    Take ``a[index]`` for ``jax.random.choice(key, a, ...)`` with a 1-D ``a`` of length ``n``.

    Args:
        key: Keys, int64 ``(..., 2)``.
        n: Number of choices.
        shape: The per-key sample shape.
        p: Optional float32 probabilities ``(..., n)`` (batch dims as ``key``), used as jax
            uses them: a cumulative sum in XLA:CPU's order and an inverse-CDF search.

    Returns:
        int64 ``(..., *shape)`` in ``[0, n)``.
    """
    if p is None:
        return randint(key, shape, 0, n)
    if p.shape[-1] != n:
        raise ValueError(f"p has {p.shape[-1]} entries for {n} choices")
    c = cumsum_xla_cpu(p.to(torch.float32))
    u = uniform(key, shape)
    batch = key.shape[:-1]
    r = c[..., -1:].reshape(*batch, *([1] * len(shape))) * (1.0 - u)
    flat = r.reshape(*batch, -1)
    idx = torch.searchsorted(c.contiguous(), flat.contiguous(), side="left")
    # jax's binary search never moves left of a NaN query (p summing to 0): index n
    idx = torch.where(flat.isnan(), n, idx)
    return idx.reshape(r.shape)


def choice_in_mask(key: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """``jax.random.choice(key, n, p=mask / mask.sum())`` for a bool mask, without a scan.

    The same index as :func:`choice` with that ``p`` (craftax's spawn and diamond draws),
    computed from counts: ``p`` holds one value ``v = 1 / count`` and zeros, so XLA's running
    sum inside a block of 16 is ``S[k]`` (``v`` added ``k`` times in float32) for the ``k``
    ones so far; the block totals are scanned as :func:`cumsum_xla_cpu` does; the index is
    the number of running sums below ``r = total * (1 - u)``. Where the mask is empty jax's
    ``p`` is NaN and its index ``n``; so is this one.

    Args:
        key: Keys, int64 ``(N, 2)``.
        mask: bool ``(N, n)``, ``n`` a multiple of 16 (and more than 16).

    Returns:
        int64 ``(N,)`` in ``[0, n]``.
    """
    n_env, n = mask.shape
    if n % 16 or n <= 16:
        raise ValueError(f"choice_in_mask needs a multiple of 16 above 16 choices, got {n}")
    count = mask.sum(-1)
    v = 1.0 / count.clamp(min=1).to(torch.float32)  # (N,) float32, as jax's p
    steps = [torch.zeros_like(v)]
    for _ in range(16):
        steps.append(steps[-1] + v)
    table = torch.stack(steps, -1)  # (N, 17): S[0..16]
    blocks = mask.reshape(n_env, n // 16, 16).to(torch.int64).cumsum(-1)  # ones so far
    inner = table.gather(1, blocks.reshape(n_env, n)).reshape(n_env, n // 16, 16)
    outer = cumsum_xla_cpu(inner[..., -1].contiguous())  # (N, n / 16)
    running = torch.cat((inner[:, :1], inner[:, 1:] + outer[:, :-1, None]), 1).reshape(n_env, n)
    u = uniform(key)
    r = running[:, -1] * (1.0 - u)
    index = (running < r[:, None]).sum(-1)
    return torch.where(count == 0, n, index)


def permutation(key: torch.Tensor, n: int) -> torch.Tensor:
    """``jax.random.permutation(key, n)`` per key.

    Args:
        key: Keys, int64 ``(..., 2)``.
        n: Length of the permuted range.

    Returns:
        int64 ``(..., n)``, a permutation of ``0..n-1``.
    """
    rounds = math.ceil(3 * math.log(max(1, n)) / math.log(MASK32))
    x = torch.arange(n, dtype=torch.int64, device=key.device).expand(*key.shape[:-1], n)
    for _ in range(rounds):
        key, sub = split2(key)
        order = torch.sort(random_bits(sub, (n,)), dim=-1, stable=True).indices
        x = torch.gather(x, -1, order)
    return x


def normal(key: torch.Tensor, shape: Sequence[int] = ()) -> torch.Tensor:
    """``jax.random.normal(key, shape)`` (float32) per key, to within a few float32 ulp.

    jax computes ``sqrt(2) * erf_inv(u)`` with ``u`` uniform in ``[nextafter(-1, 0), 1)``
    (that ``u`` is reproduced bit for bit) and XLA's float32 ``erf_inv`` polynomial; this
    evaluates ``erfinv`` in float64 and rounds, so single values may differ in the last bits.

    Args:
        key: Keys, int64 ``(..., 2)``.
        shape: The per-key sample shape.

    Returns:
        float32 ``(..., *shape)``.
    """
    lo32 = float(np.nextafter(np.float32(-1.0), np.float32(0.0)))
    u = uniform(key, shape, lo32, 1.0)
    return (math.sqrt(2) * torch.erfinv(u.to(torch.float64))).to(torch.float32)


def cumsum_xla_cpu(x: torch.Tensor) -> torch.Tensor:
    """``jnp.cumsum(x, axis=-1)`` for float32 ``x`` in XLA:CPU's summation order.

    XLA:CPU rewrites the cumulative sum (a reduce-window) into blocks of 16: a sequential
    scan inside each block, the block totals scanned the same way (recursively), and each
    block after the first gets the inclusive scan of the totals before it added once. Rounding
    depends on that order, so it is reproduced here.

    Args:
        x: float32 ``(..., n)``.

    Returns:
        float32 ``(..., n)``.
    """
    n = x.shape[-1]
    if n <= 16:
        return torch.cumsum(x, dim=-1) if n <= 2 else _sequential_cumsum(x)
    m = -(-n // 16)
    pad = m * 16 - n
    xp = torch.nn.functional.pad(x, (0, pad)) if pad else x
    inner = _sequential_cumsum(xp.reshape(*x.shape[:-1], m, 16))
    outer = cumsum_xla_cpu(inner[..., -1].contiguous())
    tail = inner[..., 1:, :] + outer[..., :-1, None]
    out = torch.cat((inner[..., :1, :], tail), dim=-2).reshape(*x.shape[:-1], m * 16)
    return out[..., :n]


def _sequential_cumsum(x: torch.Tensor) -> torch.Tensor:
    """Left-to-right float32 running sum along the last dim (each add rounded)."""
    cols = [x[..., 0]]
    for j in range(1, x.shape[-1]):
        cols.append(cols[-1] + x[..., j])
    return torch.stack(cols, dim=-1)
