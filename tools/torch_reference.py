"""PyTorch's own low-precision error on an ONNX model's exact weights and
inputs: the model converted to a torch.nn.Module by onnx2torch, module and
float inputs cast to bf16/fp16 (what `model.to(torch.bfloat16)` does to a
PyTorch model), run on the GPU when there is one. tools/check_precision.py
--torch-reference compares tessel's error against twice this one (the CUDA
backend issue's bf16 bound). onnx2torch is not installed here; the GPU
bundle carries its wheel (scripts/build_gpu_bundle.sh)."""


def low_precision_outputs(model_path, feeds, precision):
    """The model's outputs (float32 numpy arrays) computed by PyTorch in `precision` (bf16 or fp16)."""
    import onnx
    import onnx2torch
    import torch

    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16}[precision]
    device = "cuda" if torch.cuda.is_available() else "cpu"
    module = onnx2torch.convert(onnx.load(model_path)).eval().to(device).to(dtype)
    inputs = [torch.from_numpy(a).to(device) for a in feeds.values()]
    inputs = [t.to(dtype) if t.is_floating_point() else t for t in inputs]
    with torch.inference_mode():
        out = module(*inputs)
    outs = list(out) if isinstance(out, (list, tuple)) else [out]
    return [o.float().cpu().numpy() for o in outs]
