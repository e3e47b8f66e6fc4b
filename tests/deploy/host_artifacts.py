#!/usr/bin/env python3
"""CUDA artifacts made on a machine without a GPU, run on the GPU machine
through the C example, against `tessel run --target cuda` compiled there.

Here (no GPU):   scripts/build_gpu_artifacts.sh        (makes gpu-art/)
There (device):  python3 tests/deploy/host_artifacts.py --dir gpu-art

gpu-art/ holds the bundle's `tessel` and installed runtime, the model
skeletons, and MODEL[.PRECISION].tsl artifacts compiled here with
`tessel compile --target cuda --cuda-arch sm_90a --dim batch=1`. For each:
the ONNX model is materialized there from the same skeleton (seeded, so the
same weights), examples/c_app is built against the carried runtime, one
seeded input goes through c_app + the artifact and through `tessel run
MODEL.onnx --target cuda` (compiled there with NVRTC), and the outputs are
compared: bitwise equal, else the largest difference relative to the
output's largest magnitude is printed (and must be within 1e-5, fp32 GEMMs
on the GPU being free to differ only through their code, which should be the
same cubin). Exits 1 when an output differs beyond that or a step fails.
"""
import argparse
import glob
import os
import subprocess
import sys
import tempfile

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def check(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        raise SystemExit(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default=os.path.join(ROOT, "gpu-art"))
    a = ap.parse_args()
    art_dir = os.path.abspath(a.dir)
    tessel = os.path.join(art_dir, "tessel")
    work = tempfile.mkdtemp(prefix="tessel_host_art_")
    models = os.path.join(work, "models")
    app = os.path.join(work, "c_app")
    check(["cmake", "-S", os.path.join(ROOT, "examples", "c_app"), "-B", app, "-DCMAKE_BUILD_TYPE=Release",
           "-DCMAKE_PREFIX_PATH=" + os.path.join(art_dir, "runtime")])
    check(["cmake", "--build", app])
    failed = 0
    for art in sorted(glob.glob(os.path.join(art_dir, "*.tsl"))):
        name = os.path.basename(art)[:-4]
        precision = "bf16" if name.endswith(".bf16") else ""
        model = name[: -len(".bf16")] if precision else name
        check([sys.executable, os.path.join(ROOT, "tools", "compare_models.py"), "--models-dir",
               os.path.join(art_dir, "models"), "--out", models, "--models", model, "--materialize-only"])
        x = np.random.default_rng(7).standard_normal((1, 3, 224, 224)).astype(np.float32)
        np.save(os.path.join(work, "x.npy"), x)
        x.tofile(os.path.join(work, "x.bin"))
        out_app = os.path.join(work, name + "_app")
        os.makedirs(out_app)
        check([os.path.join(app, "c_app"), art, out_app, f"input={os.path.join(work, 'x.bin')}"])
        out_ref = os.path.join(work, name + "_ref")
        check([tessel, "run", os.path.join(models, model + ".onnx"), "--target", "cuda", "--dim", "batch=1",
               *(["--precision", precision] if precision else []), "--input", f"input={os.path.join(work, 'x.npy')}",
               "--save-outputs", out_ref])
        want = np.load(os.path.join(out_ref, "output_0.npy"))
        got = np.fromfile(os.path.join(out_app, "output_0.bin"), dtype=want.dtype).reshape(want.shape)
        same = np.array_equal(got.view(np.uint8), want.view(np.uint8))
        rel = float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))
        ok = same or rel <= 1e-5
        failed += not ok
        print(f"{name:24} artifact made without a GPU vs --target cuda compiled here: "
              f"{'bitwise equal' if same else f'max |diff| / max |ref| = {rel:.2e}'}  {'OK' if ok else 'FAIL'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
