#!/usr/bin/env python3
"""Compares `tessel run` with ONNX Runtime on the real model architectures of
../shared/models (skeletons refilled by their materialize.py).

    compare_models.py [--tessel BIN] [--out build/models] [--target reference]
                      [--seq 128] [--models resnet18.ts17,gpt2.ts17,...]
    compare_models.py --cuda-compile-only sm_90a [--require-compiled] ...

For each model: materialize it into OUT (cached), write random inputs as .npy
(batch 1 or --batch; token ids below the vocabulary size, attention masks of ones,
images standard normal), run

    tessel run MODEL --target T --seed 0 --save-outputs DIR --input NAME=FILE ... --json

and ONNX Runtime on the same inputs, and check every output elementwise:

    |tessel - ort| <= 1e-3 * max|ort| + 1e-3 * |ort|

Prints per model the max error, the allowed error at that element and both
run times. Exit status 0 when every model matches.

With --cuda-compile-only ARCH nothing runs: every model's GPU kernels are
compiled with NVRTC at the inputs' shapes (`tessel compile --target cuda`),
which needs no GPU (CI does this).
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
# The skeletons live in ../shared/models beside the checkout; a clone elsewhere
# finds them through $TESSEL_SHARED_MODELS or the workplace's /work/shared.
DEFAULT_MODELS_DIR = next(
    (d for d in (os.environ.get("TESSEL_SHARED_MODELS", ""),
                 os.path.normpath(os.path.join(ROOT, "..", "shared", "models")),
                 "/work/shared/models") if d and os.path.isdir(d)),
    os.path.normpath(os.path.join(ROOT, "..", "shared", "models")))
VOCAB = {"bert_base": 30522, "gpt2": 50257, "llama_tiny": 32000}


def parse_args():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tessel", default=os.path.join(ROOT, "build", "bin", "tessel"))
    p.add_argument("--models-dir", default=os.environ.get("TESSEL_MODELS_DIR", DEFAULT_MODELS_DIR))
    p.add_argument("--out", default=os.path.join(ROOT, "build", "models"))
    p.add_argument("--target", default="reference")
    p.add_argument("--seq", type=int, default=128, help="sequence length of the text models with a symbolic seq")
    p.add_argument("--batch", type=int, default=1,
                   help="batch size of the models with a symbolic batch (models exported with a fixed batch keep it)")
    p.add_argument("--require-compiled", action="store_true",
                   help="fail a model when any node ran on the reference interpreter (target cpu)")
    p.add_argument("--models", default="", help="comma-separated subset (e.g. resnet18.ts17,gpt2.ts17)")
    p.add_argument("--timeout", type=float, default=900, help="seconds for one tessel run")
    p.add_argument("--rtol", type=float, default=1e-3)
    p.add_argument("--atol-rel", type=float, default=1e-3, help="absolute tolerance as a fraction of max|ref|")
    p.add_argument("--json-out", help="write the per-model results here")
    p.add_argument("--tessel-arg", action="append", default=[], metavar="ARG",
                   help="pass ARG to every tessel run or compile (repeatable), e.g. "
                        "--tessel-arg=--knob --tessel-arg=gpu.flash.on=0")
    p.add_argument("--cuda-compile-only", metavar="ARCH",
                   help="instead of running: compile every model's GPU kernels with NVRTC for ARCH (e.g. sm_90a) "
                        "at the inputs' shapes (tessel compile --target cuda; no GPU needed)")
    p.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "fp16"],
                   help="with --cuda-compile-only: the kernels of this precision (tessel --precision)")
    p.add_argument("--materialize-only", action="store_true",
                   help="only materialize the models into OUT (tests that read them use this as a fixture)")
    return p.parse_args()


def select_skeletons(models_dir, models=""):
    """The *.skel.onnx files of models_dir, or of the comma-separated stems in `models` (exits on unknown ones)."""
    skels = sorted(glob.glob(os.path.join(models_dir, "*.skel.onnx")))
    if models:
        want = set(models.split(","))
        skels = [s for s in skels if os.path.basename(s)[: -len(".skel.onnx")] in want]
        missing = want - {os.path.basename(s)[: -len(".skel.onnx")] for s in skels}
        if missing:
            sys.exit(f"unknown models: {', '.join(sorted(missing))}")
    if not skels:
        sys.exit(f"no *.skel.onnx in {models_dir}")
    return skels


def write_results(results, json_out):
    """Writes the per-model results to json_out (if given); returns the exit status (0 when all are ok)."""
    if json_out:
        with open(json_out, "w") as f:
            json.dump(results, f, indent=1)
    return 0 if all(r["ok"] for r in results) else 1


def materialize(skel, out_path, models_dir):
    # Folders of extra skeletons (models/heldout) use shared/models' script.
    script = os.path.join(models_dir, "materialize.py")
    if not os.path.exists(script):
        script = os.path.join(DEFAULT_MODELS_DIR, "materialize.py")
    if os.path.exists(out_path) and os.path.getmtime(out_path) >= max(os.path.getmtime(skel), os.path.getmtime(script)):
        return 0.0
    t0 = time.time()
    tmp = out_path + ".tmp"
    subprocess.run([sys.executable, script, skel, tmp], check=True, stdout=subprocess.DEVNULL)
    os.replace(tmp, out_path)
    return time.time() - t0


def make_inputs(model_path, stem, seq, batch=1):
    import numpy as np
    import onnx
    from onnx import helper

    m = onnx.load(model_path, load_external_data=False)
    init_names = {t.name for t in m.graph.initializer}
    rng = np.random.default_rng(0)
    family = stem.split(".")[0]
    feeds = {}
    for vi in m.graph.input:
        if vi.name in init_names:
            continue
        tt = vi.type.tensor_type
        shape = []
        for d in tt.shape.dim:
            if d.HasField("dim_value"):
                shape.append(d.dim_value)
            else:
                shape.append(batch if "batch" in d.dim_param else seq)
        dt = helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if np.issubdtype(dt, np.integer):
            if "mask" in vi.name:
                a = np.ones(shape, dt)
            else:
                a = rng.integers(0, VOCAB.get(family, 1000), shape).astype(dt)
        elif dt == np.bool_:
            a = np.ones(shape, dt)
        else:
            a = rng.standard_normal(shape).astype(dt)
        feeds[vi.name] = a
    return feeds


def run_ort(model_path, feeds):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
    sess.run(None, feeds)  # warm-up
    t0 = time.time()
    outs = sess.run(None, feeds)
    return outs, (time.time() - t0) * 1000


def compare(name, tessel_out, ort_out, rtol, atol_rel):
    import numpy as np

    if tessel_out.shape != ort_out.shape:
        return False, f"{name}: shape {tessel_out.shape} but ONNX Runtime gives {ort_out.shape}", None
    if tessel_out.dtype != ort_out.dtype:
        return False, f"{name}: dtype {tessel_out.dtype} but ONNX Runtime gives {ort_out.dtype}", None
    a = tessel_out.astype(np.float64)
    b = ort_out.astype(np.float64)
    if a.size == 0:
        return True, "", {"max_err": 0.0, "allowed": 0.0, "max_ref": 0.0}
    finite = np.isfinite(b)
    if not np.array_equal(np.isfinite(a), finite) or not np.array_equal(a[~finite], b[~finite], equal_nan=True):
        return False, f"{name}: non-finite values differ", None
    max_ref = float(np.max(np.abs(b[finite]))) if finite.any() else 0.0
    err = np.where(finite, np.abs(a - b), 0.0)
    allowed = atol_rel * max_ref + rtol * np.abs(np.where(finite, b, 0.0))
    k = int(np.argmax(err - allowed))
    ok = bool(np.all(err <= allowed))
    stats = {"max_err": float(err.max()), "allowed": float(allowed.flat[k]), "max_ref": max_ref,
             "worst_index": [int(i) for i in np.unravel_index(k, err.shape)]}
    msg = "" if ok else (f"{name}: {int(np.sum(err > allowed))} of {err.size} elements out of tolerance; worst at "
                         f"{stats['worst_index']}: tessel {a.flat[k]:.6g}, ort {b.flat[k]:.6g}")
    return ok, msg, stats


def symbol_bindings(model_path, feeds):
    """--dim SYMBOL=N for the symbolic input dims, from the inputs' shapes."""
    import onnx

    m = onnx.load(model_path, load_external_data=False)
    dims = {}
    for vi in m.graph.input:
        if vi.name in feeds:
            for d, n in zip(vi.type.tensor_type.shape.dim, feeds[vi.name].shape):
                if d.HasField("dim_param") and d.dim_param:
                    dims[d.dim_param] = int(n)
    return dims


