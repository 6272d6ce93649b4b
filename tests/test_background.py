"""The background backend: eager first, compiled off the caller's path, an exact switch."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import gymnasium as gym
import pytest
import torch
from torch._dynamo.utils import counters
from torch.utils import _pytree as pytree

import gpuvec_envs  # noqa: F401 - registers the IDs
from gpuvec_envs.compiler import Backend, background
from gpuvec_envs.compiler import backend as compiler_backend
from gpuvec_envs.compiler.strategies import Built

ENV_ID = "gpuvec/CartPole-v1"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # a zombie (exited, not yet reaped) counts as gone
    with open(f"/proc/{pid}/stat") as f:
        return f.read().split()[2] != "Z"


def _actions(n: int, steps: int, seed: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 2, (n,), generator=g) for _ in range(steps)]


def _leaves(env: gym.vector.VectorEnv) -> list[torch.Tensor]:
    return pytree.tree_leaves(env.unwrapped.state)


def test_auto_steps_eagerly_first_and_compiles_nothing_on_the_callers_path():
    from gpuvec_envs.compiler import flat

    before = flat.compiled_graphs
    env = gym.make_vec(ENV_ID, num_envs=16)
    env.reset(seed=0)
    for a in _actions(16, 5, 0):
        env.step(a)
    step = env.unwrapped._step
    assert env.unwrapped.backend == "eager" and step.mode == "auto"
    assert step.eager_calls == 5 and env.unwrapped.compile_report is None
    assert flat.compiled_graphs == before  # nothing compiled in this process
    env.close()


@pytest.mark.heavy
def test_switch_keeps_the_state_exactly_and_loses_no_step(monkeypatch):
    """Before the switch: bitwise the eager env; after: bitwise a compiled env from there."""
    monkeypatch.setattr(compiler_backend, "START_AFTER_S", 0.0)
    n, kw = 64, dict(max_episode_steps=30, autoreset_mode="same_step")
    acts = _actions(n, 80, 1)
    bg = gym.make_vec(ENV_ID, num_envs=n, backend="background", **kw)
    eager = gym.make_vec(ENV_ID, num_envs=n, backend="eager", **kw)
    for e in (bg, eager):
        e.reset(seed=7)
    for a in acts[:10]:
        x, y = bg.step(a), eager.step(a)
        for u, v in zip(x[:4], y[:4], strict=True):
            assert torch.equal(u, v)
    assert bg.unwrapped.backend == "eager"
    counters.clear()
    assert bg.unwrapped.wait_compiled(timeout=600)
    # the build loaded what the child compiled (this file imports gymnasium before torch,
    # which once gave the caller's cache key another memory format than its child's)
    cache = counters["inductor"]
    assert (cache["fxgraph_cache_hit"], cache["fxgraph_cache_miss"]) == (1, 0)
    # the state at the switch, continued by a compiled env from a checkpoint
    sd = bg.unwrapped.state_dict()
    for u, v in zip(_leaves(bg), _leaves(eager), strict=True):
        assert torch.equal(u, v)
    ref = gym.make_vec(ENV_ID, num_envs=n, backend="compile", **kw)
    ref.reset(seed=0)
    ref.unwrapped.load_state_dict(sd)
    for a in acts[10:]:
        x, y = bg.step(a), ref.step(a)
        for u, v in zip(x[:4], y[:4], strict=True):
            assert torch.equal(u, v)
        assert torch.equal(x[4]["final_obs"], y[4]["final_obs"])
    report = bg.unwrapped.compile_report
    assert bg.unwrapped.backend == "compile" and report.fast_path
    assert report.eager_calls == 10 and report.background
    assert "compiled in the background after 10 eager calls" in str(report)
    for u, v in zip(_leaves(bg), _leaves(ref), strict=True):
        assert torch.equal(u, v)
    assert int(bg.unwrapped.state.elapsed.max()) <= 30
    for e in (bg, eager, ref):
        e.close()


class _Boom:
    name, kind = "boom", "fused"

    def applies(self, request):
        return None

    def build(self, request):
        raise RuntimeError("no compiler here")


class _Double:
    """A 'compiled' call that is the eager one plus a marker (to see the switch)."""

    name, kind = "double", "fused"

    def applies(self, request):
        return None

    def build(self, request):
        def call(x):
            return request.fn(x) + 1000

        return Built(call, call(*request.args))


#: A lambda: its job does not pickle, so these Backend tests start no child process.
_fn = lambda x: x * 2  # noqa: E731


def _no_child(monkeypatch):
    """Warm-ups finish at once, without a child process (for Backend tests of fakes)."""
    monkeypatch.setattr(background.BackgroundBuild, "_warm", lambda self, p: (True, "no child"))


def test_a_failing_background_compile_stays_eager_with_one_warning(monkeypatch):
    monkeypatch.setattr(compiler_backend, "START_AFTER_S", 0.0)
    _no_child(monkeypatch)
    b = Backend(_fn, (), "background", "boom", strategies=(_Boom(),))
    x = torch.arange(4.0)
    assert torch.equal(b(x), x * 2)
    assert b._pending is not None and b.wait(120)
    with pytest.warns(RuntimeWarning, match="background compile failed.*no compiler here"):
        assert torch.equal(b(x), x * 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(3):
            assert torch.equal(b(x), x * 2)
    assert b.name == "eager" and b.report.strategy == "eager"
    assert b.report.fallbacks[0].strategy == "background"
    assert "no compiler here" in b.report.fallbacks[0].reason


@pytest.mark.heavy
def test_a_job_that_does_not_pickle_compiles_at_the_next_call(monkeypatch):
    import threading

    monkeypatch.setattr(compiler_backend, "START_AFTER_S", 0.0)
    monkeypatch.setattr(compiler_backend, "_warned", set())
    lock = threading.Lock()  # no pickle of a lock: no child process

    def fn(x):
        with lock:
            return x * 3

    b = Backend(fn, (), "background", "local", strategies=(_Double(),))
    x = torch.arange(4.0)
    with pytest.warns(RuntimeWarning, match="does not pickle"):
        assert torch.equal(b(x), x * 3)
    assert b._pending is None and b.wait(0)
    assert torch.equal(b(x), x * 3 + 1000)  # compiled at this call
    assert b.report.strategy == "double" and b.eager_calls == 1 and b.name == "compile"


def test_background_starts_only_after_enough_eager_time(monkeypatch):
    monkeypatch.setattr(compiler_backend, "START_AFTER_S", 3600.0)
    _no_child(monkeypatch)
    b = Backend(_fn, (), "background", "late", strategies=(_Double(),))
    for _ in range(5):
        b(torch.ones(2))
    assert b._pending is None and b.wait(0)  # nothing pending: nothing to wait for
    b.start_background((torch.ones(2),))
    assert b.wait(60) and torch.equal(b(torch.ones(2)), torch.full((2,), 1002.0))


def test_close_stops_the_child_and_the_thread(monkeypatch):
    monkeypatch.setattr(compiler_backend, "START_AFTER_S", 0.0)
    env = gym.make_vec(ENV_ID, num_envs=8, backend="background", max_episode_steps=17)
    env.reset(seed=0)
    env.step(torch.zeros(8, dtype=torch.int64))
    pending = env.unwrapped._step._pending
    deadline = time.monotonic() + 60
    while pending.child_pid is None and not pending.done and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = pending.child_pid
    assert pid is not None, pending.note
    env.close()
    assert not _alive(pid)
    assert pending.wait(60) and not pending.ok and pending.note == "cancelled"
    obs, *_ = env.step(torch.zeros(8, dtype=torch.int64))  # still steps, eagerly
    assert env.unwrapped.backend == "eager" and obs.shape == (8, 4)


def test_interpreter_exit_leaves_no_child(tmp_path):
    script = textwrap.dedent(
        """
        import time, torch, gymnasium as gym, gpuvec_envs
        from gpuvec_envs.compiler import backend
        backend.START_AFTER_S = 0.0
        env = gym.make_vec("gpuvec/CartPole-v1", num_envs=8, max_episode_steps=19)
        env.reset(seed=0)
        env.step(torch.zeros(8, dtype=torch.int64))
        p = env.unwrapped._step._pending
        while p.child_pid is None and not p.done:
            time.sleep(0.05)
        print(p.child_pid, flush=True)
        """
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, check=True
    )
    pid = int(out.stdout.split()[-1])
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _alive(pid)


@pytest.mark.heavy
def test_a_script_importing_gymnasium_first_loads_its_childs_compile(tmp_path):
    """The caller's build hits the cache its child filled (on a cold cache), whatever the
    script imported first (gymnasium before torch once put ``__mp_main__`` in the key)."""
    script = textwrap.dedent(
        """
        import gymnasium as gym
        import torch
        import gpuvec_envs
        from torch._dynamo.utils import counters
        from gpuvec_envs.compiler import backend
        backend.START_AFTER_S = 0.0
        env = gym.make_vec("gpuvec/CartPole-v1", num_envs=8, max_episode_steps=19)
        env.reset(seed=0)
        env.step(torch.zeros(8, dtype=torch.int64))
        assert env.unwrapped.wait_compiled(timeout=600)
        c = counters["inductor"]
        print(env.unwrapped.backend, c["fxgraph_cache_hit"], c["fxgraph_cache_miss"])
        """
    )
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "inductor"))
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=900, env=env
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-3:] == ["compile", "1", "0"]


def test_deepcopy_of_an_env_with_a_pending_compile(monkeypatch):
    import copy

    monkeypatch.setattr(compiler_backend, "START_AFTER_S", 0.0)
    env = gym.make_vec(ENV_ID, num_envs=8, backend="background", max_episode_steps=23)
    env.reset(seed=2)
    env.step(torch.zeros(8, dtype=torch.int64))
    twin = copy.deepcopy(env)
    assert twin.unwrapped._step._pending is None
    a = torch.ones(8, dtype=torch.int64)
    for u, v in zip(env.step(a)[:4], twin.step(a)[:4], strict=True):
        assert torch.equal(u, v)
    env.close()
    twin.close()


def test_cache_keys_do_not_depend_on_the_import_order():
    """A memory format pickles by name, not via whichever module reaches it first."""
    import pickle

    from torch._inductor.codecache import FxGraphCachePickler

    from gpuvec_envs.compiler.flat import stable_cache_keys

    gm = torch.fx.GraphModule(torch.nn.Module(), torch.fx.Graph())
    fmt = torch.contiguous_format
    plain = FxGraphCachePickler(gm, False).dumps(fmt)
    with stable_cache_keys():
        data = FxGraphCachePickler(gm, False).dumps(fmt)
        fake = type(sys)("__aaa_first__")
        fake.torch = torch  # a module that reaches torch.contiguous_format
        sys.modules["__aaa_first__"] = fake
        try:
            assert FxGraphCachePickler(gm, False).dumps(fmt) == data
        finally:
            del sys.modules["__aaa_first__"]
    assert b"gpuvec_envs.compiler.flat" in data and b"main__" not in data
    assert pickle.loads(data) is fmt
    assert FxGraphCachePickler(gm, False).dumps(fmt) == plain  # restored


def test_background_module_pickles_the_env_step_job():
    env = gym.make_vec(ENV_ID, num_envs=4, backend="background")
    env.reset(seed=0)
    step = env.unwrapped._step
    job = compiler_backend.WarmJob(
        step._raw, step._bound, "t", (env.unwrapped.state,), True, step.options, 1
    )
    assert background._payload(job) is not None
    env.close()


@pytest.mark.heavy
def test_auto_collector_never_waits_for_the_compiler_and_equals_the_loop(monkeypatch):
    """Default collector on a default env: env-step rollouts at once, compiled ones later."""
    from test_rollout import N, Policy, T, expect_loop

    from gpuvec_envs.rollout import RolloutCollector

    monkeypatch.setattr(compiler_backend, "START_AFTER_S", 0.0)
    kw = dict(num_envs=N, dtype=torch.float64, max_episode_steps=12)
    env = gym.make_vec(ENV_ID, **kw)
    ref = gym.make_vec(ENV_ID, backend="eager", **kw)
    env.reset(seed=3)
    obs, _ = ref.reset(seed=3)
    policy = Policy()
    collector = RolloutCollector(env, policy, T)

    def check(out, obs):
        return expect_loop(out, policy, ref, obs, extras=False)

    obs = check(collector.collect(), obs)
    assert collector.kind == "env_step" and collector._scan_fn is None
    assert collector.wait_compiled(timeout=900)
    for _ in range(2 * (RolloutCollector.TRIALS + 1)):
        obs = check(collector.collect(), obs)
    assert env.unwrapped.backend == "compile" and collector._scan_fn is not None
    assert collector._path in ("scan", "env_step")  # decided: the next rollout takes it
    obs = check(collector.collect(), obs)
    assert collector.kind == collector._path
    env.close()


@pytest.mark.heavy
def test_collector_wait_compiled_right_after_construction():
    """``wait_compiled()`` before any rollout compiles both (what a benchmark or a script
    that wants compiled rollouts from the start calls); the first rollout is a scan trial."""
    from test_rollout import N, Policy, T, expect_loop

    from gpuvec_envs.rollout import RolloutCollector

    kw = dict(num_envs=N, dtype=torch.float64, max_episode_steps=12)
    env = gym.make_vec(ENV_ID, **kw)
    ref = gym.make_vec(ENV_ID, backend="eager", **kw)
    collector = RolloutCollector(env, Policy(), T)
    assert collector.wait_compiled(timeout=1) and collector.buffers is None  # before reset
    env.reset(seed=4)
    obs, _ = ref.reset(seed=4)
    assert collector.wait_compiled(timeout=900)
    assert env.unwrapped.backend == "compile" and collector._scan_fn is not None
    expect_loop(collector.collect(), collector.policy, ref, obs, extras=False)
    assert collector._trial_times["scan"] and not collector._trial_times["env_step"]
    env.close()


@pytest.mark.heavy
def test_auto_collector_uses_the_scan_while_the_env_step_compiles(monkeypatch):
    """The scan compiles first; until the env's own step runs compiled, the collector uses
    the scan without timing it against eager env steps (that trial would always pick it)."""
    from test_rollout import N, Policy, T

    from gpuvec_envs.rollout import RolloutCollector

    monkeypatch.setattr(compiler_backend, "START_AFTER_S", 0.0)
    env = gym.make_vec(ENV_ID, num_envs=N, dtype=torch.float64, max_episode_steps=12)
    env.reset(seed=3)
    collector = RolloutCollector(env, Policy(), T)
    collector.collect()
    assert collector.kind == "env_step" and collector._scan_build is not None
    assert collector._scan_build.wait(900) and collector._scan_build.ok
    step = env.unwrapped._step
    monkeypatch.setattr(step, "wait", lambda timeout=None: False)  # still compiling
    for _ in range(2 * (RolloutCollector.TRIALS + 1)):
        collector.collect()
    assert collector.kind == "scan" and collector._path is None
    assert collector._trial_times == {"scan": [], "env_step": []}
    monkeypatch.undo()
    assert collector.wait_compiled(timeout=900)
    for _ in range(2 * (RolloutCollector.TRIALS + 1)):
        collector.collect()
    assert env.unwrapped.backend == "compile" and collector._path in ("scan", "env_step")
    env.close()


def _work(x):
    time.sleep(0.05)  # an eager call that takes 50 ms
    return x * 2


@pytest.mark.parametrize("cpus", [2, 8])
@pytest.mark.parametrize("switch", [True, False])
@pytest.mark.parametrize("opted_in", [True, False])
def test_eager_steps_yield_to_their_running_child_on_few_cpus(monkeypatch, cpus, switch, opted_in):
    """``yield_to_compile``: while its own child process runs, on at most two CPUs, an
    eager call of a backend made with ``yield_to_child`` owes a pause as long as it ran,
    which ``settle`` pays."""
    monkeypatch.setattr(compiler_backend, "START_AFTER_S", 0.0)
    monkeypatch.setattr(compiler_backend, "available_cpus", lambda: cpus)
    # the "compile" is a child process that sleeps
    monkeypatch.setattr(compiler_backend, "WarmJob", lambda *a: functools.partial(time.sleep, 60))
    opts = {"yield_to_compile": switch}
    b = Backend(_work, (), "background", "y", compiler=opts, yield_to_child=opted_in)
    yields = opted_in and switch and cpus <= compiler_backend.YIELD_MAX_CPUS
    x = torch.arange(3.0)
    try:
        assert torch.equal(b(x), x * 2)  # starts the child
        assert b._owed_pause == 0.0
        deadline = time.monotonic() + 60
        while b._pending.child_pid is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert b._pending.child_pid is not None
        assert torch.equal(b(x), x * 2)
        assert (b._owed_pause >= 0.05) is yields
        t0 = time.perf_counter()
        b.settle()
        assert (time.perf_counter() - t0 >= 0.05) is yields and b._owed_pause == 0.0
    finally:
        b.cancel()
    assert b(x) is not None and b._owed_pause == 0.0  # no child: no pause


@pytest.mark.parametrize("interrupt", [True, False])
def test_exit_stops_a_thread_preparing_the_build(monkeypatch, interrupt):
    """Interpreter exit's handler kills the child and stops the build's thread, so that no
    thread of ours runs while Python finalizes (a daemon thread in C++ code then aborts the
    process: "terminate called without an active exception"). With the interrupt switched
    off it waits for the thread instead (here at most ``EXIT_JOIN_S``)."""
    release = threading.Event()
    entered = threading.Event()

    def prepare(cancelled):  # stands in for the imports: Python code that takes a while
        entered.set()
        while not release.wait(0.01):
            pass

    monkeypatch.setattr(background, "_prepare_build", prepare)
    monkeypatch.setattr(background, "INTERRUPT_AT_EXIT", interrupt)
    monkeypatch.setattr(background, "EXIT_JOIN_S", 1.0)
    build = background.BackgroundBuild(functools.partial(time.sleep, 60))
    try:
        assert entered.wait(60)
        pid = build.child_pid
        start = time.monotonic()
        background._cancel_all()
        took = time.monotonic() - start
        assert pid is not None and not _alive(pid)
        if interrupt:
            assert build.join(5) and took < 1.0
            assert build.done and not build.ok and build.note.startswith("_Exiting")
        else:
            assert not build.join(0) and took >= 1.0  # waited EXIT_JOIN_S for the thread
    finally:
        release.set()
        build.join(10)
