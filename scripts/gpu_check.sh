#!/usr/bin/env bash
# Runs on the GPU machine (through the device tool, carrying gpu-bundle/,
# which scripts/build_gpu_bundle.sh makes here first). Stages, each within
# one 10-minute device call; logs and JSON go to $OUT (or ./gpu-check-out):
#
#   scripts/gpu_check.sh tests    # the bundle starts; GPU tests; compute-sanitizer memcheck on them
#   scripts/gpu_check.sh models   # the eight models, --target cuda, fp32 vs ONNX Runtime (batch 1)
#   scripts/gpu_check.sh bf16     # the same at --precision bf16: relative L2 vs the fp32 reference
#   scripts/gpu_check.sh bench [gpu_models.py options]   # bench/gpu_models.py (tessel vs torch)
#
# Kernels are cached in $TESSEL_CACHE_DIR (default /tmp/tessel-cache), models
# materialized into /tmp/tessel-models, so later stages of one warm machine
# reuse both.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
out="${OUT:-$here/gpu-check-out}"
mkdir -p "$out"
export TESSEL_CACHE_DIR="${TESSEL_CACHE_DIR:-/tmp/tessel-cache}"
models=/tmp/tessel-models
bin=gpu-bundle/tessel
stage="${1:-tests}"
shift || true

case "$stage" in
  tests)
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/device.txt"
    $bin --version || exit 1
    gpu-bundle/tessel_gpu_tests 2>&1 | tee "$out/gpu_tests.log" | tail -40
    status=${PIPESTATUS[0]}
    compute-sanitizer --tool memcheck gpu-bundle/tessel_gpu_tests 2>&1 | tee "$out/memcheck.log" | tail -5
    exit $((status || PIPESTATUS[0]))
    ;;
  models)
    python3 tools/compare_models.py --tessel $bin --models-dir gpu-bundle/models --out $models \
      --target cuda --require-compiled --json-out "$out/models_cuda_fp32.json" "$@" 2>&1 | tee "$out/models_cuda_fp32.log"
    exit "${PIPESTATUS[0]}"
    ;;
  bf16)
    python3 tools/check_precision.py --tessel $bin --models-dir gpu-bundle/models --out $models \
      --target cuda --precision bf16 "$@" 2>&1 | tee "$out/models_cuda_bf16.log"
    exit "${PIPESTATUS[0]}"
    ;;
  bench)
    python3 bench/gpu_models.py --tessel $bin --models-dir gpu-bundle/models --out $models \
      --json-out "$out/gpu_bench.jsonl" "$@" 2>&1 | tee -a "$out/gpu_bench.log"
    exit "${PIPESTATUS[0]}"
    ;;
  *)
    echo "usage: scripts/gpu_check.sh tests|models|bf16|bench [options]" >&2
    exit 2
    ;;
esac