def run_tessel(args, cmd, res):
    """Runs a tessel --json command; its JSON output, or None with res["message"] saying why."""
    t0 = time.time()
    try:
        p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        res["message"] = f"tessel {cmd[1]} timed out after {args.timeout:.0f} s"
        return None
    res["tessel_wall_s"] = round(time.time() - t0, 2)
    if p.returncode != 0:
        err = [l for l in p.stderr.decode(errors="replace").splitlines() if l.startswith("error:")]
        res["message"] = (err[-1] if err else p.stderr.decode(errors="replace")[-500:]) + f" (exit {p.returncode})"
        return None
    return json.loads(p.stdout)


def compile_cuda_kernels(args, res, model_path, feeds, work):
    """`tessel compile --target cuda` at the inputs' shapes: every kernel through NVRTC."""
    os.makedirs(work, exist_ok=True)
    cmd = [args.tessel, "compile", model_path, "--target", "cuda", "--cuda-arch", args.cuda_compile_only,
           "--precision", args.precision, "-o", os.path.join(work, "kernels.tsl"), "--json"]
    for sym, n in symbol_bindings(model_path, feeds).items():
        cmd += ["--dim", f"{sym}={n}"]
    doc = run_tessel(args, cmd + args.tessel_arg, res)
    if doc is None:
        return res
    res.update({k: doc[k] for k in ("kernels", "distinct_kernels", "interpreter_nodes", "bytes", "cache_hit")})
    res["ok"] = not (args.require_compiled and doc["interpreter_nodes"])
    res["message"] = "" if res["ok"] else f"{doc['interpreter_nodes']} nodes have no GPU kernel"
    return res


