"""The generated CUDA kernels of one ID per env family, run on the CPU under Triton's interpreter.

``tools/triton_interpret.py`` lowers the step for device "cuda" on fake tensors, runs the
generated wrapper and Triton kernels on CPU tensors with ``TRITON_INTERPRET=1`` (every load
and store bounds-checked, races between programs and reads of unwritten memory caught) and
compares each step with the CPU eager step from the same state. Integer envs must agree
bitwise; float envs within :data:`ULPS` ulps (their sin/cos/exp come from numpy here and from
libdevice on a GPU, the CPU step's from ATen: the last bits differ), with discrete outputs
(``terminated``, ...) equal unless the eager step from a state within that tolerance gives
the kernel's (a value one rounding from a threshold).

Needs a CUDA build of torch with Triton (no GPU): ``tools/cuda_lowering.sh`` runs it
(``-m interp``) in ``.venv-cuda``; elsewhere it is skipped. Each case runs in its own process
(the interpreter must be switched on before Triton is imported).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpuvec_envs.compiler import fake_cuda

WHY = fake_cuda.unavailable()
pytestmark = [
    pytest.mark.interp,
    pytest.mark.heavy,
    pytest.mark.skipif(
        WHY is not None,
        reason=f"needs a CUDA build of torch with Triton ({WHY}): tools/cuda_lowering.sh",
    ),
]
TOOL = Path(__file__).resolve().parents[1] / "tools" / "triton_interpret.py"
#: Float tolerance, in ulps relative to the larger of the two values.
ULPS = 4
#: (ID, extra arguments, steps): classic control in float32 and float64 (transcendentals),
#: one MinAtar and one MiniGrid ID (integer state: bitwise). Every autotuning config of each
#: kernel in turn (``--config -1``), as a GPU's autotuning may pick any.
CASES = [
    ("CartPole-v1", [], 60),
    ("CartPole-v1", ["--float64"], 60),
    ("Acrobot-v1", ["--float64"], 30),
    ("Acrobot-v1", [], 30),
    ("Pendulum-v1", [], 60),
    ("MountainCar-v0", [], 60),
    ("MountainCarContinuous-v0", [], 60),
    ("MinAtar-Breakout-v1", [], 60),
    ("MiniGrid-DoorKey-5x5-v0", [], 30),
]


@pytest.mark.parametrize(
    ("env_id", "extra", "steps"),
    [pytest.param(i, e, s, id="-".join([i, *e])) for i, e, s in CASES],
)
def test_cuda_kernels_match_the_cpu_step(env_id: str, extra: list[str], steps: int) -> None:
    """Interpreted CUDA kernels against the CPU eager step, ``steps`` random-action steps."""
    cmd = [sys.executable, str(TOOL), env_id, "--steps", str(steps), "--num-envs", "64"]
    cmd += ["--config", "-1", "--ulps", str(ULPS), "--max-episode-steps", "20", *extra]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=1200)
    print(out.stdout[-4000:])
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    ok = re.search(r"^  ok: .*$", out.stdout, re.M)
    assert ok is not None, out.stdout
    if env_id.startswith(("MinAtar", "MiniGrid")):  # integer state
        assert "bitwise equal" in ok.group(0), ok.group(0)
