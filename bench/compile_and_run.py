#!/usr/bin/env python3
"""Compile time and run time of the shared models, two tessel binaries side by side.

For a change that must not move either (a refactoring): each round runs every
binary on every model (batch 1, sequence 128 unless told: the symbols bound
with --dim as bench/models_vs_peers.py binds them), alternating, with a fresh kernel/model cache for the
compile (`tessel compile MODEL -o FILE`, wall time of the process) and
`tessel bench --json` for the run (median of --iters timed runs). Prints per
model the median over rounds of each figure and the ratio new/base, then the
geomean ratios of the medians and of the minimums (the minimum is the figure
that a busy machine disturbs least).

  python3 bench/compile_and_run.py --base /tmp/tessel_before --new build/bin/tessel \\
      --models build/models --rounds 3 --threads 2
"""
import argparse
import glob
import json
import math
import os
import statistics
import subprocess
import tempfile
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tools"))
import compare_models as cm  # noqa: E402  (make_inputs, symbol_bindings)


def dim_args(model, seq, batch):
    stem = os.path.basename(model)[:-len(".onnx")]
    dims = cm.symbol_bindings(model, cm.make_inputs(model, stem, seq, batch))
    return [a for k, v in sorted(dims.items()) for a in ("--dim", f"{k}={v}")]


def compile_seconds(tessel, model, threads, dims):
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, TESSEL_CACHE_DIR=cache)
        out = os.path.join(cache, "model.tsl")
        t0 = time.perf_counter()
        subprocess.run([tessel, "compile", model, "-o", out, "--threads", str(threads)] + dims, env=env, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return time.perf_counter() - t0


def run_ms(tessel, model, threads, iters, dims):
    p = subprocess.run([tessel, "bench", model, "--json", "--threads", str(threads), "--iters", str(iters),
                        "--warmup", "3"] + dims, check=True, capture_output=True, text=True)
    return float(json.loads(p.stdout)["median_ms"])


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--base", required=True)
    ap.add_argument("--new", required=True)
    ap.add_argument("--models", default="build/models")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--batch", type=int, default=1)
    a = ap.parse_args()
    models = sorted(glob.glob(os.path.join(a.models, "*.onnx")))
    res = {}  # (model, which, figure) -> [values]
    dims = {m: dim_args(m, a.seq, a.batch) for m in models}
    for r in range(a.rounds):
        for m in models:
            order = [("base", a.base), ("new", a.new)] if r % 2 == 0 else [("new", a.new), ("base", a.base)]
            for which, exe in order:
                res.setdefault((m, which, "compile"), []).append(compile_seconds(exe, m, a.threads, dims[m]))
                res.setdefault((m, which, "run"), []).append(run_ms(exe, m, a.threads, a.iters, dims[m]))
    print(f"{'model':28} {'compile base s':>14} {'new s':>8} {'ratio':>6}   {'run base ms':>11} {'new ms':>8} {'ratio':>6}")
    ratios = {"compile": [], "run": []}
    min_ratios = {"compile": [], "run": []}
    for m in models:
        row = [os.path.basename(m)[:-5]]
        for fig in ("compile", "run"):
            b = statistics.median(res[(m, "base", fig)])
            n = statistics.median(res[(m, "new", fig)])
            ratios[fig].append(n / b)
            min_ratios[fig].append(min(res[(m, "new", fig)]) / min(res[(m, "base", fig)]))
            row += [b, n, n / b]
        print(f"{row[0]:28} {row[1]:14.2f} {row[2]:8.2f} {row[3]:6.3f}   {row[4]:11.2f} {row[5]:8.2f} {row[6]:6.3f}")
    def geomean(rs):
        return math.exp(sum(map(math.log, rs)) / len(rs))
    for fig in ratios:
        print(f"geomean new/base {fig}: medians {geomean(ratios[fig]):.3f}, minimums {geomean(min_ratios[fig]):.3f}")


if __name__ == "__main__":
    main()
