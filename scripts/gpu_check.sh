#!/usr/bin/env bash
# Runs on the GPU machine (through the device tool, carrying gpu-bundle/,
# which scripts/build_gpu_bundle.sh makes here first). Stages, each meant to
# fit one 10-minute device call; logs and JSON go to $OUT (or ./gpu-check-out):
#
#   scripts/gpu_check.sh tests    # the bundle starts; GPU tests; compute-sanitizer memcheck (all) and racecheck (GEMM, reductions)
#   scripts/gpu_check.sh models   # the eight models, --target cuda, fp32 vs ONNX Runtime (batch 1)
#   scripts/gpu_check.sh bf16     # the same at --precision bf16: relative L2 vs the fp32 reference
#   scripts/gpu_check.sh python   # the Python package on CUDA tensors: tests/python/test_cuda.py, overhead per call
#   scripts/gpu_check.sh deploy   # CUDA artifacts through the C API: tests/deploy/test_deploy.py --target cuda
#                                 # (c_app, cpp_app against the bundle's runtime), bench/artifact_load.py cold starts
#   scripts/gpu_check.sh torch -- --only bert          # bench/torch_compile_gpu.py: torch.compile tessel vs Inductor
#   scripts/gpu_check.sh bench -- --only resnet50:1   # bench/gpu_models.py (tessel vs torch)
#   scripts/gpu_check.sh kernels -- --only attention  # bench/gpu_kernels.py (GEMM 4096/8192, attention: tessel vs torch)
#   scripts/gpu_check.sh tune -- --only bert_base:16  # bench/gpu_tune.py: tessel tune --target cuda (ResNet-50 b32,
#                                 # BERT b16, GPT-2 b16, bf16; TUNE_BUDGET a model, default 100s) into $OUT/tuning.db,
#                                 # then bench default vs tuned, 3 alternating pairs; summary $OUT/tune.json
#   scripts/gpu_check.sh models bf16                   # several stages in one call
#   scripts/gpu_check.sh ncu -- bert_base.ts17:16:14 resnet50.ts17:32:0:'k(1|46)_'
#                                 # Nsight Compute metrics (time, occupancy, tensor-pipe use,
#                                 # warp stall reasons) of MODEL at batch B (bf16): the first
#                                 # COUNT kernel launches (0: all) whose name matches REGEX;
#                                 # MODEL kernel/NAME is bench/gpu_kernels.py's NAME (kernel/attention:1:1)
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
# tessel_gpu_tests links the runtime library (its C API tests), installed in the bundle.
export LD_LIBRARY_PATH="$here/gpu-bundle/runtime/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
models=/tmp/tessel-models
bin=gpu-bundle/tessel
run_stage() {
  local stage="$1"
  shift
  case "$stage" in
    tests)
      nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/device.txt"
      $bin --version || return 1
      gpu-bundle/tessel_gpu_tests 2>&1 | tee "$out/gpu_tests.log" | tail -40
      local status=${PIPESTATUS[0]}
      # The out-of-memory test's failed cuMemAlloc is the point of that test:
      # memcheck runs it with API-error reports off, everything else with them on.
      compute-sanitizer --tool memcheck --error-exitcode 1 gpu-bundle/tessel_gpu_tests \
        --gtest_filter='-*OutOfMemory*' 2>&1 | tee "$out/memcheck.log" | tail -5
      status=$((status || PIPESTATUS[0]))
      compute-sanitizer --tool memcheck --error-exitcode 1 --report-api-errors no gpu-bundle/tessel_gpu_tests \
        --gtest_filter='*OutOfMemory*' 2>&1 | tee -a "$out/memcheck.log" | tail -5
      status=$((status || PIPESTATUS[0]))
      # Shared-memory hazards of the GEMM kernels (the cp.async stages, the
      # double buffer), flash attention (its two K/V buffers) and the row
      # reductions.
      compute-sanitizer --tool racecheck --error-exitcode 1 gpu-bundle/tessel_gpu_tests \
        --gtest_filter='GpuMma.*:GpuFlash.*:GpuKernels.RowReductions*' 2>&1 | tee "$out/racecheck.log" | tail -5
      return $((status || PIPESTATUS[0]))
      ;;
    models)
      python3 tools/compare_models.py --tessel $bin --models-dir gpu-bundle/models --out $models \
        --target cuda --require-compiled --json-out "$out/models_cuda_fp32.json" "$@" 2>&1 | tee "$out/models_cuda_fp32.log"
      return "${PIPESTATUS[0]}"
      ;;
    bf16)
      # PyTorch's own bf16 error on the same weights (onnx2torch, carried as a wheel).
      local torch_ref=()
      if ls gpu-bundle/wheels/*.whl >/dev/null 2>&1 &&
        python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/tessel-site gpu-bundle/wheels/*.whl; then
        export PYTHONPATH=/tmp/tessel-site${PYTHONPATH:+:$PYTHONPATH}
        torch_ref=(--torch-reference)
      fi
      python3 tools/check_precision.py --tessel $bin --models-dir gpu-bundle/models --out $models \
        --target cuda --precision bf16 "${torch_ref[@]}" --json-out "$out/models_cuda_bf16.json" "$@" 2>&1 |
        tee "$out/models_cuda_bf16.log"
      return "${PIPESTATUS[0]}"
      ;;
    python)
      # The package on CUDA tensors (tests/python/test_cuda.py) and its overhead
      # per call over the CLI's (bench/python_overhead.py --target cuda).
      cp gpu-bundle/python/* python/tessel/ || return 1
      if ! python3 -c "import pytest" 2>/dev/null; then
        python3 -m pip install -q --no-index --no-compile --target /tmp/tessel-pytest gpu-bundle/pywheels/*.whl || return 1
        export PYTHONPATH=/tmp/tessel-pytest${PYTHONPATH:+:$PYTHONPATH}
      fi
      export PYTHONPATH=$here/python:$here/tests/python${PYTHONPATH:+:$PYTHONPATH}
      python3 -c "import sys, tessel; print('tessel', tessel.__version__, 'on Python', sys.version)" || return 1
      TESSEL_REQUIRE_TORCH=1 python3 -m pytest -q -rs -p no:cacheprovider tests/python/test_cuda.py "$@" 2>&1 |
        tee "$out/test_cuda.log" | tail -40
      local st=${PIPESTATUS[0]}
      python3 bench/python_overhead.py --tessel $bin --target cuda --rounds 3 2>&1 | tee "$out/python_overhead_cuda.log"
      return $((st || PIPESTATUS[0]))
      ;;
    torch)
      # torch.compile(backend="tessel") against Inductor reduce-overhead, bf16 (bench/torch_compile_gpu.py).
      cp gpu-bundle/python/* python/tessel/ || return 1
      PYTHONPATH=$here/python${PYTHONPATH:+:$PYTHONPATH} python3 bench/torch_compile_gpu.py \
        --json "$out/torch_compile_gpu.json" "$@" 2>&1 | tee "$out/torch_compile_gpu.log"
      return "${PIPESTATUS[0]}"
      ;;
    bench)
      python3 bench/gpu_models.py --tessel $bin --models-dir gpu-bundle/models --out $models \
        --json-out "$out/gpu_bench.jsonl" "$@" 2>&1 | tee -a "$out/gpu_bench.log"
      return "${PIPESTATUS[0]}"
      ;;
    kernels)
      python3 bench/gpu_kernels.py --tessel $bin --out /tmp/tessel-kernels \
        --json-out "$out/gpu_kernels.jsonl" "$@" 2>&1 | tee -a "$out/gpu_kernels.log"
      return "${PIPESTATUS[0]}"
      ;;
    tune)
      # About 2.5 minutes a model at the default budget: the three fit one call.
      python3 bench/gpu_tune.py --tessel $bin --models-dir gpu-bundle/models --out $models --db "$out/tuning.db" \
        --budget "${TUNE_BUDGET:-100s}" --json-out "$out/tune.json" "$@" 2>&1 | tee -a "$out/gpu_tune.log"
      return "${PIPESTATUS[0]}"
      ;;
    ncu)
      local metrics=gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread
      metrics+=,launch__shared_mem_per_block_dynamic,sm__warps_active.avg.pct_of_peak_sustained_active
      metrics+=,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active
      metrics+=,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed
      metrics+=,smsp__inst_executed.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum
      local r
      for r in barrier long_scoreboard short_scoreboard mio_throttle math_pipe_throttle wait not_selected \
        lg_throttle no_instruction dispatch_stall branch_resolving; do
        metrics+=,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio
      done
      local spec st=0
      for spec in "$@"; do
        local model batch count regex
        IFS=: read -r model batch count regex <<<"$spec"
        local sel=() dims=() path
        [ "${count:-0}" -gt 0 ] && sel+=(--launch-count "$count")
        [ -n "${regex:-}" ] && sel+=(--kernel-name "regex:$regex")
        case "$model" in
          kernel/*)  # a model of bench/gpu_kernels.py (constant shapes): kernel/attention
            path=/tmp/tessel-kernels/${model#kernel/}.onnx
            python3 bench/gpu_kernels.py --models-only --out /tmp/tessel-kernels --only "${model#kernel/}" \
              >/dev/null || { st=1; continue; }
            model=${model#kernel/} ;;
          *)
            python3 tools/compare_models.py --models-dir gpu-bundle/models --out $models --models "$model" \
              --materialize-only >/dev/null || { st=1; continue; }
            path=$models/$model.onnx
            dims=(--dim "batch=${batch:-1}")
            case "$model" in bert* | gpt2* | llama*) dims+=(--dim seq=128) ;; esac ;;
        esac
        ncu --csv --metrics "$metrics" "${sel[@]}" $bin bench "$path" --target cuda --precision bf16 \
          "${dims[@]}" --warmup 0 --iters 1 >"$out/ncu_${model}_b${batch}.csv" 2>"$out/ncu_${model}_b${batch}.err" || st=1
        tail -3 "$out/ncu_${model}_b${batch}.err"
      done
      return $st
      ;;
    deploy)
      python3 tools/compare_models.py --models-dir gpu-bundle/models --out $models \
        --models resnet18.ts17,resnet50.ts17,bert_base.ts17 --materialize-only >/dev/null || return 1
      python3 tests/deploy/test_deploy.py --prefix gpu-bundle/runtime --tessel $bin --target cuda --models $models \
        2>&1 | tee "$out/deploy.log" | tail -25
      local st=${PIPESTATUS[0]}
      local app=/tmp/tessel-c-app
      cmake -S examples/c_app -B $app -DCMAKE_PREFIX_PATH="$here/gpu-bundle/runtime" -DCMAKE_BUILD_TYPE=Release >/dev/null &&
        cmake --build $app >/dev/null || return 1
      for p in "" bf16; do
        python3 bench/artifact_load.py --tessel $bin --c-app $app/c_app --models-dir $models --target cuda \
          ${p:+--precision $p} --models resnet50.ts17,bert_base.ts17 --runs "${RUNS:-5}" "$@" 2>&1 |
          tee -a "$out/artifact_load_cuda.log"
        st=$((st || PIPESTATUS[0]))
      done
      return $st
      ;;
    *)
      echo "usage: scripts/gpu_check.sh STAGE... [-- options for the last stage]; stages: tests models bf16 python deploy torch bench kernels tune ncu" >&2
      return 2
      ;;
  esac
}

# Stages run in order (one machine start, models materialized once);
# options after -- go to the last stage.
stages=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do stages+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
[ ${#stages[@]} -gt 0 ] || stages=(tests)
status=0
for i in "${!stages[@]}"; do
  if [ "$i" -eq $((${#stages[@]} - 1)) ]; then run_stage "${stages[$i]}" "$@" || status=1
  else run_stage "${stages[$i]}" || status=1; fi
done
exit $status
