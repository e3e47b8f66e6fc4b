#!/usr/bin/env python3
"""How well the tuner's cost model ranks schedules: top-k recall over the
candidates `tessel tune --trials-out` recorded (bench/models_vs_ort.py --tune
--trials-out PREFIX writes one file per model).

For every kernel with more than k correct (not discarded) measured
candidates, recall@k is 1 when the measured fastest candidate is among the k
that a ranking puts first; the figure is the share of such kernels. Three
rankings:

  analytical    the roofline estimate alone (tune/cost_model.h, layer 1)
  online        the estimate the tuner used when it chose the candidate: the
                learned model as fitted on what had been measured before
                (the ranking the search actually ran on)
  held-out      the learned model (ridge regression of log(measured /
                analytical) on the schedule's features, as in
                tune/cost_model.cpp) refitted on every other kernel's trials,
                the kernel's own left out: how it ranks a kernel it has not
                seen

  python3 bench/cost_model_recall.py /tmp/trials.*.jsonl [--k 8] [--ridge 1.0]
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


def recall(kernels, k, score):
    counted = hits = 0
    for key, trials in kernels.items():
        ok = [t for t in trials if not t["wrong"] and t["measured_us"] > 0]
        if len(ok) <= k:
            continue
        best = min(ok, key=lambda t: t["measured_us"])
        ranked = sorted(ok, key=lambda t: score(key, t))
        counted += 1
        hits += any(t is best for t in ranked[:k])
    return hits / counted if counted else float("nan"), counted


def fit(rows, ridge):
    """Ridge regression on standardised features (constant ones dropped), as LearnedCostModel::fit."""
    x = np.array([r["features"] for r in rows], dtype=float)
    y = np.array([math.log(r["measured_us"] / r["analytical_us"]) for r in rows])
    mean, scale = x.mean(axis=0), x.std(axis=0)
    keep = scale > 1e-12
    z = np.zeros_like(x)
    z[:, keep] = (x[:, keep] - mean[keep]) / scale[keep]
    bias = y.mean()
    a = z.T @ z + ridge * np.eye(z.shape[1])
    w = np.linalg.solve(a, z.T @ (y - bias))

    def predict(t):
        f = np.array(t["features"], dtype=float)
        zz = np.zeros_like(f)
        zz[keep] = (f[keep] - mean[keep]) / scale[keep]
        return t["analytical_us"] * math.exp(max(-5.0, min(5.0, bias + float(zz @ w))))

    return predict


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("files", nargs="+")
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--ridge", type=float, default=1.0)
    args = p.parse_args()
    kernels = load(args.files)
    usable = {key: [t for t in ts if not t["wrong"] and t["measured_us"] > 0 and t["analytical_us"] > 0]
              for key, ts in kernels.items()}
    models = {}
    for key in kernels:
        rest = [t for other, ts in usable.items() if other != key for t in ts]
        models[key] = fit(rest, args.ridge) if len(rest) >= 16 else (lambda t: t["analytical_us"])
    rows = [
        ("analytical", lambda key, t: t["analytical_us"]),
        ("online", lambda key, t: t["predicted_us"]),
        ("held-out", lambda key, t: models[key](t)),
    ]
    trials = sum(len(ts) for ts in kernels.values())
    print(f"{len(kernels)} kernels, {trials} measured candidates, {sum(len(ts) for ts in usable.values())} correct")
    for name, score in rows:
        r, n = recall(kernels, args.k, score)
        print(f"top-{args.k} recall, {name:<10}: {r:.2f} over {n} kernels with more than {args.k} candidates")
    return 0


if __name__ == "__main__":
    sys.exit(main())
