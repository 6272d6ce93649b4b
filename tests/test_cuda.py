"""CUDA: every env class compiles to a CUDA graph, agrees with the CPU, never syncs.

Skipped without a CUDA device; ``tools/gpu_check.sh`` runs every CUDA test (``-m cuda``) on a
machine with one. Parametrised over one registered ID per env class.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import gymnasium as gym
import pytest
import torch
from registry_ids import PER_ID
from torch.utils import _pytree as pytree

import gpuvec_envs  # noqa: F401 - registers the IDs
from gpuvec_envs.core.rng import STEP, Rng, keys_from_seeds

pytestmark = [
    pytest.mark.cuda,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]
#: One registered ID per env class (the first).
CLASS_REPS = list({e.env_def: e.id for e in reversed(PER_ID)}.values())
#: Env classes whose state is all integers: bitwise equal on every device and path.
FLOAT = ("CartPole", "Pendulum", "MountainCar", "Acrobot")
N = 64
STEPS = 40


@pytest.fixture(autouse=True)
def _healthy_device():  # noqa: ANN202
    """After each test: a CUDA error left on the device (a device-side assert is sticky) ends
    this worker, so that it cannot fail the tests after it (pytest-xdist starts another)."""
    yield
    try:
        torch.cuda.synchronize()
    except RuntimeError as exc:
        sys.stderr.write(f"sticky CUDA error, ending this test process: {exc}\n")
        os._exit(3)


def _integer(env_id: str) -> bool:
    return not any(name in env_id for name in FLOAT)


def _make(env_id: str, device: str, backend: str, **kwargs):  # noqa: ANN202
    kw = dict(num_envs=N, dtype=torch.float64, autoreset_mode="SameStep", max_episode_steps=12)
    kw.update(kwargs)
    env = gym.make_vec(env_id, device=device, backend=backend, validate=False, **kw)
    return env.unwrapped


def _actions(env, steps: int, seed: int = 0) -> list[torch.Tensor]:  # noqa: ANN001
    env.action_space.seed(seed)
    return [torch.as_tensor(env.action_space.sample()) for _ in range(steps)]


def _outputs(out) -> list[torch.Tensor]:  # noqa: ANN001
    obs, reward, term, trunc, info = out
    return [t.cpu() for t in (obs, reward, term, trunc, info["final_obs"])]


@pytest.mark.parametrize("env_id", CLASS_REPS)
def test_compiled_step_is_a_cuda_graph_equal_to_the_flat_call_eager_and_cpu(env_id: str) -> None:
    graph = _make(env_id, "cuda", "compile")
    flat = _make(env_id, "cuda", "compile", compiler_options={"cuda_graph": False})
    eager = _make(env_id, "cuda", "eager")
    cpu = _make(env_id, "cpu", "eager")
    envs = (graph, flat, eager, cpu)
    for e in envs:
        e.reset(seed=1)
    for t, a in enumerate(_actions(cpu, STEPS)):
        if not _integer(env_id):  # float envs: compared per step from the same state
            for e in envs[:3]:
                e.set_env_state(pytree.tree_map(lambda x: x.cuda(), cpu.state.env))
        g, f, e, c = (_outputs(env.step(a.to(env.device))) for env in envs)
        for x, y in zip(g, f, strict=True):
            assert torch.equal(x, y), f"graph != flat call at step {t}"
        for ref in (e, c):
            if _integer(env_id):
                assert all(map(torch.equal, g, ref)), f"step {t}"
            else:
                for x, y in zip(g, ref, strict=True):
                    torch.testing.assert_close(x, y, rtol=0, atol=1e-10)
    report = graph.compile_report
    assert report.strategy == "cuda_graph" and report.fallbacks == ()
    assert report.kernels and all(k.kind == "triton" for k in report.kernels)
    # without the CUDA graph the state is written in place: the same kernels as the graph's
    assert flat.compile_report.strategy == "in_place_state" and flat.compile_report.fallbacks == ()


@pytest.mark.parametrize(
    "env_id", ["gpuvec/CartPole-v1", "gpuvec/MinAtar-Breakout-v1", "gpuvec/MiniGrid-DoorKey-5x5-v0"]
)
def test_dynamic_batch_graphs_every_size_and_equals_the_cpu(env_id: str) -> None:
    """``dynamic_batch`` on CUDA: N=64, then N=100 from the same compiled call (no new
    compile), each a CUDA graph equal to the CPU's eager step (float64 physics to 1e-10)."""
    from gpuvec_envs.compiler import flat

    for n, reused in ((N, False), (100, True)):
        graphs = flat.compiled_graphs
        kw = dict(num_envs=n, compiler_options={"dynamic_batch": True})
        graph, cpu = (
            _make(env_id, "cuda", "compile", **kw),
            _make(env_id, "cpu", "eager", num_envs=n),
        )
        graph.reset(seed=4)
        cpu.reset(seed=4)
        for a in _actions(cpu, STEPS):
            if not _integer(env_id):
                graph.set_env_state(pytree.tree_map(lambda x: x.cuda(), cpu.state.env))
            g, c = _outputs(graph.step(a.to(graph.device))), _outputs(cpu.step(a))
            for x, y in zip(g, c, strict=True):
                torch.testing.assert_close(x, y, rtol=0, atol=0 if _integer(env_id) else 1e-10)
        report = graph.compile_report
        assert report.strategy == "cuda_graph" and report.fallbacks == (), str(report)
        assert report.pass_status("dynamic_batch") == "applied", str(report)
        if reused:
            assert flat.compiled_graphs == graphs, n


