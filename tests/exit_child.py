"""A user's script that exits at a chosen moment of a background compile (for test_exit.py).

Usage: ``python exit_child.py SECONDS [fail] [wait] [compiled]``: makes ``gpuvec/CartPole-v1`` with
``backend="auto"``, resets it, steps it for ``SECONDS`` and returns from the
script (a normal interpreter exit). Prints one line to stdout: the env's backend at exit, the
pid of the background compile's child process then (``-`` if none) and where the compile
stood (:func:`stage`), then the time it returned. With ``fail``, the
background compile's child process finds a broken ``gpuvec_envs`` first on its path and
dies at its start, so the env stays eager (the eager fallback). With ``wait``, exit does
not interrupt the compile's thread (``background.INTERRUPT_AT_EXIT = False``): it waits.
With ``compiled``, it first waits for the compiled step (``wait_compiled``), warming the
inductor cache for later runs.
"""

from __future__ import annotations

import pathlib
import sys
import tempfile
import time

import gymnasium as gym
import torch

import gpuvec_envs  # noqa: F401 - registers the IDs


def stage(pending: object) -> str:
    """Where the background compile stood: ``none`` (not started), ``ok`` or ``failed``
    (its child ended), or, while its thread runs, what the thread was doing (read from its
    stack): ``preparing`` (importing inductor and probing the ISA, ``_prepare_build``),
    ``waiting`` (for its child) or ``starting`` (before its child)."""
    if pending is None:
        return "none"
    if pending.done:
        return "ok" if pending.ok else "failed"
    frame = sys._current_frames().get(pending._thread.ident)
    names = set()
    while frame is not None:
        names.add(frame.f_code.co_name)
        frame = frame.f_back
    if "_prepare_build" in names:
        return "preparing"
    return "waiting" if "wait" in names else "starting"


def main() -> None:
    """Step until the deadline, then print the state and return."""
    seconds = float(sys.argv[1])
    if "wait" in sys.argv[2:]:
        from gpuvec_envs.compiler import background

        background.INTERRUPT_AT_EXIT = False
    if "fail" in sys.argv[2:]:  # the child's path is this one's: it imports the broken one
        broken = pathlib.Path(tempfile.mkdtemp()) / "gpuvec_envs"
        broken.mkdir()
        (broken / "__init__.py").write_text("raise ImportError('broken on purpose')\n")
        sys.path.insert(0, str(broken.parent))
    env = gym.make_vec("gpuvec/CartPole-v1", num_envs=64, backend="auto")
    env.reset(seed=0)
    action = torch.zeros(64, dtype=torch.int64)
    if "compiled" in sys.argv[2:]:
        env.step(action)
        env.unwrapped.wait_compiled()
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        env.step(action)
    pending = env.unwrapped._step._pending
    child = pending.child_pid if pending is not None else None
    print(env.unwrapped.backend, child if child is not None else "-", stage(pending), flush=True)
    print(f"{time.time():.3f}", flush=True)  # when the script returned


if __name__ == "__main__":
    main()
