#!/usr/bin/env bash
# Kept for old habits: scripts/fuzz.sh runs the fuzz targets now.
#   tools/run_fuzzer.sh [SECONDS] [onnx|artifact|all]
# runs the ONNX loader, the artifact loader or every target for SECONDS
# (default 20) each. Environment as for scripts/fuzz.sh.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
case "${2:-all}" in
  onnx) which=onnx_loader ;;
  artifact) which=artifact_loader ;;
  *) which="${2:-all}" ;;
esac
exec "$here/scripts/fuzz.sh" "$which" --time "${1:-20}"
