"""Compilation off the caller's path (the ``background`` backend).

A :class:`BackgroundBuild` runs a build function on a daemon thread while the caller goes
on (calling the function eagerly). Most of a cold inductor compile is Python that holds
the GIL, and would slow the caller's eager calls for its whole length, so where a
:class:`WarmJob` (the function, its bound arguments and example arguments) pickles, a
child process first compiles the same graph, which fills inductor's on-disk cache; the
thread then builds from the warm cache, which takes seconds. The child is killed by
:meth:`BackgroundBuild.cancel`, when the build is garbage-collected, at interpreter exit,
and (from inside) when its parent process dies.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import pickle
import subprocess
import sys
import tempfile
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

#: Where a child's stderr is cut when its failure is reported.
_STDERR_TAIL = 400
_LIVE: weakref.WeakSet[BackgroundBuild] = weakref.WeakSet()


@dataclasses.dataclass
class WarmJob:
    """What a child process compiles: ``Backend(fn, bound, "compile", ...)(*args)``."""

    fn: Callable[..., Any]
    bound: tuple[Any, ...]
    tag: str
    args: tuple[Any, ...]
    state_first: bool
    options: Any  # CompilerOptions
    threads: int  # torch.get_num_threads() of the parent (inductor's codegen reads it)


class BackgroundBuild:
    """``build()`` on a daemon thread, after an optional child process warms the cache.

    Attributes:
        result: ``build()``'s return value once :attr:`done` (None if it raised).
        error: The exception ``build()`` raised, if any.
        warm_note: What the cache warming did (``"child process: 12.3 s"``, or why there was
            none or it failed).
        seconds: Wall time from the start to the end of ``build()``.
    """

    def __init__(self, build: Callable[[], Any], job: WarmJob | None) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self.warm_note = "no child process"
        self.seconds = 0.0
        self._build = build
        self._payload = _payload(job) if job is not None else None
        if job is not None and self._payload is None:
            self.warm_note = "no child process: the step function or its arguments do not pickle"
        self._proc: subprocess.Popen[bytes] | None = None
        self._cancelled = False
        self._done = threading.Event()
        self._lock = threading.Lock()
        _LIVE.add(self)
        self._thread = threading.Thread(target=self._run, name="gpuvec-compile", daemon=True)
        self._thread.start()

    @property
    def done(self) -> bool:
        """Whether the build has finished (successfully or not)."""
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the build has finished (or ``timeout`` s); return :attr:`done`."""
        return self._done.wait(timeout)

    def cancel(self) -> None:
        """Kill the child process, if any, and skip the in-process build if not begun."""
        with self._lock:
            self._cancelled = True
            proc = self._proc
        if proc is not None and proc.poll() is None:
            proc.kill()
            proc.wait()

    @property
    def child_pid(self) -> int | None:
        """The pid of the child process while it runs (for tests), else None."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def _run(self) -> None:
        start = time.perf_counter()
        try:
            if self._payload is not None:
                self.warm_note = self._warm(self._payload)
            if self._cancelled:
                self.error = RuntimeError("cancelled")
                return
            self.result = self._build()
        except BaseException as exc:  # noqa: BLE001 - reported to the caller's thread
            self.error = exc
        finally:
            self.seconds = time.perf_counter() - start
            self._done.set()

    def _warm(self, payload: bytes) -> str:
        """Compile the job in a child process; return a note on how that went."""
        start = time.perf_counter()
        fd, path = tempfile.mkstemp(prefix="gpuvec-warm-", suffix=".pkl")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if isinstance(p, str) and p)
            env["GPUVEC_WARM_CHILD"] = "1"
            with tempfile.TemporaryFile() as err:
                with self._lock:
                    if self._cancelled:
                        return "cancelled"
                    self._proc = subprocess.Popen(
                        [sys.executable, "-m", "gpuvec_envs.compiler.background", path],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=err,
                        env=env,
                    )
                code = self._proc.wait()
                seconds = time.perf_counter() - start
                if code == 0:
                    return f"child process: {seconds:.1f} s"
                err.seek(0)
                tail = err.read().decode(errors="replace").strip().splitlines()
                last = tail[-1][-_STDERR_TAIL:] if tail else ""
                return f"child process failed (exit {code} after {seconds:.1f} s): {last}"
        finally:
            os.unlink(path)


def _payload(job: WarmJob) -> bytes | None:
    """``job`` pickled, or None if it does not pickle."""
    try:
        return pickle.dumps(job)
    except Exception:  # noqa: BLE001 - closures, local classes, ...: no child then
        return None


@atexit.register
def _cancel_all() -> None:
    for build in list(_LIVE):
        build.cancel()


def _exit_with_parent() -> None:
    """In a child: exit as soon as the parent process is gone."""
    parent = os.getppid()

    def watch() -> None:
        while True:
            time.sleep(0.5)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=watch, daemon=True).start()


def _child_main(path: str) -> None:
    """Compile a pickled :class:`WarmJob` (the child process's whole work)."""
    _exit_with_parent()
    import warnings

    import torch

    from gpuvec_envs.compiler.backend import Backend

    with open(path, "rb") as f:
        job: WarmJob = pickle.load(f)  # noqa: S301 - written by our parent process
    torch.set_num_threads(job.threads)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        backend = Backend(
            job.fn,
            job.bound,
            "compile",
            job.tag,
            state_first=job.state_first,
            compiler=job.options,
        )
        backend(*job.args)


if __name__ == "__main__":
    _child_main(sys.argv[1])
