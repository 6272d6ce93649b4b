"""Settings that every test run starts with."""

from __future__ import annotations

import os

# The suite compiles the same graphs again and again; with warm start on, envs that tests
# expect to step eagerly first would build at their first call. tests/test_warm_start.py
# turns it on where it is tested.
os.environ.setdefault("GPUVEC_COMPILER", "warm_start=0")
