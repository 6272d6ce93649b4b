"""Thread-count control of compiled calls (gpuvec_envs.compiler.threads)."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch

import gpuvec_envs  # noqa: F401
from gpuvec_envs.compiler.threads import ThreadControl, check_num_threads


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield
    torch.set_num_threads(before)


class FakeMachine:
    """A clock advanced by calls whose cost depends on the thread count they run with."""

    def __init__(self, cost: dict[int, float]) -> None:
        self.now = 0.0
        self.cost = dict(cost)
        self.runs: list[int] = []
        self.idle = 0.0

    def clock(self) -> float:
        return self.now

    def call(self) -> int:
        k = torch.get_num_threads()
        self.runs.append(k)
        self.now += self.cost[k]
        return k


@pytest.mark.parametrize("bad", [0, -1, "two", "AUTO"])
def test_bad_num_threads_value(bad):
    with pytest.raises(ValueError, match="num_threads"):
        check_num_threads(bad)


@pytest.mark.parametrize("bad", [1.5, None, True])
def test_bad_num_threads_type(bad):
    with pytest.raises(TypeError, match="num_threads"):
        check_num_threads(bad)


def test_env_rejects_bad_num_threads():
    with pytest.raises(ValueError, match="num_threads"):
        gym.make_vec("gpuvec/CartPole-v1", num_envs=2, backend="eager", num_threads=0)
    env = gym.make_vec("gpuvec/CartPole-v1", num_envs=2, backend="eager", num_threads=1)
    assert env.unwrapped.num_threads == 1


def test_fixed_count_is_used_and_restored(two_threads):
    control = ThreadControl(1)
    seen = control(torch.get_num_threads)
    assert seen == 1
    assert torch.get_num_threads() == 2


def test_fixed_count_restored_after_an_exception(two_threads):
    control = ThreadControl(1)

    def boom():
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        control(boom)
    assert torch.get_num_threads() == 2


def test_auto_drops_to_fewer_threads_when_a_core_is_taken(two_threads):
    machine = FakeMachine({2: 1e-3, 1: 1.6e-3})
    control = ThreadControl("auto", clock=machine.clock, idle_cores=lambda: machine.idle)
    for _ in range(50):
        control(machine.call)
    assert control.threads == 2  # calm: the full team is faster
    machine.cost[2] = 20e-3  # another process takes a core: 2 threads stall
    for _ in range(40):
        control(machine.call)
    assert control.threads == 1
    assert control.switches == 1
    assert torch.get_num_threads() == 2  # the process's own setting is untouched
    # No core free: no probe of 2 threads for as long as that lasts.
    start = len(machine.runs)
    for _ in range(2000):
        control(machine.call)
    assert machine.runs[start:].count(2) == 0
    # The core is free again: 2 threads come back within the longest probe interval.
    machine.cost[2], machine.idle = 1e-3, 1.0
    calls_per_interval = int(ThreadControl.PROBE_MAX_S / machine.cost[1]) + 20
    for _ in range(calls_per_interval):
        control(machine.call)
    assert control.threads == 2
    assert control.switches == 2


def test_auto_probes_rarely_on_a_calm_machine(two_threads):
    machine = FakeMachine({2: 1e-3, 1: 2e-3})
    control = ThreadControl("auto", clock=machine.clock, idle_cores=lambda: 0.0)
    for _ in range(5000):
        control(machine.call)
    assert control.threads == 2 and control.switches == 0
    # each probe of 1 thread stops after one slower call; intervals grow to PROBE_MAX_S
    assert machine.runs.count(1) <= 10


def test_a_failed_probe_of_more_threads_waits_the_longest_interval(two_threads):
    """Cores that look idle but stall a bigger team (200x slower calls): after one failed
    try, more threads are tried again only every PROBE_MAX_S."""
    machine = FakeMachine({2: 40e-3, 1: 0.2e-3})
    machine.idle = 1.0
    control = ThreadControl("auto", clock=machine.clock, idle_cores=lambda: machine.idle)
    for _ in range(20):
        control(machine.call)
    assert control.threads == 1
    start, t0 = len(machine.runs), machine.now
    while machine.now - t0 < 4 * ThreadControl.PROBE_MAX_S:
        control(machine.call)
    tries = machine.runs[start:].count(2)
    assert 3 <= tries <= 5  # one slow call per PROBE_MAX_S, not a doubling ramp from 0.2 s
    assert control.threads == 1


def test_auto_never_exceeds_the_process_thread_count(two_threads):
    control = ThreadControl("auto")
    control(torch.get_num_threads)
    torch.set_num_threads(1)
    assert control(torch.get_num_threads) == 1


@pytest.mark.parametrize("env_id", ["gpuvec/CartPole-v1"])
def test_compiled_results_identical_whatever_the_thread_count(env_id, two_threads):
    n = 1000  # not a multiple of the vector width: tails included
    envs = [
        gym.make_vec(env_id, num_envs=n, backend="compile", num_threads=k, max_episode_steps=20)
        for k in (1, 2)
    ]
    gen = torch.Generator().manual_seed(1)
    for e in envs:
        e.reset(seed=3)
    for _ in range(40):
        a = torch.randint(0, 2, (n,), generator=gen)
        outs = [e.step(a)[:4] for e in envs]
        for x, y in zip(*outs, strict=True):
            assert torch.equal(x, y)
    for x, y in zip(
        torch.utils._pytree.tree_leaves(envs[0].unwrapped.state),
        torch.utils._pytree.tree_leaves(envs[1].unwrapped.state),
        strict=True,
    ):
        assert torch.equal(x, y)
    assert all(e.unwrapped.backend == "compile" for e in envs)
