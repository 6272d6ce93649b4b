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


def _auto(machine: FakeMachine, idle: float | None = None) -> ThreadControl:
    """An ``"auto"`` control timed by ``machine``; idle cores ``idle`` or ``machine.idle``."""
    cores = (lambda: machine.idle) if idle is None else (lambda: idle)
    return ThreadControl("auto", clock=machine.clock, idle_cores=cores)


def _run(control: ThreadControl, machine: FakeMachine, calls: int = 0, seconds: float = 0.0):
    """``calls`` calls, then more until ``seconds`` of the machine's clock have passed."""
    t0 = machine.now
    for _ in range(calls):
        control(machine.call)
    while machine.now - t0 < seconds:
        control(machine.call)


def _run_varying(control: ThreadControl, machine: FakeMachine, calls: int, cost_of_2) -> None:
    """``calls`` calls, the i-th with 2 threads costing ``cost_of_2(i)`` seconds."""
    for i in range(calls):
        machine.cost[2] = cost_of_2(i)
        control(machine.call)


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
    control = _auto(machine)
    _run(control, machine, 50)
    assert control.threads == 2  # calm: the full team is faster
    machine.cost[2] = 20e-3  # another process takes a core: 2 threads stall
    _run(control, machine, 40)
    assert control.threads == 1
    assert control.switches == 1
    assert torch.get_num_threads() == 2  # the process's own setting is untouched
    # No core free: no probe of 2 threads for as long as that lasts.
    start = len(machine.runs)
    _run(control, machine, 2000)
    assert machine.runs[start:].count(2) == 0
    # The core is free again: 2 threads come back within the longest probe interval.
    machine.cost[2], machine.idle = 1e-3, 1.0
    calls_per_interval = int(ThreadControl.PROBE_MAX_S / machine.cost[1]) + 20
    _run(control, machine, calls_per_interval)
    assert control.threads == 2
    assert control.switches == 2


def test_auto_probes_rarely_on_a_calm_machine(two_threads):
    machine = FakeMachine({2: 1e-3, 1: 2e-3})
    control = _auto(machine, idle=0.0)
    _run(control, machine, 5000)
    assert control.threads == 2 and control.switches == 0
    # each probe of 1 thread stops after one slower call; intervals grow to PROBE_MAX_S
    assert machine.runs.count(1) <= 10


def test_a_slower_team_that_fewer_threads_cannot_beat_is_reprobed_at_growing_intervals(
    two_threads,
):
    """Calls 1.6x slower than the calm window (above SLOW, below a stall) whose probes of
    fewer threads lose: the probes back off like periodic ones instead of one per window."""
    machine = FakeMachine({2: 1e-3, 1: 2.5e-3})
    control = _auto(machine, idle=0.0)
    _run(control, machine, 50)
    machine.cost[2] = 1.6e-3
    start = len(machine.runs)
    _run(control, machine, seconds=4 * ThreadControl.PROBE_MAX_S)
    assert control.threads == 2 and control.switches == 0
    assert machine.runs[start:].count(1) <= 10  # one per window would be ~1000


def test_a_probe_of_more_threads_is_not_judged_by_its_waking_call(two_threads):
    """The first call of a larger team wakes its threads (here 3x a calm call, above SLOW
    times the 1-thread median): that call alone must not end the probe."""

    class Waking(FakeMachine):
        last = 0

        def call(self) -> int:
            k = torch.get_num_threads()
            self.cost[2] = 3e-3 if (k, self.last) == (2, 1) else self.calm
            self.last = k
            return super().call()

    machine = Waking({2: 1e-3, 1: 1.6e-3})
    machine.calm = 1e-3
    control = _auto(machine)
    _run(control, machine, 50)
    machine.calm = 20e-3  # a core is taken: 2 threads stall
    _run(control, machine, 40)
    assert control.threads == 1
    machine.calm, machine.idle = 1e-3, 1.0  # free again
    _run(control, machine, seconds=2 * ThreadControl.PROBE_MIN_S)
    assert control.threads == 2 and control.switches == 2


def test_a_call_after_a_pause_is_not_judged(two_threads):
    """Calls that follow a pause of the caller (other work, idle cores to wake up) are slow
    for reasons the thread count does not decide: they never count as stalls."""
    machine = FakeMachine({2: 1e-3, 1: 1.6e-3})
    control = _auto(machine, idle=0.0)
    _run(control, machine, 50)
    for _ in range(40):  # each burst: a pause, then a 10 ms call, then calm calls
        machine.now += 2 * ThreadControl.GAP_S
        machine.cost[2] = 10e-3
        control(machine.call)
        machine.cost[2] = 1e-3
        _run(control, machine, 3)
    assert control.threads == 2 and control.switches == 0
    assert machine.runs.count(1) <= 10  # periodic probes only


def test_idle_time_before_the_last_decision_does_not_justify_more_threads(two_threads):
    """Cores idle long ago (before a competitor started) are no reason to try 2 threads
    after the drop to 1: idle time counts from the last probe on."""
    readings = iter([1.0])  # idle since construction; busy ever after
    machine = FakeMachine({2: 1e-3, 1: 1.6e-3})
    control = ThreadControl("auto", clock=machine.clock, idle_cores=lambda: next(readings, 0.0))
    _run(control, machine, 50)
    machine.cost[2] = 20e-3  # a competitor takes a core
    _run(control, machine, 40)
    assert control.threads == 1
    start = len(machine.runs)
    _run(control, machine, seconds=4 * ThreadControl.PROBE_MAX_S)
    assert machine.runs[start:].count(2) == 0


