"""PyTorch's own low-precision error on an ONNX model's exact weights and
inputs: the model converted to a torch.nn.Module by onnx2torch, module and
float inputs cast to bf16/fp16 (what `model.to(torch.bfloat16)` does to a
PyTorch model), run on the GPU when there is one. tools/check_precision.py
--torch-reference compares tessel's error against twice this one (the CUDA
backend issue's bf16 bound). onnx2torch is not installed here; the GPU
bundle carries its wheel (scripts/build_gpu_bundle.sh)."""


def prepare_for_onnx2torch(model):
    """The model in the form onnx2torch 1.5 converts: opset 17 at most (it
    has no opset-18 Reduce* with axes as an input: the dynamo exports), and
    GreaterOrEqual / LessOrEqual (which it lacks) as Not(Less) / Not(Greater),
    and Reshape's allowzero=1 (which it rejects) dropped where the target shape
    is a constant without a 0 in it (allowzero only changes what a 0 means).
    Same values (NaN compares false either way only for the ordered ops; the
    masks these models compare are integers)."""
    import onnx
    import onnx.version_converter

    default = [o for o in model.opset_import if o.domain in ("", "ai.onnx")]
    if default and default[0].version > 17:
        model = onnx.version_converter.convert_version(model, 17)
        # The converter keeps opset 18's noop_with_empty_axes on Reduce*, which
        # opset 13 does not know; 0 (the default) is the old behaviour.
        for n in model.graph.node:
            if n.op_type.startswith("Reduce"):
                kept = [a for a in n.attribute if not (a.name == "noop_with_empty_axes" and a.i == 0)]
                del n.attribute[:]
                n.attribute.extend(kept)
    drop_allowzero(model)
    nodes = []
    for n in model.graph.node:
        if n.op_type in ("GreaterOrEqual", "LessOrEqual"):
            strict = "Less" if n.op_type == "GreaterOrEqual" else "Greater"
            tmp = n.output[0] + "_strict"
            nodes.append(onnx.helper.make_node(strict, list(n.input), [tmp], name=n.name + "_strict"))
            nodes.append(onnx.helper.make_node("Not", [tmp], list(n.output), name=n.name))
        else:
            nodes.append(n)
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    return model


def drop_allowzero(model):
    """Removes allowzero=1 from the Reshapes whose shape operand is an
    initializer or a Constant with no zero entry; leaves the others alone."""
    import onnx.numpy_helper

    consts = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    for n in model.graph.node:
        if n.op_type == "Constant":
            for a in n.attribute:
                if a.name == "value":
                    consts[n.output[0]] = onnx.numpy_helper.to_array(a.t)
    for n in model.graph.node:
        if n.op_type != "Reshape" or len(n.input) < 2 or n.input[1] not in consts:
            continue
        if (consts[n.input[1]] == 0).any():
            continue
        kept = [a for a in n.attribute if a.name != "allowzero"]
        del n.attribute[:]
        n.attribute.extend(kept)


def low_precision_outputs(model_path, feeds, precision):
    """The model's outputs (float32 numpy arrays) computed by PyTorch in `precision` (bf16 or fp16)."""
    import onnx
    import onnx2torch
    import torch

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    module = onnx2torch.convert(prepare_for_onnx2torch(onnx.load(model_path))).eval().to(device).to(dtype)
    inputs = [torch.from_numpy(a).to(device) for a in feeds.values()]
    inputs = [t.to(dtype) if t.is_floating_point() else t for t in inputs]
    with torch.inference_mode():
        out = module(*inputs)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    return [o.float().cpu().numpy() for o in outs]
