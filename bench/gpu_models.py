#!/usr/bin/env python3
"""Whole-model GPU latency: tessel --target cuda vs PyTorch eager vs
torch.compile(mode="reduce-overhead"), on the device machine (one H200).

    python3 bench/gpu_models.py --tessel gpu-bundle/tessel --models-dir gpu-bundle/models \\
        --out /tmp/tessel-models [--precision bf16] [--only resnet50:1,bert_base:16] \\
        [--json-out $OUT/gpu_bench.json]

The models are the skeletons of ../shared/models, materialized on the
device machine (materialize.py needs onnx, numpy and onnxruntime, all
installed there); scripts/build_gpu_bundle.sh copies them (and materialize.py) into the bundle
so that the run carries them. PyTorch runs the same architectures
(torchvision, transformers) with random weights at the same batch and
sequence length.

Both sides are timed the same way: CUDA events around one forward pass on
inputs already on the device, median of --iters (30) after --warmup (5).
tessel's time is `tessel bench --target cuda` (a CUDA graph replay); its
host copies (inputs in, outputs out) are reported apart. For each model the
script also reports PyTorch's own bf16 error against fp32 on the same inputs
(relative L2 of the first output), the yardstick of the bf16 accuracy check.

One line per configuration as it finishes (so a run cut short by the
device's 10-minute limit still reports), then the table and the geometric
mean of tessel / torch.compile.
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
sys.path.insert(0, os.path.join(ROOT, "tools"))
import compare_models  # noqa: E402  (materialize, make_inputs, symbol_bindings)

# (model stem, batch, seq): the benchmark set of the CUDA backend issue.
CONFIGS = [
    ("resnet50.ts17", 1, None), ("resnet50.ts17", 32, None),
    ("bert_base.ts17", 1, 128), ("bert_base.ts17", 16, 128),
    ("gpt2.ts17", 1, 128), ("gpt2.ts17", 16, 128),
    ("vit_b_16.ts17", 1, None), ("vit_b_16.ts17", 32, None),
    ("llama_tiny.dynamo", 1, 128),
]


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessel", default=os.path.join(ROOT, "gpu-bundle", "tessel"))
    p.add_argument("--models-dir", default=os.path.join(ROOT, "gpu-bundle", "models"))
    p.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "tessel-gpu-models"))
    p.add_argument("--precision", default="bf16", choices=["bf16", "fp16", "fp32"])
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--iters", type=int, default=30)
    p.add_argument("--only", default="", help="comma-separated family:batch (e.g. resnet50:1,bert_base:16)")
    p.add_argument("--no-torch-compile", action="store_true", help="skip torch.compile (it takes minutes per model)")
    p.add_argument("--no-tessel", action="store_true")
    p.add_argument("--no-torch", action="store_true",
                   help="skip PyTorch altogether (an A/B of tessel options: compare tessel_ms between runs)")
    p.add_argument("--tessel-arg", action="append", default=[], metavar="ARG",
                   help="pass ARG to tessel bench (repeatable), e.g. --tessel-arg=--disable-pass "
                        "--tessel-arg=merge_matmuls")
    p.add_argument("--json-out", help="append one JSON object per configuration here")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="also list, per configuration, tessel's N costliest kinds of kernel (tessel bench --profile: "
                        "each launch timed alone; launches with the same ops, bytes and FLOPs summed), with "
                        "their count, bytes, FLOPs, GB/s and TFLOP/s")
    return p.parse_args()


def family(stem):
    return stem.split(".")[0]


# ---- PyTorch side -------------------------------------------------------------------------

def torch_model(fam):
    """The architecture the skeleton was exported from, with random weights."""
    if fam in ("resnet50", "vit_b_16"):
        import torchvision
        return getattr(torchvision.models, fam)(weights=None)
    import transformers as tf
    if fam == "bert_base":
        return tf.BertModel(tf.BertConfig())
    if fam == "gpt2":
        return tf.GPT2LMHeadModel(tf.GPT2Config())
    if fam == "llama_tiny":
        cfg = tf.LlamaConfig(vocab_size=32000, hidden_size=512, intermediate_size=1376, num_hidden_layers=4,
                             num_attention_heads=8, num_key_value_heads=4, max_position_embeddings=2048)
        return tf.LlamaForCausalLM(cfg)
    raise ValueError(fam)


def torch_inputs(fam, feeds, device):
    import torch
    if fam in ("resnet50", "vit_b_16"):
        return (torch.from_numpy(next(iter(feeds.values()))).to(device),), {}
    kw = {k: torch.from_numpy(v).to(device) for k, v in feeds.items()}
    return (), kw


def first_tensor(out):
    import torch
    if isinstance(out, torch.Tensor):
        return out
    if hasattr(out, "logits"):
        return out.logits
    if hasattr(out, "last_hidden_state"):
        return out.last_hidden_state
    return out[0]


def cuda_time(fn, warmup, iters, before_each=None):
    """Median milliseconds of fn() between two CUDA events, after warm-up."""
    import torch
    for _ in range(warmup):
        if before_each:
            before_each()
        fn()
    torch.cuda.synchronize()
    ms = []
    for _ in range(iters):
        if before_each:
            before_each()
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ms.append(a.elapsed_time(b))
    return statistics.median(ms)


def measure_ceilings():
    """The two ceilings a kernel's roofline line is read against, measured
    here (the issue's method): cuBLAS bf16 GEMM throughput (torch.matmul,
    8192^3) and device copy bandwidth (bytes read + written by a 1 GiB
    device-to-device copy), medians of 10 after 3 warm-ups."""
    import torch
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    gemm_ms = cuda_time(lambda: torch.matmul(a, b), 3, 10)
    src = torch.empty(1 << 30, device="cuda", dtype=torch.uint8)
    dst = torch.empty_like(src)
    copy_ms = cuda_time(lambda: dst.copy_(src), 3, 10)
    del a, b, src, dst
    torch.cuda.empty_cache()
    return {"gemm_tflops": 2 * n ** 3 / (gemm_ms / 1e3) / 1e12, "copy_gbps": 2 * (1 << 30) / (copy_ms / 1e3) / 1e9}


def bench_torch(fam, feeds, args, res):
    import torch
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.precision]
    torch.manual_seed(0)
    # The fp32 reference is true fp32 (cuDNN would use TF32 for convolutions).
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    model = torch_model(fam).eval().to("cuda")
    pos, kw = torch_inputs(fam, feeds, "cuda")
    # The error is measured off nn.MultiheadAttention's fused inference path:
    # at bf16 it gave NaN for ViT-B/16 on the H200 (2026-12-04) where the
    # plain path gives a finite error. Timings keep the fast path.
    mha = getattr(torch.backends, "mha", None)
    with torch.inference_mode():
        if mha:
            mha.set_fastpath_enabled(False)
        ref = first_tensor(model(*pos, **kw)).float()
        model = model.to(dtype)
        pos_lp = tuple(t.to(dtype) if t.is_floating_point() else t for t in pos)
        low = first_tensor(model(*pos_lp, **kw)).float()
        if mha:
            mha.set_fastpath_enabled(True)
        res["torch_rel_l2_vs_fp32"] = float(torch.linalg.vector_norm(low - ref) / torch.linalg.vector_norm(ref))
        res["torch_eager_ms"] = cuda_time(lambda: model(*pos_lp, **kw), args.warmup, args.iters)
        if not args.no_torch_compile:
            t0 = time.time()
            compiled = torch.compile(model, mode="reduce-overhead")
            mark = getattr(torch.compiler, "cudagraph_mark_step_begin", None)
            res["torch_compile_ms"] = cuda_time(lambda: compiled(*pos_lp, **kw), args.warmup, args.iters, mark)
            res["torch_compile_s"] = round(time.time() - t0, 1)
    del model
    torch.cuda.empty_cache()


# ---- tessel side --------------------------------------------------------------------------

def run_tessel_json(cmd, res):
    """Runs a `tessel ... --json` command: its JSON document, or None with
    res["tessel_error"] set to its last error line."""
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=900)
    if p.returncode != 0:
        err = [l for l in p.stderr.decode(errors="replace").splitlines() if l.startswith("error:")]
        res["tessel_error"] = err[-1] if err else p.stderr.decode(errors="replace")[-400:]
        return None
    return json.loads(p.stdout)


def input_args(feeds, work):
    """The feeds saved as .npy files in `work`: tessel's --input NAME=FILE arguments."""
    import numpy as np
    os.makedirs(work, exist_ok=True)
    args = []
    for i, (name, a) in enumerate(feeds.items()):
        path = os.path.join(work, f"input_{i}.npy")
        np.save(path, a)
        args += ["--input", f"{name}={path}"]
    return args


