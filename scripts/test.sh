#!/usr/bin/env bash
# Sets up, builds and runs every test: unit tests, lit tests, the ONNX node
# tests, the model comparisons against ONNX Runtime, the Python package
# (installed into build/pyenv with `pip install .`) and the fuzzer smoke run;
# then the unit and lit suites under ASan+UBSan and the concurrency tests
# under TSan (both below; --no-sanitize leaves them out).
#
#   scripts/test.sh [--no-sanitize] [CTEST ARGS...]
#   scripts/test.sh --sanitize=address,undefined | --sanitize=thread
#
# --sanitize builds into a separate tree and runs only the suites under the
# sanitizers (docs/testing.md says what runs where, and how long):
#   address,undefined  the unit and lit suites, in the fuzz tree (build/fuzz,
#                      whose libraries are already instrumented for the
#                      fuzzers; the fuzz smoke run builds them)
#   thread             the concurrency, runtime API and thread pool tests
#                      (tessel_concurrency_tests; TESSEL_TSAN_FILTER: a gtest
#                      filter over them) in build-tsan, built whole with TSan
# Environment: TESSEL_BUILD_LOCK (a file to flock around the sanitised
# builds, when set), TESSEL_SAN_JOBS (their parallelism, default nproc).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"

sanitize="" no_sanitize=0
args=()
for a in "$@"; do
  case "$a" in
    --sanitize=*) sanitize="${a#--sanitize=}" ;;
    --no-sanitize) no_sanitize=1 ;;
    *) args+=("$a") ;;
  esac
done

locked() { if [ -n "${TESSEL_BUILD_LOCK:-}" ]; then flock "$TESSEL_BUILD_LOCK" "$@"; else "$@"; fi; }
jobs="${TESSEL_SAN_JOBS:-$(nproc)}"

# Builds targets $2... in tree $1, the log in $1/san-logs/build.log.
build_in() {
  local bdir="$1"; shift
  mkdir -p "$bdir/san-logs"
  if ! locked nice -n 5 ninja -C "$bdir" -j"$jobs" "$@" >"$bdir/san-logs/build.log" 2>&1; then
    tail -40 "$bdir/san-logs/build.log" >&2
    echo "the sanitised build failed; the log: $bdir/san-logs/build.log" >&2
    return 1
  fi
}

# Runs test binary $2 of tree $1, the gtests matching filter $3, in $jobs
# processes at once, each a share of the test suites (one process each: the
# sanitizers' start-up is paid once per share). Shares are --gtest_filter
# lists, not GTEST_SHARD_INDEX: tests that run this binary again in a child
# would pass the sharding on to it.
run_unit_shards() {
  local bdir="$1" bin="$2" filter="$3" pids=() rc=0 shares=()
  mkdir -p "$bdir/san-logs"
  local i=0
  for suite in $("$bdir/bin/$bin" --gtest_list_tests --gtest_filter="$filter" | awk '/^[^ ]/ {print $1}' | tr -d .); do
    shares[$((i % jobs))]+="$suite.*:"
    i=$((i + 1))
  done
  local negative=""  # what the filter excludes, kept in every share's
  [[ "$filter" == *-* ]] && negative="-${filter#*-}"
  for ((i = 0; i < jobs; i++)); do
    [ -n "${shares[$i]:-}" ] || continue
    TESSEL_CACHE_DIR="$bdir/kernel-cache" "$bdir/bin/$bin" --gtest_filter="${shares[$i]%:}$negative" --gtest_brief=1 \
      >"$bdir/san-logs/unit.$i.log" 2>&1 &
    pids[$i]=$!
  done
  for ((i = 0; i < jobs; i++)); do
    [ -n "${pids[$i]:-}" ] || continue
    if ! wait "${pids[$i]}"; then
      rc=1
      echo "unit-test share $i failed; the end of $bdir/san-logs/unit.$i.log:" >&2
      tail -60 "$bdir/san-logs/unit.$i.log" >&2
    fi
    grep -E '^\[  (PASSED|SKIPPED|FAILED) ' "$bdir/san-logs/unit.$i.log" | sed "s/^/share $i: /" || true
  done
  return $rc
}

