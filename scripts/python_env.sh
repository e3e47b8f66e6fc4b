#!/usr/bin/env bash
# Makes the Python package's virtual environment (default build/pyenv) from
# PyPI: the build backend and the tests' dependencies (python/requirements.txt).
# scripts/build.sh configures CMake with its interpreter and scripts/test.sh
# installs tessel into it with `pip install .`, the way a user does.
# --install: then install tessel from this checkout (`pip install .`).
# --fresh: empty it first. --torch: add PyTorch (CPU use; about 5 GB with
# its CUDA libraries), which the tests of torch tensors need.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$here/build/pyenv"
fresh=""
torch=""
install=""
for a in "$@"; do
  case "$a" in
    --fresh) fresh="--clear" ;;
    --torch) torch="torch==2.15.*" ;;
    --install) install=1 ;;
    *) venv="$a" ;;
  esac
done
PY="${PYTHON:-python3}"
if [ -n "$fresh" ] || [ ! -x "$venv/bin/python" ]; then
  "$PY" -m venv $fresh "$venv"
fi
"$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$here/python/requirements.txt" $torch
if [ -n "$install" ]; then
  # No build isolation: the build backend and nanobind of this environment
  # configured build/ (scripts/build.sh), so nothing is rebuilt.
  "$venv/bin/python" -m pip install -q --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps "$here"
fi
