#!/usr/bin/env python3
"""Checks `tessel run --precision bf16|fp16` on the real model architectures
against the fp32 reference (ONNX Runtime, fp32, on the same inputs).

    check_precision.py [--tessel BIN] [--out build/models] [--precision bf16,fp16]
                       [--target cpu] [--models resnet18.ts17,...] [--max-rel-l2 2e-2]

Models and inputs are those of compare_models.py (materialized into OUT,
batch 1, seq --seq). For each model and precision it runs

    tessel run MODEL --target T --precision P --input NAME=FILE ... --save-outputs DIR

and reports, for every output, the relative L2 error
||tessel - ref||_2 / ||ref||_2, beside a floor: the error ONNX Runtime itself
gets in fp32 when only the weights (float initializers) and the float inputs
are rounded to the low type first. The floor is what storing the model in
that type costs before any low-precision arithmetic; on the deep CNNs with
random weights it is above 2e-2 (perturbations grow by about 20% per layer
there), which no bf16 implementation can beat.

A model passes when the non-finite values agree and every output's error is
at most --max-rel-l2, or at most --floor-factor times its floor. With
--torch-reference (needs torch and onnx2torch, as on the GPU machine) it also
reports PyTorch's own error on the same weights and inputs
(tools/torch_reference.py), and an output within twice that passes too: the
CUDA backend issue's bound max(2e-2, 2 x PyTorch's error). Exit status 0
when all pass.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import compare_models  # noqa: E402  (materialize, make_inputs, run_ort, the models folder)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessel", default=os.path.join(compare_models.ROOT, "build", "bin", "tessel"))
    p.add_argument("--models-dir", default=os.environ.get("TESSEL_MODELS_DIR", compare_models.DEFAULT_MODELS_DIR))
    p.add_argument("--out", default=os.path.join(compare_models.ROOT, "build", "models"))
    p.add_argument("--target", default="cpu")
    p.add_argument("--precision", default="bf16,fp16", help="comma-separated: bf16, fp16")
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--models", default="", help="comma-separated subset (e.g. resnet18.ts17,llama_tiny.dynamo)")
    p.add_argument("--max-rel-l2", type=float, default=2e-2)
    p.add_argument("--floor-factor", type=float, default=1.5,
                   help="also pass an output whose error is at most this times its floor (see above)")
    p.add_argument("--torch-reference", action="store_true",
                   help="also measure PyTorch's own error on the same weights and inputs (onnx2torch) and pass "
                        "outputs within twice it")
    p.add_argument("--timeout", type=float, default=900, help="seconds for one tessel run")
    p.add_argument("--json-out", help="write the per-model results here")
    return p.parse_args()


def round_to(a, precision):
    """f32 values rounded to bf16/fp16 (nearest even; finite values saturate, as tessel converts weights)."""
    import numpy as np

    a = np.asarray(a, np.float32)
    if precision == "fp16":
        r = np.clip(a, -65504, 65504).astype(np.float16).astype(np.float32)
    else:
        b = a.view(np.uint32).astype(np.uint64)
        r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16).astype(np.uint32).view(np.float32)
        big = np.float32(3.3895314e38)  # bf16's largest finite value
        r = np.where(np.isinf(r) & np.isfinite(a), np.copysign(big, a), r).astype(np.float32)
    return np.where(np.isnan(a), a, r)


def floor_outputs(model_path, feeds, precision):
    """ONNX Runtime in fp32 on the model with its float initializers and float inputs rounded to `precision`."""
    import numpy as np
    import onnx
    import onnxruntime as ort
    from onnx import numpy_helper

    m = onnx.load(model_path)
    for init in m.graph.initializer:
        if init.data_type == onnx.TensorProto.FLOAT:
            init.CopyFrom(numpy_helper.from_array(round_to(numpy_helper.to_array(init), precision), init.name))
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {k: round_to(v, precision) if v.dtype == np.float32 else v for k, v in feeds.items()})


def rel_l2(got, ref):
    import numpy as np

    a = got.astype(np.float64)
    b = ref.astype(np.float64)
    if a.shape != b.shape:
        return None, f"shape {a.shape}, reference {b.shape}"
    finite = np.isfinite(b)
    if not np.array_equal(np.isfinite(a), finite):
        return None, f"{int(np.sum(np.isfinite(a) != finite))} non-finite values differ"
    den = np.linalg.norm(b[finite])
    num = np.linalg.norm((a - b)[finite])
    return (float(num / den) if den > 0 else float(num)), ""


def run_tessel(args, model_path, feeds, work, precision):
    import numpy as np

    in_dir = os.path.join(work, "inputs")
    out_dir = os.path.join(work, f"outputs-{precision}")
    os.makedirs(in_dir, exist_ok=True)
    for f in glob.glob(os.path.join(out_dir, "output_*.npy")):
        os.remove(f)
    cmd = [args.tessel, "run", model_path, "--target", args.target, "--precision", precision, "--seed", "0",
           "--save-outputs", out_dir, "--json"]
    for i, (name, a) in enumerate(feeds.items()):
        path = os.path.join(in_dir, f"{i}.npy")
        np.save(path, a)
        cmd += ["--input", f"{name}={path}"]
    t0 = time.time()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=args.timeout)
    wall = time.time() - t0
    if p.returncode != 0:
        err = [l for l in p.stderr.decode(errors="replace").splitlines() if l.startswith("error:")]
        raise RuntimeError((err[-1] if err else p.stderr.decode(errors="replace")[-500:]) + f" (exit {p.returncode})")
    doc = json.loads(p.stdout)
    outs = []
    for i in range(len(doc["outputs"])):
        outs.append(np.load(os.path.join(out_dir, f"output_{i}.npy")))
    return outs, wall, doc.get("time_ms", 0)


def check_model(args, skel, precisions):
    stem = os.path.basename(skel)[: -len(".skel.onnx")]
    os.makedirs(args.out, exist_ok=True)
    model_path = os.path.join(args.out, stem + ".onnx")
    compare_models.materialize(skel, model_path, args.models_dir)
    feeds = compare_models.make_inputs(model_path, stem, args.seq)
    ref, _ = compare_models.run_ort(model_path, feeds)
    work = os.path.join(args.out, stem + ".precision")
    results = []
    for prec in precisions:
        r = {"model": stem, "precision": prec, "ok": False, "rel_l2": [], "floor": [], "torch_rel_l2": []}
        floor = floor_outputs(model_path, feeds, prec)
        torch_outs = []
        if args.torch_reference:
            try:
                import torch_reference
                torch_outs = torch_reference.low_precision_outputs(model_path, feeds, prec)
            except Exception as e:  # noqa: BLE001 (an op onnx2torch lacks: report it, keep the other bounds)
                r["torch_message"] = f"{type(e).__name__}: {str(e)[:300]}"
        try:
            outs, wall, ms = run_tessel(args, model_path, feeds, work, prec)
        except (RuntimeError, subprocess.TimeoutExpired) as e:
            r["message"] = str(e)
            results.append(r)
            continue
        r["wall_s"], r["run_ms"] = round(wall, 1), round(ms, 1)
        msgs = []
        for i, want in enumerate(ref):
            if i >= len(outs):
                msgs.append(f"output {i} missing")
                continue
            e, msg = rel_l2(outs[i], want)
            f, _ = rel_l2(floor[i], want)
            t = rel_l2(torch_outs[i], want)[0] if i < len(torch_outs) else None
            r["rel_l2"].append(e)
            r["floor"].append(f)
            r["torch_rel_l2"].append(t)
            if msg:
                msgs.append(f"output {i}: {msg}")
            elif t is not None and e <= 2 * t:
                pass
            elif e > args.max_rel_l2 and (f is None or e > args.floor_factor * f):
                msgs.append(f"output {i}: relative L2 error {e:.3g} > {args.max_rel_l2:g} and > "
                            f"{args.floor_factor:g} x its floor {f:.3g}")
        r["ok"] = not msgs and len(r["rel_l2"]) == len(ref)
        r["message"] = "; ".join(msgs)
        results.append(r)
    return results


def main():
    args = parse_args()
    if not os.path.isfile(args.tessel):
        sys.exit(f"tessel binary not found: {args.tessel}")
    precisions = [p for p in args.precision.split(",") if p]
    skels = compare_models.select_skeletons(args.models_dir, args.models)
    print(f"--precision {','.join(precisions)} on --target {args.target} vs fp32 ONNX Runtime, "
          f"relative L2 error per output (max {args.max_rel_l2:g})", flush=True)
    results = []
    t_all = time.time()
    for s in skels:
        for r in check_model(args, s, precisions):
            results.append(r)
            errs = ", ".join(f"{e:.2e}" for e in r["rel_l2"] if e is not None)
            floors = ", ".join(f"{e:.2e}" for e in r["floor"] if e is not None)
            torch_errs = ", ".join(f"{e:.2e}" for e in r["torch_rel_l2"] if e is not None)
            status = "OK  " if r["ok"] else "FAIL"
            print(f"{status} {r['model']:<20} {r['precision']:<5} rel L2 [{errs}] floor [{floors}]"
                  + (f" pytorch [{torch_errs}]" if args.torch_reference else "")
                  + f"  run {r.get('run_ms', float('nan')):.0f} ms (wall {r.get('wall_s', float('nan')):.1f} s)",
                  flush=True)
            if r.get("torch_message"):
                print(f"     pytorch: {r['torch_message']}", flush=True)
            if r.get("message"):
                print(f"     {r['message'][:400]}", flush=True)
    n_ok = sum(r["ok"] for r in results)
    print(f"precision: {n_ok}/{len(results)} within {args.max_rel_l2:g} or {args.floor_factor:g} x the floor "
          f"({time.time() - t_all:.0f} s)")
    return compare_models.write_results(results, args.json_out)


if __name__ == "__main__":
    sys.exit(main())
