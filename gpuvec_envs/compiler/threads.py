"""CPU thread count of compiled calls, chosen per call so that a busy core does not stall them.

Inductor's CPU kernels split a batch statically over their OpenMP team. When another
process holds one of the cores, every call waits for the thread that is descheduled, and
a call can take ten times as long as with one thread fewer. Kernels compiled with
:func:`inductor_options` read the team size at run time (``#pragma omp parallel`` without
a fixed ``num_threads``), so that the count can change from call to call without
recompiling; :class:`ThreadControl` sets it around each call (``torch.set_num_threads``,
restored afterwards, so that other torch work of the process keeps its own setting):

* ``num_threads=k``: every call runs with ``k`` threads.
* ``num_threads="auto"``: calls start with all of ``torch.get_num_threads()`` threads and
  are timed; when two calls of a window stall (:attr:`ThreadControl.STALL` times the
  fastest), a few calls with half the threads are tried at once, and kept if they are
  faster; windows far slower than their calm time try them at the growing intervals of
  the periodic probes (a team that fewer threads cannot beat is not re-tried every
  window). More threads are re-tried at growing intervals
  (:attr:`ThreadControl.PROBE_MAX_S` at most), where the machine has had idle cores since
  the last try (``/proc/stat``, where it exists), so the full team comes back when the
  cores are free again; a count taken on such a try is dropped at its second stall within
  :attr:`ThreadControl.PROBE_MAX_S`, so a lucky try costs two stalled calls, not a window.
  Calls slow for reasons the count does not decide are not judged: the first call of a
  larger team (it wakes the new threads) and a call after a pause of the caller
  (:attr:`ThreadControl.GAP_S`; idle cores wake up first).

The thread count changes how a batch is divided, never what each element computes: the
env steps' results are bitwise the same whatever the count.
"""

from __future__ import annotations

import contextlib
import os
import statistics
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch

#: The ``num_threads`` values accepted besides positive ints.
AUTO = "auto"


def check_num_threads(num_threads: int | str) -> int | str:
    """Validate a ``num_threads`` argument: ``"auto"`` or a positive int.

    Raises:
        TypeError: not an int or a string.
        ValueError: a string other than ``"auto"``, or an int below 1.
    """
    if isinstance(num_threads, str):
        if num_threads != AUTO:
            raise ValueError(f"num_threads must be 'auto' or a positive int, got {num_threads!r}")
        return num_threads
    if not isinstance(num_threads, int) or isinstance(num_threads, bool):
        raise TypeError(
            f"num_threads must be 'auto' or a positive int, got {type(num_threads).__name__}"
        )
    if num_threads < 1:
        raise ValueError(f"num_threads must be 'auto' or a positive int, got {num_threads}")
    return num_threads


def inductor_options() -> dict[str, Any]:
    """Inductor config values that make CPU kernels take their team size at run time."""
    return {"cpp.dynamic_threads": True}


