#!/usr/bin/env python3
"""Loading artifacts and cold starts, CPU or GPU (docs/deploy.md).

    python3 bench/artifact_load.py [--tessel build/bin/tessel] [--c-app PATH]
                                   [--models resnet50.ts17,bert_base.ts17] [--runs 9]
                                   [--target cpu|cuda] [--precision bf16]

For each model: compiles an artifact (`tessel compile --dim batch=1`, seq=128
for the transformers), then reports, as min / median / max over --runs:
  - load: the artifact's load time inside `tessel run --json` (`load_ms`:
    read and verify, parse the model, link the kernels, plan);
  - cold start of the deployed path: wall time of a whole process of the C
    example (examples/c_app, built against an installed runtime) from start
    to its first result, beside the same for `tessel run` of the ONNX file
    (which compiles, from a warm kernel cache unless TESSEL_CACHE_DIR points
    at an empty folder), and of `tessel run` with an empty kernel cache
    (min(--runs, 3) times: each compiles every kernel again).
--target cuda compiles CUDA artifacts (`tessel compile --target cuda`): the
load is then the cubin's module load and the weights' upload, and the C
example runs the model on the GPU through the same C API.
Inputs are zeros for the C example and seeded random for `tessel run`: the
time does not depend on them. Runs alternate between the two so that drift
hits both alike.
"""
import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def dims_for(model):
    dims = ["--dim", "batch=1"]
    if any(k in model for k in ("bert", "gpt2", "llama")):
        dims += ["--dim", "seq=128"]
    return dims


def wall(cmd, env=None):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True, env=env)
    return (time.perf_counter() - t0) * 1e3


def summary(xs):
    return f"{min(xs):8.1f} {statistics.median(xs):8.1f} {max(xs):8.1f}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tessel", default=os.path.join(ROOT, "build", "bin", "tessel"))
    ap.add_argument("--c-app", default="", help="examples/c_app built against an installed runtime (optional)")
    ap.add_argument("--models-dir", default=os.path.join(ROOT, "build", "models"))
    ap.add_argument("--models", default="resnet50.ts17,bert_base.ts17")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--target", choices=("cpu", "cuda"), default="cpu")
    ap.add_argument("--precision", default="", help="--precision for compile and run (e.g. bf16 on cuda)")
    a = ap.parse_args()
    opts = ["--target", a.target] + (["--precision", a.precision] if a.precision else [])
    tmp = tempfile.mkdtemp(prefix="tessel_load_")
    print(f"{'model':16} {'what':28} {'min':>8} {'median':>8} {'max':>8}  (ms)")
    for model in a.models.split(","):
        onnx = os.path.join(a.models_dir, model + ".onnx")
        art = os.path.join(tmp, model + ".tsl")
        subprocess.run([a.tessel, "compile", onnx, *opts, *dims_for(model), "-o", art], check=True, capture_output=True)
        load, cold_app, cold_cli, cold_compile = [], [], [], []
        for i in range(a.runs):
            r = subprocess.run([a.tessel, "run", art, *opts, "--json"], check=True, capture_output=True, text=True)
            load.append(json.loads(r.stdout)["load_ms"])
            if a.c_app:
                cold_app.append(wall([a.c_app, art, tmp]))
            cold_cli.append(wall([a.tessel, "run", onnx, *opts, *dims_for(model)]))
            if i < 3:
                empty = tempfile.mkdtemp(dir=tmp)
                cold_compile.append(wall([a.tessel, "run", onnx, *opts, *dims_for(model)],
                                         env={**os.environ, "TESSEL_CACHE_DIR": empty}))
        size = os.path.getsize(art) / 1e6
        print(f"{model:16} {f'artifact load ({size:.0f} MB)':28} {summary(load)}")
        if cold_app:
            print(f"{model:16} {'cold start, c_app + artifact':28} {summary(cold_app)}")
        print(f"{model:16} {'cold start, tessel run ONNX':28} {summary(cold_cli)}")
        print(f"{model:16} {'  the same, empty kernel cache':28} {summary(cold_compile)}")


if __name__ == "__main__":
    main()
