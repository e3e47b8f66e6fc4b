"""tessel: a machine-learning compiler, from Python.

    import numpy as np, tessel
    exe = tessel.compile("model.onnx")                  # or bytes, or an onnx.ModelProto
    y = exe(np.random.rand(1, 3, 224, 224).astype(np.float32))
    exe.save("model.tsl"); exe = tessel.load("model.tsl")

PyTorch (docs/python.md, "torch.compile"): `torch.compile(m, backend="tessel")`
and `tessel.export(m, (x,))`; torch is imported only when they are used.

Arrays go in and out without copies where they can (docs/python.md): a
contiguous numpy array or CPU DLPack tensor (torch included) is read in
place, and outputs are arrays over the executable's own buffers. Outputs are
numpy arrays, or torch tensors when any input is a torch tensor.

CUDA executables called with CUDA tensors (torch's, or any DLPack CUDA
array) read them in place and write outputs on the device (torch.empty on
the inputs' device for torch), on the caller's current stream, without
waiting for the device: as a torch operator would.
"""
from __future__ import annotations

import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from . import _core
from ._core import CompileError, Error, InputError, StepTime, ValueInfo

__version__: str = _core.__version__
__all__ = ["compile", "load", "export", "Executable", "Error", "CompileError", "InputError", "ValueInfo", "StepTime"]

_NUMPY, _TORCH, _DLPACK = 0, 1, 2
_KDL_CUDA = 2  # DLPack's device type of CUDA memory
_OUTPUT_DIMS_CACHE = 64  # input shapes remembered per executable (their outputs' dims)


def _on_cuda(a: Any) -> bool:
    """Whether `a` is a CUDA tensor: torch's, or any DLPack array in CUDA memory."""
    if getattr(a, "is_cuda", False):
        return True
    dev = getattr(a, "__dlpack_device__", None)
    if dev is None or type(a).__module__.split(".")[0] in ("numpy", "torch"):
        return False
    try:
        return dev()[0] == _KDL_CUDA
    except Exception:  # noqa: BLE001 - not a DLPack array after all
        return False


class _TorchSupport:
    """What device runs on torch tensors need from torch, looked up once."""

    def __init__(self) -> None:
        import torch

        from .torch_backend import _IR_DTYPE
        self.ir_dtype = dict(_IR_DTYPE)
        self.torch_dtype = {v: k for k, v in _IR_DTYPE.items()}
        self.empty = torch.empty
        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what Inductor's generated code calls
        if raw is not None:
            self.current_stream = lambda device: raw(device.index or 0)
        else:  # pragma: no cover - other torch versions
            self.current_stream = lambda device: torch.cuda.current_stream(device).cuda_stream


_TORCH_SUPPORT: Optional[_TorchSupport] = None


def _torch_support() -> _TorchSupport:
    global _TORCH_SUPPORT
    if _TORCH_SUPPORT is None:
        _TORCH_SUPPORT = _TorchSupport()
    return _TORCH_SUPPORT


def _framework_of(arrays: Sequence[Any]) -> int:
    """Outputs take the form of the inputs: torch tensors for torch, numpy otherwise."""
    kinds = {type(a).__module__.split(".")[0] for a in arrays}
    if "torch" in kinds:
        return _TORCH
    if kinds and kinds <= {"numpy"}:
        return _NUMPY
    if arrays and all(hasattr(a, "__dlpack__") for a in arrays) and "numpy" not in kinds:
        return _DLPACK
    return _NUMPY


def _as_array(x: Any, name: str) -> Any:
    """Arrays and DLPack tensors pass through; Python numbers and lists become numpy arrays."""
    if hasattr(x, "__dlpack__") or hasattr(x, "__array_interface__"):
        kind = getattr(getattr(x, "dtype", None), "kind", None)
        if kind in ("O", "U", "S", "c", "V"):
            raise InputError(f"input '{name}': numpy arrays of dtype {x.dtype} are not supported")
        return x
    import numpy as np

    try:
        return np.asarray(x)
    except Exception as e:  # noqa: BLE001 - any failure is the caller's input
        raise InputError(f"input '{name}': cannot make an array of {type(x).__name__}: {e}") from None


