#!/usr/bin/env python3
"""Whole-model latency: tessel (--target cpu) against ONNX Runtime, both with
the same thread count, on the same inputs, measured in the same run.

For each materialized model (tools/compare_models.py materializes them into
build/models), with batch 1 (or --batch) and seq 128 for text models:
  tessel: `tessel bench MODEL --input ... --threads T --warmup W --iters N --json`
          (median of N timed runs after W warm-ups; compile time reported apart)
  ORT:    InferenceSession with intra_op_num_threads=T, inter_op 1, all graph
          optimizations, same inputs; median of N runs after W warm-ups.
Prints one row per model and the geometric mean of tessel/ORT.

  python3 bench/models_vs_ort.py --tessel build/bin/tessel [--threads 2] [--models a,b] [--json-out F]
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tools"))
import compare_models as cm  # noqa: E402  (materialize, make_inputs, model list)


def ort_median_ms(model_path, feeds, threads, warmup, iters):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    for _ in range(warmup):
        sess.run(None, feeds)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def tessel_bench(args, model_path, input_args):
    cmd = [args.tessel, "bench", model_path, "--target", "cpu", "--threads", str(args.threads), "--warmup",
           str(args.warmup), "--iters", str(args.iters), "--json"] + input_args
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=args.timeout)
    if p.returncode != 0:
        raise RuntimeError(p.stderr.decode(errors="replace")[-400:])
    return json.loads(p.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessel", default=os.path.join(cm.ROOT, "build", "bin", "tessel"))
    p.add_argument("--models-dir", default=cm.DEFAULT_MODELS_DIR)
    p.add_argument("--out", default=os.path.join(cm.ROOT, "build", "models"))
    p.add_argument("--models", default="")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--timeout", type=float, default=1800)
    p.add_argument("--json-out")
    args = p.parse_args()

    import numpy as np

    stems = sorted(f[: -len(".skel.onnx")] for f in os.listdir(args.models_dir) if f.endswith(".skel.onnx"))
    if args.models:
        stems = [s for s in stems if s in set(args.models.split(","))]
    os.makedirs(args.out, exist_ok=True)
    print(f"tessel vs ONNX Runtime {__import__('onnxruntime').__version__}: {args.threads} threads, batch "
          f"{args.batch}, seq {args.seq}, median of {args.iters} after {args.warmup} warm-ups", flush=True)
    rows = []
    for stem in stems:
        model = os.path.join(args.out, stem + ".onnx")
        cm.materialize(os.path.join(args.models_dir, stem + ".skel.onnx"), model, args.models_dir)
        feeds = cm.make_inputs(model, stem, args.seq, args.batch)
        in_dir = os.path.join(args.out, stem + ".bench")
        os.makedirs(in_dir, exist_ok=True)
        input_args = []
        for i, (name, a) in enumerate(feeds.items()):
            path = os.path.join(in_dir, f"in{i}.npy")
            np.save(path, a)
            input_args += ["--input", f"{name}={path}"]
        row = {"model": stem}
        try:
            t = tessel_bench(args, model, input_args)
            row.update(tessel_ms=t["median_ms"], compile_s=t["compile_s"])
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            row["error"] = str(e)
        row["ort_ms"] = ort_median_ms(model, feeds, args.threads, args.warmup, args.iters)
        if "tessel_ms" in row:
            row["ratio"] = row["tessel_ms"] / row["ort_ms"]
            print(f"{stem:<20} tessel {row['tessel_ms']:9.2f} ms  ort {row['ort_ms']:9.2f} ms  "
                  f"ratio {row['ratio']:6.2f}  (compile {row['compile_s']:.1f} s)", flush=True)
        else:
            print(f"{stem:<20} tessel FAILED ({row['error'][:200]})  ort {row['ort_ms']:9.2f} ms", flush=True)
        rows.append(row)
    ratios = [r["ratio"] for r in rows if "ratio" in r]
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print(f"geomean tessel/ORT over {len(ratios)} models: {geo:.3f}")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if len(ratios) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
