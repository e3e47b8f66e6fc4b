#!/usr/bin/env python3
"""Loading artifacts and cold starts on the CPU (docs/deploy.md).

    python3 bench/artifact_load.py [--tessel build/bin/tessel] [--c-app PATH]
                                   [--models resnet50.ts17,bert_base.ts17] [--runs 9]

For each model: compiles an artifact (`tessel compile --dim batch=1`, seq=128
for the transformers), then reports, as min / median / max over --runs:
  - load: the artifact's load time inside `tessel run --json` (`load_ms`:
    read and verify, parse the model, link the kernels, plan);
  - cold start of the deployed path: wall time of a whole process of the C
    example (examples/c_app, built against an installed runtime) from start
    to its first result, beside the same for `tessel run` of the ONNX file
    (which compiles, from a warm kernel cache unless TESSEL_CACHE_DIR points
    at an empty folder).
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


def wall(cmd):
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
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
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tessel_load_")
    print(f"{'model':16} {'what':28} {'min':>8} {'median':>8} {'max':>8}  (ms)")
    for model in a.models.split(","):
        onnx = os.path.join(a.models_dir, model + ".onnx")
        art = os.path.join(tmp, model + ".tsl")
        subprocess.run([a.tessel, "compile", onnx, *dims_for(model), "-o", art], check=True, capture_output=True)
        load, cold_app, cold_cli = [], [], []
        for _ in range(a.runs):
            r = subprocess.run([a.tessel, "run", art, "--json"], check=True, capture_output=True, text=True)
            load.append(json.loads(r.stdout)["load_ms"])
            if a.c_app:
                cold_app.append(wall([a.c_app, art, tmp]))
            cold_cli.append(wall([a.tessel, "run", onnx, *dims_for(model)]))
        size = os.path.getsize(art) / 1e6
        print(f"{model:16} {f'artifact load ({size:.0f} MB)':28} {summary(load)}")
        if cold_app:
            print(f"{model:16} {'cold start, c_app + artifact':28} {summary(cold_app)}")
        print(f"{model:16} {'cold start, tessel run ONNX':28} {summary(cold_cli)}")


if __name__ == "__main__":
    main()