def bench_tessel(model_path, feeds, args, res, work):
    cmd = [args.tessel, "bench", model_path, "--target", "cuda", "--precision", args.precision,
           "--warmup", str(args.warmup), "--iters", str(args.iters), "--json"]
    if args.profile > 0:
        cmd += ["--profile", "100000"]  # every step: profile_kinds() groups them
    cmd += args.tessel_arg
    cmd += input_args(feeds, work)
    t0 = time.time()
    doc = run_tessel_json(cmd, res)
    res["tessel_wall_s"] = round(time.time() - t0, 1)
    if doc is None:
        return
    res["tessel_ms"] = doc["median_ms"]
    for k in ("upload_ms", "download_ms", "end_to_end_ms", "compile_s", "cuda_graph", "profile"):
        if k in doc:
            res["tessel_" + k] = doc[k]


def profile_kinds(rows):
    """tessel bench --profile's steps grouped by kind: the same ops (the
    bracketed list of `what`), bytes and FLOPs; costliest first. Each kind
    has its launch count, summed time and share, and its median launch."""
    kinds = {}
    for row in rows:
        what = row["what"]
        ops = what[what.find("["):] if "[" in what else what
        k = kinds.setdefault((ops, row["bytes"], row["flops"]), {
            "ops": ops, "bytes": row["bytes"], "flops": row["flops"], "count": 0, "total_ms": 0.0, "share": 0.0,
            "launches": []})
        k["count"] += 1
        k["total_ms"] += row["median_ms"]
        k["share"] += row["share"]
        k["launches"].append(row["median_ms"])
    out = sorted(kinds.values(), key=lambda k: -k["total_ms"])
    for k in out:
        k["median_ms"] = sorted(k.pop("launches"))[(k["count"] - 1) // 2]
    return out


# ---- driver -------------------------------------------------------------------------------

def fmt(v, nd=3):
    return "-" if v is None else f"{v:.{nd}f}"


def main():
    args = parse_args()
    want = set(args.only.split(",")) if args.only else None
    configs = [c for c in CONFIGS if not want or f"{family(c[0])}:{c[1]}" in want]
    os.makedirs(args.out, exist_ok=True)
    results = []
    ceilings = None
    if args.profile > 0:
        try:
            ceilings = measure_ceilings()
            print("CEILINGS " + json.dumps(ceilings), flush=True)
        except Exception as e:  # no torch or no GPU: the profile goes without percentages
            print(f"note: no ceilings measured ({type(e).__name__}: {str(e)[:200]})", flush=True)
    for stem, batch, seq in configs:
        fam = family(stem)
        res = {"model": fam, "batch": batch, "seq": seq, "precision": args.precision}
        skel = os.path.join(args.models_dir, stem + ".skel.onnx")
        model_path = os.path.join(args.out, stem + ".onnx")
        compare_models.materialize(skel, model_path, args.models_dir)
        feeds = compare_models.make_inputs(model_path, stem, seq or 128, batch)
        if not args.no_tessel:
            bench_tessel(model_path, feeds, args, res, os.path.join(args.out, f"{fam}_b{batch}"))
        if args.tessel_arg:
            res["tessel_args"] = args.tessel_arg
        try:
            if not args.no_torch:
                bench_torch(fam, feeds, args, res)
        except Exception as e:  # report and go on with the next model
            res["torch_error"] = f"{type(e).__name__}: {str(e)[:300]}"
        if res.get("tessel_ms") and res.get("torch_compile_ms"):
            res["tessel_over_compile"] = res["tessel_ms"] / res["torch_compile_ms"]
        if ceilings:
            res["ceilings"] = ceilings
        results.append(res)
        print("RESULT " + json.dumps(res), flush=True)
        if args.json_out:
            with open(args.json_out, "a") as f:
                f.write(json.dumps(res) + "\n")
    print(f"\n| model | batch | tessel ms | eager ms | torch.compile ms | tessel/compile | tessel H2D+D2H ms | "
          f"torch {args.precision} rel L2 vs fp32 |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in results:
        copies = (r.get("tessel_upload_ms") or 0) + (r.get("tessel_download_ms") or 0) if "tessel_ms" in r else None
        print(f"| {r['model']} | {r['batch']} | {fmt(r.get('tessel_ms'))} | {fmt(r.get('torch_eager_ms'))} | "
              f"{fmt(r.get('torch_compile_ms'))} | {fmt(r.get('tessel_over_compile'), 2)} | {fmt(copies)} | "
              f"{fmt(r.get('torch_rel_l2_vs_fp32'), 4)} |")
        for k in ("tessel_error", "torch_error"):
            if k in r:
                print(f"  {k}: {r[k]}")
    if ceilings:
        print(f"\nceilings (this run): cuBLAS bf16 GEMM 8192^3 {ceilings['gemm_tflops']:.0f} TFLOP/s, device copy "
              f"{ceilings['copy_gbps']:.0f} GB/s (read + write); 'bw' and 'mma' below are % of those")
    for r in results:
        if r.get("tessel_profile"):
            print(f"\n{r['model']} batch {r['batch']}: costliest kinds of tessel kernel (each launch timed alone; "
                  f"per launch: median ms, bytes, FLOPs)")
            for k in profile_kinds(r["tessel_profile"])[:args.profile]:
                s = k["median_ms"] / 1e3
                line = (f"  {k['total_ms']:8.3f} ms {100 * k['share']:5.1f}% {k['count']:3d} x {k['median_ms']:7.3f} ms  "
                        f"{k['ops'][:50]:<50}")
                line += f" {k['bytes'] / 1e6:8.2f} MB {k['bytes'] / s / 1e9:7.0f} GB/s" if s > 0 else ""
                if k["flops"] > 0 and s > 0:
                    line += f"  {k['flops'] / 1e9:8.2f} GFLOP {k['flops'] / s / 1e12:6.1f} TFLOP/s"
                if ceilings and s > 0:
                    line += f"  bw {100 * k['bytes'] / s / 1e9 / ceilings['copy_gbps']:3.0f}%"
                    if k["flops"] > 0:
                        line += f" mma {100 * k['flops'] / s / 1e12 / ceilings['gemm_tflops']:3.0f}%"
                print(line)
    ratios = [r["tessel_over_compile"] for r in results if "tessel_over_compile" in r]
    if ratios:
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        print(f"\ngeomean tessel / torch.compile(reduce-overhead): {geo:.2f} over {len(ratios)} of {len(results)} "
              f"configurations")
    return 0


if __name__ == "__main__":
    sys.exit(main())
