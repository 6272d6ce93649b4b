#!/usr/bin/env bash
# The device check: every CUDA test, then the GPU benchmark against gymnax and navix.
#
# On a machine with an NVIDIA GPU, from the repository root:
#
#   tools/gpu_check.sh [OUT_DIR]     # default: $OUT, else bench_out/
#
# writes to OUT_DIR: nvidia-smi.txt, cuda_tests.log (pytest -m cuda: every CUDA test, one
# ID per env class or more), cuda_vs_cpu.txt (test_reproducibility's largest |CPU - CUDA|
# per env and dtype), cuda_diag.log (tools/cuda_diag.py: the lava worlds and Breakout
# eager, compiled and graphed, against the CPU step by step), gpu.json (python -m
# gpuvec_envs.bench --suite gpu), bench.log, prewarm.log (the benchmark's compiles, run
# beside the tests) and failures.txt. Copy gpu.json to docs/results/gpu.json; `python -m
# gpuvec_envs.bench.report render docs/results/cpu.json` then adds its GPU section to
# BENCHMARKS.md. Last, ppo.json and ppo.log (tools/gpu_ppo.py: PPO on CartPole to a mean
# return of 475, --overlap off and on, and gymnasium's SyncVectorEnv). Then the MuJoCo Warp
# engine (tools/gpu_mujoco_check.py): mujoco_warp_parity.{json,md} (one env step of each of
# gymnasium's eleven v5 models at N=64 against MuJoCo C; run beside the tests, as it mostly
# builds Warp kernels on the CPUs; the benchmark waits for it) and mujoco_warp_bench.{json,md}
# (env-steps/s of HalfCheetah, Hopper, Ant, Humanoid at N=1024..65536, alone and in a torch
# CUDA graph, registered envs, MJX beside them), mujoco_*.log. Without the MuJoCo steps it
# runs in under 8 minutes on an H200 (16 CPUs): the tests take up to 4, the benchmark up to
# 3.5 (timeouts TESTS_S and BENCH_S), the PPO timing what is left of 470 s, at most 90 s;
# the MuJoCo parity can hold the benchmark back until 230 s and its benchmark adds up to
# MUJOCO_S (150 s; MUJOCO_S=0 skips both MuJoCo steps).
#
# Needs torch (CUDA), pytest and pytest-xdist, gymnasium; for the peers jax (CUDA), gymnax
# and navix; for the MuJoCo steps mujoco, mujoco-warp and warp-lang (mujoco-mjx for MJX),
# which the lent image lacks (skipped and logged when they do not import; warp-lang's wheel
# is 142 MiB). A machine without network whose image lacks some (the lent H200's has torch
# 2.11, jax, pytest, pytest-xdist, flax, chex, but no gymnasium, gymnax or navix): run
#
#   tools/gpu_check.sh wheels        # here, with network: pure-Python wheels into .whl/
#
# and carry .whl/ (ignored by git, ~1 MB); this script installs them into /tmp/site first.
set -uo pipefail
cd "$(dirname "$0")/.."
WHEELS="gymnasium==1.4.0 farama-notifications==0.0.6 gymnax==1.0.1 navix==4.0.0"

if [ "${1:-}" = "wheels" ]; then
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
        --implementation cp --platform manylinux_2_28_x86_64 --platform manylinux2014_x86_64 \
        -d .whl $WHEELS
    ls -l .whl
    exit 0
fi

