#!/usr/bin/env bash
# Runs one libFuzzer target (or every one, `all`) for SECONDS from its corpus
# and prints how many inputs it executed. Builds the instrumented tree first
# when needed (clang-19, ASan + UBSan, no LLVM; fuzz/CMakeLists.txt).
#
#   scripts/fuzz.sh TARGET [--time SECONDS] [--jobs N] [--build-dir DIR] [--no-build]
#
# TARGET: graph_parser, loop_parser, schedule_parser, tuning_db,
# onnx_loader, onnx_structured, artifact_loader (the fuzz_ prefix may be
# given), or all (each in turn, SECONDS each: the ctest fuzz_smoke); `tree`
# only configures the build tree (scripts/test.sh --sanitize=address,undefined
# builds its tests there).
# --jobs N runs N fuzzer processes on the one corpus (libFuzzer -fork=N);
# --no-build runs the binaries as they are (while another build owns the tree).
#
# Corpus: the committed seeds in fuzz/corpus/fuzz_TARGET (read only;
# onnx_structured shares onnx_loader's) and a working
# corpus in BUILD_DIR/corpus/TARGET that keeps what the runs find. The ONNX
# targets also start from the node-test models (TESSEL_NODE_TESTS, default
# build/node_tests) and the artifact loader from artifacts that TESSEL_BIN
# (default build/bin/tessel) compiles from a few of them. A crash, a sanitizer
# report, a round-trip mismatch, a leak, a timeout or an out-of-memory exits
# non-zero, with the reproducer in BUILD_DIR/artifacts/ and its report shown.
#
# Environment: TESSEL_FUZZ_BUILD_DIR (default build/fuzz), CXX_FUZZ (default
# clang++-19), TESSEL_FUZZ_JOBS (build parallelism, default 2),
# TESSEL_BUILD_LOCK (a file to flock around the build, when set).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

all_targets=(graph_parser loop_parser schedule_parser tuning_db onnx_loader onnx_structured artifact_loader)
usage() { echo "usage: scripts/fuzz.sh TARGET|all [--time SECONDS] [--jobs N] [--build-dir DIR] [--no-build]" >&2; exit 2; }
[ $# -ge 1 ] || usage
target="${1#fuzz_}"; shift
secs=60 jobs=1 bdir="${TESSEL_FUZZ_BUILD_DIR:-build/fuzz}" build=1
while [ $# -gt 0 ]; do
  case "$1" in
    --time) secs="${2:?}"; shift 2 ;;
    --jobs) jobs="${2:?}"; shift 2 ;;
    --build-dir) bdir="${2:?}"; shift 2 ;;
    --no-build) build=0; shift ;;
    *) usage ;;
  esac
done
if [ "$target" = all ] || [ "$target" = tree ]; then
  targets=("${all_targets[@]}")
else
  [[ " ${all_targets[*]} " == *" $target "* ]] || { echo "unknown fuzz target '$target' (one of: ${all_targets[*]}, all)" >&2; exit 2; }
  targets=("$target")
fi

locked() { if [ -n "${TESSEL_BUILD_LOCK:-}" ]; then flock "$TESSEL_BUILD_LOCK" "$@"; else "$@"; fi; }
if [ "$build" = 1 ] && [ ! -f "$bdir/build.ninja" ]; then
  # Tests and LLVM on: the same tree runs the unit and lit suites under the
  # sanitizers (fuzz/CMakeLists.txt); the fuzz targets do not use LLVM.
  locked cmake -S . -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="${CXX_FUZZ:-clang++-19}" \
    -DTESSEL_FUZZ=ON -DTESSEL_BUILD_TESTS=ON -DTESSEL_WITH_LLVM=ON -DTESSEL_PYTHON=OFF \
    -DPython3_EXECUTABLE="$(command -v "${PYTHON:-python3}")" >/dev/null
fi
[ "$target" = tree ] && exit 0
if [ "$build" = 1 ]; then
  mkdir -p "$bdir/logs"
  if ! locked ninja -C "$bdir" -j"${TESSEL_FUZZ_JOBS:-2}" "${targets[@]/#/fuzz_}" >"$bdir/logs/build.log" 2>&1; then
    tail -40 "$bdir/logs/build.log" >&2
    echo "building the fuzz targets failed; the log: $bdir/logs/build.log" >&2
    exit 1
  fi
fi
for t in "${targets[@]}"; do [ -x "$bdir/bin/fuzz_$t" ] || { echo "fuzz_$t is not built" >&2; exit 1; }; done

