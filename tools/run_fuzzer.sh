#!/usr/bin/env bash
# Builds the libFuzzer target for the ONNX loader in build-fuzz/ (clang-19,
# ASan + UBSan) and runs it for SECONDS (default 20) on a corpus seeded with
# the node-test models. Exits non-zero when the fuzzer finds a crash, a leak,
# a sanitizer report, a timeout or an out-of-memory; the reproducer is left in
# build-fuzz/artifacts/.
#   tools/run_fuzzer.sh [SECONDS]
# Environment: TESSEL_FUZZ_JOBS (build parallelism, default 2),
#              TESSEL_NODE_TESTS (seed folder, default build/node_tests),
#              TESSEL_FUZZ_BUILD_DIR (default build-fuzz).
set -euo pipefail
secs="${1:-20}"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
bdir="${TESSEL_FUZZ_BUILD_DIR:-build-fuzz}"
cxx="${CXX_FUZZ:-clang++-19}"
if [ ! -f "$bdir/build.ninja" ]; then
  cmake -S . -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
    -DTESSEL_FUZZ=ON -DTESSEL_BUILD_TESTS=OFF -DTESSEL_WITH_LLVM=OFF >/dev/null
fi
ninja -C "$bdir" -j"${TESSEL_FUZZ_JOBS:-2}" fuzz_onnx_loader

mkdir -p "$bdir/corpus" "$bdir/seeds" "$bdir/artifacts"
seeds="${TESSEL_NODE_TESTS:-build/node_tests}"
if [ -d "$seeds" ] && [ -z "$(ls -A "$bdir/seeds")" ]; then
  for m in "$seeds"/*/model.onnx; do
    [ -f "$m" ] && cp "$m" "$bdir/seeds/$(basename "$(dirname "$m")").onnx"
  done
fi

"$bdir/bin/fuzz_onnx_loader" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len=65536 \
  -print_final_stats=1 -artifact_prefix="$bdir/artifacts/" "$bdir/corpus" "$bdir/seeds"