def check_model(args, skel):
    import numpy as np

    stem = os.path.basename(skel)[: -len(".skel.onnx")]
    os.makedirs(args.out, exist_ok=True)
    model_path = os.path.join(args.out, stem + ".onnx")
    res = {"model": stem, "ok": False}
    try:
        res["materialize_s"] = round(materialize(skel, model_path, args.models_dir), 1)
    except subprocess.CalledProcessError as e:
        res["message"] = f"materialize.py failed: {e}"
        return res
    feeds = make_inputs(model_path, stem, args.seq, args.batch)
    if args.cuda_compile_only:
        return compile_cuda_kernels(args, res, model_path, feeds, os.path.join(args.out, stem + ".cuda"))
    work = os.path.join(args.out, stem + ".run")
    in_dir = os.path.join(work, "inputs")
    out_dir = os.path.join(work, "outputs")
    os.makedirs(in_dir, exist_ok=True)
    for f in glob.glob(os.path.join(out_dir, "output_*.npy")):
        os.remove(f)
    cmd = [args.tessel, "run", model_path, "--target", args.target, "--seed", "0", "--save-outputs", out_dir, "--json"]
    for name, a in feeds.items():
        path = os.path.join(in_dir, f"{len(cmd)}.npy")
        np.save(path, a)
        cmd += ["--input", f"{name}={path}"]
    res["inputs"] = {k: list(v.shape) for k, v in feeds.items()}

    doc = run_tessel(args, cmd + args.tessel_arg, res)
    if doc is None:
        return res
    res["tessel_ms"] = round(doc.get("time_ms", 0), 1)
    res["interpreter_ops"] = doc.get("interpreter_ops", [])

    ort_outs, ort_ms = run_ort(model_path, feeds)
    res["ort_ms"] = round(ort_ms, 1)
    ok_all, msgs, worst = True, [], None
    for i, ref in enumerate(ort_outs):
        path = os.path.join(out_dir, f"output_{i}.npy")
        if not os.path.exists(path):
            ok_all = False
            msgs.append(f"output_{i}.npy missing")
            continue
        ok, msg, stats = compare(f"output {i}", np.load(path), ref, args.rtol, args.atol_rel)
        ok_all &= ok
        if msg:
            msgs.append(msg)
        if stats and (worst is None or stats["max_err"] > worst["max_err"]):
            worst = stats
    if args.require_compiled and res["interpreter_ops"]:
        ok_all = False
        msgs.append("ran on the interpreter: " + ", ".join(res["interpreter_ops"]))
    res["ok"] = ok_all
    res["message"] = "; ".join(msgs)
    if worst:
        res.update(worst)
    return res


