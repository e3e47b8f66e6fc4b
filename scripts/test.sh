#!/usr/bin/env bash
# Sets up, builds and runs every test: unit tests, lit tests, the ONNX node
# tests, the model comparisons against ONNX Runtime and the fuzzer smoke run.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
scripts/setup.sh
scripts/build.sh
start=$(date +%s)
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
echo "tests took $(( $(date +%s) - start )) s"