class ThreadControl:
    """Runs calls with a fixed or an adaptively chosen number of CPU threads.

    Args:
        num_threads: ``"auto"`` or a positive int (see the module docstring).
        clock: Seconds, monotonic (the timer of ``"auto"``).
        idle_cores: Average idle CPUs since its previous call (default: from ``/proc/stat``;
            infinity where unknown).

    Attributes:
        threads: The count the next call runs with (``None`` until the first call in
            ``"auto"`` mode, which then starts with ``torch.get_num_threads()``).
        switches: How many times ``"auto"`` changed the count (for tests and reports).
    """

    #: Calls timed per decision.
    WINDOW = 6
    #: Calls tried with another count before keeping it (with more threads, after one
    #: unjudged call: it wakes the new threads and moves data between the cores' caches).
    PROBE_CALLS = 4
    #: A window this much slower than its count's calm time triggers a probe.
    SLOW = 1.5
    #: A probed count is kept when its calls take at most this fraction of the current's.
    GAIN = 0.9
    #: First and largest interval between periodic probes, seconds.
    PROBE_MIN_S = 0.2
    PROBE_MAX_S = 3.0
    #: Calls not timed at the start (the first compiles).
    WARMUP = 1
    #: One call this much slower than the fastest with its count, and by at least
    #: STALL_MIN_S, is a stall (a thread of the team waited for a busy core, which costs
    #: a scheduler slice, milliseconds): fewer threads are tried at once. Shorter delays
    #: of sub-millisecond calls are a VM's jitter, not a taken core.
    STALL = 4.0
    STALL_MIN_S = 1e-3
    #: A window this many times faster than the best one seen with its count: the called
    #: code changed (an eager step became compiled), so the timings so far are dropped.
    NEW_CODE = 4.0
    #: A call that starts this long after the previous one ended is not judged: idle cores
    #: may first have to wake up (on a VM an idle vCPU took ~2 ms).
    GAP_S = 0.05

    def __init__(
        self,
        num_threads: int | str = AUTO,
        *,
        clock: Callable[[], float] = time.perf_counter,
        idle_cores: Callable[[], float] | None = None,
    ) -> None:
        self.num_threads = check_num_threads(num_threads)
        self.threads: int | None = None if num_threads == AUTO else int(num_threads)
        self.switches = 0
        self._auto = num_threads == AUTO
        self._seen = 0
        self._window: list[float] = []
        self._calm: dict[int, float] = {}  # thread count -> best window median, seconds
        self._current_median = float("inf")
        self._probe: int | None = None  # the count being tried
        self._probe_times: list[float] = []
        self._probe_warming = False  # the probe's next call is not judged
        self._last_end: float | None = None  # when the previous call ended
        self._interval = self.PROBE_MIN_S
        self._next_probe = 0.0
        self._direction = -1  # the next periodic probe: -1 fewer threads, +1 more
        self._fastest: dict[int, float] = {}  # thread count -> fastest call, seconds
        self._raised: tuple[int, float] | None = None  # (previous count, when) after a raise
        self._clock = clock
        self._idle_cores = idle_cores if idle_cores is not None else _IdleCores().since_last

    def __call__(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)`` with the chosen thread count (restored afterwards)."""
        before = torch.get_num_threads()
        if self.threads is None:
            self.threads = before
        k = self._count(before)
        if not self._auto:  # no context manager here: this is every step's path
            if k == before:
                return fn(*args)
            torch.set_num_threads(k)
            try:
                return fn(*args)
            finally:
                torch.set_num_threads(before)
        if k != before:
            torch.set_num_threads(k)
        t0 = self._clock()
        try:
            out = fn(*args)
        finally:
            dt = self._clock() - t0
            if k != before:
                torch.set_num_threads(before)
        after_gap = self._last_end is not None and t0 - self._last_end > self.GAP_S
        self._last_end = t0 + dt
        self._observe(dt, t0, before, after_gap)
        return out

    @contextlib.contextmanager
    def scope(self) -> Iterator[None]:
        """Run the block (untimed) with the thread count calls now get.

        For the eager work around the calls (action checks, flags): its parallel torch ops
        would stall on a busy core as the compiled kernels do.
        """
        before = torch.get_num_threads()
        k = self._count(before)
        if k == before:
            yield
            return
        torch.set_num_threads(k)
        try:
            yield
        finally:
            torch.set_num_threads(before)

    def _count(self, before: int) -> int:
        """The thread count of the next call, given the process's ``before``."""
        k = self._probe if self._probe is not None else self.threads
        if k is None:
            return before
        return min(k, before) if self._auto else k  # auto: never more than the process allows

    # -- the "auto" policy -------------------------------------------------------------
    def _observe(self, dt: float, now: float, limit: int, after_gap: bool = False) -> None:
        """Account one call of ``dt`` seconds; maybe start, end or judge a probe."""
        self._seen += 1
        if self._seen <= self.WARMUP or after_gap:
            return
        if self._probe is not None:
            if self._probe_warming:  # a larger team's first call wakes its new threads
                self._probe_warming = False
                return
            self._probe_times.append(dt)
            if dt > self.SLOW * self._current_median or len(self._probe_times) >= self.PROBE_CALLS:
                self._end_probe(now)
            return
        k = self.threads
        fastest = self._fastest.get(k, dt)
        self._fastest[k] = min(fastest, dt)
        self._window.append(dt)
        stall = max(self.STALL * self._fastest[k], self._fastest[k] + self.STALL_MIN_S)
        if sum(t > stall for t in self._window) >= 2 and self._stalled(k, now, limit):
            return
        if len(self._window) < self.WINDOW:
            return
        median = statistics.median(self._window)
        if median * self.NEW_CODE < self._calm.get(k, 0.0):
            self._forget(k, median, min(self._window), now)
            return
        self._window.clear()
        self._current_median = median
        calm = self._calm.get(k, median)
        self._calm[k] = min(calm, median)
        fewer, more = self._neighbours(k, limit)
        if now < self._next_probe:
            return
        if fewer is not None and median > self.SLOW * calm:
            self._start_probe(fewer)
        else:
            if more is not None and self._idle_cores() < 0.5 * (more - k):
                more = None  # no core was free: more threads would stall
            options = [c for c in ((fewer, more) if self._direction < 0 else (more, fewer)) if c]
            self._direction = -self._direction
            if options:
                self._start_probe(options[0])
            else:
                self._next_probe = now + self._interval

    def _forget(self, k: int, median: float, fastest: float, now: float) -> None:
        """Drop what was learnt from slower code; probe again from the first interval."""
        self._window.clear()
        self._calm, self._fastest = {k: median}, {k: fastest}
        self._current_median, self._raised = median, None
        self._interval, self._next_probe = self.PROBE_MIN_S, now

    def _stalled(self, k: int, now: float, limit: int) -> bool:
        """React to two stalled calls with ``k`` threads in the window; return whether it did.

        One stall alone may be a hiccup of the machine.
        """
        fewer, _ = self._neighbours(k, limit)
        if fewer is None:
            return False
        mean = statistics.mean(self._window)  # what the stalls cost per call
        self._window.clear()
        raised = self._raised
        if raised is not None and raised[0] < k and now - raised[1] < self.PROBE_MAX_S:
            # the count a probe of more threads just won stalls: back at once, and the next
            # try of more threads waits the longest interval
            self.threads, self._raised = raised[0], None
            self.switches += 1
            self._interval = self.PROBE_MAX_S
            self._next_probe = now + self._interval
        else:
            self._current_median = mean
            self._start_probe(fewer)
        return True

    @staticmethod
    def _neighbours(k: int, limit: int) -> tuple[int | None, int | None]:
        """The next smaller and larger counts of the ladder ``limit, limit // 2, ..., 1``."""
        ladder = sorted({max(1, limit >> i) for i in range(limit.bit_length())})
        smaller = [c for c in ladder if c < k]
        larger = [c for c in ladder if c > k]
        return (smaller[-1] if smaller else None), (larger[0] if larger else None)

    def _start_probe(self, k: int) -> None:
        self._probe, self._probe_times = k, []
        self._probe_warming = k > (self.threads or 0)

    def _end_probe(self, now: float) -> None:
        probe, times = self._probe, self._probe_times
        self._probe, self._probe_times = None, []
        self._idle_cores()  # the next try of more threads judges idle time from here on
        full = len(times) >= self.PROBE_CALLS
        if full and statistics.median(times) <= self.GAIN * self._current_median:
            self._raised = (self.threads, now) if probe > (self.threads or 0) else None
            self.threads = probe
            self.switches += 1
            self._interval = self.PROBE_MIN_S
        elif probe > (self.threads or 0):
            # more threads stalled although cores looked idle: one such call can cost
            # hundreds of calm ones, so wait the longest interval before the next try
            self._interval = self.PROBE_MAX_S
        else:
            self._interval = min(2 * self._interval, self.PROBE_MAX_S)
        self._next_probe = now + self._interval


class _IdleCores:
    """Average number of idle CPUs between calls of :meth:`since_last` (Linux ``/proc/stat``).

    Where the file cannot be read, :meth:`since_last` returns infinity (no evidence either way).
    """

    def __init__(self) -> None:
        self._last = self._read()

    @staticmethod
    def _read() -> tuple[float, int] | None:
        try:
            with open("/proc/stat", "rb") as f:
                fields = f.readline().split()
        except OSError:
            return None
        if len(fields) < 6 or fields[0] != b"cpu":
            return None
        return time.monotonic(), int(fields[4]) + int(fields[5])  # idle + iowait ticks

    def since_last(self) -> float:
        """Idle CPUs averaged since the previous call (or construction)."""
        now, last = self._read(), self._last
        self._last = now
        if now is None or last is None or now[0] <= last[0]:
            return float("inf")
        return (now[1] - last[1]) / _TICKS_PER_S / (now[0] - last[0])


try:
    _TICKS_PER_S = float(os.sysconf("SC_CLK_TCK"))
except (AttributeError, ValueError, OSError):  # pragma: no cover - not POSIX
    _TICKS_PER_S = 100.0
