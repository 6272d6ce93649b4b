"""Same seed, same trajectory: eager and compiled steps are bitwise equal.

The ``auto`` backend steps eagerly until its background compile lands and compiled after,
so a trajectory may only depend on the seed and the actions if both compute the same bits.
Bitwise over whole runs (resets, time limits, autoresets): observations, rewards, flags
and final observations. The fast suite runs the classic envs briefly; ``heavy`` runs every
env of the families in :data:`reproducibility.FAMILIES` for 1000 steps at two batch sizes,
every autoreset mode and frame skip, and the two-process cold/warm cache run.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import warnings

import gymnasium as gym
import numpy as np
import pytest
import torch
from reproducibility import (
    CI_GAME_IDS,
    CLASSIC_IDS,
    SWEPT_IDS,
    actions,
    bits_equal,
    flat,
    run,
    step_row,
    swept,
)

from gpuvec_envs.compiler import compile_flat
from gpuvec_envs.compiler.backend import Backend
from gpuvec_envs.compiler.options import CompilerOptions
from gpuvec_envs.compiler.passes import eager_math
from gpuvec_envs.envs.classic import _trig
from gpuvec_envs.registry import REGISTRY

DTYPES = {"f32": torch.float32, "f64": torch.float64}
HERE = os.path.dirname(os.path.abspath(__file__))


def assert_same_trajectory(env_id: str, steps: int, n: int, **kwargs) -> int:
    """The eager and the compiled backend stepped side by side under the same actions,
    each step's outputs (:func:`reproducibility.run`'s rows) asserted bitwise equal; no
    trajectory is kept (a game's at N=4096 over 1000 steps is tens of GB). Returns how many
    steps wrote a final observation."""
    kwargs = {"num_envs": n, "max_episode_steps": 40, **kwargs}
    eager = gym.make_vec(env_id, backend="eager", **kwargs)
    compiled = gym.make_vec(env_id, backend="compile", **kwargs)
    acts = actions(eager.action_space, steps, 5)
    first = [flat(env.reset(seed=3)[0]).numpy() for env in (eager, compiled)]
    assert_bitwise(first[0][None], first[1][None])
    obs_width, ended = first[0].shape[1], 0
    for t, act in enumerate(acts, 1):
        a, b = step_row(eager, act), step_row(compiled, act)
        if not bits_equal(a, b):
            raise AssertionError(f"first difference at step {t}: max {np.abs(a - b).max():.3g}")
        ended += bool(a[:, obs_width + 3 :].any())
    report = compiled.unwrapped.compile_report
    # float32 classic physics needs no pass (_trig); float64 runs torch's sin/cos as ATen calls
    expected = "applied" if kwargs.get("dtype") == torch.float64 else "not_needed"
    assert report.fast_path and report.pass_status("eager_math") in (expected, "not_needed"), str(
        report
    )
    return ended


def assert_bitwise(a: np.ndarray, b: np.ndarray) -> None:
    if not bits_equal(a, b):
        step = int(np.argmax((a != b).reshape(len(a), -1).any(1)))
        raise AssertionError(f"first difference at step {step}: max {np.abs(a - b).max():.3g}")


# the fast suite: CartPole in float32 (_trig), the chaotic Pendulum in float64 (ATen sin/cos);
# Acrobot's compile takes minutes on 2 busy cores: it is in the heavy registry sweep
FAST = [
    ("gpuvec/CartPole-v1", "f32"),
    ("gpuvec/Pendulum-v1", "f64"),
]


@pytest.mark.parametrize(("env_id", "dtype"), FAST)
def test_eager_and_compiled_bitwise_equal(env_id: str, dtype: str) -> None:
    kw = {"dtype": DTYPES[dtype], "autoreset_mode": "same_step"}
    assert assert_same_trajectory(env_id, 200, 64, **kw) > 0  # episodes ended


#: One ID per env class (the first registered): the sweep's cases that CI runs (``heavy``):
#: every classic-control class in float32 at N=64 and 4096 and in float64 at N=64, and
#: :data:`CI_GAME_IDS` in float32 at N=64. Every other ID, dtype and N is ``slow`` (~200
#: compiles).
CLASS_IDS = {e.id for e in {e.env_def: e for e in reversed(REGISTRY) if swept(e)}.values()}


def _sweep_mark(env_id: str, dtype: str, n: int) -> pytest.MarkDecorator:
    classic = env_id in CLASSIC_IDS
    ci = env_id in CLASS_IDS and (classic or (env_id in CI_GAME_IDS and dtype == "f32" and n == 64))
    if ci and classic and n == 4096 and dtype == "f64":
        ci = False
    return pytest.mark.heavy if ci else pytest.mark.slow


@pytest.mark.parametrize(
    ("env_id", "dtype", "n"),
    [
        pytest.param(i, d, n, marks=_sweep_mark(i, d, n))
        for i in SWEPT_IDS
        for d in sorted(DTYPES)
        for n in (64, 4096)
    ],
)
def test_registry_eager_and_compiled_bitwise_equal(env_id: str, dtype: str, n: int) -> None:
    """Every env of the swept families, 1000 steps of random actions with resets."""
    assert_same_trajectory(env_id, 1000, n, dtype=DTYPES[dtype])


@pytest.mark.parametrize("frame_skip", [1, 3])
@pytest.mark.parametrize("mode", ["next_step", "same_step", "disabled"])
@pytest.mark.parametrize(  # CartPole in CI (heavy), the others slow (72 compiles in all)
    "env_id",
    [
        pytest.param(i, marks=pytest.mark.heavy if i == "gpuvec/CartPole-v1" else pytest.mark.slow)
        for i in CLASSIC_IDS
    ],
)
def test_classic_modes_and_frame_skip_bitwise_equal(env_id: str, mode: str, frame_skip: int):
    for dtype in DTYPES.values():
        kw = {"dtype": dtype, "autoreset_mode": mode, "frame_skip": frame_skip}
        assert_same_trajectory(env_id, 300, 64, **kw)


def test_trig_is_accurate_and_equal_compiled() -> None:
    """The classic envs' sin/cos: within 1 ulp (float64) / 2 ulp (float32) of the true
    values over the envs' angles, and bitwise equal compiled (64 + 5 values: a vector
    loop and its scalar tail)."""
    gen = torch.Generator().manual_seed(0)
    x64 = (torch.rand(4096 + 5, dtype=torch.float64, generator=gen) - 0.5) * 200
    for dtype, max_ulp in ((torch.float64, 1.0), (torch.float32, 2.0)):
        x = x64.to(dtype)
        s, c = _trig.sincos(x)
        xl = x.numpy().astype(np.longdouble)
        for got, ref in ((s, np.sin(xl)), (c, np.cos(xl))):
            ulp = np.spacing(np.abs(ref).astype(got.numpy().dtype)).astype(np.longdouble)
            assert (np.abs(got.numpy().astype(np.longdouble) - ref) / ulp).max() <= max_ulp
        call = compile_flat(_trig.sincos, (x,))
        assert eager_math.exact(call.passes)
        for e, k in zip((s, c), call(x), strict=True):
            assert torch.equal(e, k)


def _sin_step(x: torch.Tensor) -> tuple[torch.Tensor]:
    return (torch.sin(x) * 1.5 + torch.exp(x * 0.1),)


@pytest.fixture(scope="module")
def inexact_input() -> torch.Tensor:
    gen = torch.Generator().manual_seed(1)
    return (torch.rand(4096, dtype=torch.float32, generator=gen) - 0.5) * 20


def test_eager_math_routes_inexact_ops_to_aten(inexact_input: torch.Tensor) -> None:
    """On: ``sin``/``exp`` run as ATen kernels (the lean wrapper calls them at every call),
    bitwise eager. Off: inductor's own code,
    which differs in the last bit (so the pass is needed), and the report says so; the two
    builds do not share inductor's cache entry."""
    x = inexact_input
    want = _sin_step(x)[0]
    on = compile_flat(_sin_step, (x,), compiler=CompilerOptions())
    off = compile_flat(_sin_step, (x,), compiler=CompilerOptions(eager_math=False))
    on_pass = next(p for p in on.passes if p.name == "eager_math")
    off_pass = next(p for p in off.passes if p.name == "eager_math")
    assert on_pass.status == "applied", on_pass
    lean = next(p for p in on.passes if p.name == "lean_wrapper")
    assert lean.status == "applied", lean  # it knows the ATen calls' statements
    # "aten.sin.default x1" when lowered now, without the count from inductor's cache
    assert "aten.sin.default" in on_pass.detail and "aten.exp.default" in on_pass.detail
    assert off_pass.status == "off" and "aten.sin.default" in off_pass.detail
    assert torch.equal(on(x)[0], want)
    assert not torch.equal(off(x)[0], want)
    assert eager_math.exact(on.passes) and not eager_math.exact(off.passes)


