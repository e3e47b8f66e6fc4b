#!/usr/bin/env python3
"""Writes the ONNX backend node tests in the onnx_test_runner layout.

Recent onnx releases build the node test cases in memory
(onnx.backend.test.loader.load_model_tests(kind="node")) instead of shipping
them. This writes every case under OUT/<case>/: model.onnx and
test_data_set_K/{input,output}_N.pb, as ONNX Runtime's onnx_test_runner reads
them, and OUT/excluded.txt with the cases outside the denominator and why:
training ops (ai.onnx.preview.training), the ai.onnx.ml domain, and cases whose
graph inputs or outputs are not tensors.

usage: gen_node_tests.py OUT
"""
import os
import sys
import warnings


def excluded_reason(model):
    for opset in model.opset_import:
        if opset.domain == "ai.onnx.preview.training":
            return "training op"
    for node in model.graph.node:
        if node.domain == "ai.onnx.ml":
            return "ai.onnx.ml domain"
        if node.domain == "ai.onnx.preview.training":
            return "training op"
    for vi in list(model.graph.input) + list(model.graph.output):
        if vi.type.WhichOneof("value") != "tensor_type":
            return "non-tensor graph input/output"
    return None


def write_proto(path, proto):
    with open(path, "wb") as f:
        f.write(proto.SerializeToString())


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    warnings.simplefilter("ignore")
    import numpy as np
    import onnx
    from onnx import numpy_helper
    from onnx.backend.test.loader import load_model_tests

    os.makedirs(out, exist_ok=True)
    excluded = []
    count = 0
    for case in load_model_tests(kind="node"):
        model = case.model
        reason = excluded_reason(model)
        if reason:
            excluded.append(f"{case.name}\t{reason}")
            continue
        d = os.path.join(out, case.name)
        os.makedirs(d, exist_ok=True)
        write_proto(os.path.join(d, "model.onnx"), model)
        for k, (inputs, outputs) in enumerate(case.data_sets or []):
            dd = os.path.join(d, f"test_data_set_{k}")
            os.makedirs(dd, exist_ok=True)
            for kind, values, infos in (("input", inputs, model.graph.input), ("output", outputs, model.graph.output)):
                for i, v in enumerate(values):
                    name = infos[i].name if i < len(infos) else ""
                    if isinstance(v, onnx.TensorProto):
                        t = v
                    else:
                        t = numpy_helper.from_array(np.asarray(v), name)
                    t.name = name
                    write_proto(os.path.join(dd, f"{kind}_{i}.pb"), t)
        count += 1
    with open(os.path.join(out, "excluded.txt"), "w") as f:
        f.write("\n".join(sorted(excluded)) + "\n")
    print(f"wrote {count} node test cases to {out} ({len(excluded)} excluded, see excluded.txt)")


if __name__ == "__main__":
    main()
