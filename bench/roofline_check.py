#!/usr/bin/env python3
"""The roofline's validation (issue 24): tessel's own GEMM and copy micro-kernels
against the machine's measured ceilings, through the whole CLI.

Measures the ceilings once (`tessel ceilings --refresh`, into a scratch cache
folder), then for each micro-model runs `tessel bench --profile --json` a few
rounds and prints, for its kernel, the limiter the roofline names and the
median over the rounds of its % of bound. The kernels should reach >= 85% of
their bound: the GEMMs as compute-bound (FMA peak), the copy (a Relu over a
tensor past the last-level cache: every byte read once and written once, no
arithmetic to speak of) as memory-bound (DRAM read bandwidth).

  python3 bench/roofline_check.py --tessel build/bin/tessel --threads 1 --rounds 5
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
from onnx import TensorProto, helper, numpy_helper
import onnx


def model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def gemm(m, n, k):
    """x[m, k] @ w[k, n], w a constant (prepacked at compile time, as in the models)."""
    w = numpy_helper.from_array(np.random.default_rng(0).standard_normal((k, n)).astype(np.float32), "w")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [m, k])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [m, n])
    return model([helper.make_node("MatMul", ["x", "w"], ["y"])], [x], [y], [w])


def copy(floats):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [floats])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [floats])
    return model([helper.make_node("Relu", ["x"], ["y"])], [x], [y])


# (name, model, the limiter it must have, whether it counts for the >= 85% check). The 64 MiB copy is
# shown, not checked: an output over glibc's largest mmap threshold (32 MiB) is a fresh mapping on every
# run, and its page faults, not DRAM, set its time (docs/roofline.md).
CASES = [
    ("gemm 512x512x512", lambda: gemm(512, 512, 512), "compute", True),
    ("gemm 1024x1024x1024", lambda: gemm(1024, 1024, 1024), "compute", True),
    ("gemm 2048x1024x1024", lambda: gemm(2048, 1024, 1024), "compute", True),
    ("copy 24 MiB -> 24 MiB", lambda: copy(6 << 20), "memory", True),
    ("copy 64 MiB -> 64 MiB", lambda: copy(16 << 20), "memory", False),
]


def run(tessel, args, env):
    p = subprocess.run([tessel] + [str(a) for a in args], env=env, capture_output=True, text=True)
    if p.returncode != 0:
        sys.exit(f"tessel {' '.join(map(str, args))} failed:\n{p.stderr}")
    return json.loads(p.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tessel", default="build/bin/tessel")
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iters", type=int, default=10)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = dict(os.environ, TESSEL_CACHE_DIR=os.path.join(tmp, "cache"))
        ceil = run(args.tessel, ["ceilings", "--threads", args.threads, "--refresh", "--json"], env)
        s = ceil["sets"][-1]
        print(f"ceilings, {s['threads']} threads: FMA {s['fma_flops_per_s'] / 1e9:.1f} GFLOP/s; read "
              + ", ".join(f"{lv['name']} {lv['read_bytes_per_s'] / 1e9:.1f}" for lv in s["levels"])
              + f" GB/s; launch {s['launch_s'] * 1e6:.2f} us; {ceil['disturbed_samples']} disturbed samples;"
              f" load average {ceil['load_average']:.2f}")
        ok = True
        for name, make, expect, checked in CASES:
            path = os.path.join(tmp, "m.onnx")
            onnx.save(make(), path)
            rows = []
            for _ in range(args.rounds):
                doc = run(args.tessel, ["bench", path, "--threads", args.threads, "--iters", args.iters,
                                        "--warmup", 3, "--profile", 1, "--json"], env)
                rows.append(doc["profile"][0])
            frac = statistics.median(r["of_bound"] for r in rows)
            limiters = sorted({r["limiter"] for r in rows})
            r = rows[0]
            rate = (f"{statistics.median(x['achieved_flops_per_s'] for x in rows) / 1e9:.1f} GFLOP/s" if r["flops"]
                    else f"{statistics.median(x['achieved_bytes_per_s'] for x in rows) / 1e9:.1f} GB/s")
            good = limiters == [expect] and frac >= 0.85
            ok &= good or not checked
            each = ", ".join(f"{100 * x['of_bound']:.0f}" for x in rows)
            print(f"{name:26s} {r['what'][:34]:34s} {rate:>14s}  {100 * frac:5.1f}% of bound (rounds {each})"
                  f"  limiter {'/'.join(limiters)} ({r['level']})  {'ok' if good else 'BELOW'}{'' if checked else ' (not checked)'}")
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
