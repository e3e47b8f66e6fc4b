#!/usr/bin/env python3
"""tessel from Python in a dozen lines: build a small ONNX model, compile it
for this CPU, run it on numpy arrays and check it against numpy.

    build/pyenv/bin/python examples/quickstart.py
"""
import numpy as np
from onnx import TensorProto, helper, numpy_helper

import tessel

rng = np.random.default_rng(0)
w = rng.standard_normal((64, 10)).astype(np.float32)
graph = helper.make_graph(
    [helper.make_node("MatMul", ["x", "w"], ["logits"]), helper.make_node("Softmax", ["logits"], ["p"], axis=-1)],
    "classifier", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
    [helper.make_tensor_value_info("p", TensorProto.FLOAT, ["batch", 10])], [numpy_helper.from_array(w, "w")])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])

exe = tessel.compile(model)  # an onnx.ModelProto, ONNX bytes or a path
print(exe)
x = rng.standard_normal((4, 64)).astype(np.float32)
p = exe(x)
logits = x.astype(np.float64) @ w
want = np.exp(logits - logits.max(-1, keepdims=True))
want /= want.sum(-1, keepdims=True)
err = float(np.abs(p - want).max())
print(f"batch 4: max |tessel - numpy| = {err:.2e}")
assert err < 1e-5, "tessel and numpy disagree"
for s in exe.profile(x, warmup=2, iters=5):
    print(f"  {s.kind:<11} {s.name:<40} {s.seconds * 1e6:8.1f} us")
