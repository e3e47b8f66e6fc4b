#!/usr/bin/env python3
"""GPU tuning, measured: `tessel tune --target cuda` on each configuration,
then `tessel bench` of the default against the tuned model (--tuning-db),
alternating, on the device machine.

    python3 bench/gpu_tune.py --tessel gpu-bundle/tessel --models-dir gpu-bundle/models \\
        --out /tmp/tessel-models --db $OUT/tuning.db --budget 120s --pairs 3 \\
        [--only resnet50:32,bert_base:16] --json-out $OUT/tune.json

The configurations are the GPU issue's large-batch ones in bf16: ResNet-50
at batch 32, BERT-base and GPT-2 at batch 16 (sequence 128). Inputs are the
benchmark's (bench/gpu_models.py, compare_models.make_inputs), saved once
and given to both tune and bench, so that both bind the same sizes.

Per configuration: the tuner's JSON line (kernels, improved, candidates
measured, wrong, its estimate of the kernel time), then --pairs rounds of
bench default / bench tuned (each a median of --iters CUDA-graph replays
after --warmup; each bench compiles the model again, from NVRTC's cubin
cache after the first), the median of each side's medians and their ratio.
The summary (--json-out) is rewritten after each configuration, so a run
cut short by the device's time limit keeps what it measured.
"""
import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))
import compare_models  # noqa: E402  (materialize, make_inputs)
import gpu_models  # noqa: E402  (bench_tessel, run_tessel_json, input_args)

# (model stem, batch, seq)
CONFIGS = [("resnet50.ts17", 32, None), ("bert_base.ts17", 16, 128), ("gpt2.ts17", 16, 128)]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessel", default=os.path.join(ROOT, "gpu-bundle", "tessel"))
    p.add_argument("--models-dir", default=os.path.join(ROOT, "gpu-bundle", "models"))
    p.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "tessel-gpu-models"))
    p.add_argument("--db", default=os.path.join(tempfile.gettempdir(), "tessel-gpu-tune", "tuning.db"))
    p.add_argument("--precision", default="bf16", choices=["bf16", "fp16", "fp32"])
    p.add_argument("--budget", default="120s", help="tessel tune --budget, per configuration")
    p.add_argument("--pairs", type=int, default=3, help="bench rounds of default then tuned")
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--only", default="", help="comma-separated family:batch (e.g. bert_base:16)")
    p.add_argument("--no-tune", action="store_true", help="bench against the records already in --db")
    p.add_argument("--json-out", help="the summary, rewritten after each configuration")
    return p.parse_args()


def tune(model_path, inputs, args, res, log):
    cmd = [args.tessel, "tune", model_path, "--target", "cuda", "--precision", args.precision, "--budget",
           args.budget, "--db", args.db, "--json"] + inputs
    t0 = time.time()
    with open(log, "w") as err:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=err, timeout=3600)
    res["tune_wall_s"] = round(time.time() - t0, 1)
    if p.returncode not in (0, 130):
        with open(log) as f:
            lines = [l for l in f.read().splitlines() if l.startswith("error:")]
        res["tune_error"] = lines[-1] if lines else f"exit {p.returncode} (see {log})"
        return
    res["tune"] = json.loads(p.stdout)


def bench(model_path, feeds, args, res, work, tuned):
    b = argparse.Namespace(tessel=args.tessel, precision=args.precision, warmup=args.warmup, iters=args.iters,
                           profile=0, tessel_arg=["--tuning-db", args.db] if tuned else [])
    r = {}
    gpu_models.bench_tessel(model_path, feeds, b, r, work)
    if "tessel_error" in r:
        res.setdefault("bench_errors", []).append(r["tessel_error"])
    return r.get("tessel_ms")


def main():
    args = parse_args()
    want = set(args.only.split(",")) if args.only else None
    configs = [c for c in CONFIGS if not want or f"{gpu_models.family(c[0])}:{c[1]}" in want]
    os.makedirs(args.out, exist_ok=True)
    os.makedirs(os.path.dirname(os.path.abspath(args.db)), exist_ok=True)
    summary = {"precision": args.precision, "budget": args.budget, "pairs": args.pairs, "db": args.db, "configs": []}
    for stem, batch, seq in configs:
        fam = gpu_models.family(stem)
        res = {"model": fam, "batch": batch, "seq": seq}
        skel = os.path.join(args.models_dir, stem + ".skel.onnx")
        model_path = os.path.join(args.out, stem + ".onnx")
        compare_models.materialize(skel, model_path, args.models_dir)
        feeds = compare_models.make_inputs(model_path, stem, seq or 128, batch)
        work = os.path.join(args.out, f"tune_{fam}_b{batch}")
        inputs = gpu_models.input_args(feeds, work)
        if not args.no_tune:
            log = os.path.join(os.path.dirname(os.path.abspath(args.json_out or args.db)), f"tune_{fam}_b{batch}.log")
            tune(model_path, inputs, args, res, log)
            print(f"TUNE {fam} b{batch}: " + json.dumps(res.get("tune", res.get("tune_error"))), flush=True)
        default_ms, tuned_ms = [], []
        for _ in range(args.pairs):
            for tuned, out in ((False, default_ms), (True, tuned_ms)):
                ms = bench(model_path, feeds, args, res, work, tuned)
                if ms is not None:
                    out.append(ms)
        res["default_ms"], res["tuned_ms"] = default_ms, tuned_ms
        if default_ms and tuned_ms:
            res["default_median_ms"] = statistics.median(default_ms)
            res["tuned_median_ms"] = statistics.median(tuned_ms)
            res["tuned_over_default"] = res["tuned_median_ms"] / res["default_median_ms"]
        summary["configs"].append(res)
        ratios = [c["tuned_over_default"] for c in summary["configs"] if "tuned_over_default" in c]
        if ratios:
            summary["geomean_tuned_over_default"] = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        print("RESULT " + json.dumps(res), flush=True)
        if args.json_out:
            with open(args.json_out, "w") as f:
                json.dump(summary, f, indent=1)
    print("\n| model | batch | tune s | kernels improved | default ms | tuned ms | tuned / default |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: |")
    for r in summary["configs"]:
        t = r.get("tune", {})
        print(f"| {r['model']} | {r['batch']} | {gpu_models.fmt(t.get('seconds'), 0)} | "
              f"{t.get('improved', '-')}/{t.get('kernels', '-')} | {gpu_models.fmt(r.get('default_median_ms'))} | "
              f"{gpu_models.fmt(r.get('tuned_median_ms'))} | {gpu_models.fmt(r.get('tuned_over_default'))} |")
    if "geomean_tuned_over_default" in summary:
        print(f"geomean tuned / default: {summary['geomean_tuned_over_default']:.3f}")
    return 0 if all("tuned_over_default" in r and "tune_error" not in r for r in summary["configs"]) else 1


if __name__ == "__main__":
    sys.exit(main())