def test_a_failed_probe_of_more_threads_waits_the_longest_interval(two_threads):
    """Cores that look idle but stall a bigger team (200x slower calls): after one failed
    try, more threads are tried again only every PROBE_MAX_S (two slow calls per try: the
    unjudged waking call and the judged one)."""
    machine = FakeMachine({2: 40e-3, 1: 0.2e-3})
    control = _auto(machine, idle=1.0)
    _run(control, machine, 20)
    assert control.threads == 1
    start = len(machine.runs)
    _run(control, machine, seconds=4 * ThreadControl.PROBE_MAX_S)
    tries = machine.runs[start:].count(2) / 2
    assert 3 <= tries <= 5  # one try per PROBE_MAX_S, not a doubling ramp from 0.2 s
    assert control.threads == 1


def test_two_stalled_calls_are_enough_to_try_fewer_threads(two_threads):
    machine = FakeMachine({2: 1e-3, 1: 1.6e-3})
    control = _auto(machine, idle=0.0)
    _run(control, machine, 50)
    machine.cost[2] = 60e-3  # a core is taken
    start = len(machine.runs)
    _run(control, machine, 20)
    assert control.threads == 1
    assert machine.runs[start:].count(2) == 2  # not a whole window of stalls
    # one hiccup alone changes nothing
    machine2 = FakeMachine({2: 1e-3, 1: 1.6e-3})
    control2 = _auto(machine2, idle=0.0)
    _run_varying(control2, machine2, 400, lambda i: 30e-3 if i % 50 == 25 else 1e-3)
    assert control2.threads == 2 and control2.switches == 0


def test_sub_millisecond_jitter_is_not_a_stall(two_threads):
    """On a VM a 0.1 ms call now and then takes 6x as long without any core being taken:
    not a stall (a thread waiting for a busy core costs milliseconds)."""
    machine = FakeMachine({2: 0.1e-3, 1: 0.16e-3})
    control = _auto(machine, idle=1.0)
    _run_varying(control, machine, 3000, lambda i: 0.6e-3 if i % 3 == 0 else 0.1e-3)
    assert control.threads == 2 and control.switches == 0


def test_timings_of_slower_code_are_forgotten(two_threads):
    """When the called code becomes much faster (the eager step replaced by the compiled
    one), what the slow calls taught (a count that stalled, the longest probe interval)
    is dropped: more threads are tried again within the first interval."""
    machine = FakeMachine({2: 60e-3, 1: 10e-3})  # eager, while a child compiles on a core
    control = _auto(machine, idle=1.0)
    _run(control, machine, seconds=10.0)
    while machine.runs[-2:] != [2, 1]:  # up to the end of a failed try of 2 threads
        control(machine.call)
    assert control.threads == 1 and control._interval == ThreadControl.PROBE_MAX_S
    machine.cost = {2: 0.1e-3, 1: 0.2e-3}  # compiled, the core free again
    _run(control, machine, seconds=ThreadControl.PROBE_MIN_S + 0.05)
    assert control.threads == 2


def test_a_lucky_probe_of_more_threads_is_dropped_at_its_second_stall(two_threads):
    """Under a competitor, a probe of 2 threads can run while the competitor sleeps; the
    count it wins is dropped at the second stall, and the next try waits PROBE_MAX_S."""

    class Lucky(FakeMachine):
        streak = 0  # consecutive calls with 2 threads, this one included

        def call(self) -> int:
            self.streak = self.streak + 1 if torch.get_num_threads() == 2 else 0
            self.cost[2] = 0.1e-3 if self.streak <= 4 else 60e-3  # 4 fast calls, then stalls
            return super().call()

    machine = Lucky({2: 60e-3, 1: 0.2e-3})
    control = _auto(machine, idle=1.0)  # /proc/stat says a core was free
    _run(control, machine, 40)
    assert control.threads == 1
    start = len(machine.runs)
    _run(control, machine, seconds=4 * ThreadControl.PROBE_MAX_S)
    runs = machine.runs[start:]
    tries = sum(1 for a, b in zip(runs, runs[1:], strict=False) if (a, b) == (1, 2))
    assert 3 <= tries <= 5
    # a warm-up call and PROBE_CALLS lucky probe calls, then 2 stalls per try
    assert runs.count(2) <= tries * (1 + ThreadControl.PROBE_CALLS + 2)
    assert control.threads == 1


def test_action_checks_run_with_the_steps_thread_count(two_threads, monkeypatch):
    """The eager work around the compiled call (action checks) uses the step's count: with
    the process's 2 threads, its parallel ops stalled on a busy core (CartPole N=65536,
    validate=True, one busy competitor: 17 M env-steps/s instead of 94 M)."""
    env = gym.make_vec("gpuvec/CartPole-v1", num_envs=8, backend="eager", num_threads=1)
    env.reset(seed=0)
    seen = []
    check = env.unwrapped._check_action_values
    monkeypatch.setattr(
        env.unwrapped,
        "_check_action_values",
        lambda t: (seen.append(torch.get_num_threads()), check(t)),
    )
    env.step(torch.zeros(8, dtype=torch.int64))
    env.unwrapped.prepare_action(torch.zeros(8, dtype=torch.int64))  # adapters call it alone
    assert seen == [1, 1] and torch.get_num_threads() == 2


def test_auto_never_exceeds_the_process_thread_count(two_threads):
    control = ThreadControl("auto")
    control(torch.get_num_threads)
    torch.set_num_threads(1)
    assert control(torch.get_num_threads) == 1


@pytest.mark.heavy
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
