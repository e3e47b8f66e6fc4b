#!/usr/bin/env bash
# The peers' virtual environment for bench/models_vs_peers.py: ONNX Runtime
# and OpenVINO (and what the benchmark's model loading needs) from PyPI, in
# build/peersenv (or $1). OpenVINO is a peer to measure against, not a
# dependency of tessel: the test path never installs it.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="${1:-$here/build/peersenv}"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip
"$venv/bin/python" -m pip install -q -r "$here/bench/requirements-peers.txt"
"$venv/bin/python" -c "import onnxruntime, openvino; print('peers:', 'onnxruntime', onnxruntime.__version__, 'openvino', openvino.__version__)"
