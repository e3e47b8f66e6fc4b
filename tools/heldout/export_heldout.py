#!/usr/bin/env python3
"""Export held-out architectures as ONNX skeletons (run on the GPU machine,
which has torch, torchvision and transformers; no weights are downloaded).

Each model is built with random weights (weights=None / a default config),
exported by torch's TorchScript exporter at opset 17 with symbolic batch (and
sequence) axes, and then stripped the way ../shared/models does it: float
initializers of 512 or more elements lose their data and keep their mean and
standard deviation in metadata_props['synthetic_weights'], so that
shared/models/materialize.py can refill them.

usage: export_heldout.py OUT_DIR [NAME ...]
"""
import json, os, sys, traceback

import numpy as np
import onnx
import torch
from onnx import numpy_helper

STRIP_MIN_ELEMENTS = 512


def vision(builder):
    def make():
        m = builder(weights=None).eval()
        x = torch.randn(1, 3, 224, 224)
        return m, (x,), ["input"], {"input": {0: "batch"}}
    return make


def text(model_cls, config_cls, extra=None):
    def make():
        torch.manual_seed(0)
        m = model_cls(config_cls(**(extra or {}))).eval()
        ids = torch.randint(0, 1000, (1, 128))
        mask = torch.ones(1, 128, dtype=torch.int64)
        dyn = {n: {0: "batch", 1: "seq"} for n in ("input_ids", "attention_mask")}
        return m, (ids, mask), ["input_ids", "attention_mask"], dyn
    return make


def catalogue():
    import torchvision.models as tv
    import transformers as hf
    return {
        "efficientnet_b0.ts17": vision(tv.efficientnet_b0),
        "convnext_tiny.ts17": vision(tv.convnext_tiny),
        "swin_t.ts17": vision(tv.swin_t),
        "shufflenet_v2.ts17": vision(tv.shufflenet_v2_x1_0),
        "regnet_x_400mf.ts17": vision(tv.regnet_x_400mf),
        "distilbert.ts17": text(hf.DistilBertModel, hf.DistilBertConfig),
        "t5_encoder.ts17": text(hf.T5EncoderModel, hf.T5Config),
    }


def strip(m):
    stats = {}
    for t in m.graph.initializer:
        if t.data_type != onnx.TensorProto.FLOAT or int(np.prod(t.dims)) < STRIP_MIN_ELEMENTS:
            continue
        a = numpy_helper.to_array(t).astype(np.float64)
        stats[t.name] = [float(a.mean()), float(a.std())]
        dims, name = list(t.dims), t.name
        t.Clear()
        t.name, t.data_type = name, onnx.TensorProto.FLOAT
        t.dims.extend(dims)
    p = m.metadata_props.add()
    p.key, p.value = "synthetic_weights", json.dumps(stats)


def export(name, make, out_dir):
    m, args, names, dyn = make()
    if "input_ids" in names:  # T5EncoderModel and DistilBertModel take (input_ids, attention_mask)
        class Wrap(torch.nn.Module):
            def __init__(self, inner):
                super().__init__()
                self.inner = inner
            def forward(self, input_ids, attention_mask):
                return self.inner(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
        m = Wrap(m).eval()
    full = os.path.join(out_dir, name + ".full.onnx")
    with torch.no_grad():
        torch.onnx.export(m, args, full, input_names=names, output_names=["output"], dynamic_axes=dyn,
                          opset_version=17, dynamo=False)
    model = onnx.load(full)
    os.remove(full)
    strip(model)
    path = os.path.join(out_dir, name + ".skel.onnx")
    onnx.save(model, path)
    ops = sorted({n.op_type for n in model.graph.node})
    print(f"{name}: {os.path.getsize(path)} bytes, {len(model.graph.node)} nodes, ops {ops}", flush=True)


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    cat = catalogue()
    names = sys.argv[2:] or list(cat)
    print(f"torch {torch.__version__}, onnx {onnx.__version__}", flush=True)
    failed = 0
    for n in names:
        try:
            export(n, cat[n], out_dir)
        except Exception:
            failed += 1
            print(f"{n}: export failed", flush=True)
            traceback.print_exc()
    return 1 if failed == len(names) else 0


if __name__ == "__main__":
    sys.exit(main())
