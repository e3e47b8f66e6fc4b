#!/usr/bin/env bash
# Installs what tessel needs on Debian 12, by name from Debian and PyPI:
# compilers and libraries (apt) and the pinned Python test dependencies (pip).
# Safe to run repeatedly: it installs only what is missing.
set -euo pipefail

APT_PACKAGES=(
  cmake ninja-build g++ python3
  llvm-19-dev llvm-19-tools             # CPU code generator; FileCheck for lit tests
  libprotobuf-dev protobuf-compiler     # ONNX model loading (static libprotobuf)
  libonnx-dev                           # ships onnx.proto, compiled by protoc at build time
  libgtest-dev libbenchmark-dev libcli11-dev
  nlohmann-json3-dev                    # the CLI's --json output
  clang-19 libclang-rt-19-dev           # libFuzzer target for the loader
  chromium                              # tessel report's test in a headless browser (tests/report)
)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  SUDO=""
  [ "$(id -u)" -eq 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${PYTHON:-python3}"
if ! "$PY" - "$here/requirements.txt" <<'PYEOF' 2>/dev/null; then
import sys, importlib.metadata as md
from packaging.requirements import Requirement
for line in open(sys.argv[1]):
    line = line.split("#")[0].strip()
    if not line:
        continue
    r = Requirement(line)
    if not r.specifier.contains(md.version(r.name), prereleases=True):
        sys.exit(1)
PYEOF
  echo "setup: installing Python packages from requirements.txt" >&2
  "$PY" -m pip install -q -r "$here/requirements.txt"
fi
