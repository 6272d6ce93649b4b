"""``examples/minigrid_ppo.py`` runs end to end (smoke) and learns DoorKey-5x5 (slow)."""

from __future__ import annotations

import importlib.util
import math
import pathlib

import pytest

import gpuvec_envs  # noqa: F401  (registers gpuvec/...)

EXAMPLES = pathlib.Path(__file__).resolve().parents[1] / "examples"
TINY = (
    "--step-backend eager --no-cuda --quiet --total-timesteps 2048 --num-envs 8 "
    "--num-steps 64 --num-minibatches 4 --update-epochs 2 --seed 3"
).split()


@pytest.fixture(scope="module")
def minigrid_ppo():
    spec = importlib.util.spec_from_file_location("minigrid_ppo", EXAMPLES / "minigrid_ppo.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_smoke_doorkey(minigrid_ppo):
    """4 iterations of 8 envs x 64 steps: finite losses, uint8 image observations."""
    result = minigrid_ppo.main(TINY)
    assert result["global_step"] == 2048 and len(result["history"]) == 4
    assert all(math.isfinite(v) for v in result["losses"].values())
    assert 0.0 < result["losses"]["entropy"] <= math.log(7) + 1e-6
    assert all(0.0 <= r <= 1.0 for r in result["returns"])


@pytest.mark.slow
def test_learns_doorkey_5x5(minigrid_ppo):
    """Reaches a mean return of 0.9 over 100 episodes (random play: ~0.05)."""
    result = minigrid_ppo.main(["--no-cuda", "--quiet", "--target-return", "0.9"])
    assert result["reached_at_step"] is not None, result["mean_return"]
