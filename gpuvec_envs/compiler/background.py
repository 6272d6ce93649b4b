"""Compilation off the caller's path (the ``background`` backend): cache warming.

A cold inductor compile takes seconds to minutes, most of it Python. A
:class:`BackgroundBuild` runs a job (any picklable callable; the backend's is
:class:`~gpuvec_envs.compiler.backend.WarmJob`: the function, its bound arguments and
example arguments), pickled with cloudpickle so that classes defined in ``__main__`` and
closures travel too, in a child process, which compiles the same graph and so fills
inductor's on-disk cache, while the caller goes on calling the function eagerly. The
caller then builds the compiled call itself, from the warm cache (a few seconds), on its
own thread: tracing (``make_fx``) patches ``torch.nn.Module.__call__`` process-wide while
it runs, so a trace on another thread would reroute the caller's module calls (a policy's
forward) into the trace. The child is killed by :meth:`BackgroundBuild.cancel`, when the
build is garbage-collected, at interpreter exit, and (from inside) when its parent dies;
on POSIX it leads its own process group, and the whole group is killed (inductor's compile
workers with it).

Interpreter exit: an ``atexit`` handler kills every child, stops the builds' threads and
waits for them (:data:`EXIT_JOIN_S` at most), so that none is still running when Python
finalizes. A daemon thread still alive then is stopped by ``pthread_exit`` as soon as it
needs the GIL, which unwinds its C++ frames; in a frame that must not throw (pybind11's
GIL guards, torch's C++ dispatcher registering operators while the thread imports
inductor) that is ``std::terminate``: "terminate called without an active exception" and
an abort. A thread preparing the build (an import of ~1.4 s, seconds more on a busy
machine) is stopped by an exception raised in it (CPython's
``PyThreadState_SetAsyncExc``, the one trick here, off with :data:`INTERRUPT_AT_EXIT`),
so that exit does not wait for the import; where that cannot be done, exit waits.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
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
#: One child at a time, in the order the builds started: each gets a whole core.
_SLOTS = threading.Semaphore(1)
#: Seconds interpreter exit waits, in all, for the builds' threads once their children
#: are killed (a thread preparing the build finishes the import or probe it is in).
EXIT_JOIN_S = 60.0
#: Whether interpreter exit raises :class:`_Exiting` in the builds' threads (see above).
INTERRUPT_AT_EXIT = True
_POSIX = os.name == "posix"
_log = logging.getLogger(__name__)


class _Exiting(BaseException):
    """Raised in a build's thread at interpreter exit, to stop it at once."""


