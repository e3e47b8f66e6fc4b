#!/usr/bin/env bash
# Sets up, builds, and runs tessel's main job on its embedded demo model: a
# small convolutional network that tessel builds itself, compiled and run, and
# checked against the reference interpreter; then the same from Python, with
# the package installed into build/pyenv.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
scripts/setup.sh
scripts/build.sh
build/bin/tessel demo
scripts/python_env.sh build/pyenv --install
build/pyenv/bin/python examples/quickstart.py