# Left out of the sanitised runs: the gtests that read generated data
# (tests/CMakeLists.txt TESSEL_DATA_GTESTS: they need the main build's
# fixtures) and the emulated tensor-core GEMMs (MmaEmulation: the loop-IR
# evaluator stepping every lane, minutes per test without sanitizers).
data_gtests="IrText.EveryNodeTestModelRoundTrips:OnnxImport.NodeTestModels:PassModelShapes.*:ScheduleModels.*:Bisect.Model*"
left_out="$data_gtests:MmaEmulation.*"
# Tests whose forked children raise SIGSEGV on purpose and expect to see that
# signal: run on their own with ASan's SEGV handler off.
crashing="IsolatedRun.*:TunerIsolation.*"

sanitized_run() {
  local start=$(date +%s)
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" ASAN_OPTIONS="detect_leaks=1:abort_on_error=1"
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
  case "$1" in
    address,undefined | undefined,address)
      local bdir="${TESSEL_SAN_BUILD_DIR:-build/fuzz}"
      TESSEL_FUZZ_BUILD_DIR="$bdir" scripts/fuzz.sh tree
      build_in "$bdir" tessel tessel_unit_tests
      echo "sanitised build (address,undefined) took $(( $(date +%s) - start )) s"
      local rc=0
      start=$(date +%s)
      run_unit_shards "$bdir" tessel_unit_tests "-$left_out:$crashing" || rc=1
      ASAN_OPTIONS="$ASAN_OPTIONS:handle_segv=0" TESSEL_CACHE_DIR="$bdir/kernel-cache" \
        "$bdir/bin/tessel_unit_tests" --gtest_filter="$crashing" --gtest_brief=1 || rc=1
      ctest --test-dir "$bdir" -L lit --output-on-failure || rc=1
      echo "sanitised tests (address,undefined) took $(( $(date +%s) - start )) s"
      return $rc ;;
    thread)
      local bdir="${TESSEL_TSAN_BUILD_DIR:-build-tsan}"
      if [ ! -f "$bdir/build.ninja" ]; then
        # -O1 and line tables only: the tests take seconds, the build is the cost.
        locked cmake -S . -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Tsan -DCMAKE_CXX_FLAGS="-O1 -gline-tables-only" \
          -DCMAKE_CXX_COMPILER=clang++-19 -DTESSEL_SANITIZE=thread -DTESSEL_PYTHON=OFF -DPython3_EXECUTABLE="$(command -v "${PYTHON:-python3}")" >/dev/null
      fi
      build_in "$bdir" tessel tessel_concurrency_tests
      echo "sanitised build (thread) took $(( $(date +%s) - start )) s"
      start=$(date +%s)
      local rc=0
      run_unit_shards "$bdir" tessel_concurrency_tests "${TESSEL_TSAN_FILTER:-*}" || rc=1
      echo "sanitised tests (thread) took $(( $(date +%s) - start )) s"
      return $rc ;;
    *)
      echo "unknown --sanitize=$1 (address,undefined or thread)" >&2
      return 2 ;;
  esac
}

if [ -n "$sanitize" ]; then
  sanitized_run "$sanitize"
  exit
fi

scripts/setup.sh
scripts/build.sh
scripts/python_env.sh build/pyenv --torch --install
start=$(date +%s)
ctest --test-dir build --output-on-failure -j"$(nproc)" "${args[@]}"
echo "tests took $(( $(date +%s) - start )) s"
# The fuzz smoke run (ctest fuzz_smoke) has built the instrumented libraries
# that the ASan+UBSan run reuses.
if [ "$no_sanitize" = 0 ]; then
  rc=0
  sanitized_run address,undefined || rc=1
  sanitized_run thread || rc=1
  exit $rc
fi
