#!/usr/bin/env bash
# Builds the libFuzzer targets in build-fuzz/ (clang-19, ASan + UBSan) and
# runs each for SECONDS (default 20): the ONNX loader on a corpus seeded with
# the node-test models, the artifact loader on one seeded with artifacts
# compiled from a few of them (by TESSEL_BIN, default build/bin/tessel, when
# it is there). Exits non-zero when a fuzzer finds a crash, a leak, a
# sanitizer report, a timeout or an out-of-memory; the reproducer is left in
# build-fuzz/artifacts/.
#   tools/run_fuzzer.sh [SECONDS] [onnx|artifact|all]
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
which="${2:-all}"
ninja -C "$bdir" -j"${TESSEL_FUZZ_JOBS:-2}" fuzz_onnx_loader fuzz_artifact_loader

mkdir -p "$bdir/corpus" "$bdir/seeds" "$bdir/artifacts"
seeds="${TESSEL_NODE_TESTS:-build/node_tests}"
if [ -d "$seeds" ] && [ -z "$(ls -A "$bdir/seeds")" ]; then
  for m in "$seeds"/*/model.onnx; do
    [ -f "$m" ] && cp "$m" "$bdir/seeds/$(basename "$(dirname "$m")").onnx"
  done
fi

fuzz() {  # TARGET CORPUS SEEDS MAX_LEN
  "$bdir/bin/$1" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -max_len="$4" \
    -print_final_stats=1 -artifact_prefix="$bdir/artifacts/" "$2" "$3"
}
if [ "$which" = onnx ] || [ "$which" = all ]; then
  fuzz fuzz_onnx_loader "$bdir/corpus" "$bdir/seeds" 65536
fi
if [ "$which" = artifact ] || [ "$which" = all ]; then
  mkdir -p "$bdir/corpus_artifact" "$bdir/seeds_artifact"
  tessel="${TESSEL_BIN:-build/bin/tessel}"
  if [ -x "$tessel" ] && [ -z "$(ls -A "$bdir/seeds_artifact")" ]; then
    for c in test_add test_relu test_matmul_2d test_softmax_axis_1 test_conv_with_strides_padding test_gather_0; do
      m="$seeds/$c/model.onnx"
      [ -f "$m" ] && "$tessel" compile "$m" -o "$bdir/seeds_artifact/$c.tsl" >/dev/null 2>&1 || true
    done
  fi
  fuzz fuzz_artifact_loader "$bdir/corpus_artifact" "$bdir/seeds_artifact" 262144
fi
