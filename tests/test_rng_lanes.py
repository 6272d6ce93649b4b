"""The RNG's int32-lane hash gives lowbias32's bits, eager and compiled, without overflow."""

from __future__ import annotations

import contextlib

import pytest
import torch

from gpuvec_envs import compiler
from gpuvec_envs.core import rng
from gpuvec_envs.core.eager import host_eager

EDGES = [0, 1, 0x7FFF, 0x8000, 0xFFFF, 0x10000, 2**31 - 1, 2**31, 2**32 - 2, 2**32 - 1]
VALUES = torch.tensor(
    EDGES + torch.randint(0, 2**32, (4093,), generator=torch.Generator().manual_seed(0)).tolist()
)
REFERENCE = [rng.hash32_int(int(v)) for v in VALUES]


def test_hash_equals_the_python_reference():
    assert rng.hash32(VALUES).tolist() == REFERENCE


def test_compiled_hash_equals_the_python_reference():
    compiled = compiler.compile_flat(lambda x: (rng.hash32(x),), (VALUES,))
    assert compiled(VALUES)[0].tolist() == REFERENCE


@pytest.mark.parametrize("c", [0, 1, 0x7FFF, 0x8000, 0xFFFF, 0x7FEB352D, 0x846CA68B, 2**32 - 1])
def test_multiply_is_exact_mod_2_32(c):
    """Every constant-half sign case, including x's own edge values."""
    got = rng.from_bits32(rng._mul32(rng.to_bits32(VALUES), c))
    assert got.tolist() == [(int(v) * c) & rng.MASK32 for v in VALUES]


def test_bits_round_trip():
    assert torch.equal(rng.from_bits32(rng.to_bits32(VALUES)), VALUES)
    assert rng.to_bits32(VALUES).dtype == torch.int32


def test_only_the_low_32_bits_of_the_counter_count():
    key0, key1 = rng.keys_from_seeds(torch.arange(4))
    low = torch.tensor([0, 5, 2**31, 2**32 - 1])
    high = low + torch.tensor([2**32, 2**40, 2**62, 2**32 * 7])
    a = rng.Rng(key0, key1, low, rng.STEP).bits(3)
    b = rng.Rng(key0, key1, high, rng.STEP).bits(3)
    assert torch.equal(a, b)


@pytest.mark.parametrize("high", [1, 2, 3, 9, 1000, 2**15 - 1, 2**15, 2**31 - 1])
def test_randint_is_the_high_bits_of_the_product(high):
    """Both routes (int32 below 2**15, int64 above) equal ``(bits * high) >> 32``."""
    n = 64
    key0, key1 = rng.keys_from_seeds(torch.arange(n))
    counter = torch.arange(n) * 7
    bits = rng.Rng(key0, key1, counter, rng.STEP).bits(9)
    got = rng.Rng(key0, key1, counter, rng.STEP).randint(high, 9)
    assert got.dtype == torch.int64
    assert torch.equal(got, (bits * high) >> 32)


def test_scale_at_the_largest_bits_and_per_env_highs():
    """:func:`rng.scale`'s partial sums stay below 2**31 at the largest inputs; ``high`` as
    an int or as a per-lane int32 tensor gives ``(bits * high) >> 32``."""
    bits = torch.tensor([2**32 - 1, 2**32 - 2**16, 2**16 - 1, 2**31] + VALUES.tolist())
    b = rng.to_bits32(bits)
    for high in (1, 8, 12345, 2**15 - 1):
        got = rng.scale(b, high)
        assert got.dtype == torch.int32
        assert got.tolist() == [(int(v) * high) >> 32 for v in bits]
    highs = torch.arange(len(bits), dtype=torch.int32) % (2**15 - 1) + 1
    assert torch.equal(rng.scale(b, highs).to(torch.int64), (bits * highs) >> 32)


def test_bits32_below_and_scale_are_the_int64_draws():
    """``bits32`` holds ``bits``'s draws; :func:`rng.below` is ``uniform < p``."""
    key0, key1 = rng.keys_from_seeds(torch.arange(64))
    counter = torch.arange(64) * 5

    def fresh() -> rng.Rng:
        return rng.Rng(key0, key1, counter, rng.STEP)

    bits, b32 = fresh().bits(7), fresh().bits32(7)
    assert b32.dtype == torch.int32 and torch.equal(rng.from_bits32(b32), bits)
    cols = fresh().columns(7, "bits32")
    assert torch.equal(torch.stack(cols, dim=1), b32)
    for p in (1 / 3, 1 / 2, 0.3):
        assert torch.equal(rng.below(b32, p), fresh().uniform(7) < p)
        assert torch.equal(rng.below(b32, p), fresh().bernoulli(p, 7))


def test_uniform_and_bernoulli_use_the_top_24_bits():
    key0, key1 = rng.keys_from_seeds(torch.arange(32))
    counter = torch.full((32,), 5)
    bits = rng.Rng(key0, key1, counter, rng.RESET).bits(6)
    uniform = rng.Rng(key0, key1, counter, rng.RESET).uniform(6, low=-1.0, high=3.0)
    expected = -1.0 + 4.0 * ((bits >> 8).to(torch.float32) * (1.0 / (1 << 24)))
    assert torch.equal(uniform, expected)
    coin = rng.Rng(key0, key1, counter, rng.RESET).bernoulli(0.3, 6)
    assert torch.equal(coin, (bits >> 8) < 5033165)  # ceil(0.3 * 2**24)


def test_columns_are_the_columns_of_one_multi_stream_draw():
    key0, key1 = rng.keys_from_seeds(torch.arange(16))
    counter = torch.arange(16) * 3

    def fresh() -> rng.Rng:
        return rng.Rng(key0, key1, counter, rng.STEP)

    assert torch.equal(torch.stack(fresh().columns(5), dim=1), fresh().bits(5))
    kw = {"low": -2.0, "high": 0.5, "dtype": torch.float64}
    cols = fresh().columns(3, "uniform", **kw)
    assert torch.equal(torch.stack(cols, dim=1), fresh().uniform(3, **kw))
    r = fresh()
    r.columns(2)
    assert torch.equal(r.bits(), fresh().bits(3)[:, 2])  # consumed two streams
    with pytest.raises(ValueError, match="kind must be"):
        fresh().columns(2, "randint")


@pytest.mark.parametrize("host", [False, True], ids=["torch", "numpy"])
def test_bits_padded_holds_the_next_draws(host: bool):
    """``bits_padded(k, w)``: the draws of ``bits(k)`` in its first k columns, the same
    streams consumed, on the torch path and on the eager host (numpy) path."""
    key0, key1 = rng.keys_from_seeds(torch.arange(40))
    counter = torch.arange(40) * 3
    with host_eager() if host else contextlib.nullcontext():
        a = rng.Rng(key0, key1, counter, rng.RESET)
        b = rng.Rng(key0, key1, counter, rng.RESET)
        padded, after_padded = a.bits_padded(5, 25), a.bits(2)
        plain, after_plain = b.bits(5), b.bits(2)
    assert padded.shape == (40, 25) and padded.dtype == torch.int64
    assert torch.equal(padded[:, :5], plain)
    assert torch.equal(after_padded, after_plain)
    with pytest.raises(ValueError, match="count <= width"):
        a.bits_padded(26, 25)
