#!/usr/bin/env bash
# Configures (once) and builds tessel into build/: the CLI, the libraries, the
# tests and the Python package's native module (built with the interpreter of
# build/pyenv, made here from PyPI when missing, so that `pip install .` into
# it reuses this build).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
if [ ! -f build/build.ninja ]; then
  [ -x build/pyenv/bin/python ] || scripts/python_env.sh build/pyenv
  # Python: the package's module, for build/pyenv; Python3: the tests' tools
  # (compare_models.py, lit), with the interpreter scripts/setup.sh provisioned
  # (until `pip install .` points it at build/pyenv, which has them too).
  cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DPython_EXECUTABLE="$here/build/pyenv/bin/python" \
        -DPython3_EXECUTABLE="$(command -v "${PYTHON:-python3}")" >/dev/null
fi
cmake --build build -- -j"$(nproc)"
