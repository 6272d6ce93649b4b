#!/usr/bin/env bash
# The test environment in .venv: the package with the [test] tools, the MuJoCo engines
# ([mujoco]) and the references the parity tests run against (jax + craftax, [craftax]),
# every version pinned by constraints.txt. craftax is installed without its dependencies:
# it asks for pygame, whose files pygame-ce (minigrid's) would have overwritten.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q -c constraints.txt -e ".[test,mujoco,craftax]"
.venv/bin/pip install -q --no-deps -c constraints.txt craftax==1.6.1
