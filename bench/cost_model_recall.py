#!/usr/bin/env python3
"""How well the tuner's cost model ranks schedules: top-k recall over the
candidates `tessel tune --trials-out` recorded (bench/models_vs_peers.py --tune
--trials-out PREFIX writes one file per model).

For every kernel with more than k correct (not discarded) measured
candidates, recall@k is 1 when the measured fastest candidate is among the k
that a ranking puts first; the figure is the share of such kernels. Three
rankings:

  analytical    the roofline estimate alone (tune/cost_model.h, layer 1)
  online        the estimate the tuner used when it chose the candidate: the
                learned model as fitted on what had been measured before
                (the ranking the search actually ran on)
  held-out      the learned model (gradient-boosted trees predicting
                log(measured / analytical) from the schedule's features, as
                tune/cost_model.cpp fits them) refitted on the other models'
                trials, the kernel's own model left out: how it ranks the
                kernels of a model it has not seen

Measured times carry a few percent of noise, and many candidates tie: each
figure is given twice, strict (the single fastest measured candidate is in
the top k) and within 3% (a candidate within 3% of the fastest is).

  python3 bench/cost_model_recall.py /tmp/trials.*.jsonl [--k 8]
"""
import argparse
import collections
import json
import math
import sys

import numpy as np


def load(paths):
    kernels = collections.OrderedDict()
    for path in paths:
        for line in open(path):
            t = json.loads(line)
            kernels.setdefault((path, t["kernel"]), []).append(t)
    return kernels


def recall(kernels, k, score, tol=0.0):
    counted = hits = 0
    for key, trials in kernels.items():
        ok = [t for t in trials if not t["wrong"] and t["measured_us"] > 0]
        if len(ok) <= k:
            continue
        best = min(t["measured_us"] for t in ok)
        ranked = sorted(ok, key=lambda t: score(key, t))
        counted += 1
        hits += any(t["measured_us"] <= best * (1 + tol) for t in ranked[:k])
    return hits / counted if counted else float("nan"), counted


TREES, DEPTH, MIN_LEAF, RATE, SPLITS = 60, 3, 8, 0.2, 16  # as tune/cost_model.cpp


def grow(x, r, rows, depth):
    """A regression tree as LearnedCostModel's: quantile thresholds, squared error."""
    mean = float(r[rows].mean())
    if depth == 0 or len(rows) < 2 * MIN_LEAF:
        return ("leaf", mean)
    best = (1e-12, None, None)
    total = r[rows].sum()
    for f in range(x.shape[1]):
        vals = x[rows, f]
        srt = np.sort(vals)
        if srt[0] == srt[-1]:
            continue
        for q in range(1, SPLITS):
            t = srt[len(srt) * q // SPLITS]
            left = vals < t
            nl = int(left.sum())
            nr = len(rows) - nl
            if nl < MIN_LEAF or nr < MIN_LEAF:
                continue
            sl = r[rows][left].sum()
            sr = total - sl
            gain = sl * sl / nl + sr * sr / nr - total * total / len(rows)
            if gain > best[0]:
                best = (gain, f, t)
    if best[1] is None:
        return ("leaf", mean)
    _, f, t = best
    left = rows[x[rows, f] < t]
    right = rows[x[rows, f] >= t]
    return ("split", f, t, grow(x, r, left, depth - 1), grow(x, r, right, depth - 1))


def evaluate(tree, v):
    while tree[0] == "split":
        tree = tree[3] if v[tree[1]] < tree[2] else tree[4]
    return tree[1]


def fit(rows):
    x = np.array([t["features"] for t in rows], dtype=float)
    y = np.array([math.log(t["measured_us"] / t["analytical_us"]) for t in rows])
    bias = y.mean()
    r = y - bias
    trees = []
    idx = np.arange(len(y))
    for _ in range(TREES):
        tree = grow(x, r, idx, DEPTH)
        r = r - RATE * np.array([evaluate(tree, v) for v in x])
        trees.append(tree)

    def predict(t):
        v = t["features"]
        z = bias + RATE * sum(evaluate(tree, v) for tree in trees)
        return t["analytical_us"] * math.exp(max(-5.0, min(5.0, z)))

    return predict


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+")
    p.add_argument("--k", type=int, default=8)
    args = p.parse_args()
    kernels = load(args.files)
    usable = {key: [t for t in ts if not t["wrong"] and t["measured_us"] > 0 and t["analytical_us"] > 0]
              for key, ts in kernels.items()}
    models = {}  # per model file: trees fitted on the other files' trials
    for path in args.files:
        rest = [t for other, ts in usable.items() if other[0] != path for t in ts]
        models[path] = fit(rest) if len(rest) >= 16 else (lambda t: t["analytical_us"])
    rows = [
        ("analytical", lambda key, t: t["analytical_us"]),
        ("online", lambda key, t: t["predicted_us"]),
        ("held-out", lambda key, t: models[key[0]](t)),
    ]
    trials = sum(len(ts) for ts in kernels.values())
    print(f"{len(kernels)} kernels, {trials} measured candidates, {sum(len(ts) for ts in usable.values())} correct")
    for name, score in rows:
        r, n = recall(kernels, args.k, score)
        r3, _ = recall(kernels, args.k, score, tol=0.03)
        print(f"top-{args.k} recall, {name:<10}: {r:.2f} strict, {r3:.2f} within 3%, over {n} kernels with more "
              f"than {args.k} candidates")
    return 0


if __name__ == "__main__":
    sys.exit(main())
