"""autotune: memory and time budgets, frame_skip and collector T selection, arguments.

The real sweeps here run on the CPU with the eager backend and tiny candidate lists; the
CUDA branch's budget arithmetic runs with the CUDA memory queries (and the timing, which
needs a GPU) replaced.
"""

from __future__ import annotations

import importlib
import json
import time

import pytest
import torch

from gpuvec_envs.bench import cli

at = importlib.import_module("gpuvec_envs.bench.tuning")  # the package's `autotune` is the function

FAST = {"backends": ("eager",), "min_time": 0.02, "repeats": 1}


def fake_rates(calls: list):
    """A ``measure`` whose env-steps/s grow with N and fall with frame_skip (recorded)."""

    def measure(env_id, num_envs, backend, *, frame_skip=1, device="cpu", **kwargs):
        calls.append((num_envs, frame_skip, torch.device(device).type))
        rate = num_envs * 100.0 / (1 + 0.5 * (frame_skip - 1))  # fs=4: 0.4x env-steps/s
        return {"steps_per_s": rate, "call_us": 1.0, "setup_s": 0.0}

    return measure


@pytest.fixture
def fake_cuda(monkeypatch):
    """CUDA queries of a device with 1 GB free plus 24 MB cached by PyTorch, unused."""
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "mem_get_info", lambda dev: (10**9, 8 * 10**9))
    monkeypatch.setattr(torch.cuda, "memory_reserved", lambda dev: 30 * 10**6)
    monkeypatch.setattr(torch.cuda, "memory_allocated", lambda dev: 6 * 10**6)
    return 10**9 + 24 * 10**6


def test_cpu_sweep_skips_beyond_the_budget_and_picks_the_fastest():
    per_env = at.bytes_per_env("CartPole-v1")
    best = at.autotune("CartPole-v1", num_envs=(1, 256, 10**6), memory_budget=300 * per_env, **FAST)
    measured = [c for c in best.candidates if c.score is not None]
    assert [c.num_envs for c in measured] == [1, 256]
    assert best.candidates[-1].skipped.startswith("memory: needs")
    assert best.num_envs == max(measured, key=lambda c: c.score).num_envs
    assert best.env_id == "gpuvec/CartPole-v1" and best.backend == "eager"
    assert best.device == "cpu" and best.memory_budget == 300 * per_env
    assert best.frame_skip == 1 and best.rollout_steps is None
    with pytest.raises(ValueError, match="fits"):
        at.autotune("CartPole-v1", num_envs=(10**6,), memory_budget=1, **FAST)


def test_cuda_budget_is_a_fraction_of_the_free_memory(fake_cuda):
    budget, source = at._device_budget(torch.device("cuda:0"), 0.5)
    assert budget == int(0.5 * fake_cuda) and "mem_get_info" in source


@pytest.mark.heavy
def test_cuda_sweep_is_large_and_capped_by_the_free_memory(monkeypatch, fake_cuda):
    calls = []
    monkeypatch.setattr(at, "measure", fake_rates(calls))
    monkeypatch.setattr(at, "bytes_per_env", lambda *a, **k: 200)  # no CUDA env here
    best = at.autotune("CartPole-v1", device="cuda", frame_skips=(1, 4), time_budget=None)
    budget = int(at.DEFAULT_MEMORY_FRACTION["cuda"] * fake_cuda)  # 0.5 x 1.024 GB
    assert best.memory_budget == budget and best.device == "cuda"
    sizes = [c.num_envs for c in best.candidates]
    assert sizes == [n for n in at.DEFAULT_CUDA_NUM_ENVS for _ in (1, 4)]
    assert at.DEFAULT_CUDA_NUM_ENVS[0] == 2**12 and at.DEFAULT_CUDA_NUM_ENVS[-1] == 2**24
    fit = [n for n in at.DEFAULT_CUDA_NUM_ENVS if n * 200 <= budget]
    assert fit == [4**k for k in range(6, 11)]  # up to 2^20: 2^22 x 200 B > 512 MB
    assert sorted({n for n, _, _ in calls}) == fit and {d for *_, d in calls} == {"cuda"}
    for c in best.candidates:
        assert (c.skipped is None) == (c.num_envs in fit)
    # frame_skip 4: 0.4x the env-steps/s, 1.6x the simulation steps/s
    assert (best.num_envs, best.frame_skip) == (2**20, 4)
    assert best.score == pytest.approx(4 * best.steps_per_s)


@pytest.mark.heavy
def test_frame_skip_and_rollout_steps_are_the_best_measured():
    best = at.autotune(
        "CartPole-v1", num_envs=(64,), frame_skips=(1, 2), rollout_steps=(2, 8), **FAST
    )
    steps = [c for c in best.candidates if c.stage == "step"]
    rolls = [c for c in best.candidates if c.stage == "rollout"]
    assert [(c.frame_skip, c.skipped) for c in steps] == [(1, None), (2, None)]
    assert [(c.rollout_steps, c.skipped) for c in rolls] == [(2, None), (8, None)]
    for c in steps + rolls:
        assert c.steps_per_s > 0 and c.score == pytest.approx(c.steps_per_s * c.frame_skip)
    top = max(steps, key=lambda c: c.score)
    assert best.frame_skip == top.frame_skip
    assert all(c.frame_skip == top.frame_skip and c.path == "env_step" for c in rolls)
    top_roll = max(rolls, key=lambda c: c.score)
    assert best.rollout_steps == top_roll.rollout_steps and best.score == top_roll.score
    assert "RolloutCollector" in best.measured and "LinearPolicy" in best.measured


