#!/usr/bin/env python3
"""What a call through the Python package costs over the CLI's own timing.

For each model: `tessel bench --json` (the C++ executable's run alone, median
after warm-up) and, in this process, `exe(x)` through `tessel` on the same
input (median of many calls after warm-up). The difference is the package's
overhead per call: argument checks, borrowing the arrays, releasing the GIL,
wrapping the outputs. Issue 22's bars: <= 10 us on the CPU, <= 15 us on the GPU.

    build/pyenv/bin/python bench/python_overhead.py --tessel build/bin/tessel [--models a.onnx,b.onnx]
    python3 bench/python_overhead.py --tessel gpu-bundle/tessel --target cuda [--precision bf16]

With --target cuda the inputs are torch CUDA tensors (the device path: read in
place, outputs from torch.empty, the caller's stream) and the CLI's figure is
its device time per replay of the model's CUDA graph (back to back, CUDA
events); the Python figure is the same back-to-back form: --iters calls, then
one torch.cuda.synchronize(), divided by --iters (median of 5 such blocks).

Without --models it builds two small models (the overhead is per call, so
small models show it best) and takes ResNet-18 from build/models if there.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import tessel


def small_models(folder):
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    out = []
    for name, k, n in (("relu_1x64", None, 64), ("linear_8x256x256", 256, 256)):
        if k is None:
            g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], name,
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])])
        else:
            w = numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), "w")
            g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], name,
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [8, k])],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [8, n])], [w])
        p = os.path.join(folder, name + ".onnx")
        onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), p)
        out.append(p)
    return out


def symbol_values(model_path):
    """Every symbol of the model's inputs bound as the CLI binds it from the
    input files (seq 128, the rest 1), so that both sides run the same kernels."""
    import onnx

    if tessel._core.is_artifact(model_path):
        return {}  # compiled already: its symbols bind from the inputs
    m = onnx.load(model_path, load_external_data=False)
    dims = {}
    for i in m.graph.input:
        for d in i.type.tensor_type.shape.dim:
            if d.dim_param:
                dims[d.dim_param] = 128 if "seq" in d.dim_param else 1
    return dims


def inputs_for(exe, dims, rng):
    arrays = {}
    for v in exe.inputs:
        shape = [d if isinstance(d, int) else dims[d] for d in v.shape]
        if v.dtype == "i64":
            arrays[v.name] = np.ones(shape, np.int64)  # token ids and masks
        else:
            arrays[v.name] = rng.standard_normal(shape).astype(np.float32)
    return arrays


def cli_median_ms(tessel_bin, model, files, threads, iters, target, precision):
    cmd = [tessel_bin, "bench", model, "--json", "--threads", str(threads), "--iters", str(iters), "--warmup", "50",
           "--target", target, "--precision", precision]
    for name, f in files.items():
        cmd += ["--input", f"{name}={f}"]
    r = subprocess.run(cmd, capture_output=True, text=True, check=True)
    return json.loads(r.stdout)["median_ms"]


def python_cuda_median_ms(exe, arrays, iters):
    import torch

    args = [torch.from_numpy(a).cuda() for a in arrays.values()]
    for _ in range(50):
        exe(*args)
    torch.cuda.synchronize()
    blocks = []
    for _ in range(5):
        t0 = time.perf_counter_ns()
        for _ in range(iters):
            exe(*args)
        torch.cuda.synchronize()
        blocks.append((time.perf_counter_ns() - t0) / iters)
    return statistics.median(blocks) / 1e6


def python_median_ms(exe, arrays, iters):
    args = list(arrays.values())
    for _ in range(50):
        exe(*args)
    times = []
    for _ in range(iters):
        t0 = time.perf_counter_ns()
        exe(*args)
        times.append(time.perf_counter_ns() - t0)
    return statistics.median(times) / 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tessel", required=True, help="the CLI binary (build/bin/tessel)")
    ap.add_argument("--models", default="", help="comma-separated model files (default: two small ones + ResNet-18)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--iters", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=3, help="CLI and Python alternate this many times")
    ap.add_argument("--target", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--precision", default="fp32", help="fp32 | bf16 | fp16 (cuda)")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tessel-overhead-")
    models = a.models.split(",") if a.models else small_models(tmp)
    if not a.models:
        here = os.path.dirname(os.path.abspath(__file__))
        r18 = os.path.join(here, "..", "build", "models", "resnet18.ts17.onnx")
        if os.path.exists(r18):
            models.append(r18)
    rng = np.random.default_rng(1)
    print(f"{'model':<28} {'cli median us':>14} {'python median us':>17} {'overhead us':>12}")
    small = []  # overheads on models that run in under a millisecond: there the per-call cost shows
    for m in models:
        dims = symbol_values(m)
        exe = tessel.compile(m, threads=a.threads, dims=dims, target=a.target, precision=a.precision)
        arrays = inputs_for(exe, dims, rng)
        files = {}
        for name, arr in arrays.items():
            files[name] = os.path.join(tmp, f"{os.path.basename(m)}.{name}.npy")
            np.save(files[name], arr)
        iters = a.iters if os.path.getsize(m) < (1 << 20) else 50  # the small models take many more
        cli, py = [], []
        for _ in range(a.rounds):
            cli.append(cli_median_ms(a.tessel, m, files, a.threads, iters, a.target, a.precision))
            timer = python_cuda_median_ms if a.target == "cuda" else python_median_ms
            py.append(timer(exe, arrays, iters))
        c, p = statistics.median(cli) * 1e3, statistics.median(py) * 1e3
        if c < 1000:
            small.append(p - c)
        print(f"{os.path.basename(m):<28} {c:>14.2f} {p:>17.2f} {p - c:>12.2f}", flush=True)
    if small:
        print(f"overhead per call (models under 1 ms): at most {max(small):.2f} us; on models of tens of ms the "
              f"difference between two processes is run-to-run noise")


if __name__ == "__main__":
    sys.exit(main())
