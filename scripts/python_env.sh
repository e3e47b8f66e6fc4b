#!/usr/bin/env bash
# Makes the Python package's virtual environment (default build/pyenv) from
# PyPI: the build backend and the tests' dependencies (python/requirements.txt).
# scripts/build.sh configures CMake with its interpreter and scripts/test.sh
# installs tessel into it with `pip install .`, the way a user does.
# --install: then install tessel from this checkout (`pip install .`).
# --fresh: empty it first. --torch: add PyTorch, torchvision and transformers
# (python/requirements-torch.txt; about 5 GB with torch's CUDA libraries),
# which the tests of torch tensors and torch.compile need.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$here/build/pyenv"
fresh=""
torch=""
install=""
for a in "$@"; do
  case "$a" in
    --fresh) fresh="--clear" ;;
    --torch) torch="-r $here/python/requirements-torch.txt" ;;
    --install) install=1 ;;
    *) venv="$a" ;;
  esac
done
PY="${PYTHON:-python3}"
if [ -n "$fresh" ] || [ ! -x "$venv/bin/python" ]; then
  "$PY" -m venv $fresh "$venv"
fi
# No wheel cache: torch's stack is ~4 GB of wheels that a cache would keep a
# second copy of (CI's disk has run out at this step); what is installed is
# what is needed.
pip=("$venv/bin/python" -m pip install -q --disable-pip-version-check --no-cache-dir)
if [ -n "$torch" ] && ! "$venv/bin/python" -c "import torch, torchvision, transformers" 2>/dev/null; then
  need_gb=8
  avail_gb=$(( $(df -Pk "$venv" | awk 'NR == 2 {print $4}') / 1048576 ))
  if (( avail_gb < need_gb )); then
    echo "python_env: warning: PyTorch with its CUDA libraries takes about $need_gb GB under $venv; $avail_gb GB are free" >&2
  fi
fi
"${pip[@]}" -r "$here/python/requirements.txt" $torch
if [ -n "$install" ]; then
  # No build isolation: the build backend and nanobind of this environment
  # configured build/ (scripts/build.sh), so nothing is rebuilt.
  "${pip[@]}" --no-build-isolation --force-reinstall --no-deps "$here"
fi
