#!/usr/bin/env bash
# The compile path and the parity tests on every torch release the package supports.
#
# Builds one virtual environment per release (.venv-torch<version>; CUDA builds of torch
# from PyPI run on a machine without a GPU) and runs there: the compiler, fusion, parity
# and MinAtar tests, the host-data test, the CUDA lowering test (every registered ID's step
# and the rollout scan lowered for device "cuda" on fake tensors; skipped with a CPU build)
# and tools/compile_reports.py (every ID compiled on the CPU, none off the fast path).
# CI keeps the pinned torch (constraints.txt); run this by hand.
#
#   tools/torch_compat.sh                 # build (if missing) and test every release below
#   TORCH_VERSIONS=2.11.0 tools/torch_compat.sh test [PYTEST ARGS...]
#   tools/torch_compat.sh build | clean   # clean deletes the venvs (several GB each)
set -uo pipefail
cd "$(dirname "$0")/.."
TORCH_VERSIONS="${TORCH_VERSIONS:-2.11.0 2.13.0 2.14.1}"
action="${1:-all}"
[ $# -gt 0 ] && shift

build() {  # $1: torch version
    local venv=".venv-torch${1//./}"
    if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import torch" 2>/dev/null; then
        return
    fi
    python3 -m venv "$venv"
    # The other pins stay; only torch differs from constraints.txt.
    grep -v '^torch==' constraints.txt > "$venv/constraints.txt"
    "$venv/bin/pip" install -q "torch==$1" -c "$venv/constraints.txt"
    "$venv/bin/pip" install -q -c "$venv/constraints.txt" "torch==$1" -e ".[test]"
}

run_tests() {  # $1: torch version, then pytest arguments
    local venv=".venv-torch${1//./}"
    shift
    "$venv/bin/python" -c "import torch; print('torch', torch.__version__, 'cuda build', \
torch.version.cuda, torch.backends.cpu.get_cpu_capability(), 'threads', torch.get_num_threads())"
    # Slow tests are left out unless asked for (``test -m slow``: the last -m wins).
    "$venv/bin/python" -m pytest -q -p no:cacheprovider -n 2 -m "not slow" \
        tests/test_compiler.py tests/test_fusion.py tests/test_cpp_schedule.py \
        tests/test_parity.py tests/test_minatar_asterix.py tests/test_minatar_breakout.py \
        tests/test_minatar_freeway.py tests/test_minatar_seaquest.py \
        tests/test_minatar_space_invaders.py tests/test_host_data.py \
        tests/test_cuda_lowering.py tests/test_dynamic_batch.py "$@" || return 1
    "$venv/bin/python" tools/compile_reports.py
}

status=0
for version in $TORCH_VERSIONS; do
    echo "== torch $version"
    case "$action" in
        build) build "$version" || status=1 ;;
        test) run_tests "$version" "$@" || status=1 ;;
        all) { build "$version" && run_tests "$version" "$@"; } || status=1 ;;
        clean) rm -rf ".venv-torch${version//./}" ;;
        *) echo "usage: $0 [all|build|test|clean] [pytest args]" >&2; exit 2 ;;
    esac
done
exit "$status"
