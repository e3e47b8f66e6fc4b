#!/usr/bin/env bash
# Makes gpu-art/ (git-ignored) for tests/deploy/host_artifacts.py on the GPU
# machine: CUDA artifacts compiled here, where there is no GPU, with the
# bundle's `tessel` and installed runtime (scripts/build_gpu_bundle.sh first)
# and the model skeletons, under the 64 MiB a device call carries. Run there:
#   python3 tests/deploy/host_artifacts.py --dir gpu-art   (carry gpu-art)
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
[ -x gpu-bundle/tessel ] || { echo "error: run scripts/build_gpu_bundle.sh first" >&2; exit 1; }
models="${TESSEL_MODELS_OUT:-build/models}"
rm -rf gpu-art
mkdir -p gpu-art
cp gpu-bundle/tessel gpu-art/
cp -r gpu-bundle/runtime gpu-bundle/models gpu-art/
# MobileNet-V2 in fp32 and ResNet-18 in bf16: two models, both precisions.
python3 tools/compare_models.py --out "$models" --models mobilenet_v2.ts17,resnet18.ts17 --materialize-only >/dev/null
build/bin/tessel compile "$models/mobilenet_v2.ts17.onnx" --target cuda --cuda-arch sm_90a --dim batch=1 \
  -o gpu-art/mobilenet_v2.ts17.tsl
build/bin/tessel compile "$models/resnet18.ts17.onnx" --target cuda --cuda-arch sm_90a --precision bf16 --dim batch=1 \
  -o gpu-art/resnet18.ts17.bf16.tsl
du -sh gpu-art