def test_auto_backend_does_not_switch_to_an_inexact_step(inexact_input: torch.Tensor) -> None:
    """With the pass off, ``auto`` keeps such a function eager (the report says why), so a
    run never switches between unequal steps; ``compile`` runs it compiled."""
    x = inexact_input
    options = {"eager_math": False, "warm_start": False}
    auto = Backend(_sin_step, (), "auto", "repro_inexact", compiler=options)
    auto.start_background((x,))
    assert auto.wait(300)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        out = auto(x)
    assert torch.equal(out[0], _sin_step(x)[0])
    assert auto.kind == "eager" and auto.report.strategy == "eager"
    assert any("would not equal eager" in f.reason for f in auto.report.fallbacks)
    assert any("would not equal eager" in str(w.message) for w in caught)
    compiled = Backend(_sin_step, (), "compile", "repro_inexact_c", compiler=options)
    compiled(x)
    assert compiled.kind == "fused" and compiled.report.pass_status("eager_math") == "off"


@pytest.mark.heavy
def test_cold_and_warm_cache_runs_give_the_same_trajectories(tmp_path) -> None:
    """One script run twice as separate processes on a fresh inductor cache: the first
    steps eagerly until its background compile lands (it waits for it at step 150), the
    second finds the cache warm and runs compiled from the first step; every classic env's
    trajectory is bitwise the same. The suite's ``GPUVEC_COMPILER=warm_start=0`` (conftest)
    is not passed on. (The warm-start key covers gpuvec_envs' sources: do not
    edit them while it runs.)"""
    env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("GPUVEC_COMPILER", None)  # conftest turns warm start off for the suite itself
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(HERE), env.get("PYTHONPATH", "")])
    ids = ",".join(CLASSIC_IDS)
    outs = []
    for k in range(2):
        out = tmp_path / f"run{k}.npz"
        cmd = [sys.executable, os.path.join(HERE, "reproducibility.py"), ids, "400", "64"]
        subprocess.run([*cmd, "150", str(out)], env=env, check=True, timeout=1500)
        outs.append(np.load(out))
    cold, warm = outs
    env_defs = {e.id: e.env_def for e in REGISTRY}
    seen: set[str] = set()
    for env_id in CLASSIC_IDS:
        # the first ID of each env class switches mid-run; a later one (CartPole-v1 after
        # v0: the same step) finds the cache that the first warmed in the same run
        first = env_defs[env_id] not in seen
        seen.add(env_defs[env_id])
        eager_calls = int(cold[env_id + ":eager_calls"])
        assert eager_calls >= 150 if first else eager_calls in (0, 150), (env_id, eager_calls)
        assert int(warm[env_id + ":eager_calls"]) == 0, env_id  # compiled from the first step
        assert str(cold[env_id + ":backend"]) == str(warm[env_id + ":backend"]) == "compile"
        assert_bitwise(cold[env_id], warm[env_id])


