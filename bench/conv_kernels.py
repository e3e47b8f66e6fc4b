#!/usr/bin/env python3
"""Per-kernel timings of single convolutions (Conv + Relu, batch 1) shaped
like ResNet's, MobileNet's and ViT's layers: each model is written to
--out, timed with `tessel bench --profile` (2 threads) --reps times, and
the best median of its conv step is printed. Extra arguments after `--`
go to tessel bench (e.g. `-- --knob conv.gemm.rows=channels`).

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

# name: (in channels, out channels, input size, kernel, stride, pad)
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
}


def write_model(path, c, oc, h, k, stride, pad, rng):
    oh = (h + 2 * pad - k) // stride + 1
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, h, h])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, oc, oh, oh])
    w = numpy_helper.from_array((rng.standard_normal((oc, c, k, k)) * 0.05).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(oc).astype(np.float32), "b")
    conv = helper.make_node("Conv", ["x", "w", "b"], ["c"], kernel_shape=[k, k], pads=[pad] * 4, strides=[stride] * 2)
    relu = helper.make_node("Relu", ["c"], ["y"])
    graph = helper.make_graph([conv, relu], os.path.basename(path), [x], [y], [w, b])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def conv_ms(tessel, path, extra):
    out = subprocess.run([tessel, "bench", path, "--threads", "2", "--iters", "50", "--profile", "5", "--quiet"] + extra,
                         stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    for line in out.splitlines():
        m = re.match(r"\s+([0-9.]+)\s.*\[[^\]]*Conv", line)
        if m:
            return float(m[1])
    raise RuntimeError(f"no conv step in the profile of {path}:\n{out}")


def main():
    argv = sys.argv[1:]
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tessel", default="build/bin/tessel")
    ap.add_argument("--out", default="build/conv_kernels")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--only", default="", help="comma-separated names")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    rng = np.random.default_rng(0)
    names = a.only.split(",") if a.only else list(SHAPES)
    for name in names:
        path = os.path.join(a.out, name + ".onnx")
        write_model(path, *SHAPES[name], rng)
        best = min(conv_ms(a.tessel, path, extra) for _ in range(a.reps))
        print(f"{name:10s} {best:7.3f} ms", flush=True)


if __name__ == "__main__":
    main()