def test_rollout_buffers_that_do_not_fit_move_t_to_a_smaller_measured_n(monkeypatch):
    monkeypatch.setattr(at, "measure", fake_rates([]))
    ran = []

    def measure_rollout(env_id, n, t, backend, policy, **kwargs):
        ran.append((n, t))
        return {"steps_per_s": float(n * t), "call_us": 1.0, "setup_s": 0.0, "path": "scan"}

    monkeypatch.setattr(at, "measure_rollout", measure_rollout)
    per_env = at.bytes_per_env("CartPole-v1")
    per_step = at.rollout_bytes_per_step("CartPole-v1", lambda obs: obs[:, 0] > 0)
    budget = 256 * per_env + 64 * 8 * per_step  # T=1 fits at N=256; T=8 at N=64 only
    best = at.autotune(
        "CartPole-v1",
        num_envs=(64, 256),
        rollout_steps=(1, 8, 10**6),
        policy=lambda obs: obs[:, 0] > 0,
        memory_budget=budget,
        **FAST,
    )
    assert ran == [(256, 1), (64, 8)]
    assert best.candidates[-1].skipped.startswith("memory")  # T=10^6 fits nowhere
    assert (best.num_envs, best.rollout_steps) == (64, 8)  # 512 > 256 env-steps per call


def test_time_budget_skips_what_does_not_fit_and_says_so(monkeypatch):
    def slow(*args, **kwargs):
        time.sleep(0.3)
        return {"steps_per_s": 1.0, "call_us": 1.0, "setup_s": 0.0}

    monkeypatch.setattr(at, "measure", slow)
    best = at.autotune(
        "CartPole-v1", num_envs=(8, 16, 32), rollout_steps=(4,), time_budget=0.5, **FAST
    )
    assert [c.skipped is None for c in best.candidates] == [True, False, False, False]
    assert all(c.skipped.startswith("time budget") for c in best.candidates[1:])
    assert (best.num_envs, best.rollout_steps) == (8, None)
    assert best.elapsed_s >= 0.3 and best.time_budget == 0.5


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"num_envs": (0, 8)}, "num_envs"),
        ({"num_envs": ()}, "num_envs"),
        ({"frame_skips": (1.5,)}, "frame_skips"),
        ({"rollout_steps": (0,)}, "rollout_steps"),
        ({"backends": ("jit",)}, "backends"),
        ({"device": "meta"}, "device"),
        ({"device": "not a device"}, "device"),
        ({"time_budget": 0}, "time_budget"),
        ({"memory_fraction": 1.5}, "memory_fraction"),
        ({"memory_fraction": 0.5, "memory_budget": 10**9}, "not both"),
        ({"frame_skip": 2}, "frame_skip"),
        ({"repeats": 0}, "repeats"),
    ],
)
def test_bad_arguments_raise_a_value_error_naming_them(kwargs, match):
    with pytest.raises(ValueError, match=match):
        at.autotune("CartPole-v1", **kwargs)


def test_cuda_without_cuda_is_a_value_error(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    with pytest.raises(ValueError, match="CUDA is not available"):
        at.autotune("CartPole-v1", device="cuda", num_envs=(8,))


@pytest.mark.heavy
def test_bench_cli_passes_the_autotune_options(tmp_path, capsys):
    out = tmp_path / "b.json"
    args = "--num-envs 8 --backends eager --peers= --min-time 0.04 --repeats 1 --no-progress"
    tune = "--autotune --autotune-num-envs 8,16 --autotune-frame-skips 1,2"
    tune += " --autotune-rollout-steps 4"
    rc = cli.main([*args.split(), *tune.split(), "--json", str(out)])
    assert rc == 0
    (tuned,) = json.loads(out.read_text())["autotune"]
    sizes = [(c["stage"], c["num_envs"], c["frame_skip"]) for c in tuned["candidates"]]
    assert sizes[:4] == [("step", 8, 1), ("step", 8, 2), ("step", 16, 1), ("step", 16, 2)]
    assert tuned["rollout_steps"] == 4 and tuned["time_budget"] == 300.0
    assert "autotune gpuvec/CartPole-v1 on cpu" in capsys.readouterr().out


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_sweep_measures_on_the_gpu():
    free = at.free_memory("cuda")
    best = at.autotune(
        "CartPole-v1",
        device="cuda",
        num_envs=(2**12, 2**14),
        frame_skips=(1, 2),
        rollout_steps=(8,),
        **FAST,
    )
    assert best.device == "cuda" and "mem_get_info" in best.memory_source
    assert 0 < best.memory_budget <= free
    assert all(c.skipped is None and c.score > 0 for c in best.candidates)
    assert best.rollout_steps == 8 and best.candidates[-1].path == "env_step"
