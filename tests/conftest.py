"""Settings that every test run starts with."""

from __future__ import annotations

import os
import sys

# Two xdist workers with two OpenMP threads each share two cores: spinning threads then wait
# for threads that are not running (an eager Craftax step 2-3x slower beside a busy core).
# Passive waiting leaves the threads and every result as they are. It is read when torch
# loads its OpenMP runtime, so only before torch is imported.
if "torch" not in sys.modules:
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# The suite compiles the same graphs again and again; with warm start on, envs that tests
# expect to step eagerly first would build at their first call. tests/test_warm_start.py
# turns it on where it is tested.
os.environ.setdefault("GPUVEC_COMPILER", "warm_start=0")


def pytest_runtest_logreport(report) -> None:  # noqa: ANN001 - pytest's TestReport
    """With ``GPUVEC_TEST_FAILURES=PATH``, append each failure's report to PATH at once.

    For runs that may be stopped before pytest's summary (the device check).
    """
    path = os.environ.get("GPUVEC_TEST_FAILURES")
    if path and report.failed:
        with open(path, "a") as f:
            f.write(f"=== {report.nodeid} ({report.when})\n{report.longreprtext[-4000:]}\n\n")
