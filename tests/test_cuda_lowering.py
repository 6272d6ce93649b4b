"""Every registered step compiles for CUDA, checked without a GPU (fake CUDA tensors).

Needs a CUDA build of torch with Triton (one runs on a machine without a GPU): CI runs this
file in a second virtual environment (``tools/cuda_lowering.sh``); with a CPU build of
torch it is skipped. See :mod:`gpuvec_envs.compiler.fake_cuda`. CI generates the Triton code
of one ID per env class (three heavy classes: lowering only) and lowers every other ID (the
further sizes of the MiniGrid classes are marked ``heavy``); ``-m slow`` adds SameStep code
generation and the rest.
"""

from __future__ import annotations

import re

import gymnasium as gym
import pytest
import torch
from registry_ids import PER_ID

import gpuvec_envs  # noqa: F401 - registers the IDs
from gpuvec_envs.compiler import compile_flat, fake_cuda, flat
from gpuvec_envs.registry import MINIGRID

WHY = fake_cuda.unavailable()
pytestmark = pytest.mark.skipif(
    WHY is not None,
    reason=f"needs a CUDA build of torch with Triton ({WHY}): tools/cuda_lowering.sh",
)
N = 64
#: One registered ID per env class (the first): generated down to Triton code.
CLASS_REPS = list({e.env_def: e.id for e in reversed(PER_ID)}.values())
#: Classes whose code generation takes 30-40 s on 2 cores: lowered only, in CI.
HEAVY = ("Seaquest", "KeyCorridor", "Unlock")
#: Kernels at most of a NextStep step, where placements read no grid (``FreeCells``).
MAX_KERNELS = {"DoorKey": 3, "FourRooms": 3}
#: The sizes of MiniGrid classes beyond their first ID: lowered too (``heavy``: every ID's
#: step lowers for CUDA in CI).
MINIGRID_SIZES = {e.id for e in MINIGRID} - set(CLASS_REPS)


def _slow_if(ids, slow, mark=pytest.mark.slow):  # noqa: ANN001, ANN202
    return [pytest.param(i, marks=mark) if slow(i) else i for i in ids]


def _heavy(env_id: str) -> bool:
    return any(name in env_id for name in HEAVY)


#: Lowered: every ID whose class is not generated below in CI; the heavy classes first, so
#: that two workers do not end on one of them (KeyCorridor's lowering alone takes ~90 s).
LOWERED = _slow_if(
    sorted(
        (e.id for e in PER_ID if e.id not in CLASS_REPS or _heavy(e.id)),
        key=lambda i: not _heavy(i),
    ),
    lambda i: i in MINIGRID_SIZES,
    pytest.mark.heavy,
)


def _env(env_id: str, **kwargs):
    env = gym.make_vec(env_id, num_envs=N, backend="eager", validate=False, **kwargs).unwrapped
    env.reset(seed=0)
    return env


@pytest.mark.parametrize("env_id", LOWERED)
def test_every_id_lowers_for_cuda(env_id: str) -> None:
    """Trace and inductor lowering for device "cuda": no error, no host data copied per call."""
    low = fake_cuda.lower_step(_env(env_id), stop_after="lowering")
    assert low.buffers > 0


@pytest.mark.parametrize("env_id", _slow_if(CLASS_REPS, _heavy))
@pytest.mark.parametrize("mode", ["NextStep", pytest.param("SameStep", marks=pytest.mark.slow)])
def test_every_env_class_generates_triton_kernels(env_id: str, mode: str) -> None:
    """Triton code generation for an H200; every kernel states the bytes it moves."""
    low = fake_cuda.lower_step(_env(env_id, autoreset_mode=mode))
    assert low.kernels and all(k.kind == "triton" for k in low.kernels)
    most = next((k for name, k in MAX_KERNELS.items() if name in env_id), None)
    if most is not None and mode == "NextStep":
        assert len(low.kernels) <= most, [k.name for k in low.kernels]
    assert low.bytes_per_call() is not None and low.bytes_per_call() > 0
    assert "empty_strided_cpu((" not in low.source  # nothing of the step lives on the host


@pytest.mark.parametrize(
    "env_id",
    [
        "gpuvec/CartPole-v1",
        "gpuvec/MinAtar-Breakout-v1",
        pytest.param("gpuvec/MiniGrid-DoorKey-5x5-v0", marks=pytest.mark.slow),  # ~60 s
    ],
)
def test_a_dynamic_batch_step_takes_the_size_at_run_time(env_id: str) -> None:
    """``dynamic_batch`` on CUDA: the kernels take the batch size at run time (a size
    symbol in the code); as many as the fixed size's."""
    fixed = fake_cuda.lower_step(_env(env_id))
    dynamic = fake_cuda.lower_step(_env(env_id, compiler_options={"dynamic_batch": True}))
    symbol = re.compile(r"\bk?s\d+\b")
    assert symbol.search(dynamic.source) and not symbol.search(fixed.source)
    assert len(dynamic.kernels) == len(fixed.kernels)
    assert all(k.kind == "triton" for k in dynamic.kernels)