OUT_DIR="${1:-${OUT:-bench_out}}"
mkdir -p "$OUT_DIR"
start=$(date +%s)
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site .whl/*.whl \
        || exit 1
    export PYTHONPATH="/tmp/site${PYTHONPATH:+:$PYTHONPATH}"
fi
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # jax would take 75 % of the GPU's memory
export GPUVEC_COMPILER="${GPUVEC_COMPILER:-warm_start=0}"
{ nvidia-smi; python3 -c "import torch; print('torch', torch.__version__, torch.version.cuda)"; } \
    >"$OUT_DIR/nvidia-smi.txt" 2>&1

# the benchmark's compiles fill inductor's cache meanwhile, in 4 processes of their own
export TORCHINDUCTOR_COMPILE_THREADS=1  # many compiling processes at once: no worker pools
timeout 240 python3 -m gpuvec_envs.bench.suites prewarm 6 >"$OUT_DIR/prewarm.log" 2>&1 &
prewarm=$!

# the MiniGrid lava worlds' compiled CUDA steps, one path per process with synchronous
# kernels (a CUDA error there ended the tests of its worker on the first H200 run)
timeout 200 python3 tools/cuda_diag.py gpuvec/MiniGrid-LavaGapS5-v0 \
    gpuvec/MiniGrid-LavaCrossingS9N1-v0 gpuvec/MinAtar-Breakout-v1 >"$OUT_DIR/cuda_diag.log" 2>&1 &
diag=$!

# the MuJoCo Warp parity check builds every model's Warp kernels meanwhile (~/.cache/warp),
# so the MuJoCo benchmark at the end finds them built
MUJOCO_S="${MUJOCO_S:-150}"
if [ "$MUJOCO_S" -gt 0 ]; then
    timeout 230 python3 tools/gpu_mujoco_check.py --parity-only --out "$OUT_DIR" \
        >"$OUT_DIR/mujoco_parity.log" 2>&1 &
    mujoco_parity=$!
fi

# 1. every CUDA test (files that hold them; test_mujoco_warp.py skips without mujoco_warp); each
# failure's report goes to failures.txt at once, in case the run is stopped
export GPUVEC_TEST_FAILURES="$OUT_DIR/failures.txt"
export GPUVEC_CUDA_VS_CPU="$OUT_DIR/cuda_vs_cpu.txt"
timeout "${TESTS_S:-240}" python3 -m pytest -v -m cuda -n 10 -p no:cacheprovider -rfEs \
    tests/test_cuda.py tests/test_engine.py tests/test_rollout.py tests/test_checkpoint.py \
    tests/test_cleanrl_wrappers.py tests/test_reproducibility.py tests/test_craftax_torch.py \
    tests/test_craftax_pixels.py \
    tests/test_mujoco_warp.py >"$OUT_DIR/cuda_tests.log" 2>&1
tests=$?
grep -E "FAILED|ERROR|passed|failed" "$OUT_DIR/cuda_tests.log" | tail -n 40
echo "[gpu_check] tests exit $tests after $(( $(date +%s) - start )) s"
wait "$diag"
echo "[gpu_check] cuda_diag exit $? after $(( $(date +%s) - start )) s"
cut -c1-300 "$OUT_DIR/cuda_diag.log" | grep '^{' | tail -n 9
wait "$prewarm"
echo "[gpu_check] prewarm exit $? after $(( $(date +%s) - start )) s"
grep -v ": ok$" "$OUT_DIR/prewarm.log" | tail -n 5

if [ "$MUJOCO_S" -gt 0 ]; then  # the GPU to the benchmark alone
    wait "$mujoco_parity"
    echo "[gpu_check] mujoco parity exit $? after $(( $(date +%s) - start )) s"
    grep -E "^\| |MuJoCo Warp is not" "$OUT_DIR/mujoco_parity.log" | tail -n 13
fi

# 2. the GPU benchmark: gpuvec, gymnax and navix side by side
timeout "${BENCH_S:-200}" python3 -m gpuvec_envs.bench --suite gpu --min-time 0.6 --repeats 3 \
    --json "$OUT_DIR/gpu.json" >"$OUT_DIR/bench.log" 2>&1
bench=$?
tail -n 5 "$OUT_DIR/bench.log"
python3 -m gpuvec_envs.bench.report gpu-table "$OUT_DIR/gpu.json" 2>&1 | tee "$OUT_DIR/gpu_table.md"
echo "[gpu_check] bench exit $bench after $(( $(date +%s) - start )) s"

# 3. PPO on CartPole to a mean return of 475 (tools/gpu_ppo.py: gpuvec with --overlap off
# and on, gymnasium's SyncVectorEnv capped), alone on the GPU after the benchmark: at most
# 90 s, fewer if the steps above left less of the 8 minutes (470 s), none below 30 s
ppo_s=$(( 470 - ($(date +%s) - start) ))
[ "$ppo_s" -gt 90 ] && ppo_s=90
if [ "$ppo_s" -ge 30 ]; then
    timeout "$ppo_s" python3 tools/gpu_ppo.py "$OUT_DIR/ppo.json" --budget-s $(( ppo_s - 8 )) \
        >"$OUT_DIR/ppo.log" 2>&1
    echo "[gpu_check] ppo exit $? after $(( $(date +%s) - start )) s"
    grep -E "reached|stopped|overlap|Error" "$OUT_DIR/ppo.log" | tail -n 8
else
    echo "[gpu_check] ppo skipped: ${ppo_s} s left of 470" | tee "$OUT_DIR/ppo.log"
fi
# 4. MuJoCo Warp env-steps/s (its parity ran above, beside the tests), alone on the GPU
if [ "$MUJOCO_S" -gt 0 ]; then
    timeout "$MUJOCO_S" python3 tools/gpu_mujoco_check.py --bench-only --out "$OUT_DIR" \
        >"$OUT_DIR/mujoco_bench.log" 2>&1
    echo "[gpu_check] mujoco bench exit $? after $(( $(date +%s) - start )) s"
    grep -E "^\| |MuJoCo Warp is not" "$OUT_DIR/mujoco_bench.log" | tail -n 40
fi
[ "$tests" = 0 ] && [ "$bench" = 0 ]
