"""The soak benchmark: a tiny eager run in the fast suite, a compiled one marked slow."""

from __future__ import annotations

import pytest

from gpuvec_envs.bench.soak import main, soak


def test_tiny_soak_counts_every_operation(capsys: pytest.CaptureFixture[str]) -> None:
    r = soak(
        "gpuvec/CartPole-v1",
        8,
        8 * 40,
        backend="eager",
        reset_every=5,
        checkpoint_every=7,
        params_every=9,
    )
    assert (r.calls, r.env_steps, r.resets, r.checkpoints, r.param_changes) == (40, 320, 8, 5, 4)
    assert r.graphs_at_end == r.graphs_after_warmup and r.backend == "eager"  # process-wide count
    main(["--env", "gpuvec/Pendulum-v1", "--num-envs", "4", "--steps", "80", "--backend", "eager"])
    assert '"env_id": "gpuvec/Pendulum-v1"' in capsys.readouterr().out


@pytest.mark.heavy
@pytest.mark.slow
@pytest.mark.parametrize(
    ("env_id", "n"), [("gpuvec/CartPole-v1", 4096), ("gpuvec/MinAtar-Breakout-v1", 512)]
)
def test_compiled_soak_keeps_graphs_and_memory_flat(env_id: str, n: int) -> None:
    """~2000 calls with resets, checkpoints and set_params toggles: no new graph, flat RSS."""
    r = soak(env_id, n, n * 2000, backend="compile")
    assert r.backend == "compile" and r.param_changes == 6 and r.checkpoints == 10
    assert r.graphs_at_end == r.graphs_after_warmup
    assert r.rss_at_end_mib - r.rss_after_warmup_mib < 64
