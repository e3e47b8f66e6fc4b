#!/usr/bin/env python3
"""Whole-model latency: tessel (--target cpu) against ONNX Runtime and
OpenVINO, all with the same thread count, on the same inputs, measured in the
same run.

For each materialized model (tools/compare_models.py materializes them into
build/models), with batch 1 (or --batch) and seq 128 for text models:
  tessel: `tessel bench MODEL --input ... --threads T --warmup W --iters N --json`
          (median of N timed runs after W warm-ups; compile time reported apart)
  ORT:    InferenceSession with intra_op_num_threads=T, inter_op 1, all graph
          optimizations, same inputs; median of N runs after W warm-ups.
  OpenVINO: the CPU plugin on the model reshaped to the inputs' frozen shapes,
          INFERENCE_PRECISION_HINT=f32, PERFORMANCE_HINT=LATENCY,
          INFERENCE_NUM_THREADS=T; one infer request, median of N after W.
Prints one row per model and the geometric means of tessel over each peer and
over the faster peer of each model. OpenVINO is not a dependency of tessel:
bench/peers_env.sh makes a virtual environment with it (build/peersenv);
--peers ort times ONNX Runtime alone.

With --tuning-db DB, tessel is timed twice, with its default schedules and
with the tuned ones of DB (`tessel bench --tuning-db`), in alternating
rounds (--rounds, the median of the rounds' medians kept), so that drift of
the machine hits both alike; the rows add tuned/default and tuned/ORT.
With --tune BUDGET as well, `tessel tune` first searches each model on the
same inputs for at most BUDGET (e.g. 10m) and records into DB.

  bench/peers_env.sh && build/peersenv/bin/python bench/models_vs_peers.py --tessel build/bin/tessel \
      [--threads 2] [--models a,b] [--json-out F]
  python3 bench/models_vs_peers.py --peers ort --tuning-db /tmp/t.db --tune 10m  # tune; default vs tuned vs ORT
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


def openvino_median_ms(model_path, feeds, threads, warmup, iters):
    import openvino as ov

    core = ov.Core()
    model = core.read_model(model_path)
    model.reshape({name: list(a.shape) for name, a in feeds.items()})  # the frozen shapes of this run
    compiled = core.compile_model(model, "CPU", {"INFERENCE_PRECISION_HINT": "f32", "PERFORMANCE_HINT": "LATENCY",
                                                 "INFERENCE_NUM_THREADS": threads})
    req = compiled.create_infer_request()
    for _ in range(warmup):
        req.infer(feeds)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter()
        req.infer(feeds)
        times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


PEERS = {"ort": ("ONNX Runtime", "onnxruntime", ort_median_ms), "openvino": ("OpenVINO", "openvino", openvino_median_ms)}


def failure(p):
    """The error lines of a failed tessel run (its progress lines are noise), else the end of its output."""
    err = p.stderr.decode(errors="replace")
    lines = [line for line in err.splitlines() if line.startswith("error:")]
    return "\n".join(lines)[-400:] if lines else f"exit {p.returncode}: " + err[-400:]


def tessel_bench(args, model_path, input_args, tuning_db=None):
    cmd = [args.tessel, "bench", model_path, "--target", "cpu", "--threads", str(args.threads), "--warmup",
           str(args.warmup), "--iters", str(args.iters), "--json"] + input_args
    if tuning_db:
        cmd += ["--tuning-db", tuning_db]
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=args.timeout)
    if p.returncode != 0:
        raise RuntimeError(failure(p))
    return json.loads(p.stdout)


def tessel_tune(args, model_path, input_args):
    cmd = [args.tessel, "tune", model_path, "--target", "cpu", "--threads", str(args.threads), "--budget", args.tune,
           "--db", args.tuning_db, "--trials", str(args.tune_trials), "--json"] + input_args
    if args.trials_out:
        cmd += ["--trials-out", args.trials_out + "." + os.path.basename(model_path) + ".jsonl"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=args.timeout)
    if p.returncode != 0:
        raise RuntimeError(failure(p))
    out = json.loads(p.stdout)
    out["wall_s"] = time.perf_counter() - t0
    return out


def default_and_tuned(args, model, input_args):
    """Alternating rounds of the default and the tuned model: medians of the rounds' medians."""
    default, tuned, compile_s = [], [], 0
    for _ in range(args.rounds):
        d = tessel_bench(args, model, input_args)
        default.append(d["median_ms"])
        compile_s = max(compile_s, d["compile_s"])
        tuned.append(tessel_bench(args, model, input_args, args.tuning_db)["median_ms"])
    return statistics.median(default), statistics.median(tuned), compile_s


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
    p.add_argument("--tuning-db", help="also time tessel with the tuned schedules of this database")
    p.add_argument("--tune", help="run `tessel tune --budget TUNE` into --tuning-db first, per model")
    p.add_argument("--tune-trials", type=int, default=64, help="with --tune: candidates per kernel at most")
    p.add_argument("--trials-out", help="with --tune: write each model's measured candidates to PREFIX.MODEL.jsonl")
    p.add_argument("--rounds", type=int, default=3, help="alternating default/tuned rounds (with --tuning-db)")
    p.add_argument("--peers", default="ort,openvino", help="comma-separated: ort, openvino")
    args = p.parse_args()
    if args.tune and not args.tuning_db:
        p.error("--tune needs --tuning-db")
    peers = [x for x in args.peers.split(",") if x]
    for peer in peers:
        if peer not in PEERS:
            p.error(f"unknown peer {peer!r} (peers: {', '.join(PEERS)})")
        try:
            __import__(PEERS[peer][1])
        except ImportError:
            p.error(f"{PEERS[peer][0]} is not installed in this Python: run bench/peers_env.sh and use "
                    f"build/peersenv/bin/python, or leave it out with --peers")

    import numpy as np

    stems = sorted(f[: -len(".skel.onnx")] for f in os.listdir(args.models_dir) if f.endswith(".skel.onnx"))
    if args.models:
        stems = [s for s in stems if s in set(args.models.split(","))]
    os.makedirs(args.out, exist_ok=True)
    versions = ", ".join(f"{PEERS[x][0]} {__import__(PEERS[x][1]).__version__}" for x in peers)
    print(f"tessel vs {versions}: {args.threads} threads, batch "
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
            if args.tune:
                t = tessel_tune(args, model, input_args)
                row.update(tune_s=t["wall_s"], tune_improved=t["improved"], tune_kernels=t["kernels"],
                           tune_measured=t["measured"], tune_wrong=t["wrong"])
            if args.tuning_db:
                d, tu, cs = default_and_tuned(args, model, input_args)
                row.update(tessel_ms=d, tuned_ms=tu, compile_s=cs)
            else:
                t = tessel_bench(args, model, input_args)
                row.update(tessel_ms=t["median_ms"], compile_s=t["compile_s"])
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            row["error"] = str(e)
        for peer in peers:
            try:
                row[f"{peer}_ms"] = PEERS[peer][2](model, feeds, args.threads, args.warmup, args.iters)
            except Exception as e:  # noqa: BLE001 - a peer that cannot run the model is reported, not fatal
                row[f"{peer}_error"] = f"{type(e).__name__}: {e}"[:300]
                print(f"{stem:<20} {PEERS[peer][0]} FAILED: {row[f'{peer}_error']}", flush=True)
        times = {x: row[f"{x}_ms"] for x in peers if f"{x}_ms" in row}
        if "tessel_ms" in row and times:
            for x, ms in times.items():
                row[f"ratio_{x}"] = row["tessel_ms"] / ms
            row["ratio_best_peer"] = row["tessel_ms"] / min(times.values())
            if "ort_ms" in row:
                row["ratio"] = row["ratio_ort"]  # the name earlier runs' JSON used
            line = f"{stem:<20} tessel {row['tessel_ms']:9.2f} ms"
            for x, ms in times.items():
                line += f"  {x} {ms:9.2f} ms (ratio {row[f'ratio_{x}']:5.2f})"
            if "tuned_ms" in row and "ort_ms" in row:
                row["tuned_ratio"] = row["tuned_ms"] / row["ort_ms"]
                row["tuned_vs_default"] = row["tuned_ms"] / row["tessel_ms"]
                line += (f"  tuned {row['tuned_ms']:9.2f} ms  tuned/default {row['tuned_vs_default']:5.3f}"
                         f"  tuned/ort {row['tuned_ratio']:6.2f}")
            if "tune_s" in row:
                line += f"  (tune {row['tune_s']:.0f} s, {row['tune_improved']}/{row['tune_kernels']} kernels)"
            print(line + f"  (compile {row['compile_s']:.1f} s)", flush=True)
        else:
            print(f"{stem:<20} tessel FAILED ({row.get('error', 'no peer ran')[:200]})", flush=True)
        rows.append(row)
    def geomean(key):
        vals = [r[key] for r in rows if key in r]
        return (math.exp(sum(math.log(v) for v in vals) / len(vals)), len(vals)) if vals else (None, 0)

    ratios = [r["ratio_best_peer"] for r in rows if "ratio_best_peer" in r]
    for key, what in [("ratio_ort", "tessel/ORT"), ("ratio_openvino", "tessel/OpenVINO"),
                      ("ratio_best_peer", "tessel/(the faster peer)"), ("tuned_ratio", "tuned tessel/ORT"),
                      ("tuned_vs_default", "tuned/default tessel")]:
        geo, n = geomean(key)
        if n:
            print(f"geomean {what} over {n} models: {geo:.3f}")
    if args.json_out:
        with open(args.json_out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if len(ratios) == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
