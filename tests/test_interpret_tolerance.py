"""How ``tools/triton_interpret.py`` judges a kernel's outputs against the CPU step.

Floats within a few ulps of the larger of the two values and of their column's scale;
discrete outputs equal unless a state within that tolerance gives the kernel's. These run
on the CPU build (the tool's comparison needs no Triton).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import NamedTuple

import pytest
import torch

TOOL = Path(__file__).resolve().parents[1] / "tools" / "triton_interpret.py"


@pytest.fixture(scope="module")
def tool():
    """The tool as a module, with the environment variable it sets restored afterwards."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("TRITON_INTERPRET", raising=False)  # restored on exit
        spec = importlib.util.spec_from_file_location("triton_interpret", TOOL)
        module = importlib.util.module_from_spec(spec)
        sys.modules["triton_interpret"] = module
        spec.loader.exec_module(module)
        yield module
        sys.modules.pop("triton_interpret", None)


def test_ulps_relative_to_the_value_and_the_column(tool) -> None:
    one = torch.tensor([1.0, 0.5, float("nan"), 3.0])
    got = torch.nextafter(one, torch.tensor(2.0))
    got[2], got[3] = float("nan"), float("nan")
    u = tool.ulps(got, one)
    assert u[0].item() == pytest.approx(1.0, rel=1e-6)  # one ulp of 1.0
    assert u[1].item() == pytest.approx(1.0, rel=1e-6)  # one ulp of 0.5, in 0.5's units
    assert u[2].item() == 0.0 and u[3].item() == float("inf")  # NaN = NaN; NaN != 3
    # a value that cancels to near zero is held to its column's scale
    want = torch.tensor([[1e-6, 1.0], [2.0, 1.0]])
    got = want + torch.tensor([[1.2e-7, 0.0], [0.0, 0.0]])
    assert tool.ulps(got, want)[0, 0] > 100
    scaled = tool.ulps(got, want, tool.column_scale(want))
    assert scaled[0, 0].item() == pytest.approx(0.5, rel=1e-2)  # 1.2e-7 of a column of 2
    ints = tool.ulps(torch.tensor([1, 2]), torch.tensor([1, 3]))
    assert ints.tolist() == [0.0, float("inf")]


class _State(NamedTuple):
    x: torch.Tensor  # (N,) float32


class _Out(NamedTuple):
    x: torch.Tensor  # (N,) float32
    terminated: torch.Tensor  # (N,) uint8


def _step(state: _State, action: torch.Tensor) -> _Out:
    x = state.x * 1.5 + action
    return _Out(x, (x > 1.5).to(torch.uint8))


@pytest.mark.parametrize(("x", "excused"), [(1.0, True), (0.5, False)])
def test_a_flag_may_differ_only_one_rounding_from_its_threshold(tool, x, excused) -> None:
    """At x = 1.0 the eager step gives exactly 1.5 (not terminated); a kernel that rounds
    up one ulp terminates: excused. At x = 0.5 the same flag is a bug."""
    state = _State(torch.tensor([x, 0.25]))
    action = torch.zeros(2)
    want = _step(state, action)
    assert want.terminated.tolist() == [0, 0]
    kernel_x = torch.nextafter(want.x[0], torch.tensor(9.0)) if excused else want.x[0]
    got_rows = [kernel_x.reshape(1), torch.ones(1, dtype=torch.uint8)]
    scales = [tool.column_scale(want.x), tool.column_scale(want.terminated)]
    gen = torch.Generator().manual_seed(0)
    assert (
        tool._excused(_step, state, action, 0, got_rows, scales, 4.0, torch.float32, gen) is excused
    )
