#!/usr/bin/env python3
"""Peer figures for the GEMM rows of tessel_bench_kernels: the same fp32
shapes through numpy (OpenBLAS) and ONNX Runtime's MatMul, with 1 and 2
threads. Like the C++ benchmark it reports the median over repetitions of
GFLOP/s by wall clock and by process CPU time (the machine is shared).

Run with the thread variables set before numpy loads OpenBLAS, e.g.
  OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 python3 bench/peer_matmul.py --threads 1
"""
import argparse
import statistics
import time

import numpy as np

SHAPES = [(256, 256, 256), (512, 512, 512), (1024, 1024, 1024), (2048, 2048, 2048),
          (128, 768, 768), (128, 3072, 768), (128, 768, 3072), (1, 1000, 512), (3136, 64, 576)]


def measure(fn, flops, min_seconds=0.3, repetitions=5):
    """Median GFLOP/s (wall, cpu) over repetitions of at least min_seconds each, after a warm-up."""
    fn()
    walls, cpus = [], []
    for _ in range(repetitions):
        n, w0, c0 = 0, time.perf_counter(), time.process_time()
        while True:
            fn()
            n += 1
            w, c = time.perf_counter() - w0, time.process_time() - c0
            if w >= min_seconds:
                break
        walls.append(flops * n / w * 1e-9)
        cpus.append(flops * n / max(c, 1e-9) * 1e-9)
    return statistics.median(walls), statistics.median(cpus)


def ort_session(m, n, k, threads):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper
    g = helper.make_graph([helper.make_node("MatMul", ["a", "b"], ["c"])], "mm",
                          [helper.make_tensor_value_info("a", TensorProto.FLOAT, [m, k]),
                           helper.make_tensor_value_info("b", TensorProto.FLOAT, [k, n])],
                          [helper.make_tensor_value_info("c", TensorProto.FLOAT, [m, n])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()
    rng = np.random.default_rng(42)
    print(f"threads={args.threads}  (GFLOP/s wall / per CPU second)")
    for m, n, k in SHAPES:
        a = rng.uniform(-1, 1, (m, k)).astype(np.float32)
        b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
        flops = 2.0 * m * n * k
        npw, npc = measure(lambda: a @ b, flops)
        sess = ort_session(m, n, k, args.threads)
        feeds = {"a": a, "b": b}
        orw, orc = measure(lambda: sess.run(None, feeds), flops)
        print(f"{m}x{n}x{k}: numpy {npw:.1f} / {npc:.1f}   onnxruntime {orw:.1f} / {orc:.1f}")


if __name__ == "__main__":
    main()
