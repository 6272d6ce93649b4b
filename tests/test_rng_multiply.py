"""The RNG hash's multiplies by shifts and adds give the same bits as multiplies."""

from __future__ import annotations

import pytest
import torch

from gpuvec_envs import compiler
from gpuvec_envs.core import rng

VALUES = torch.tensor(
    [0, 1, 2**31 - 1, 2**31, 2**32 - 1, 0x12345678]
    + torch.randint(0, 2**32, (997,), generator=torch.Generator().manual_seed(0)).tolist()
)


@pytest.fixture
def mode(monkeypatch):
    def set_mode(value):
        monkeypatch.setattr(rng, "RNG_MULTIPLY", value)

    return set_mode


@pytest.mark.parametrize("value", ["mul", "shift", "auto"])
def test_hash_equals_the_reference_in_every_mode(mode, value):
    mode(value)
    assert rng.hash32(VALUES).tolist() == [rng.hash32_int(int(v)) for v in VALUES]


@pytest.mark.parametrize("c", [0, 1, 2, 3, 0x352D, 0x7FEB, 0xA68B, 0x846C, 0xFFFF])
def test_signed_digits_sum_to_the_constant(c):
    digits = rng._signed_digits(c)
    assert sum(d << k for k, d in digits) == c
    assert all(b[0] - a[0] >= 2 for a, b in zip(digits, digits[1:], strict=False))


def test_compiled_shift_hash_equals_multiply_hash(mode):
    mode("shift")
    compiled = compiler.compile_flat(lambda x: (rng.hash32(x),), (VALUES,))
    assert compiled(VALUES)[0].tolist() == [rng.hash32_int(int(v)) for v in VALUES]


def test_bad_mode_is_rejected(mode):
    mode("fast")
    with pytest.raises(ValueError, match="GPUVEC_RNG_MULTIPLY"):
        rng.hash32(VALUES)
