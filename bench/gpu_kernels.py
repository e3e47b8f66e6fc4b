#!/usr/bin/env python3
"""Kernel-level GPU throughput: tessel --target cuda vs PyTorch on the
shapes of issue 5's "Done when", on the device machine (one H200).

    python3 bench/gpu_kernels.py --tessel gpu-bundle/tessel --out /tmp/tessel-kernels \\
        [--json-out FILE] [--only gemm4096,gemm8192,attention] [--warmup 5 --iters 30]

Configurations, each a one-pattern ONNX model (opset 17, every tensor
BFLOAT16, so tessel runs it without casts) written into --out:
  gemm4096, gemm8192  Y = MatMul(A, B), A and B [n, n] graph inputs;
                      PyTorch: torch.matmul (cuBLAS). FLOPs 2 n^3.
  attention           Q, K, V [1, 64, 4096, 128] (batch x heads 64, seq 4096,
                      head dim 128), O = Softmax(Q K^T * 1/sqrt(128)) V,
                      non-causal; PyTorch: scaled_dot_product_attention with
                      the FlashAttention backend (the default backend where
                      that fails). FLOPs 4 B H S^2 D (the two matmuls).

tessel's time is `tessel bench --target cuda --precision bf16` on its own
random inputs: the CUDA-graph replay's median (tessel_ms), and the sum of
the per-kernel medians of `--profile` (each launch timed alone,
tessel_kernels_ms). PyTorch's is the median of --iters CUDA-event timings
after --warmup on random bf16 device tensors (gpu_models.cuda_time).
ratio = torch_ms / tessel_ms: tessel's throughput as a fraction of
PyTorch's (the GEMM target is >= 0.8). Numerics are not checked here: the
GPU tests and tools/compare_models.py cover them.

One `RESULT {json}` line per configuration as it finishes (appended to
--json-out too), then a markdown table; exit status 1 when either side
failed on some configuration (the others still run). --models-only writes
the models and exits; --scale-down (for local checks without a GPU only)
divides the sizes by 32 (gemm 128 and 256, attention [1, 2, 128, 128]; head
dim kept).
"""
import argparse
import json
import math
import os
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import gpu_models  # noqa: E402  (cuda_time, run_tessel_json)

NAMES = ["gemm4096", "gemm8192", "attention"]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessel", default=os.path.join(os.path.dirname(HERE), "gpu-bundle", "tessel"))
    p.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "tessel-kernels"))
    p.add_argument("--json-out", help="append one JSON object per configuration here")
    p.add_argument("--only", default="", help="comma-separated subset of " + ",".join(NAMES))
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--models-only", action="store_true", help="write the models into --out and exit")
    p.add_argument("--scale-down", action="store_true", help="sizes / 32, for local checks only")
    return p.parse_args()


