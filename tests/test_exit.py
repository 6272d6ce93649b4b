"""A script that exits while a background compile is under way exits cleanly.

Each run is a fresh interpreter (``exit_child.py``) that makes ``gpuvec/CartPole-v1`` with
``backend="auto"``, steps it and returns at a chosen moment of the compile (in the heavy
test, at random moments, two runs at a time so that each keeps the other's cores busy):
before the
background compile starts, while its child process compiles (the parent's compile thread
waiting for it or preparing the build: importing inductor, probing the ISA), after the
child ended (the thread still preparing the build; or the switch to the compiled call
due), after a failed compile (the eager fallback), and once the step runs compiled. The
parent's build of the compiled call from the warm cache runs inside a ``step`` call, on
the caller's thread, so a script that returns never exits during it. Every run must exit
with status 0, print no "terminate called" (a C++ abort at interpreter exit) and leave no
process behind (each run is its own session; a process of that session alive after the
exit is a stray).
"""

from __future__ import annotations

import collections
import concurrent.futures
import os
import pathlib
import random
import shutil
import subprocess
import sys
import time

import pytest

CHILD = pathlib.Path(__file__).with_name("exit_child.py")
ROOT = CHILD.parents[1]

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="finds strays by session in /proc"
)


def session_processes(sid: int) -> list[str]:
    """Command lines of the live processes of session ``sid``."""
    found = []
    for stat in pathlib.Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid and fields[0] != "Z":
                cmd = (stat.parent / "cmdline").read_bytes().replace(b"\0", b" ")
                found.append(f"{stat.parent.name}: {cmd.decode(errors='replace')[:120]}")
        except (OSError, IndexError, ValueError):
            continue  # gone meanwhile
    return found


def run_exit(delay: float, cache: pathlib.Path, *flags: str) -> dict:
    """One fresh interpreter that exits after ``delay`` s of steps; what happened.

    ``flags``: ``"fail"`` (its background compile fails), ``"wait"`` (exit waits for the
    compile's thread instead of interrupting it); see ``exit_child.py``.
    """
    env = dict(os.environ, TORCHINDUCTOR_CACHE_DIR=str(cache), OMP_NUM_THREADS="1")
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen(
        [sys.executable, str(CHILD), f"{delay:.3f}", *flags],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=cache.parent,  # not the checkout: `python -m` puts the cwd first on the path
        start_new_session=True,  # its session id is its pid: its descendants are found
    )
    try:
        out, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    ended = time.time()
    strays = session_processes(proc.pid)
    state = out.decode().split()
    return {
        "delay": delay,
        "status": proc.returncode,
        "backend": state[0] if state else "?",
        "child": len(state) > 1 and state[1] != "-",
        "build": state[2] if len(state) > 2 else "?",
        # from the script's return to the process's end (the interpreter's exit)
        "exit_s": ended - float(state[3]) if len(state) > 3 else float("nan"),
        "terminate": "terminate called" in err.decode(errors="replace"),
        "strays": strays,
        "stderr": err.decode(errors="replace")[-2000:],
    }


def moment(r: dict) -> str:
    """Where the compile stood when the run exited (see ``exit_child.stage``)."""
    if r["backend"] == "compile":
        return "compiled"
    where = "child compiling" if r["child"] else "no child"
    return {
        "none": "compile not started",
        "starting": f"{where}, thread starting",
        "waiting": f"{where}, thread waiting for it",
        # the thread imports inductor and probes the ISA: the moment an unstopped thread
        # aborts the exit
        "preparing": f"{where}, thread preparing the build",
        "failed": "eager fallback (compile failed)",
        "ok": "cache warm, switch due",
    }.get(r["build"], f"{where}, build {r['build']}")