node_tests="${TESSEL_NODE_TESTS:-build/node_tests}"
# Extra seed folders of a target, made once in the build tree.
extra_seeds() {
  case "$1" in
    onnx_loader | onnx_structured)
      local d="$bdir/seeds/onnx"
      if [ ! -d "$d" ] && [ -d "$node_tests" ]; then
        mkdir -p "$d"
        for m in "$node_tests"/*/model.onnx; do cp "$m" "$d/$(basename "$(dirname "$m")").onnx"; done
      fi
      [ -d "$d" ] && echo "$d" ;;
    artifact_loader)
      local d="$bdir/seeds/artifact" tessel="${TESSEL_BIN:-build/bin/tessel}"
      if [ ! -d "$d" ] && [ -x "$tessel" ]; then
        mkdir -p "$d"
        for c in test_add test_relu test_matmul_2d test_softmax_axis_1 test_conv_with_strides_padding test_gather_0; do
          m="$node_tests/$c/model.onnx"
          [ -f "$m" ] && "$tessel" compile "$m" -o "$d/$c.tsl" >/dev/null 2>&1 || true
        done
      fi
      [ -d "$d" ] && echo "$d" ;;
  esac
  return 0
}

# Seconds one input may take before libFuzzer calls it a hang. The
# structured ONNX target compiles every input: the GridSample node test with
# reflection padding lowers to a 240 KB loop-IR statement (its coordinate
# expression repeated at every use), 1 s in the normal build and about 20 s
# under ASan with coverage (docs/testing.md, findings).
input_timeout() {
  case "$1" in
    onnx_structured) echo 60 ;;
    *) echo 10 ;;
  esac
}

max_len() {
  case "$1" in
    onnx_loader | onnx_structured) echo 65536 ;;
    artifact_loader) echo 262144 ;;
    *) echo 16384 ;;
  esac
}

status=0
for t in "${targets[@]}"; do
  corpus="$bdir/corpus/$t" log="$bdir/logs/$t.$$.log"  # per run: two runs of a target may overlap
  mkdir -p "$corpus" "$bdir/artifacts" "$bdir/logs"
  dirs=("$corpus")
  committed="fuzz/corpus/fuzz_$t"
  [ "$t" = onnx_structured ] && committed=fuzz/corpus/fuzz_onnx_loader  # the same models, mutated by structure
  [ -d "$committed" ] && dirs+=("$committed")
  extra="$(extra_seeds "$t")"
  [ -n "$extra" ] && dirs+=("$extra")
  fork=()
  [ "$jobs" -gt 1 ] && fork=(-fork="$jobs" -ignore_crashes=0)
  start=$(date +%s)
  rc=0
  # -close_fd_mask=2: the targets' own warnings (a damaged tuning database
  # says so on stderr) stay out of the log; libFuzzer and the sanitizers
  # still report there.
  "$bdir/bin/fuzz_$t" -max_total_time="$secs" -timeout="$(input_timeout "$t")" -rss_limit_mb=2048 -max_len="$(max_len "$t")" \
    -close_fd_mask=2 -print_final_stats=1 -artifact_prefix="$bdir/artifacts/$t-" "${fork[@]}" "${dirs[@]}" \
    >"$log" 2>&1 || rc=$?
  execs=$(grep -ao 'stat::number_of_executed_units: [0-9]*' "$log" | awk '{s += $2} END {print s + 0}')
  if [ "$jobs" -gt 1 ]; then  # -fork prints no final stats: the last status line's count
    execs=$(grep -ao '^#[0-9]*' "$log" | tail -1 | tr -d '#')
  fi
  took=$(( $(date +%s) - start ))
  echo "fuzz_$t: ${execs:-0} execs in ${took} s ($(( ${execs:-0} / (took > 0 ? took : 1) ))/s), corpus $(ls "$corpus" | wc -l) files"
  if [ "$rc" -ne 0 ]; then
    status=1
    echo "fuzz_$t FAILED (exit $rc); the end of $log:" >&2
    tail -40 "$log" >&2
    repro=$(ls -t "$bdir/artifacts/$t-"* 2>/dev/null | head -1 || true)
    if [ -n "$repro" ]; then
      echo "reproducer: $repro; its report without -close_fd_mask:" >&2
      "$bdir/bin/fuzz_$t" "$repro" 2>&1 | tail -40 >&2 || true
    fi
  fi
done
exit $status