def main():
    args = parse_args()
    if not args.materialize_only and not os.path.isfile(args.tessel):
        sys.exit(f"tessel binary not found: {args.tessel}")
    skels = select_skeletons(args.models_dir, args.models)
    if args.materialize_only:
        os.makedirs(args.out, exist_ok=True)
        for s in skels:
            stem = os.path.basename(s)[: -len(".skel.onnx")]
            secs = materialize(s, os.path.join(args.out, stem + ".onnx"), args.models_dir)
            print(f"materialized {stem} ({secs:.1f} s)", flush=True)
        return 0
    if args.cuda_compile_only:
        print(f"compiling {len(skels)} models' GPU kernels for {args.cuda_compile_only} (batch {args.batch}, seq {args.seq}, "
              f"{args.precision})", flush=True)
    else:
        print(f"comparing {len(skels)} models with ONNX Runtime (target {args.target}, batch {args.batch}, seq {args.seq})", flush=True)
    results = []
    t_all = time.time()
    for s in skels:
        r = check_model(args, s)
        results.append(r)
        status = "OK  " if r["ok"] else "FAIL"
        if args.cuda_compile_only:
            line = (f"{r.get('kernels', '?')} kernels ({r.get('distinct_kernels', '?')} distinct), "
                    f"{r.get('interpreter_nodes', '?')} interpreter nodes, artifact {r.get('bytes', 0)} bytes, "
                    f"wall {r.get('tessel_wall_s', float('nan')):.1f} s{' (cached)' if r.get('cache_hit') else ''}")
        else:
            err = f"max err {r['max_err']:.3g} (allowed {r['allowed']:.3g}, max|ref| {r['max_ref']:.3g})" if "max_err" in r else ""
            times = f"tessel {r.get('tessel_ms', float('nan')):.0f} ms (wall {r.get('tessel_wall_s', float('nan')):.1f} s), ort {r.get('ort_ms', float('nan')):.1f} ms"
            line = f"{err}  {times}"
        print(f"{status} {r['model']:<22} {line}", flush=True)
        if r.get("message"):
            print(f"     {r['message'][:400]}", flush=True)
    n_ok = sum(r["ok"] for r in results)
    what = "compiled for CUDA" if args.cuda_compile_only else "match ONNX Runtime"
    print(f"models: {n_ok}/{len(results)} {what} ({time.time() - t_all:.0f} s)")
    return write_results(results, args.json_out)


if __name__ == "__main__":
    sys.exit(main())