def _with_table(x: torch.Tensor) -> torch.Tensor:
    """A step-like function with a constant table, written the plain torch way."""
    return x[:, None] ^ torch.tensor([3, 5, 7], dtype=torch.int32, device=x.device)[None, :]


def _with_host_compute(x: torch.Tensor) -> torch.Tensor:
    """A function that computes on the host and copies the result to the device."""
    return x[:, None] + torch.arange(3, dtype=torch.int32).to(x.device)[None, :]


def test_host_constants_are_placed_on_the_device_once() -> None:
    """``torch.tensor(list, device=cuda)`` traces as a host constant plus a copy per call.

    The compiler makes the copy once, at compile time: the generated code reads a device
    constant. Without that, the graph copies host memory at every call (a host sync, and
    a copy a CUDA graph replay does not redo from the constant): refused loudly.
    """
    x = torch.zeros(N, dtype=torch.int32)
    low = fake_cuda.lower(_with_table, (x,))
    assert len(low.kernels) == 1 and "empty_strided_cpu((" not in low.source
    # two inputs: x and the device table (the host original is not passed along unused)
    assert re.findall(r"\n\s+(.*) = args\n", low.source) == ["arg0_1, arg1_1"]
    with pytest.raises(flat.HostCopyError, match="copies host tensors to the device"):
        fake_cuda.lower(_with_host_compute, (x,))


def test_without_placing_constants_the_step_copies_host_data(monkeypatch) -> None:
    """The failing form, reproduced: CartPole's step with constants left on the host."""
    env = _env("gpuvec/MinAtar-Breakout-v1")  # its observation reads a constant table
    monkeypatch.setattr(flat, "_place_constants", lambda gm, device, fake_mode=None: 0)
    with pytest.raises(flat.HostCopyError, match="_to_copy"):
        fake_cuda.lower_step(env, stop_after="lowering")


def test_a_graphed_call_takes_tensors_only() -> None:
    """A Python number argument would be frozen into the graph: compile_flat refuses it."""
    with pytest.raises(TypeError, match="unsupported pytree node int"):
        compile_flat(lambda x, k: x + k, (torch.zeros(3), 3))


class _Greedy(torch.nn.Module):
    """A linear policy over the flattened observation."""

    def __init__(self, n_in: int, n_actions: int) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(n_in, n_actions)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.linear(obs.flatten(1).float()).argmax(-1)


@pytest.mark.parametrize("env_id", ["gpuvec/CartPole-v1", "gpuvec/MinAtar-Breakout-v1"])
def test_the_rollout_scan_lowers_for_cuda(env_id: str) -> None:
    """The collector's T-step scan (policy and env step in one program) for CUDA."""
    from gpuvec_envs.rollout import scan_rollout_example

    env = _env(env_id)
    n_in = int(torch.tensor(env.single_observation_space.shape).prod())
    fn, args = scan_rollout_example(env, _Greedy(n_in, env.single_action_space.n), 8)
    low = fake_cuda.lower(fn, args, stop_after="lowering")
    assert low.buffers > 0


def _breakout_frame_skip_8(**options):  # noqa: ANN003, ANN202
    env = _env("gpuvec/MinAtar-Breakout-v1", frame_skip=8, compiler_options=options or None)
    return fake_cuda.lower_step(env)


def test_wide_fusion_makes_a_frame_skipped_step_a_few_kernels() -> None:
    """Breakout, frame_skip=8: with ``wide_fusion`` the eight frames are one kernel (plus the
    observation's and two small ones)."""
    assert len(_breakout_frame_skip_8().kernels) <= 4


@pytest.mark.slow
def test_without_wide_fusion_the_frame_skipped_step_is_split() -> None:
    """Inductor's cap of 64 operations per kernel splits the eight frames and writes the
    state between the parts (the switch off)."""
    wide = _breakout_frame_skip_8()
    capped = _breakout_frame_skip_8(wide_fusion=False)
    assert len(capped.kernels) >= 2 * len(wide.kernels)
    assert wide.bytes_per_call() < capped.bytes_per_call()


def test_wide_fusion_fuses_nodes_however_far_apart() -> None:
    """Asterix: ``wide_fusion`` also lifts inductor's rule against fusing nodes over 64
    apart in its schedule; the same cap without the lift (set as an inductor option, which
    the report names) leaves more kernels."""
    from gpuvec_envs.compiler.options import WIDE_FUSION

    wide = fake_cuda.lower_step(_env("gpuvec/MinAtar-Asterix-v1"))
    near = {"inductor": {"max_fusion_size": WIDE_FUSION - 1}}
    kept = fake_cuda.lower_step(_env("gpuvec/MinAtar-Asterix-v1", compiler_options=near))
    assert len(wide.kernels) <= 3 < len(kept.kernels)