def run_exits(
    tmp_path: pathlib.Path,
    delays: list[tuple[float, str]],
    parallel: int = 1,
) -> list[dict]:
    """Runs at ``delays`` (seconds, cache), ``parallel`` at a time.

    The cache is ``"fresh"`` (an empty inductor cache of its own: the compile starts and
    its child compiles for tens of seconds), ``"warm"`` (a cache a first run filled and
    marked warm: the step compiles from it at the first call), ``"unmarked"`` (a copy of
    that cache without gpuvec's warm marker: a short child compile that hits the cache,
    then the switch), ``"fail"`` (a fresh one, and the child compile fails at its start:
    the env stays eager, with a warning) or ``"wait"`` (a fresh one, and exit waits for
    the compile's thread instead of interrupting it), or ``"after"`` (the warm one, and the
    run first waits for the compiled step: it exits after the switch).
    """
    warm = tmp_path / "warm"
    if any(cache in ("warm", "unmarked", "after") for _, cache in delays):
        first = run_exit(0.0, warm, "compiled")
        assert first["status"] == 0 and first["backend"] == "compile", first
    runs = []
    for i, (delay, cache) in enumerate(delays):
        folder = warm if cache in ("warm", "after") else tmp_path / f"run{i}"
        if cache == "unmarked":
            shutil.copytree(warm, folder, ignore=shutil.ignore_patterns("gpuvec_warm"))
        flags = {"fail": ["fail"], "wait": ["wait"], "after": ["compiled"]}.get(cache, [])
        runs.append((delay, folder, *flags))
    with concurrent.futures.ThreadPoolExecutor(parallel) as pool:
        results = list(pool.map(lambda run: run_exit(*run), runs))
    print(f"\n{len(results)} exits (delay, cache, exit status, state at exit):")
    for r, (_, cache) in zip(results, delays, strict=True):
        print(
            f"  {r['delay']:6.2f} s {cache:8} status {r['status']}, exit took "
            f"{r['exit_s']:5.2f} s, {moment(r)}"
        )
    counts = collections.Counter(moment(r) for r in results)
    print(
        "  moments:", dict(counts), " statuses:", collections.Counter(r["status"] for r in results)
    )
    print(f"  load average at the end: {os.getloadavg()[0]:.1f} (1 min)")
    for r in results:
        assert r["status"] == 0 and not r["terminate"], r
        assert not r["strays"], r
    return results


def test_exit_during_a_background_compile_is_clean(tmp_path: pathlib.Path) -> None:
    """Three exits: before the compile starts, while its child compiles, and with a child
    that failed at its start (the build's thread then prepares the build, importing
    inductor: the moment an unstopped thread would abort the exit)."""
    delays = [(0.0, "fresh"), (2.0, "fresh"), (3.0, "fail")]
    results = run_exits(tmp_path, delays)
    assert any(r["child"] for r in results)  # at least one exit with the compile under way


@pytest.mark.heavy
def test_exits_at_random_moments_of_a_compile_are_clean(tmp_path: pathlib.Path) -> None:
    """46 exits at random moments, two at a time: each run steps and compiles beside the
    other's, so every exit happens with the cores busy (see :func:`run_exits` for the caches):
    14 with a fresh cache, 4 with a warm one, 14 with an unmarked copy of it (the child's
    short compile and the switch), 8 whose compile fails (the eager fallback; the thread
    then imports inductor), 4 without the interrupt of the compile's thread (exit waits
    for it), 2 after the switch to the compiled step. ``GPUVEC_EXIT_SEED`` picks other
    moments."""
    rng = random.Random(int(os.environ.get("GPUVEC_EXIT_SEED", "0")))
    delays = [(rng.uniform(0.0, 8.0), "fresh") for _ in range(14)]
    delays += [(rng.uniform(0.0, 3.0), "warm") for _ in range(4)]
    delays += [(rng.uniform(0.0, 16.0), "unmarked") for _ in range(14)]
    delays += [(rng.uniform(0.0, 6.0), "fail") for _ in range(8)]
    delays += [(rng.uniform(0.0, 4.0), "wait") for _ in range(4)]
    delays += [(rng.uniform(0.0, 2.0), "after") for _ in range(2)]
    rng.shuffle(delays)
    results = run_exits(tmp_path, delays, parallel=2)
    seen = {moment(r) for r in results}
    assert "compiled" in seen and any(m.startswith("child compiling") for m in seen), seen