@pytest.mark.parametrize("env_id", CLASS_REPS)
@pytest.mark.parametrize("backend", ["eager", "compile"])
def test_no_host_sync_in_a_cuda_step(env_id: str, backend: str) -> None:
    env = _make(env_id, "cuda", backend)
    env.reset(seed=4)
    actions = [a.cuda() for a in _actions(env, 21)]
    env.step(actions[0])  # compiles (and builds the constant tables) outside the check
    torch.cuda.synchronize()
    torch.cuda.set_sync_debug_mode("error")
    try:
        for a in actions[1:]:
            env.step(a)
    finally:
        torch.cuda.set_sync_debug_mode(0)
    torch.cuda.synchronize()


@pytest.mark.parametrize("env_id", CLASS_REPS)
def test_a_cpu_checkpoint_runs_on_in_a_cuda_graph_and_back(env_id: str) -> None:
    cpu = _make(env_id, "cpu", "eager")
    cpu.reset(seed=2)
    acts = _actions(cpu, 30, seed=3)
    for a in acts[:10]:
        cpu.step(a)
    saved = cpu.state_dict()
    expected = [_outputs(cpu.step(a)) for a in acts[10:]]
    gpu = _make(env_id, "cuda", "compile")
    gpu.reset(seed=0)
    for a in acts[:3]:
        gpu.step(a.cuda())  # graphed before the load
    gpu.load_state_dict(saved)
    got = [_outputs(gpu.step(a.cuda())) for a in acts[10:20]]
    back = _make(env_id, "cpu", "eager")
    back.load_state_dict(gpu.state_dict())
    got += [_outputs(back.step(a)) for a in acts[20:]]
    assert gpu.compile_report.strategy == "cuda_graph"
    for t, (x, y) in enumerate(zip(got, expected, strict=True)):
        if _integer(env_id):
            assert all(map(torch.equal, x, y)), f"step {t}"
        else:  # float64, 20 steps apart from the CPU's sin/cos
            for u, v in zip(x[:2] + x[4:], y[:2] + y[4:], strict=True):
                torch.testing.assert_close(u, v, rtol=0, atol=1e-8)


@pytest.mark.parametrize("env_id", [e.id for e in PER_ID])
def test_every_id_renders_on_cuda_as_on_cpu(env_id: str) -> None:
    cpu = gym.make_vec(env_id, num_envs=4, backend="eager", render_mode="rgb_array").unwrapped
    gpu = gym.make_vec(
        env_id, num_envs=4, backend="eager", render_mode="rgb_array", device="cuda"
    ).unwrapped
    cpu.reset(seed=3)
    gpu.reset(seed=3)
    gpu.set_env_state(pytree.tree_map(lambda t: t.cuda(), cpu.state.env))
    frames = gpu.render_frames()
    assert frames.device.type == "cuda" and frames.dtype == torch.uint8
    assert (frames.cpu() == cpu.render_frames()).all(-1).double().mean() >= 0.999


def test_rng_draws_equal_cpu() -> None:
    k0, k1 = keys_from_seeds(torch.arange(1000))
    c = torch.arange(1000)
    cpu = Rng(k0, k1, c, STEP)
    gpu = Rng(k0.cuda(), k1.cuda(), c.cuda(), STEP)
    assert torch.equal(cpu.bits(7), gpu.bits(7).cpu())
    assert torch.equal(cpu.uniform(3), gpu.uniform(3).cpu())


_AUTO = """
import json, sys, time
t0 = time.perf_counter()
import gymnasium as gym, torch, gpuvec_envs
env = gym.make_vec(sys.argv[1], num_envs=4096, device="cuda", validate=False).unwrapped
ref = gym.make_vec(sys.argv[1], num_envs=4096, device="cuda", backend="eager", validate=False)
env.reset(seed=0); ref.reset(seed=0)
a = torch.zeros(4096, dtype=torch.int64, device="cuda")
t1 = time.perf_counter()
out = env.step(a); torch.cuda.synchronize()
first = time.perf_counter() - t1
eager_kind = env.backend
diff = [(out[0].double() - ref.step(a)[0].double()).abs().max().item()]
ok = env.wait_compiled(600)
for _ in range(20):
    diff.append((env.step(a)[0].double() - ref.step(a)[0].double()).abs().max().item())
r = env.compile_report
print(json.dumps(dict(import_and_make=t1 - t0, first_step=first, eager_first=eager_kind,
                      waited=ok, strategy=r.strategy, background=r.background,
                      eager_calls=r.eager_calls, diff=max(diff))))
"""


@pytest.mark.parametrize("env_id", ["gpuvec/CartPole-v1", "gpuvec/MinAtar-Breakout-v1"])
def test_auto_backend_steps_at_once_and_switches_to_the_cuda_graph(env_id, tmp_path) -> None:
    """On a cold inductor cache: the first step is eager (<= 3 s); the compiled step and its
    CUDA graph come from a child process, and the switch keeps the results exact."""
    import json

    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    env["TRITON_CACHE_DIR"] = str(tmp_path / "triton")
    run = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_AUTO), env_id],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert run.returncode == 0, run.stderr[-2000:]
    got = json.loads(run.stdout.strip().splitlines()[-1])
    print(env_id, got)
    assert got["eager_first"] == "eager" and got["first_step"] <= 3.0
    assert got["waited"] and got["strategy"] == "cuda_graph"
    assert got["diff"] <= (0.0 if "MinAtar" in env_id else 1e-5)  # float32 CartPole: sin/cos
    assert got["background"].startswith("child process")
