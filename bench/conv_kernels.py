#!/usr/bin/env python3
"""Per-kernel timings of single convolutions (Conv + Relu, batch 1; MobileNet's
layers Conv + Clip(0, 6), their depthwise ones with group = channels) shaped
like ResNet's, MobileNet's and ViT's layers: each model is written to
--out, timed with `tessel bench --profile` (2 threads) --reps times, and
the best median of its conv step is printed. Extra arguments after `--`
go to tessel bench (e.g. `-- --knob conv.gemm.rows=channels`). With --ort,
ONNX Runtime's time for the same node (its per-node profile, 2 threads,
median) is printed beside it.

  build/peersenv/bin/python bench/conv_kernels.py --tessel build/bin/tessel
"""
import argparse
import os
import re
import subprocess
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

# name: (in channels, out channels, input size, kernel, stride, pad[, group])
SHAPES = {
    "c3_7": (512, 512, 7, 3, 1, 1),
    "c3_14": (256, 256, 14, 3, 1, 1),
    "c3_28": (128, 128, 28, 3, 1, 1),
    "c3_56": (64, 64, 56, 3, 1, 1),
    "c3s2_14": (256, 256, 14, 3, 2, 1),
    "c1_7": (512, 2048, 7, 1, 1, 0),
    "c1_14": (1024, 256, 14, 1, 1, 0),
    "c1_28": (512, 128, 28, 1, 1, 0),
    "c1_56a": (64, 256, 56, 1, 1, 0),
    "c1_56b": (256, 64, 56, 1, 1, 0),
    "stem": (3, 64, 224, 7, 2, 3),
    "m1_112": (32, 16, 112, 1, 1, 0),
    "m1_56": (144, 24, 56, 1, 1, 0),
    "m1_14": (384, 64, 14, 1, 1, 0),
    "m1_7": (320, 1280, 7, 1, 1, 0),
    "vitpatch": (3, 768, 224, 16, 16, 0),
    # MobileNet-V2's stem, expansions and depthwise convs (Clip epilogue)
    "mb_stem": (3, 32, 224, 3, 2, 1),
    "mb_e112": (16, 96, 112, 1, 1, 0),
    "mb_e56": (24, 144, 56, 1, 1, 0),
    "mb_e7": (160, 960, 7, 1, 1, 0),
    "mb_p7": (960, 160, 7, 1, 1, 0),
    "mb_e14": (96, 576, 14, 1, 1, 0),
    "mb_p14": (576, 96, 14, 1, 1, 0),
    "mb_e14s": (64, 384, 14, 1, 1, 0),
    "mb_e28": (32, 192, 28, 1, 1, 0),
    "mb_p56": (144, 24, 56, 1, 1, 0),
    "mb_p112": (32, 16, 112, 1, 1, 0),
    "mb_last": (320, 1280, 7, 1, 1, 0),
    "mb_p7b": (960, 320, 7, 1, 1, 0),
    "dw_112": (32, 32, 112, 3, 1, 1, 32),
    "dws2_112": (96, 96, 112, 3, 2, 1, 96),
    "dw_56": (144, 144, 56, 3, 1, 1, 144),
    "dws2_56": (144, 144, 56, 3, 2, 1, 144),
    "dw_28": (192, 192, 28, 3, 1, 1, 192),
    "dw_14": (576, 576, 14, 3, 1, 1, 576),
    "dws2_14": (576, 576, 14, 3, 2, 1, 576),
    "dw_7": (960, 960, 7, 3, 1, 1, 960),
}


def write_model(path, name, c, oc, h, k, stride, pad, group=1, rng=None):
    oh = (h + 2 * pad - k) // stride + 1
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, h])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, oc, oh, oh])
    w = numpy_helper.from_array((rng.standard_normal((oc, c // group, k, k)) * 0.05).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(oc).astype(np.float32), "b")
    conv = helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[k, k], pads=[pad] * 4, strides=[stride] * 2,
                            group=group)
    inits = [w, b]
    if name.startswith(("mb_", "dw")):
        lo = numpy_helper.from_array(np.array(0, np.float32), "lo")
        hi = numpy_helper.from_array(np.array(6, np.float32), "hi")
        act = helper.make_node("Clip", ["c", "lo", "hi"], ["y"])
        inits += [lo, hi]
    else:
        act = helper.make_node("Relu", ["c"], ["y"])
    graph = helper.make_graph([conv, act], os.path.basename(path), [x], [y], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def conv_ms(tessel, path, extra):
    out = subprocess.run([tessel, "bench", path, "--threads", "2", "--iters", "50", "--profile", "5", "--quiet"] + extra,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    for line in out.splitlines():
        m = re.match(r"\s+([0-9.]+)\s.*\[[^\]]*Conv", line)
        if m:
            return float(m[1])
    raise RuntimeError(f"no conv step in the profile of {path}:\n{out}")


def ort_ms(path, iters=200):
    import json
    import tempfile
    import onnxruntime as ort
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    so.inter_op_num_threads = 1
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.gettempdir(), "conv_kernels_ort")
    s = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    i = s.get_inputs()[0]
    x = np.random.default_rng(1).standard_normal(i.shape).astype(np.float32)
    for _ in range(iters):
        s.run(None, {i.name: x})
    prof = s.end_profiling()
    with open(prof) as f:
        events = json.load(f)
    os.remove(prof)
    runs = {}
    for e in events:  # the conv node's kernel time per run (with its fused activation)
        if e.get("cat") == "Node" and e["name"].endswith("_kernel_time") and e["args"].get("op_name") == "Conv":
            runs.setdefault(e["name"], []).append(e["dur"])
    times = sorted(sum(t) for t in zip(*runs.values()))[iters // 10:]
    return times[len(times) // 2] / 1000


def main():
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tessel", default="build/bin/tessel")
    ap.add_argument("--out", default="build/conv_kernels")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated names")
    ap.add_argument("--ort", action="store_true", help="also ONNX Runtime's time for the conv node")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(0)
    names = a.only.split(",") if a.only else list(SHAPES)
    for name in names:
        path = os.path.join(a.out, name + ".onnx")
        write_model(path, name, *SHAPES[name], rng=rng)
        best = min(conv_ms(a.tessel, path, extra) for _ in range(a.reps))
        peer = f"   ort {ort_ms(path):7.3f} ms" if a.ort else ""
        print(f"{name:10s} {best:7.3f} ms{peer}", flush=True)


if __name__ == "__main__":
    main()