class Executable:
    """A compiled model. Call it with its inputs (in graph order, or by name)."""

    def __init__(self, native: "_core.Executable"):
        self._exe = native
        self._input_names = [v.name for v in native.inputs]
        self._out_dtypes = [v.dtype for v in native.outputs]
        self._out_dims: Dict[Tuple[Any, ...], List[List[int]]] = {}

    @property
    def target(self) -> str:
        """'cpu' or 'cuda'."""
        return self._exe.target

    @property
    def inputs(self) -> List[ValueInfo]:
        """The graph inputs: name, dtype ('f32', ...) and shape (ints, and strings for symbols)."""
        return self._exe.inputs

    @property
    def outputs(self) -> List[ValueInfo]:
        return self._exe.outputs

    @property
    def interpreter_ops(self) -> List[str]:
        """Operators that run on the reference interpreter (empty: every node is compiled)."""
        return self._exe.interpreter_ops

    def _arrays(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> List[Any]:
        names = self._input_names
        if len(args) > len(names):
            raise InputError(f"the model takes {len(names)} inputs, got {len(args)}")
        given: Dict[str, Any] = dict(zip(names, args))
        for k, v in kwargs.items():
            if k not in names:
                raise InputError(f"the model has no input '{k}' (inputs: {', '.join(names)})")
            if k in given:
                raise InputError(f"input '{k}' given twice")
            given[k] = v
        missing = [n for n in names if n not in given]
        if missing:
            raise InputError(f"missing input(s): {', '.join(missing)}")
        return [_as_array(given[n], n) for n in names]

    def run(self, *args: Any, **kwargs: Any) -> List[Any]:
        """Runs the model; returns every output in a list (graph output order)."""
        return self._run_arrays(self._arrays(args, kwargs))

    def _run_arrays(self, arrays: Sequence[Any]) -> List[Any]:
        if self._exe.target == "cuda" and any(_on_cuda(a) for a in arrays):
            return self._run_device(arrays)
        try:
            return self._exe.run(arrays, _framework_of(arrays))
        except TypeError as e:  # an argument nanobind could not take as an array
            raise InputError(str(e)) from None

    def _run_device(self, arrays: Sequence[Any]) -> List[Any]:
        """A run on CUDA tensors: read in place, outputs allocated on the device, the caller's stream."""
        ptrs: List[int] = []
        dims: List[Any] = []
        dtypes: List[str] = []
        on_host: List[bool] = []
        keep: List[Any] = []  # contiguous copies and host arrays live until the run is issued
        torch_device = None
        for a, name in zip(arrays, self._input_names):
            if type(a).__module__.split(".")[0] == "torch":
                tb = _torch_support()
                dt = tb.ir_dtype.get(a.dtype)
                if dt is None:
                    raise InputError(f"input '{name}': torch tensors of dtype {a.dtype} are not supported")
                if a.is_cuda:
                    if a.get_device() != 0:
                        raise InputError(f"input '{name}' is on {a.device}; tessel runs on cuda:0")
                    torch_device = a.device
                if not a.is_contiguous():
                    a = a.contiguous()
                ptrs.append(a.data_ptr())
                dims.append(a.shape)
                dtypes.append(dt)
                on_host.append(not a.is_cuda)
            else:
                if not _on_cuda(a):
                    import numpy as np
                    a = np.ascontiguousarray(a)
                ptr, shape, dt, dev_type, dev_id = _core.array_info(a)
                if dev_type == _KDL_CUDA and dev_id != 0:
                    raise InputError(f"input '{name}' is on CUDA device {dev_id}; tessel runs on device 0")
                ptrs.append(ptr)
                dims.append(tuple(shape))
                dtypes.append(dt)
                on_host.append(dev_type != _KDL_CUDA)
            keep.append(a)
        key = (tuple(dims), tuple(dtypes))
        out_dims = self._out_dims.get(key)
        if out_dims is None:
            out_dims = self._exe.output_dims(dims, dtypes)
            if len(self._out_dims) >= _OUTPUT_DIMS_CACHE:
                self._out_dims.clear()
            self._out_dims[key] = out_dims
        if torch_device is not None:
            tb = _torch_support()
            outs = [tb.empty(d, dtype=tb.torch_dtype[t], device=torch_device) for d, t in zip(out_dims, self._out_dtypes)]
            addrs = [o.data_ptr() for o in outs]
            stream = tb.current_stream(torch_device)
        else:
            outs = [_core.device_array(t, d) for d, t in zip(out_dims, self._out_dtypes)]
            addrs = [_core.array_info(o)[0] for o in outs]
            stream = 0  # the legacy default stream: DLPack's stream for a consumer that names none
        self._exe.run_device(ptrs, dims, dtypes, on_host, addrs, stream)
        return outs

    def synchronize(self) -> None:
        """Waits for the last run on CUDA tensors; raises the error of a failed check in it, if any."""
        self._exe.synchronize()

    def __call__(self, *args: Any, **kwargs: Any) -> Union[Any, Tuple[Any, ...]]:
        """Runs the model; one output is returned as is, several as a tuple."""
        outs = self.run(*args, **kwargs)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def profile(self, *args: Any, warmup: int = 3, iters: int = 10, **kwargs: Any) -> List[StepTime]:
        """Each step's median time over `iters` runs (wall time on the CPU, device time on CUDA)."""
        arrays = [a.cpu() if getattr(a, "is_cuda", False) else a for a in self._arrays(args, kwargs)]
        return self._exe.profile(arrays, warmup, iters)

    def save(self, path: Union[str, os.PathLike]) -> None:
        """Writes a compiled artifact (CPU executables) that tessel.load reads without compiling."""
        self._exe.save(os.fspath(path))

    def stats(self) -> Dict[str, int]:
        """Runs so far, and how many inputs were read in place (borrowed) or copied."""
        return self._exe.stats()

    def __repr__(self) -> str:
        ins = ", ".join(map(repr, self.inputs))
        outs = ", ".join(map(repr, self.outputs))
        return f"<tessel.Executable {self.target} ({ins}) -> ({outs})>"


def _args(target: str, precision: str, dims: Optional[Mapping[str, int]], threads: int,
          tuning_db: Optional[Union[str, os.PathLike]], knobs: Iterable[str]) -> "_core.CompileArgs":
    a = _core.CompileArgs()
    a.target = target
    a.precision = precision
    a.dims = dict(dims or {})
    a.threads = int(threads)
    a.tuning_db = os.fspath(tuning_db) if tuning_db else ""
    a.knobs = list(knobs)
    return a


def compile(model: Any, target: str = "cpu", precision: str = "fp32", dims: Optional[Mapping[str, int]] = None,
            threads: int = 0, tuning_db: Optional[Union[str, os.PathLike]] = None,
            knobs: Iterable[str] = ()) -> Executable:
    """Compiles a model: a path (ONNX, text IR or a compiled artifact), ONNX bytes, or an onnx.ModelProto.

    target: 'cpu' or 'cuda'. precision: 'fp32' (CPU and CUDA), 'bf16' or 'fp16' (CUDA).
    dims: symbol bindings (like --dim); symbols left out stay symbolic and bind at each call.
    threads: worker threads (0: one per core). tuning_db: a database from `tessel tune`.
    knobs: schedule knobs such as 'gemm.pack.b=1' (like --knob).
    Raises CompileError with the CLI's message when the model cannot be compiled.
    """
    args = _args(target, precision, dims, threads, tuning_db, knobs)
    if isinstance(model, (str, os.PathLike)):
        return Executable(_core.compile_path(os.fspath(model), args))
    if isinstance(model, (bytes, bytearray, memoryview)):
        return Executable(_core.compile_bytes(bytes(model), args))
    if hasattr(model, "SerializeToString"):  # onnx.ModelProto, without importing onnx
        return Executable(_core.compile_bytes(model.SerializeToString(), args))
    raise CompileError(f"tessel.compile takes a path, bytes or an onnx.ModelProto, not {type(model).__name__}")


def load(path: Union[str, os.PathLike], threads: int = 0) -> Executable:
    """Loads a compiled artifact (Executable.save, or `tessel compile -o`) without compiling."""
    p = os.fspath(path)
    if not _core.is_artifact(p):
        raise CompileError(f"{p}: not a tessel artifact (tessel.compile takes models)")
    return Executable(_core.compile_path(p, _args("cpu", "fp32", None, threads, None, ())))


def export(module: Any, example_inputs: Any, dynamic_shapes: Any = None, **kwargs: Any) -> Executable:
    """Exports a torch.nn.Module with torch.export and compiles the program with tessel.

    Same graph path as torch.compile(module, backend="tessel"), without the eager
    fallback: every operator must be one tessel takes. dynamic_shapes as
    torch.export.export takes it (torch.export.Dim("batch") becomes the symbol
    "batch"); keyword arguments: kwargs (the module's keyword inputs), strict,
    target, precision, dims, threads, tuning_db, knobs. Returns an Executable over the
    flattened tensor inputs and outputs; .save() writes it as an artifact.
    """
    from .torch_backend import export as _export  # imports torch

    return _export(module, example_inputs, dynamic_shapes, **kwargs)