class BackgroundBuild:
    """A job (any picklable callable) run in a child process, from a thread.

    Attributes:
        ok: Whether the child finished without error (valid once :attr:`done`).
        note: What happened (``"child process: 12.3 s"``, or why it failed).
        seconds: Wall time from the start to the child's end.
    """

    def __init__(self, job: Callable[[], Any]) -> None:
        self.ok = False
        self.note = "pending"
        self.seconds = 0.0
        self._payload = _payload(job)
        if self._payload is None:
            raise TypeError("the job does not pickle")
        self._proc: subprocess.Popen[bytes] | None = None
        self._cancelled = False
        self._done = threading.Event()
        self._lock = threading.Lock()
        _LIVE.add(self)
        self._thread = threading.Thread(target=self._run, name="gpuvec-compile", daemon=True)
        self._thread.start()

    @property
    def done(self) -> bool:
        """Whether the child has finished (successfully or not)."""
        return self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the child has finished (or ``timeout`` s); return :attr:`done`."""
        return self._done.wait(timeout)

    def cancel(self) -> None:
        """Kill the child process (and its process group on POSIX), if any."""
        with self._lock:
            self._cancelled = True
            proc = self._proc
        if proc is None:
            return
        if _POSIX and proc.returncode is None:  # not reaped: its pid is still its group's
            # the whole group: inductor's compile workers would outlive their leader
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
        proc.wait()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the build's thread to end (after :meth:`cancel`: soon); whether it did."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def interrupt(self) -> bool:
        """Raise :class:`_Exiting` in the build's thread (for interpreter exit only).

        The thread stops at its next Python instruction (an import it was in fails, a
        subprocess it waited for is killed). Returns whether the exception was set.
        """
        ident = self._thread.ident
        if ident is None or self._done.is_set() or not self._thread.is_alive():
            return False  # not started, or past its work: it ends by itself
        try:
            import ctypes

            set_async = ctypes.pythonapi.PyThreadState_SetAsyncExc
        except (ImportError, AttributeError):  # not CPython
            return False
        return set_async(ctypes.c_ulong(ident), ctypes.py_object(_Exiting)) == 1

    @property
    def child_pid(self) -> int | None:
        """The pid of the child process while it runs, else None."""
        proc = self._proc
        return proc.pid if proc is not None and proc.poll() is None else None

    def _run(self) -> None:
        start = time.perf_counter()
        try:
            with _SLOTS:
                self.ok, self.note = self._warm(self._payload)
        except BaseException as exc:  # noqa: BLE001 - reported to the caller's thread
            self.ok, self.note = False, f"{type(exc).__name__}: {exc}"
        finally:
            self.seconds = time.perf_counter() - start
            self._done.set()

    def _warm(self, payload: bytes) -> tuple[bool, str]:
        """Run the job in a child process; return (success, a note on how it went)."""
        start = time.perf_counter()
        fd, path = tempfile.mkstemp(prefix="gpuvec-warm-", suffix=".pkl")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(payload)
            env = dict(os.environ)
            env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if isinstance(p, str) and p)
            with tempfile.TemporaryFile() as err:
                with self._lock:
                    if self._cancelled:
                        return False, "cancelled"
                    self._proc = subprocess.Popen(
                        [sys.executable, "-m", "gpuvec_envs.compiler.background", path],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=err,
                        env=env,
                        start_new_session=_POSIX,  # a group of its own: killed as one
                    )
                # while the child compiles: ~2.5 s less to the switch
                _prepare_build(lambda: self._cancelled)
                code = self._proc.wait()
                seconds = time.perf_counter() - start
                if code == 0:
                    return True, f"child process: {seconds:.1f} s"
                if self._cancelled:
                    return False, "cancelled"
                err.seek(0)
                tail = err.read().decode(errors="replace").strip().splitlines()
                last = tail[-1][-_STDERR_TAIL:] if tail else ""
                return False, f"child process failed (exit {code} after {seconds:.1f} s): {last}"
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(path)  # the child removes it once read


def _prepare_build(cancelled: Callable[[], bool]) -> None:
    """Do here, off the caller's thread, what the caller's build would do first.

    The imports (~1.4 s), and inductor's check that the compiler and CPU support the
    vector ISA it will pick (a g++ build and a child Python, cached per process; see
    :mod:`~gpuvec_envs.compiler.passes.isa_probe`). Neither patches any state, so both
    are safe on this thread; a failure is left to the build. Each step is skipped once
    ``cancelled()`` (interpreter exit waits for this thread).
    """
    try:
        if cancelled():
            return
        import torch._inductor.compile_fx  # noqa: F401

        from gpuvec_envs.compiler.passes import isa_probe

        if not cancelled():
            isa_probe.picked_isa()
    except Exception:  # noqa: BLE001, S110 - the caller's build meets it again and reports it
        pass


def _payload(job: Callable[[], Any]) -> bytes | None:
    """``job`` pickled by cloudpickle, or None if it does not pickle."""
    import cloudpickle

    try:
        return cloudpickle.dumps(job)
    except Exception:  # noqa: BLE001 - a lock, a file, ... in the job: no child then
        return None


@atexit.register
def _cancel_all() -> None:
    """At exit: kill every child, stop the builds' threads and wait for them (module doc)."""
    builds = list(_LIVE)
    for build in builds:
        build.cancel()
    deadline = time.monotonic() + EXIT_JOIN_S
    for build in builds:
        if build.join(0.05):
            continue
        if INTERRUPT_AT_EXIT and not build.interrupt():
            _log.debug("gpuvec: could not interrupt a compile thread at exit; waiting for it")
        if not build.join(max(0.0, deadline - time.monotonic())):
            _log.warning("gpuvec: a compile thread was still running at exit")


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
    """Run a pickled job (the child process's whole work)."""
    _exit_with_parent()
    import pickle
    import warnings

    with open(path, "rb") as f:
        job = pickle.load(f)  # noqa: S301 - written by our parent process
    os.unlink(path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        job()


if __name__ == "__main__":
    _child_main(sys.argv[1])
