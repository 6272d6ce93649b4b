#!/usr/bin/env bash
# Every registered ID's step (and the rollout scan) compiled for device "cuda" without a GPU.
#
# Builds .venv-cuda with a CUDA build of torch (it runs on a machine without a GPU; the
# project's CPU pin cannot trace fake CUDA tensors) and the few packages the check needs,
# then runs tests/test_cuda_lowering.py: a lowering error, a fallback or host data copied
# into a step fails it. With --interp it runs tests/test_triton_interpret.py instead: one ID
# per env family's generated CUDA kernels executed under Triton's interpreter on the CPU and
# compared with the CPU step (-rP prints each case's tolerance and largest difference).
# CI runs both after the main suites (.ci/run).
#
#   tools/cuda_lowering.sh [PYTEST ARGS...]           # e.g. -m slow: also SameStep codegen
#   tools/cuda_lowering.sh --interp [PYTEST ARGS...]  # the interpreter suite
#   tools/cuda_lowering.sh --build                    # only build .venv-cuda
set -euo pipefail
cd "$(dirname "$0")/.."
TORCH_VERSION="${CUDA_LOWERING_TORCH:-2.14.1}"
VENV=.venv-cuda
if ! { [ -x "$VENV/bin/python" ] && "$VENV/bin/python" -c "import torch, triton" 2>/dev/null; }; then
    python3 -m venv "$VENV"
    pins=$(grep -E '^(gymnasium|numpy|cloudpickle|pytest|pytest-xdist)==' constraints.txt)
    # shellcheck disable=SC2086
    "$VENV/bin/pip" install -q "torch==$TORCH_VERSION" $pins
    "$VENV/bin/pip" install -q --no-deps -e .
fi
if [ "${1:-}" = "--build" ]; then
    exit 0
fi
if [ "${1:-}" = "--interp" ]; then
    shift
    exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider -n 2 --dist worksteal -m "interp and not slow" -rP \
        tests/test_triton_interpret.py "$@"
fi
exec "$VENV/bin/python" -m pytest -q -p no:cacheprovider -n 2 --dist worksteal -m "not slow" \
    tests/test_cuda_lowering.py "$@"
