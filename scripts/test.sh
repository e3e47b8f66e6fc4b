#!/usr/bin/env bash
# Sets up, builds and runs every test: unit tests, lit tests, the ONNX node
# tests, the model comparisons against ONNX Runtime, the Python package
# (installed into build/pyenv with `pip install .`) and the fuzzer smoke run.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
scripts/setup.sh
scripts/build.sh
scripts/python_env.sh build/pyenv --torch --install
start=$(date +%s)
ctest --test-dir build --output-on-failure -j"$(nproc)" "$@"
echo "tests took $(( $(date +%s) - start )) s"
