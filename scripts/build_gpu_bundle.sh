#!/usr/bin/env bash
# Builds tessel for the GPU machine (docs/codegen_cuda.md) in build-gpu/:
# without the LLVM CPU code generator (the reference target stays), with
# protobuf, libstdc++ and libgcc linked statically, then copies the stripped
# `tessel` and `tessel_gpu_tests` into gpu-bundle/ (git-ignored), with the
# runtime library installed into gpu-bundle/runtime (component runtime), which a
# device run carries. Fails when a binary needs a shared library beyond the C
# library (that machine has none of our Debian libraries) or when the bundle
# is over 40 MiB. The model skeletons of ../shared/models go into
# gpu-bundle/models for the GPU benchmark and the model comparisons.
#
# The Python module (tessel._core, for tests/python/test_cuda.py and the
# torch.compile benchmarks there) is built too when a CPython of the GPU
# machine's version (3.12: TESSEL_GPU_PYTHON, else python3.12 or pyenv's)
# with nanobind is here: in build-gpu-py/, without LLVM, against the shared
# libprotobuf (Debian's static one cannot go into a shared object), which is
# copied beside it (the module's RPATH is $ORIGIN). On that machine:
#   cp gpu-bundle/python/* python/tessel/ && PYTHONPATH=python python3 ...
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$here"
build="${TESSEL_GPU_BUILD_DIR:-build-gpu}"
bundle=gpu-bundle
limit=$((40 * 1024 * 1024))

launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
if [ ! -f "$build/build.ninja" ]; then
  cmake -G Ninja -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTESSEL_WITH_LLVM=OFF -DTESSEL_PORTABLE=ON -DTESSEL_PYTHON=OFF \
    "${launcher[@]}" >/dev/null
fi
cmake --build "$build" --target tessel tessel_gpu_tests tessel_runtime_shared -- -j"${JOBS:-$(nproc)}"

rm -rf "$bundle"
mkdir -p "$bundle"
for b in tessel tessel_gpu_tests; do
  strip -o "$bundle/$b" "$build/bin/$b"
done
# The deployable runtime, as a program on that machine finds it (find_package(tessel)).
cmake --install "$build" --component runtime --prefix "$bundle/runtime" --strip >/dev/null

gpu_python="${TESSEL_GPU_PYTHON:-$( (ls /root/.pyenv/versions/3.12.*/bin/python3 2>/dev/null || command -v python3.12) | tail -1)}"
# A fresh pyenv 3.12 lacks nanobind: install it there (from PyPI) rather than
# make a bundle without the module.
if [ -n "$gpu_python" ] && ! "$gpu_python" -m nanobind --cmake_dir >/dev/null 2>&1; then
  "$gpu_python" -m pip install -q nanobind >/dev/null 2>&1 || true
fi
if [ -n "$gpu_python" ] && "$gpu_python" -m nanobind --cmake_dir >/dev/null 2>&1; then
  pybuild="${TESSEL_GPU_PY_BUILD_DIR:-build-gpu-py}"
  if [ ! -f "$pybuild/build.ninja" ]; then
    cmake -G Ninja -S . -B "$pybuild" -DCMAKE_BUILD_TYPE=Release -DTESSEL_WITH_LLVM=OFF -DTESSEL_BUILD_TESTS=OFF \
      -DTESSEL_PYTHON=ON -DPython_EXECUTABLE="$gpu_python" -DCMAKE_BUILD_RPATH='$ORIGIN' "${launcher[@]}" >/dev/null
  fi
  cmake --build "$pybuild" --target _core -- -j"${JOBS:-$(nproc)}"
  mkdir -p "$bundle/python"
  for so in "$pybuild"/python/_core*.so; do strip -o "$bundle/python/$(basename "$so")" "$so"; done
  cp -L "$(ldd "$pybuild"/python/_core*.so | awk '/libprotobuf\.so/ {print $3}')" "$bundle/python/"
else
  echo "note: no Python 3.12 with nanobind here: the bundle has no Python module" >&2
fi

# Only the C library, the math library and the loader may stay shared
# (libdl/libpthread/librt are part of glibc since 2.34, and present before).
status=0
for f in "$bundle"/tessel "$bundle"/tessel_gpu_tests "$bundle"/runtime/lib*/libtessel_runtime.so; do  # (the Python module needs libstdc++: Python has it)
  # (tessel_gpu_tests links the bundle's own runtime library: gpu_check.sh puts it on LD_LIBRARY_PATH)
  extra=$(ldd "$f" | grep -vE 'linux-vdso|ld-linux|/libc\.so|/libm\.so|/libdl\.so|/libpthread\.so|/librt\.so|libtessel_runtime\.so' || true)
  if [ -n "$extra" ]; then
    echo "error: $f needs shared libraries the GPU machine may not have:" >&2
    echo "$extra" >&2
    status=1
  fi
done

size=$(du -cb "$bundle"/* | tail -1 | cut -f1)  # (the models and wheels below are not counted)

# The model skeletons and materialize.py, for bench/gpu_models.py and
# tools/compare_models.py there (the device copy of the checkout lacks
# ../shared); not counted in the binaries' 40 MiB.
shared_models="${TESSEL_SHARED_MODELS:-$here/../shared/models}"
[ -d "$shared_models" ] || shared_models=/work/shared/models
if [ -d "$shared_models" ]; then
  mkdir -p "$bundle/models"
  cp "$shared_models"/*.skel.onnx "$shared_models"/materialize.py "$bundle/models/"
else
  echo "note: no ../shared/models: the bundle has no model skeletons" >&2
fi
# onnx2torch (pure Python) for check_precision.py --torch-reference there:
# PyTorch's own bf16 error on the same weights. Optional: skipped offline.
if ! python3 -m pip download -q --no-deps --only-binary=:all: -d "$bundle/wheels" onnx2torch==1.5.15 2>/dev/null; then
  echo "note: could not download onnx2torch: the bf16 check there runs without the PyTorch reference" >&2
fi
# pytest (pure Python) for tests/python/test_cuda.py there, should its Python lack it.
if ! python3 -m pip download -q --only-binary=:all: -d "$bundle/pywheels" pytest 2>/dev/null; then
  echo "note: could not download pytest: the python stage there needs its own" >&2
fi
ls -l "$bundle"
echo "gpu-bundle: $((size / 1024)) KiB in all (limit $((limit / 1024)) KiB)"
if [ "$size" -gt "$limit" ]; then
  echo "error: gpu-bundle is larger than 40 MiB" >&2
  status=1
fi
exit $status