def _cuda_ids() -> list[str]:
    from registry_ids import GENERIC

    seen: set[str] = set()
    out = []
    for e in GENERIC:
        if e.id in SWEPT_IDS and e.env_def not in seen:
            seen.add(e.env_def)
            out.append(e.id)
    return out


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("env_id", _cuda_ids())
def test_cuda_eager_compiled_graphed_and_cpu(env_id: str, dtype: str) -> None:
    """On CUDA, eager, compiled and CUDA-graphed steps are bitwise equal; integer envs
    equal the CPU bitwise; the float envs' largest difference from the CPU goes to the file
    ``$GPUVEC_CUDA_VS_CPU`` (tools/gpu_check.sh), the measure docs/design.md asks for."""
    kw = {"num_envs": 256, "max_episode_steps": 40, "dtype": DTYPES[dtype]}
    runs = {}
    for name, extra in (
        ("cpu", {"backend": "eager"}),
        ("eager", {"backend": "eager", "device": "cuda"}),
        (
            "compiled",
            {"backend": "compile", "device": "cuda", "compiler_options": {"cuda_graph": False}},
        ),
        ("graphed", {"backend": "compile", "device": "cuda"}),
    ):
        env = gym.make_vec(env_id, **kw, **extra)
        acts = [a.to(env.unwrapped.device) for a in actions(env.action_space, 300, 5)]
        runs[name] = run(env, acts, seed=3)
    assert_bitwise(runs["eager"], runs["compiled"])
    assert_bitwise(runs["eager"], runs["graphed"])
    diff = np.abs(runs["cpu"] - runs["eager"]).max()
    line = f"{env_id} {dtype}: max |CPU - CUDA| {diff:.3g}\n"
    if os.environ.get("GPUVEC_CUDA_VS_CPU"):  # tools/gpu_check.sh collects them
        with open(os.environ["GPUVEC_CUDA_VS_CPU"], "a") as f:
            f.write(line)
    if not env_id.startswith(
        ("gpuvec/CartPole", "gpuvec/Pendulum", "gpuvec/Acrobot", "gpuvec/MountainCar")
    ):
        assert_bitwise(runs["cpu"], runs["eager"])


def _box_muller(u: torch.Tensor) -> tuple[torch.Tensor]:
    """Normal draws as the MuJoCo tasks' reset noise makes them (log1p, sqrt, cos)."""
    radius = torch.sqrt(-2.0 * torch.log1p(-u[:, 0]))
    return (0.1 * (radius * torch.cos((2.0 * math.pi) * u[:, 1])),)


def test_sqrt_runs_as_eager_computes_it() -> None:
    """Eager's vectorised CPU ``sqrt`` is not correctly rounded (inductor's is): the pass
    routes it to ATen, so that a compiled Box-Muller draw equals the eager one bit for bit."""
    gen = torch.Generator().manual_seed(0)
    u = torch.randint(0, 1 << 24, (4096, 2, 9), generator=gen).double() * 2.0**-24
    call = compile_flat(_box_muller, (u,))
    assert "aten.sqrt.default" in next(p for p in call.passes if p.name == "eager_math").detail
    assert torch.equal(call(u)[0], _box_muller(u)[0])