def shapes(name, scale):
    """The configuration's sizes: (n,) for a GEMM, (B, H, S, D) for attention."""
    if name.startswith("gemm"):
        return (int(name[4:]) // scale,)
    return (1, 64 // scale, 4096 // scale, 128)


def flops(name, dims):
    if name.startswith("gemm"):
        return 2 * dims[0] ** 3
    b, h, s, d = dims
    return 4 * b * h * s * s * d


# ---- models -------------------------------------------------------------------------------

def write_model(name, dims, path):
    from onnx import TensorProto, helper, save
    bf16 = TensorProto.BFLOAT16

    def vi(n, shape):
        return helper.make_tensor_value_info(n, bf16, list(shape))

    if name.startswith("gemm"):
        n = dims[0]
        nodes = [helper.make_node("MatMul", ["A", "B"], ["Y"])]
        inputs, outputs, inits = [vi("A", [n, n]), vi("B", [n, n])], [vi("Y", [n, n])], []
    else:
        b, h, s, d = dims
        nodes = [
            helper.make_node("Transpose", ["K"], ["Kt"], perm=[0, 1, 3, 2]),
            helper.make_node("MatMul", ["Q", "Kt"], ["S"]),
            helper.make_node("Mul", ["S", "scale"], ["S2"]),
            helper.make_node("Softmax", ["S2"], ["P"], axis=-1),
            helper.make_node("MatMul", ["P", "V"], ["O"]),
        ]
        inputs = [vi(x, dims) for x in ("Q", "K", "V")]
        outputs = [vi("O", dims)]
        inits = [helper.make_tensor("scale", bf16, [], [1 / math.sqrt(d)])]  # onnx rounds it to bf16
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


# ---- the two sides ------------------------------------------------------------------------

def bench_tessel(path, args, res):
    cmd = [args.tessel, "bench", path, "--target", "cuda", "--precision", "bf16", "--warmup", str(args.warmup),
           "--iters", str(args.iters), "--json", "--profile", "100000"]
    doc = gpu_models.run_tessel_json(cmd, res)
    if doc is None:
        return
    res["tessel_ms"] = doc["median_ms"]
    res["tessel_kernels_ms"] = sum(row["median_ms"] for row in doc.get("profile", []))
    res["tessel_kernels"] = [f"{row['median_ms']:.3f} ms {row['what']}" for row in doc.get("profile", [])]


def bench_torch(name, dims, args, res):
    import torch
    torch.manual_seed(0)
    rand = lambda *shape: torch.randn(*shape, device="cuda", dtype=torch.bfloat16)  # noqa: E731
    if name.startswith("gemm"):
        a, b = rand(dims[0], dims[0]), rand(dims[0], dims[0])
        res["torch_ms"] = gpu_models.cuda_time(lambda: torch.matmul(a, b), args.warmup, args.iters)
        res["torch_backend"] = "cublas"
    else:
        q, k, v = rand(*dims), rand(*dims), rand(*dims)
        sdpa = lambda: torch.nn.functional.scaled_dot_product_attention(q, k, v)  # noqa: E731
        try:
            try:
                from torch.nn.attention import SDPBackend, sdpa_kernel
                flash = sdpa_kernel(SDPBackend.FLASH_ATTENTION)
            except ImportError:  # before torch 2.3
                flash = torch.backends.cuda.sdp_kernel(enable_flash=True, enable_math=False,
                                                       enable_mem_efficient=False)
            with flash:
                res["torch_ms"] = gpu_models.cuda_time(sdpa, args.warmup, args.iters)
            res["torch_backend"] = "flash_attention"
        except RuntimeError as e:
            res["torch_ms"] = gpu_models.cuda_time(sdpa, args.warmup, args.iters)
            res["torch_backend"] = f"default (flash failed: {str(e)[:120]})"
    torch.cuda.empty_cache()


# ---- driver -------------------------------------------------------------------------------

def fmt(v, nd=3):
    return "-" if v is None else f"{v:.{nd}f}"


def main():
    args = parse_args()
    names = [n for n in NAMES if not args.only or n in args.only.split(",")]
    scale = 32 if args.scale_down else 1
    os.makedirs(args.out, exist_ok=True)
    paths = {}
    for name in names:
        paths[name] = os.path.join(args.out, name + ".onnx")
        write_model(name, shapes(name, scale), paths[name])
    if args.models_only:
        print("\n".join(paths.values()))
        return 0
    results = []
    for name in names:
        dims = shapes(name, scale)
        res = {"name": name, "shape": list(dims), "flops": flops(name, dims)}
        bench_tessel(paths[name], args, res)
        try:
            bench_torch(name, dims, args, res)
        except Exception as e:  # report and go on with the next configuration
            res["torch_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        for side in ("tessel", "torch"):
            if res.get(side + "_ms"):
                res["tflops_" + side] = res["flops"] / (res[side + "_ms"] / 1e3) / 1e12
        if res.get("tessel_ms") and res.get("torch_ms"):
            res["ratio"] = res["torch_ms"] / res["tessel_ms"]
        results.append(res)
        print("RESULT " + json.dumps(res), flush=True)
        if args.json_out:
            with open(args.json_out, "a") as f:
                f.write(json.dumps(res) + "\n")
    print("\n| kernel | tessel ms | tessel kernels ms | torch ms | tessel TFLOP/s | torch TFLOP/s | "
          "torch/tessel | torch backend |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        print(f"| {r['name']} | {fmt(r.get('tessel_ms'))} | {fmt(r.get('tessel_kernels_ms'))} | "
              f"{fmt(r.get('torch_ms'))} | {fmt(r.get('tflops_tessel'), 1)} | {fmt(r.get('tflops_torch'), 1)} | "
              f"{fmt(r.get('ratio'), 2)} | {r.get('torch_backend', '-')} |")
        for k in ("tessel_error", "torch_error"):
            if k in r:
                print(f"  {k}: {r[k]}")
    return 1 if any("tessel_error" in r or "torch_error" in r for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
