#!/usr/bin/env bash
# Build a second virtual environment with another torch release and run the compile-path
# and parity tests there. CI keeps the pinned torch only; run this by hand.
#
#   tools/torch_compat.sh            # build (if missing) and test, torch 2.14.1
#   TORCH_VERSION=2.14.1 tools/torch_compat.sh build
#   tools/torch_compat.sh test [PYTEST ARGS...]   # then tools/compile_reports.py
#   tools/torch_compat.sh clean      # delete the venv (several GB)
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_VERSION="${TORCH_VERSION:-2.14.1}"
VENV=".venv-torch${TORCH_VERSION//./}"
action="${1:-all}"
[ $# -gt 0 ] && shift

build() {
    if [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import torch" 2>/dev/null; then
        return
    fi
    python3 -m venv "$VENV"
    # The other pins stay; only torch differs from constraints.txt.
    grep -v '^torch==' constraints.txt > "$VENV/constraints.txt"
    "$VENV/bin/pip" install -q "torch==${TORCH_VERSION}" -c "$VENV/constraints.txt"
    "$VENV/bin/pip" install -q -c "$VENV/constraints.txt" -e ".[test]"
}

run_tests() {
    "$VENV/bin/python" -c "import torch; print('torch', torch.__version__, \
torch.backends.cpu.get_cpu_capability(), 'threads', torch.get_num_threads())"
    # Slow tests are left out unless asked for (``test -m slow``: the last -m wins).
    "$VENV/bin/python" -m pytest -q -p no:cacheprovider -m "not slow" \
        tests/test_compiler.py tests/test_fusion.py tests/test_cpp_schedule.py \
        tests/test_parity.py tests/test_minatar_asterix.py tests/test_minatar_breakout.py \
        tests/test_minatar_freeway.py tests/test_minatar_seaquest.py \
        tests/test_minatar_space_invaders.py "$@"
    "$VENV/bin/python" tools/compile_reports.py
}

case "$action" in
    build) build ;;
    test) run_tests "$@" ;;
    all) build && run_tests "$@" ;;
    clean) rm -rf "$VENV" ;;
    *) echo "usage: $0 [all|build|test|clean] [pytest args]" >&2; exit 2 ;;
esac
