"""Run a script in a child process that builds AVX2 code, also on an AVX-512 machine."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

#: Skips a test on a CPU that cannot run AVX2 code.
needs_avx2 = pytest.mark.skipif(
    torch.backends.cpu.get_cpu_capability() not in ("AVX2", "AVX512")
    or torch.torch_version.TorchVersion(torch.__version__) < (2, 13),
    reason="needs AVX2, and torch >= 2.13 (before it, compile_flat refuses AVX2 code: "
    "gpuvec_envs.compiler.flat.AVX2_TRUSTED_FROM)",
)


def run_avx2(script: str, cache_dir: os.PathLike[str] | str) -> list[str]:
    """The words ``script`` prints, run with AVX2 kernels (ATen's and inductor's, built for
    ``-march=x86-64-v3``) and a fresh inductor cache in ``cache_dir``; from ``tests/``."""
    env = {
        **os.environ,
        "ATEN_CPU_CAPABILITY": "avx2",
        "TORCHINDUCTOR_CPP_MARCH": "x86-64-v3",
        "TORCHINDUCTOR_CACHE_DIR": str(cache_dir),
    }
    prelude = "import torch\nassert torch.backends.cpu.get_cpu_capability() == 'AVX2'\n"
    out = subprocess.run(
        [sys.executable, "-c", prelude + script],
        env=env,
        cwd=os.path.dirname(__file__),
        capture_output=True,
        text=True,
        check=True,
    )
    return out.stdout.split()
