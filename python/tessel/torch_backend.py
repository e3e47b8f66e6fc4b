"""PyTorch graphs compiled by tessel: `torch.compile(m, backend="tessel")` and `tessel.export`.

    import torch, tessel
    with torch.no_grad():
        y = torch.compile(model, backend="tessel", options={"threads": 2})(x)
    exe = tessel.export(model, (x,), dynamic_shapes=...)   # a tessel.Executable

Both take PyTorch's ATen graph after decompositions (Dynamo's graph through
AOTAutograd, or torch.export's program) and write it straight into tessel's
graph IR with `tessel._core.Builder`, one small function per ATen operator
(`_HANDLERS`); no ONNX file is made. torch.compile splits a graph into the
parts tessel can compile (CapabilityBasedPartitioner) and runs the rest
eagerly, counting each operator it could not take in `stats()` and logging
why (logger "tessel.torch"). docs/python.md ("torch.compile") is the guide.

Inference only: a graph that needs gradients is refused with
TrainingNotSupported (or run eagerly with options={"training": "eager"}).
Parameters and buffers are frozen into the compiled graph as constants; each
call checks that they are still the same tensors with the same version, and
compiles again when one was replaced or changed in place.
"""
from __future__ import annotations

import atexit
import itertools
import logging
import math
import operator
import threading
import weakref
from collections import Counter
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Set, Tuple

import numpy as np
import sympy
import torch
import torch.fx as fx

from . import CompileError, Executable, _args, _core

__all__ = ["tessel_backend", "export", "stats", "reset_stats", "supported_ops", "TrainingNotSupported"]

log = logging.getLogger("tessel.torch")
aten = torch.ops.aten


class TrainingNotSupported(CompileError, NotImplementedError):
    """A graph that needs gradients reached tessel's backend, which compiles inference graphs only."""


class _Unsupported(Exception):
    """An operator (or one use of it) that the converter cannot express; the node runs eagerly."""


# ---- statistics -------------------------------------------------------------------------

class _Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        self.compiles = 0            # graphs Dynamo handed to the backend
        self.partitions = 0          # parts of them compiled by tessel
        self.failed_partitions = 0   # parts tessel could not compile (run eagerly)
        self.eager_graphs = 0        # whole graphs run eagerly (training, devices, no tessel part)
        self.training_graphs = 0     # graphs that needed gradients
        self.refreezes = 0           # recompiles after a parameter or buffer changed
        self.exports = 0             # tessel.export calls that compiled
        self.ops_compiled: Counter = Counter()
        self.fallback_ops: Counter = Counter()
        self.fallback_reasons: Dict[str, str] = {}

    def snapshot(self) -> Dict[str, Any]:
        with self.lock:
            return {
                "compiles": self.compiles, "partitions": self.partitions,
                "failed_partitions": self.failed_partitions, "eager_graphs": self.eager_graphs,
                "training_graphs": self.training_graphs, "refreezes": self.refreezes, "exports": self.exports,
                "ops_compiled": dict(self.ops_compiled), "fallback_ops": dict(self.fallback_ops),
                "fallback_reasons": dict(self.fallback_reasons),
            }

    def add(self, field: str, n: int = 1) -> None:
        with self.lock:
            setattr(self, field, getattr(self, field) + n)

    def fallback(self, op: str, reason: str, n: int = 1) -> None:
        with self.lock:
            self.fallback_ops[op] += n
            self.fallback_reasons.setdefault(op, reason)


_STATS = _Stats()


def stats() -> Dict[str, Any]:
    """What the backend did so far in this process.

    compiles: graphs handed to the backend (one per Dynamo compile; a new batch size
    under a dynamic dimension compiles nothing); partitions: parts of them compiled by
    tessel; ops_compiled / fallback_ops: ATen operator -> node count, compiled by tessel
    or run eagerly; fallback_reasons: operator -> why (the first reason seen);
    failed_partitions: parts that tessel refused (run eagerly, reason logged);
    eager_graphs, training_graphs, refreezes, exports: see docs/python.md.
    """
    return _STATS.snapshot()


def reset_stats() -> None:
    """Sets every counter of stats() back to zero."""
    with _STATS.lock:
        _STATS.reset()


# ---- options ----------------------------------------------------------------------------

_DEFAULT_OPTIONS: Dict[str, Any] = {
    "target": "auto",       # tessel's target: "auto" is the graph's device ("cuda" for CUDA tensors, else "cpu")
    "precision": "fp32",
    "threads": 0,           # worker threads of each executable (0: one per core)
    "tuning_db": None,
    "knobs": (),
    "fallback": True,       # False: an operator tessel cannot take is an error, not an eager fallback
    "training": "error",    # "eager": run graphs that need gradients eagerly instead of raising
    "freeze": True,         # parameters and buffers become constants of the compiled graph
    "min_ops": 1,           # parts with fewer compute operators than this run eagerly
}


def _options(given: Optional[Mapping[str, Any]]) -> Dict[str, Any]:
    opts = dict(_DEFAULT_OPTIONS)
    for k, v in (given or {}).items():
        if k not in opts:
            raise CompileError(f"tessel backend: unknown option '{k}' (options: {', '.join(sorted(opts))})")
        opts[k] = v
    if opts["training"] not in ("error", "eager"):
        raise CompileError(f"tessel backend: option 'training' is 'error' or 'eager', not {opts['training']!r}")
    return opts


def _compile_args(opts: Mapping[str, Any], dims: Optional[Mapping[str, int]] = None) -> "_core.CompileArgs":
    return _args(opts["target"], opts["precision"], dims, opts["threads"], opts["tuning_db"], opts["knobs"])


# ---- dtypes -----------------------------------------------------------------------------

_IR_DTYPE = {
    torch.float32: "f32", torch.float64: "f64", torch.float16: "f16", torch.bfloat16: "bf16",
    torch.int8: "i8", torch.int16: "i16", torch.int32: "i32", torch.int64: "i64", torch.uint8: "u8",
    torch.bool: "bool",
}
_ONNX_DTYPE = {
    torch.float32: 1, torch.uint8: 2, torch.int8: 3, torch.int16: 5, torch.int32: 6, torch.int64: 7,
    torch.bool: 9, torch.float16: 10, torch.float64: 11, torch.bfloat16: 16,
}
_INT64_MAX = 2**63 - 1
_INT64_MIN = -(2**63)


def _is_float(dt: torch.dtype) -> bool:
    return dt.is_floating_point


# ---- the converter ----------------------------------------------------------------------

class _V:
    """A tessel value (a Builder handle) with the dtype and shape of the torch value it stands for."""
    __slots__ = ("h", "dtype", "shape")

    def __init__(self, h: int, dtype: torch.dtype, shape: Sequence[Any]):
        self.h, self.dtype, self.shape = h, dtype, tuple(shape)

    @property
    def rank(self) -> int:
        return len(self.shape)


def _val(node: fx.Node) -> Any:
    """The fake value of an FX node (FakeTensor, SymInt, number, or a tuple of them)."""
    if "val" in node.meta:
        return node.meta["val"]
    return node.meta.get("example_value")


def _static(d: Any) -> Optional[int]:
    """d as an int when it is one (a SymInt with a constant value included), else None."""
    if isinstance(d, int):
        return d
    if isinstance(d, torch.SymInt):
        e = d.node.expr
        if e.is_number:
            return int(e)
    return None


def _same_shape(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Equal shapes, compared as expressions (comparing SymInts would add guards after tracing)."""
    return len(a) == len(b) and all(sympy.expand(_expr(x) - _expr(y)) == 0 if not (
        isinstance(x, int) and isinstance(y, int)) else x == y for x, y in zip(a, b))


def _expr(d: Any) -> sympy.Expr:
    if isinstance(d, torch.SymInt):
        return d.node.expr
    return sympy.Integer(int(d))


class _Converter:
    """Writes one FX graph of ATen operators into a tessel Builder."""

    def __init__(self, sym_names: Optional[Mapping[str, str]] = None):
        self.b = _core.Builder(opset=17)
        self.env: Dict[fx.Node, Any] = {}
        self.sym_names = dict(sym_names or {})
        self.dims: Dict[sympy.Expr, Tuple[int, int]] = {}     # symbolic size -> (input handle, axis)
        self.sym_inputs: Dict[sympy.Expr, Callable[[], int]] = {}  # size passed as a tensor, made on use
        self.sym_cache: Dict[sympy.Expr, int] = {}
        self.const_cache: Dict[Any, int] = {}
        self.leaves: set = set()      # handles of inputs and constants (not made by a node)
        self.ops: Counter = Counter()

    # -- inputs -----------------------------------------------------------------------

    def dim_name(self, d: Any, input_name: str, axis: int) -> Any:
        s = _static(d)
        if s is not None:
            return s
        e = _expr(d)
        if isinstance(e, sympy.Symbol):
            return self.sym_names.get(str(e), str(e))
        return f"{input_name}_dim{axis}"   # a size like 2*s0: a symbol of its own

    def tensor_input(self, name: str, t: torch.Tensor) -> _V:
        if t.dtype not in _IR_DTYPE:
            raise _Unsupported(f"input dtype {t.dtype}")
        shape = list(t.shape)
        h = self.b.input(name, _IR_DTYPE[t.dtype], [self.dim_name(d, name, i) for i, d in enumerate(shape)])
        self.leaves.add(h)
        for i, d in enumerate(shape):
            if _static(d) is None:
                self.dims.setdefault(sympy.expand(_expr(d)), (h, i))
        return _V(h, t.dtype, shape)

    def constant_tensor(self, t: torch.Tensor, name: str = "") -> _V:
        t = t.detach()
        if t.dtype not in _IR_DTYPE:
            raise _Unsupported(f"constant dtype {t.dtype}")
        if t.device.type != "cpu":
            t = t.cpu()
        return _V(self.const(t.contiguous(), name), t.dtype, tuple(t.shape))

    def const(self, array: Any, name: str = "") -> int:
        # Not copied: the model keeps the array (a frozen weight is held once);
        # a changed parameter recompiles before it is read again (_Part).
        h = self.b.constant(array, name, copy=False)
        self.leaves.add(h)
        return h

    # -- small helpers ------------------------------------------------------------------

    def op(self, name: str, inputs: Sequence[Any], attrs: Optional[Dict[str, Any]] = None, n: int = 1) -> Any:
        hs = [-1 if x is None else (x.h if isinstance(x, _V) else int(x)) for x in inputs]
        out = self.b.node(name, hs, n, attrs or {})
        return out[0] if n == 1 else out

    def i64(self, values: Sequence[int]) -> int:
        key = ("i64", tuple(int(v) for v in values))
        if key not in self.const_cache:
            self.const_cache[key] = self.const(np.asarray(values, dtype=np.int64).reshape(len(values)))
        return self.const_cache[key]

    def i64_scalar(self, v: int) -> int:
        key = ("i64s", int(v))
        if key not in self.const_cache:
            self.const_cache[key] = self.const(np.asarray(int(v), dtype=np.int64))
        return self.const_cache[key]

    def scalar(self, value: Any, dtype: torch.dtype) -> int:
        """A 0-d constant of dtype (bf16 included: made through torch)."""
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            raise _Unsupported("a symbolic scalar used as a tensor value")
        key = ("s", dtype, repr(value))
        if key not in self.const_cache:
            self.const_cache[key] = self.const(torch.tensor(value, dtype=dtype))
        return self.const_cache[key]

    def cast(self, x: _V, dtype: torch.dtype) -> _V:
        if x.dtype == dtype:
            return x
        if dtype not in _ONNX_DTYPE:
            raise _Unsupported(f"cast to {dtype}")
        return _V(self.op("Cast", [x], {"to": _ONNX_DTYPE[dtype]}), dtype, x.shape)

    def as_value(self, a: Any, dtype: torch.dtype) -> Any:
        """A tensor operand (cast to dtype) or a number (a 0-d constant of dtype)."""
        if isinstance(a, _V):
            return self.cast(a, dtype)
        if isinstance(a, torch.SymInt) and _static(a) is None:
            s = self.op("Reshape", [self.sym(a), self.i64([])])
            return self.cast(_V(s, torch.int64, ()), dtype)
        if isinstance(a, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            a = a.node.expr
            a = int(a) if a.is_integer else float(a)
        return _V(self.scalar(a, dtype), dtype, ())

    # -- symbolic sizes ---------------------------------------------------------------------

    def sym(self, d: Any) -> int:
        """A size (int or SymInt) as a 1-element i64 tensor, computed from input shapes."""
        s = _static(d)
        if s is not None:
            return self.i64([s])
        return self.expr(sympy.expand(_expr(d)))

    def expr(self, e: sympy.Expr) -> int:
        if e in self.sym_cache:
            return self.sym_cache[e]
        from torch.utils._sympy import functions as symfn
        if e.is_number:
            h = self.i64([int(e)])
        elif e in self.dims:
            src, axis = self.dims[e]
            h = self.op("Shape", [src], {"start": axis, "end": axis + 1})
        elif e in self.sym_inputs and not all(x in self.dims for x in e.free_symbols):
            # a size passed in as a number only where the inputs' shapes cannot give it:
            # computed from shapes, it keeps every size known to shape inference (the
            # CUDA target needs that; a number's value is only known at run time)
            h = self.sym_inputs[e]()
        elif isinstance(e, sympy.Add):
            parts = [self.expr(a) for a in e.args]
            h = parts[0]
            for p in parts[1:]:
                h = self.op("Add", [h, p])
        elif isinstance(e, sympy.Mul):
            parts = [self.expr(a) for a in e.args]
            h = parts[0]
            for p in parts[1:]:
                h = self.op("Mul", [h, p])
        elif isinstance(e, sympy.Pow) and e.exp.is_Integer and int(e.exp) > 0:
            base = self.expr(e.base)
            h = base
            for _ in range(int(e.exp) - 1):
                h = self.op("Mul", [h, base])
        elif isinstance(e, symfn.FloorDiv):
            # sizes are >= 0 here, so truncating integer division is floor division
            h = self.op("Div", [self.expr(e.args[0]), self.expr(e.args[1])])
        elif isinstance(e, (symfn.Mod, symfn.PythonMod)):
            h = self.op("Mod", [self.expr(e.args[0]), self.expr(e.args[1])])
        elif isinstance(e, (sympy.Max, sympy.Min)):
            parts = [self.expr(a) for a in e.args]
            h = self.op("Max" if isinstance(e, sympy.Max) else "Min", parts)
        else:
            raise _Unsupported(f"the symbolic size {e} is not known from the inputs' shapes")
        self.sym_cache[e] = h
        return h

    def shape_of(self, sizes: Sequence[Any]) -> int:
        """A shape (ints and SymInts) as a 1-D i64 tensor: one constant, or a Concat of sizes."""
        if all(_static(d) is not None for d in sizes):
            return self.i64([_static(d) for d in sizes])
        parts: List[int] = []
        run: List[int] = []
        for d in sizes:
            s = _static(d)
            if s is not None:
                run.append(s)
                continue
            if run:
                parts.append(self.i64(run))
                run = []
            parts.append(self.sym(d))
        if run:
            parts.append(self.i64(run))
        return parts[0] if len(parts) == 1 else self.op("Concat", parts, {"axis": 0})

    def scalar_size(self, d: Any) -> int:
        """A size as a 0-d i64 tensor."""
        s = _static(d)
        if s is not None:
            return self.i64_scalar(s)
        return self.op("Reshape", [self.sym(d), self.i64([])])

    # -- node arguments -------------------------------------------------------------------

    def arg(self, a: Any) -> Any:
        if isinstance(a, fx.Node):
            if a not in self.env:
                raise _Unsupported(f"input {a.name} is not available")
            return self.env[a]
        if isinstance(a, (list, tuple)):
            return type(a)(self.arg(x) for x in a)
        return a

    def emit(self, node: fx.Node) -> None:
        if node.target is operator.getitem:
            src = self.arg(node.args[0])
            self.env[node] = src[node.args[1]]
            return
        entry = _HANDLERS.get(node.target)
        if entry is None:
            raise _Unsupported("no conversion")
        fn, _check = entry
        args = [self.arg(a) for a in node.args]
        kwargs = {k: self.arg(v) for k, v in node.kwargs.items()}
        out = fn(self, node, *args, **kwargs)
        m = _val(node)
        if isinstance(out, int):
            out = _V(out, m.dtype, tuple(m.shape))
        elif isinstance(out, (list, tuple)):
            out = tuple(_V(o, mm.dtype, tuple(mm.shape)) if isinstance(o, int) else o for o, mm in zip(out, m))
        self.env[node] = out
        self.ops[str(node.target)] += 1


# ---- operator table ---------------------------------------------------------------------

_HANDLERS: Dict[Any, Tuple[Callable[..., Any], Optional["_Check"]]] = {}


_Check = Callable[[fx.Node], Optional[str]]


def _reg(*ops: Any, check: Optional[_Check] = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        for o in ops:
            if o is not None:
                _HANDLERS[o] = (fn, check)
        return fn
    return deco


def _ov(packet: Any, *names: str) -> List[Any]:
    """The named overloads of an ATen operator that exist in this torch."""
    out = []
    for n in names:
        o = getattr(packet, n, None) if packet is not None else None
        if o is not None:
            out.append(o)
    return out


def _aten(name: str) -> Any:
    return getattr(aten, name, None)


def _out(node: fx.Node) -> Any:
    return _val(node)


def _axis(d: int, rank: int) -> int:
    return d + rank if d < 0 else d


def _promote(a: Any, b: Any) -> torch.dtype:
    """torch's result dtype of a binary op on (fake) tensors / numbers."""
    def dummy(x: Any) -> Any:
        if isinstance(x, _V):
            return torch.empty((0,) if x.rank else (), dtype=x.dtype)
        if isinstance(x, torch.SymInt):
            return 1
        if isinstance(x, torch.SymFloat):
            return 1.0
        if isinstance(x, torch.SymBool):
            return True
        return x
    return torch.result_type(dummy(a), dummy(b))


# -- elementwise ------------------------------------------------------------------------

def _binary(onnx_op: str, compare: bool = False) -> Callable[..., Any]:
    def h(cv: _Converter, node: fx.Node, a: Any, b: Any, *rest: Any, alpha: Any = 1, **kw: Any) -> Any:
        if rest:
            alpha = rest[0]
        dt = _promote(a, b) if compare else _out(node).dtype
        x, y = cv.as_value(a, dt), cv.as_value(b, dt)
        if alpha != 1:
            y = _V(cv.op("Mul", [y, cv.scalar(alpha, dt)]), dt, y.shape)
        if onnx_op == "NotEqual":
            return cv.op("Not", [cv.op("Equal", [x, y])])
        return cv.op(onnx_op, [x, y])
    return h


for _name, _onnx in [("add", "Add"), ("sub", "Sub"), ("mul", "Mul"), ("maximum", "Max"), ("minimum", "Min")]:
    _reg(*_ov(_aten(_name), "Tensor", "Scalar", "default"))(_binary(_onnx))
for _name, _onnx in [("eq", "Equal"), ("ne", "NotEqual"), ("lt", "Less"), ("le", "LessOrEqual"),
                     ("gt", "Greater"), ("ge", "GreaterOrEqual")]:
    _reg(*_ov(_aten(_name), "Tensor", "Scalar"))(_binary(_onnx, compare=True))


@_reg(*_ov(aten.rsub, "Tensor", "Scalar"))
def _rsub(cv, node, a, b, alpha=1):
    dt = _out(node).dtype
    x, y = cv.as_value(a, dt), cv.as_value(b, dt)
    if alpha != 1:
        x = _V(cv.op("Mul", [x, cv.scalar(alpha, dt)]), dt, x.shape)
    return cv.op("Sub", [y, x])


def _div_check(node: fx.Node) -> Optional[str]:
    mode = node.kwargs.get("rounding_mode", node.args[2] if len(node.args) > 2 else None)
    if mode not in (None, "trunc", "floor"):
        return f"rounding_mode {mode!r}"
    return None


@_reg(*_ov(aten.div, "Tensor", "Scalar", "Tensor_mode", "Scalar_mode"), check=_div_check)
def _div(cv, node, a, b, rounding_mode=None):
    dt = _out(node).dtype
    if rounding_mode is None:
        return cv.op("Div", [cv.as_value(a, dt), cv.as_value(b, dt)])
    # rounded division, computed in floating point and rounded toward -inf or 0
    ft = dt if _is_float(dt) else torch.float64
    q = cv.op("Div", [cv.as_value(a, ft), cv.as_value(b, ft)])
    if rounding_mode == "floor":
        r = cv.op("Floor", [q])
    else:
        r = cv.op("Mul", [cv.op("Sign", [q]), cv.op("Floor", [cv.op("Abs", [q])])])
    return cv.cast(_V(r, ft, ()), dt).h


@_reg(*_ov(_aten("true_divide"), "Tensor", "Scalar"))
def _true_divide(cv, node, a, b):
    dt = _out(node).dtype
    return cv.op("Div", [cv.as_value(a, dt), cv.as_value(b, dt)])


@_reg(*_ov(_aten("floor_divide"), "default", "Scalar"))
def _floor_divide(cv, node, a, b):
    return _div(cv, node, a, b, rounding_mode="floor")


@_reg(*_ov(aten.remainder, "Tensor", "Scalar"))
def _remainder(cv, node, a, b):
    dt = _out(node).dtype
    return cv.op("Mod", [cv.as_value(a, dt), cv.as_value(b, dt)], {"fmod": 0})


@_reg(*_ov(aten.fmod, "Tensor", "Scalar"))
def _fmod(cv, node, a, b):
    dt = _out(node).dtype
    return cv.op("Mod", [cv.as_value(a, dt), cv.as_value(b, dt)], {"fmod": 1})


@_reg(*_ov(aten.pow, "Tensor_Scalar", "Tensor_Tensor", "Scalar"))
def _pow(cv, node, a, b):
    dt = _out(node).dtype
    if isinstance(a, _V) and not isinstance(b, _V) and not isinstance(b, (torch.SymInt, torch.SymFloat)):
        x = cv.cast(a, dt)
        if b == 1:
            return cv.op("Identity", [x])
        if b == 2:
            return cv.op("Mul", [x, x])
        if b == 3:
            return cv.op("Mul", [cv.op("Mul", [x, x]), x])
        if b == 0.5:
            return cv.op("Sqrt", [x])
        if b == -1 and _is_float(dt):
            return cv.op("Reciprocal", [x])
        if b == -0.5 and _is_float(dt):
            return cv.op("Reciprocal", [cv.op("Sqrt", [x])])
    return cv.op("Pow", [cv.as_value(a, dt), cv.as_value(b, dt)])


def _logical(onnx_op: str) -> Callable[..., Any]:
    def h(cv, node, a, b):
        return cv.op(onnx_op, [cv.as_value(a, torch.bool), cv.as_value(b, torch.bool)])
    return h


for _name, _onnx in [("logical_and", "And"), ("logical_or", "Or"), ("logical_xor", "Xor")]:
    _reg(*_ov(_aten(_name), "default"))(_logical(_onnx))


def _bitwise(bool_op: str, int_op: str) -> Callable[..., Any]:
    def h(cv, node, a, b):
        dt = _out(node).dtype
        return cv.op(bool_op if dt == torch.bool else int_op, [cv.as_value(a, dt), cv.as_value(b, dt)])
    return h


for _name, _b, _i in [("bitwise_and", "And", "BitwiseAnd"), ("bitwise_or", "Or", "BitwiseOr"),
                      ("bitwise_xor", "Xor", "BitwiseXor")]:
    _reg(*_ov(_aten(_name), "Tensor", "Scalar"))(_bitwise(_b, _i))


@_reg(*_ov(aten.logical_not, "default"))
def _logical_not(cv, node, a):
    return cv.op("Not", [cv.cast(a, torch.bool)])


@_reg(*_ov(aten.bitwise_not, "default"))
def _bitwise_not(cv, node, a):
    return cv.op("Not" if a.dtype == torch.bool else "BitwiseNot", [a])


_UNARY = {
    "neg": "Neg", "exp": "Exp", "log": "Log", "sqrt": "Sqrt", "abs": "Abs", "sin": "Sin", "cos": "Cos",
    "tan": "Tan", "tanh": "Tanh", "sinh": "Sinh", "cosh": "Cosh", "asin": "Asin", "acos": "Acos",
    "atan": "Atan", "erf": "Erf", "sigmoid": "Sigmoid", "relu": "Relu", "reciprocal": "Reciprocal",
    "floor": "Floor", "ceil": "Ceil", "sign": "Sign", "isnan": "IsNaN", "isinf": "IsInf",
}


def _unary(onnx_op: str) -> Callable[..., Any]:
    def h(cv, node, a):
        out = _out(node).dtype
        x = cv.cast(a, out) if out != torch.bool else a
        return cv.op(onnx_op, [x])
    return h


for _name, _onnx in _UNARY.items():
    _reg(*_ov(_aten(_name), "default"))(_unary(_onnx))


def _round_check(node: fx.Node) -> Optional[str]:
    dec = node.kwargs.get("decimals", node.args[1] if len(node.args) > 1 else 0)
    return None if dec == 0 else "round with decimals"


@_reg(*_ov(aten.round, "default", "decimals"), check=_round_check)
def _round(cv, node, a, decimals=0):
    return cv.op("Round", [a])


@_reg(*_ov(aten.rsqrt, "default"))
def _rsqrt(cv, node, a):
    return cv.op("Reciprocal", [cv.op("Sqrt", [cv.cast(a, _out(node).dtype)])])


@_reg(*_ov(aten.trunc, "default"))
def _trunc(cv, node, a):
    if not _is_float(a.dtype):
        return cv.op("Identity", [a])
    return cv.op("Mul", [cv.op("Sign", [a]), cv.op("Floor", [cv.op("Abs", [a])])])


@_reg(*_ov(aten.log1p, "default"))
def _log1p(cv, node, a):
    dt = _out(node).dtype
    return cv.op("Log", [cv.op("Add", [cv.cast(a, dt), cv.scalar(1.0, dt)])])


@_reg(*_ov(aten.expm1, "default"))
def _expm1(cv, node, a):
    dt = _out(node).dtype
    return cv.op("Sub", [cv.op("Exp", [cv.cast(a, dt)]), cv.scalar(1.0, dt)])


@_reg(*_ov(aten.exp2, "default"))
def _exp2(cv, node, a):
    dt = _out(node).dtype
    return cv.op("Pow", [cv.scalar(2.0, dt), cv.cast(a, dt)])


@_reg(*_ov(aten.log2, "default"))
def _log2(cv, node, a):
    dt = _out(node).dtype
    return cv.op("Div", [cv.op("Log", [cv.cast(a, dt)]), cv.scalar(math.log(2.0), dt)])


@_reg(*_ov(aten.silu, "default"))
def _silu(cv, node, a):
    return cv.op("Mul", [a, cv.op("Sigmoid", [a])])


def _gelu_check(node: fx.Node) -> Optional[str]:
    ap = node.kwargs.get("approximate", node.args[1] if len(node.args) > 1 else "none")
    return None if ap in ("none", "tanh") else f"gelu approximate={ap!r}"


@_reg(*_ov(aten.gelu, "default"), check=_gelu_check)
def _gelu(cv, node, a, approximate="none"):
    return cv.op("Gelu", [a], {"approximate": approximate})


@_reg(*_ov(aten.hardtanh, "default"))
def _hardtanh(cv, node, a, min_val=-1.0, max_val=1.0):
    return cv.op("Clip", [a, cv.scalar(min_val, a.dtype), cv.scalar(max_val, a.dtype)])


@_reg(*_ov(aten.clamp, "default", "Tensor"))
def _clamp(cv, node, a, min=None, max=None):
    dt = _out(node).dtype
    x = cv.cast(a, dt)
    if isinstance(min, _V) or isinstance(max, _V):
        if min is not None:
            x = _V(cv.op("Max", [x, cv.as_value(min, dt)]), dt, x.shape)
        if max is not None:
            x = _V(cv.op("Min", [x, cv.as_value(max, dt)]), dt, x.shape)
        return cv.op("Identity", [x]) if min is None and max is None else x.h
    lo = None if min is None else cv.scalar(min, dt)
    hi = None if max is None else cv.scalar(max, dt)
    return cv.op("Clip", [x, lo, hi])


@_reg(*_ov(aten.clamp_min, "default", "Tensor"))
def _clamp_min(cv, node, a, m):
    dt = _out(node).dtype
    return cv.op("Max", [cv.cast(a, dt), cv.as_value(m, dt)])


@_reg(*_ov(aten.clamp_max, "default", "Tensor"))
def _clamp_max(cv, node, a, m):
    dt = _out(node).dtype
    return cv.op("Min", [cv.cast(a, dt), cv.as_value(m, dt)])


@_reg(*_ov(aten.leaky_relu, "default"))
def _leaky_relu(cv, node, a, negative_slope=0.01):
    return cv.op("LeakyRelu", [a], {"alpha": float(negative_slope)})


def _elu_check(node: fx.Node) -> Optional[str]:
    args = list(node.args[2:4])
    return None if all(x == 1 for x in args) else "elu with scale or input_scale"


@_reg(*_ov(aten.elu, "default"), check=_elu_check)
def _elu(cv, node, a, alpha=1.0, scale=1, input_scale=1):
    return cv.op("Elu", [a], {"alpha": float(alpha)})


@_reg(*_ov(aten.hardsigmoid, "default"))
def _hardsigmoid(cv, node, a):
    return cv.op("HardSigmoid", [a], {"alpha": 1.0 / 6.0, "beta": 0.5})


@_reg(*_ov(aten.hardswish, "default"))
def _hardswish(cv, node, a):
    return cv.op("HardSwish", [a])


@_reg(*_ov(aten.softplus, "default"))
def _softplus(cv, node, a, beta=1, threshold=20):
    dt = a.dtype
    bx = a if beta == 1 else _V(cv.op("Mul", [a, cv.scalar(beta, dt)]), dt, a.shape)
    sp = cv.op("Softplus", [bx])
    if beta != 1:
        sp = cv.op("Div", [sp, cv.scalar(beta, dt)])
    return cv.op("Where", [cv.op("Greater", [bx, cv.scalar(threshold, dt)]), a, sp])


def _where_operands(cv: _Converter, node: fx.Node, a: Any, b: Any) -> Tuple[Any, Any]:
    dt = _out(node).dtype
    return cv.as_value(a, dt), cv.as_value(b, dt)


@_reg(*_ov(aten.where, "self", "ScalarSelf", "ScalarOther", "Scalar"))
def _where(cv, node, cond, a, b):
    x, y = _where_operands(cv, node, a, b)
    return cv.op("Where", [cv.cast(cond, torch.bool), x, y])


@_reg(*_ov(aten.masked_fill, "Scalar", "Tensor"))
def _masked_fill(cv, node, a, mask, value):
    dt = _out(node).dtype
    return cv.op("Where", [cv.cast(mask, torch.bool), cv.as_value(value, dt), cv.cast(a, dt)])


# -- reductions -------------------------------------------------------------------------

def _dims(dim: Any, rank: int) -> List[int]:
    if dim is None:
        return list(range(rank))
    if isinstance(dim, int):
        dim = [dim]
    dims = [_axis(int(d), max(rank, 1)) for d in dim]
    return dims if dims else list(range(rank))


def _reduce(cv: _Converter, onnx_op: str, x: _V, dims: List[int], keepdim: bool) -> int:
    if x.rank == 0:
        return cv.op("Identity", [x])
    return cv.op(onnx_op, [x, cv.i64(dims)], {"keepdims": int(bool(keepdim))})


def _reduction(onnx_op: str) -> Callable[..., Any]:
    def h(cv, node, a, dim=None, keepdim=False, dtype=None, **kw):
        out = _out(node).dtype
        return _reduce(cv, onnx_op, cv.cast(a, out), _dims(dim, a.rank), keepdim)
    return h


_reg(*_ov(aten.sum, "dim_IntList"))(_reduction("ReduceSum"))
_reg(*_ov(aten.mean, "dim"))(_reduction("ReduceMean"))
_reg(*_ov(aten.prod, "dim_int"))(_reduction("ReduceProd"))


@_reg(*_ov(aten.sum, "default"))
def _sum_all(cv, node, a, dtype=None):
    return _reduce(cv, "ReduceSum", cv.cast(a, _out(node).dtype), list(range(a.rank)), False)


@_reg(*_ov(aten.mean, "default"))
def _mean_all(cv, node, a, dtype=None):
    return _reduce(cv, "ReduceMean", cv.cast(a, _out(node).dtype), list(range(a.rank)), False)


def _minmax(onnx_op: str) -> Callable[..., Any]:
    def h(cv, node, a, dim=(), keepdim=False):
        x = a if a.dtype != torch.bool else cv.cast(a, torch.int32)
        r = _reduce(cv, onnx_op, x, _dims(dim, a.rank) if dim not in ((), []) else list(range(a.rank)), keepdim)
        return r if a.dtype != torch.bool else cv.cast(_V(r, torch.int32, ()), torch.bool).h
    return h


_reg(*_ov(aten.amax, "default"))(_minmax("ReduceMax"))
_reg(*_ov(aten.amin, "default"))(_minmax("ReduceMin"))


def _anyall(onnx_op: str) -> Callable[..., Any]:
    def h(cv, node, a, dim=None, keepdim=False):
        x = cv.cast(cv.cast(a, torch.bool), torch.int32)
        r = _reduce(cv, onnx_op, x, _dims(dim, a.rank), keepdim)
        return cv.cast(_V(r, torch.int32, ()), torch.bool).h
    return h


_reg(*_ov(aten.any, "dim", "dims", "default"))(_anyall("ReduceMax"))
_reg(*_ov(aten.all, "dim", "dims", "default"))(_anyall("ReduceMin"))


def _argminmax(onnx_op: str) -> Callable[..., Any]:
    def h(cv, node, a, dim=None, keepdim=False):
        x = a
        if dim is None:
            x = _V(cv.op("Reshape", [a, cv.i64([-1])]), a.dtype, (None,))
            r = cv.op(onnx_op, [x], {"axis": 0, "keepdims": 0})
            if keepdim:
                r = cv.op("Reshape", [r, cv.i64([1] * a.rank)])
            return r
        return cv.op(onnx_op, [x], {"axis": _axis(dim, a.rank), "keepdims": int(bool(keepdim))})
    return h


_reg(*_ov(aten.argmax, "default"))(_argminmax("ArgMax"))
_reg(*_ov(aten.argmin, "default"))(_argminmax("ArgMin"))


def _dim_minmax(reduce_op: str, arg_op: str) -> Callable[..., Any]:
    def h(cv, node, a, dim, keepdim=False):
        ax = _axis(dim, a.rank)
        return (cv.op(reduce_op, [a, cv.i64([ax])], {"keepdims": int(bool(keepdim))}),
                cv.op(arg_op, [a], {"axis": ax, "keepdims": int(bool(keepdim))}))
    return h


_reg(*_ov(aten.max, "dim"))(_dim_minmax("ReduceMax", "ArgMax"))
_reg(*_ov(aten.min, "dim"))(_dim_minmax("ReduceMin", "ArgMin"))


def _static_count(shape: Sequence[Any], dims: Sequence[int]) -> Optional[int]:
    n = 1
    for d in dims:
        s = _static(shape[d])
        if s is None:
            return None
        n *= s
    return n


def _var_check(node: fx.Node) -> Optional[str]:
    x = _val(node.args[0])
    dim = node.args[1] if len(node.args) > 1 else node.kwargs.get("dim")
    if _static_count(x.shape, _dims(dim, x.dim())) is None:
        return "variance over symbolic sizes"
    return None


def _variance(cv: _Converter, a: _V, dim: Any, correction: Any, keepdim: bool) -> Tuple[int, int]:
    dims = _dims(dim, a.rank)
    n = _static_count(a.shape, dims)
    corr = 1 if correction is None else correction
    mean_k = cv.op("ReduceMean", [a, cv.i64(dims)], {"keepdims": 1})
    d = cv.op("Sub", [a, mean_k])
    ss = cv.op("ReduceSum", [cv.op("Mul", [d, d]), cv.i64(dims)], {"keepdims": int(bool(keepdim))})
    var = cv.op("Div", [ss, cv.scalar(float(max(n - corr, 0)), a.dtype)])
    mean = mean_k if keepdim else cv.op("Squeeze", [mean_k, cv.i64(dims)])
    return var, mean


@_reg(*_ov(aten.var, "correction"), check=_var_check)
def _var(cv, node, a, dim=None, correction=None, keepdim=False):
    return _variance(cv, a, dim, correction, keepdim)[0]


@_reg(*_ov(aten.var_mean, "correction"), check=_var_check)
def _var_mean(cv, node, a, dim=None, correction=None, keepdim=False):
    return _variance(cv, a, dim, correction, keepdim)


@_reg(*_ov(aten.cumsum, "default"))
def _cumsum(cv, node, a, dim, dtype=None):
    x = cv.cast(a, _out(node).dtype)
    return cv.op("CumSum", [x, cv.i64_scalar(_axis(dim, max(a.rank, 1)))])


@_reg(*_ov(aten.logsumexp, "default"))
def _logsumexp(cv, node, a, dim, keepdim=False):
    return _reduce(cv, "ReduceLogSumExp", a, _dims(dim, a.rank), keepdim)


@_reg(*_ov(aten._softmax, "default"), *_ov(aten.softmax, "int"))
def _softmax(cv, node, a, dim, half_to_float=False, **kw):
    x = cv.cast(a, _out(node).dtype)
    return cv.op("Softmax", [x], {"axis": _axis(dim, max(a.rank, 1))})


@_reg(*_ov(aten._log_softmax, "default"), *_ov(aten.log_softmax, "int"))
def _log_softmax(cv, node, a, dim, half_to_float=False, **kw):
    x = cv.cast(a, _out(node).dtype)
    return cv.op("LogSoftmax", [x], {"axis": _axis(dim, max(a.rank, 1))})


def _safe_softmax_of(cv: _Converter, x: _V, axis: int) -> int:
    """Softmax whose rows of -inf only give 0 (torch's _safe_softmax), not NaN."""
    sm = cv.op("Softmax", [x], {"axis": axis})
    ninf = cv.op("Equal", [x, cv.scalar(float("-inf"), x.dtype)])
    allm = cv.op("ReduceMin", [cv.op("Cast", [ninf], {"to": _ONNX_DTYPE[torch.int32]}), cv.i64([axis])],
                 {"keepdims": 1})
    return cv.op("Where", [cv.op("Cast", [allm], {"to": _ONNX_DTYPE[torch.bool]}), cv.scalar(0.0, x.dtype), sm])


@_reg(*_ov(_aten("_safe_softmax"), "default"))
def _safe_softmax(cv, node, a, dim, dtype=None):
    x = cv.cast(a, _out(node).dtype)
    return _safe_softmax_of(cv, x, _axis(dim, max(a.rank, 1)))


@_reg(*_ov(aten.linalg_vector_norm, "default"),
      check=lambda n: None if (n.args[1] if len(n.args) > 1 else n.kwargs.get("ord", 2)) in (1, 2) else "norm order")
def _vector_norm(cv, node, a, ord=2, dim=None, keepdim=False, dtype=None):
    x = cv.cast(a, _out(node).dtype)
    return _reduce(cv, "ReduceL2" if ord == 2 else "ReduceL1", x, _dims(dim, a.rank), keepdim)


# -- normalization ----------------------------------------------------------------------

@_reg(*_ov(aten.native_layer_norm, "default"))
def _layer_norm(cv, node, x, normalized_shape, weight, bias, eps):
    k = len(normalized_shape)
    if weight is None:
        weight = cv.constant_tensor(torch.ones(list(normalized_shape), dtype=x.dtype))
    users = {u.args[1] for u in node.users if u.target is operator.getitem}
    outs = 3 if (users - {0}) else 1
    attrs = {"axis": -k, "epsilon": float(eps)}
    r = cv.op("LayerNormalization", [x, weight, bias], attrs, n=outs)
    if outs == 1:
        return (r, None, None)
    return tuple(r)


def _bn_no_training(cv: _Converter, x: _V, weight: Any, bias: Any, mean: _V, var: _V, eps: float) -> int:
    c = x.shape[1]
    if weight is None:
        weight = cv.constant_tensor(torch.ones(int(c), dtype=x.dtype))
    if bias is None:
        bias = cv.constant_tensor(torch.zeros(int(c), dtype=x.dtype))
    return cv.op("BatchNormalization", [x, weight, bias, mean, var], {"epsilon": float(eps)})


def _bn_check(node: fx.Node) -> Optional[str]:
    x = _val(node.args[0])
    if x.dim() < 2 or _static(x.shape[1]) is None:
        return "batch norm needs a static channel count"
    return None


@_reg(*_ov(aten._native_batch_norm_legit_no_training, "default"), check=_bn_check)
def _bn_legit(cv, node, x, weight, bias, running_mean, running_var, momentum, eps):
    y = _bn_no_training(cv, x, weight, bias, running_mean, running_var, eps)
    return (y, None, None)


def _native_bn_check(node: fx.Node) -> Optional[str]:
    training = node.args[5] if len(node.args) > 5 else node.kwargs.get("training")
    if training:
        return "batch norm in training mode"
    return _bn_check(node)


@_reg(*_ov(aten.native_batch_norm, "default"), check=_native_bn_check)
def _native_bn(cv, node, x, weight, bias, running_mean, running_var, training, momentum, eps):
    return (_bn_no_training(cv, x, weight, bias, running_mean, running_var, eps), None, None)


def _group_norm_check(node: fx.Node) -> Optional[str]:
    x = _val(node.args[0])
    if any(_static(d) is None for d in x.shape[1:]):
        return "group norm over symbolic sizes"
    return None


@_reg(*_ov(aten.native_group_norm, "default"), check=_group_norm_check)
def _group_norm(cv, node, x, weight, bias, N, C, HxW, group, eps):
    # normalise over [C/G, *spatial] per group, then scale and shift per channel
    rest = [int(d) for d in x.shape[1:]]
    c = rest[0]
    g = cv.op("Reshape", [x, cv.i64([0, int(group), -1])])
    mean = cv.op("ReduceMean", [g, cv.i64([2])], {"keepdims": 1})
    d = cv.op("Sub", [g, mean])
    var = cv.op("ReduceMean", [cv.op("Mul", [d, d]), cv.i64([2])], {"keepdims": 1})
    y = cv.op("Div", [d, cv.op("Sqrt", [cv.op("Add", [var, cv.scalar(float(eps), x.dtype)])])])
    y = cv.op("Reshape", [y, cv.shape_of([x.shape[0]] + rest)])
    bshape = [c] + [1] * (len(rest) - 1)
    if weight is not None:
        y = cv.op("Mul", [y, cv.op("Reshape", [weight, cv.i64(bshape)])])
    if bias is not None:
        y = cv.op("Add", [y, cv.op("Reshape", [bias, cv.i64(bshape)])])
    return (y, None, None)


@_reg(*_ov(aten.native_dropout, "default"),
      check=lambda n: "dropout in training mode" if (n.args[2] if len(n.args) > 2 else n.kwargs.get("train")) else None)
def _dropout(cv, node, x, p, train):
    ones = cv.op("Expand", [cv.scalar(True, torch.bool), cv.op("Shape", [x])])
    return (cv.op("Identity", [x]), ones)


# -- convolution, matrix products, pooling ------------------------------------------------

def _conv_check(node: fx.Node) -> Optional[str]:
    x = _val(node.args[0])
    if x.dim() not in (3, 4, 5):
        return f"convolution of rank {x.dim()}"
    return None


@_reg(*_ov(aten.convolution, "default"), check=_conv_check)
def _convolution(cv, node, x, w, b, stride, padding, dilation, transposed, output_padding, groups):
    nd = x.rank - 2
    rep = lambda v: [int(e) for e in (list(v) * nd if len(v) == 1 else v)]  # noqa: E731
    pads = rep(padding)
    attrs = {"strides": rep(stride), "pads": pads + pads, "dilations": rep(dilation), "group": int(groups),
             "kernel_shape": [int(d) for d in w.shape[2:]]}
    if transposed:
        attrs["output_padding"] = rep(output_padding)
        return cv.op("ConvTranspose", [x, w, b], attrs)
    return cv.op("Conv", [x, w, b], attrs)


@_reg(*_ov(aten.mm, "default"), *_ov(aten.bmm, "default"), *_ov(aten.matmul, "default"))
def _mm(cv, node, a, b):
    return cv.op("MatMul", [a, b])


@_reg(*_ov(aten.addmm, "default"))
def _addmm(cv, node, bias, a, b, beta=1, alpha=1):
    if _is_float(a.dtype):
        return cv.op("Gemm", [a, b, bias], {"alpha": float(alpha), "beta": float(beta)})
    mm = cv.op("MatMul", [a, b])
    if alpha != 1:
        mm = cv.op("Mul", [mm, cv.scalar(alpha, a.dtype)])
    c = bias.h if beta == 1 else cv.op("Mul", [bias, cv.scalar(beta, bias.dtype)])
    return cv.op("Add", [mm, c])


@_reg(*_ov(aten.baddbmm, "default"))
def _baddbmm(cv, node, bias, a, b, beta=1, alpha=1):
    mm = cv.op("MatMul", [a, b])
    if alpha != 1:
        mm = cv.op("Mul", [mm, cv.scalar(alpha, a.dtype)])
    if beta == 0:
        return mm
    c = bias.h if beta == 1 else cv.op("Mul", [bias, cv.scalar(beta, bias.dtype)])
    return cv.op("Add", [mm, c])


@_reg(*_ov(aten.linear, "default"))
def _linear(cv, node, x, w, b=None):
    wt = cv.op("Transpose", [w], {"perm": [1, 0]})
    y = cv.op("MatMul", [x, wt])
    return y if b is None else cv.op("Add", [y, b])


def _pool_lists(x_rank: int, kernel: Sequence[int], stride: Sequence[int], padding: Any,
                dilation: Any = 1) -> Dict[str, Any]:
    nd = x_rank - 2

    def rep(v: Any) -> List[int]:
        return [int(e) for e in ([v] * nd if isinstance(v, int) else (list(v) * nd if len(v) == 1 else v))]

    k = rep(kernel)
    s = rep(stride) if stride not in (None, [], ()) else list(k)
    p = rep(padding)
    return {"kernel_shape": k, "strides": s, "pads": p + p, "dilations": rep(dilation)}


def _maxpool_check(node: fx.Node) -> Optional[str]:
    if any(u.target is operator.getitem and u.args[1] == 1 for u in node.users):
        return "max pool indices are used"
    x = _val(node.args[0])
    if x.dim() not in (3, 4, 5):
        return "max pool of this rank"
    return None


@_reg(*_ov(aten.max_pool2d_with_indices, "default"), *_ov(aten.max_pool3d_with_indices, "default"),
      check=_maxpool_check)
def _maxpool_idx(cv, node, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    attrs = _pool_lists(x.rank, kernel_size, stride, padding, dilation)
    attrs["ceil_mode"] = int(bool(ceil_mode))
    return (cv.op("MaxPool", [x], attrs), None)


@_reg(*_ov(aten.max_pool2d, "default"), *_ov(aten.max_pool1d, "default"), *_ov(aten.max_pool3d, "default"))
def _maxpool(cv, node, x, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    attrs = _pool_lists(x.rank, kernel_size, stride, padding, dilation)
    attrs["ceil_mode"] = int(bool(ceil_mode))
    return cv.op("MaxPool", [x], attrs)


def _avgpool_check(node: fx.Node) -> Optional[str]:
    div = node.args[6] if len(node.args) > 6 else node.kwargs.get("divisor_override")
    return None if div is None else "avg pool with divisor_override"


@_reg(*_ov(aten.avg_pool2d, "default"), *_ov(aten.avg_pool1d, "default"), *_ov(aten.avg_pool3d, "default"),
      check=_avgpool_check)
def _avgpool(cv, node, x, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
             divisor_override=None):
    attrs = _pool_lists(x.rank, kernel_size, stride, padding)
    del attrs["dilations"]
    attrs["ceil_mode"] = int(bool(ceil_mode))
    attrs["count_include_pad"] = int(bool(count_include_pad))
    return cv.op("AveragePool", [x], attrs)


def _adaptive_check(node: fx.Node) -> Optional[str]:
    x = _val(node.args[0])
    out = list(node.args[1])
    if all(o == 1 for o in out):
        return None
    spatial = [_static(d) for d in x.shape[-len(out):]]
    if any(s is None for s in spatial):
        return "adaptive pool over symbolic sizes"
    if len(out) > 2 and any(s % o for s, o in zip(spatial, out)):
        return "3-D adaptive pool to a size that does not divide the input"
    return None


def _adaptive_matrix(n: int, o: int, dtype: torch.dtype) -> torch.Tensor:
    """[o, n]: row i averages input positions floor(i*n/o) .. ceil((i+1)*n/o) - 1 (torch's windows)."""
    a = torch.zeros(o, n, dtype=torch.float64)
    for i in range(o):
        lo, hi = (i * n) // o, -((-(i + 1) * n) // o)
        a[i, lo:hi] = 1.0 / (hi - lo)
    return a.to(dtype)


@_reg(*_ov(aten._adaptive_avg_pool2d, "default"), *_ov(aten.adaptive_avg_pool1d, "default"),
      *_ov(aten._adaptive_avg_pool3d, "default"), check=_adaptive_check)
def _adaptive_avgpool(cv, node, x, output_size):
    out = [int(o) for o in output_size]
    if all(o == 1 for o in out):
        return cv.op("GlobalAveragePool", [x])
    spatial = [int(_static(d)) for d in x.shape[-len(out):]]
    if all(s % o == 0 for s, o in zip(spatial, out)):
        k = [s // o for s, o in zip(spatial, out)]
        return cv.op("AveragePool", [x], {"kernel_shape": k, "strides": k})
    # uneven windows: averaging matrices, y = A_h @ x @ A_w^T (A_w^T alone in 1-D)
    y = x.h
    aw = cv.constant_tensor(_adaptive_matrix(spatial[-1], out[-1], x.dtype).t().contiguous())
    y = cv.op("MatMul", [y, aw])
    if len(out) == 2:
        ah = cv.constant_tensor(_adaptive_matrix(spatial[0], out[0], x.dtype))
        y = cv.op("MatMul", [ah, y])
    return y


# -- layout and movement ----------------------------------------------------------------

def _alias(cv, node, x, *args, **kwargs):
    return x


_reg(*_ov(aten.clone, "default"), *_ov(aten.alias, "default"), *_ov(aten.detach, "default"),
     *_ov(aten.lift_fresh_copy, "default"), *_ov(_aten("contiguous"), "default"))(_alias)


@_reg(*_ov(aten.view, "default"), *_ov(aten._unsafe_view, "default"), *_ov(aten.reshape, "default"),
      *_ov(_aten("view_copy"), "default"))
def _view(cv, node, x, size):
    return _to_node_shape(cv, node, x, "Reshape")


def _to_node_shape(cv, node, x, op):
    """x reshaped or expanded (op) to the node's output shape; x itself when it has it."""
    out = tuple(_out(node).shape)
    if _same_shape(out, x.shape):
        return x
    return cv.op(op, [x, cv.shape_of(out)])


@_reg(*_ov(aten.permute, "default"))
def _permute(cv, node, x, dims):
    perm = [_axis(int(d), x.rank) for d in dims]
    if perm == list(range(x.rank)):
        return x
    return cv.op("Transpose", [x], {"perm": perm})


@_reg(*_ov(aten.t, "default"))
def _t(cv, node, x):
    if x.rank < 2:
        return x
    return cv.op("Transpose", [x], {"perm": [1, 0]})


@_reg(*_ov(aten.transpose, "int"))
def _transpose(cv, node, x, d0, d1):
    perm = list(range(x.rank))
    a, b = _axis(d0, x.rank), _axis(d1, x.rank)
    if a == b:
        return x
    perm[a], perm[b] = perm[b], perm[a]
    return cv.op("Transpose", [x], {"perm": perm})


@_reg(*_ov(aten.expand, "default"))
def _expand(cv, node, x, size, implicit=False):
    return _to_node_shape(cv, node, x, "Expand")


@_reg(*_ov(aten.unsqueeze, "default"))
def _unsqueeze(cv, node, x, dim):
    return cv.op("Unsqueeze", [x, cv.i64([_axis(dim, x.rank + 1)])])


@_reg(*_ov(aten.squeeze, "default", "dim", "dims"))
def _squeeze(cv, node, x, dim=None):
    cand = list(range(x.rank)) if dim is None else _dims(dim, x.rank)
    axes = [d for d in cand if x.rank and _static(x.shape[d]) == 1]
    if not axes:
        return x
    return cv.op("Squeeze", [x, cv.i64(axes)])


@_reg(*_ov(aten.cat, "default"))
def _cat(cv, node, tensors, dim=0):
    out = _out(node)
    parts = [t for t in tensors if not (t.rank == 1 and _static(t.shape[0]) == 0)]
    if not parts:
        return cv.constant_tensor(torch.empty(0, dtype=out.dtype)).h
    parts = [cv.cast(t, out.dtype) for t in parts]
    if len(parts) == 1:
        return parts[0]
    return cv.op("Concat", parts, {"axis": _axis(dim, out.dim())})


@_reg(*_ov(aten.slice, "Tensor"))
def _slice(cv, node, x, dim=0, start=None, end=None, step=1):
    ax = _axis(dim, x.rank)
    start = 0 if start is None else start
    end = _INT64_MAX if end is None else end
    size = _static(x.shape[ax])
    if _static(start) == 0 and step == 1 and (
            _static(end) is not None and size is not None and _static(end) >= size):
        return x
    if _same_shape(_out(node).shape, x.shape) and _static(start) == 0 and step == 1:
        return x
    st = cv.i64([_static(start)]) if _static(start) is not None else cv.sym(start)
    en = cv.i64([min(_static(end), _INT64_MAX)]) if _static(end) is not None else cv.sym(end)
    return cv.op("Slice", [x, st, en, cv.i64([ax]), cv.i64([int(step)])])


@_reg(*_ov(aten.select, "int"))
def _select(cv, node, x, dim, index):
    ax = _axis(dim, x.rank)
    idx = cv.i64_scalar(_static(index)) if _static(index) is not None else cv.scalar_size(index)
    return cv.op("Gather", [x, idx], {"axis": ax})


def _split_sizes(cv: _Converter, node: fx.Node, ax: int) -> int:
    return cv.shape_of([o.shape[ax] for o in _out(node)])


@_reg(*_ov(aten.split, "Tensor"), *_ov(aten.split_with_sizes, "default"))
def _split(cv, node, x, split, dim=0):
    outs = _out(node)
    ax = _axis(dim, x.rank)
    if len(outs) == 1:
        return (x,)
    return tuple(cv.op("Split", [x, _split_sizes(cv, node, ax)], {"axis": ax}, n=len(outs)))


@_reg(*_ov(aten.unbind, "int"))
def _unbind(cv, node, x, dim=0):
    outs = _out(node)
    ax = _axis(dim, x.rank)
    parts = [x.h] if len(outs) == 1 else cv.op("Split", [x, cv.i64([1] * len(outs))], {"axis": ax}, n=len(outs))
    return tuple(cv.op("Squeeze", [p, cv.i64([ax])]) for p in parts)


@_reg(*_ov(aten._to_copy, "default"),
      check=lambda n: None if _same_device(n) else "copy to another device")
def _to_copy(cv, node, x, **kw):
    return cv.cast(x, _out(node).dtype)


@_reg(*_ov(getattr(torch.ops.prims, "convert_element_type", None), "default"))
def _convert_element_type(cv, node, x, dtype):
    # Dynamo's dynamic floats become 0-d f64 tensors that prims casts
    return cv.cast(x, _out(node).dtype)


@_reg(*_ov(aten.embedding, "default"))
def _embedding(cv, node, weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    return cv.op("Gather", [weight, cv.cast(indices, torch.int64)], {"axis": 0})


@_reg(*_ov(aten.index_select, "default"))
def _index_select(cv, node, x, dim, index):
    return cv.op("Gather", [x, cv.cast(index, torch.int64)], {"axis": _axis(dim, x.rank)})


def _index_check(node: fx.Node) -> Optional[str]:
    idx = node.args[1]
    for i in idx:
        if i is not None and _val(i).dtype in (torch.bool, torch.uint8):
            return "indexing with a boolean mask"
    return None


@_reg(*_ov(aten.index, "Tensor"), check=_index_check)
def _index(cv, node, x, indices):
    pos = [i for i, t in enumerate(indices) if t is not None]
    if len(pos) == 1:
        return cv.op("Gather", [x, cv.cast(indices[pos[0]], torch.int64)], {"axis": pos[0]})
    # several index tensors: broadcast them, stack on a last axis, GatherND over the
    # indexed axes moved to the front (torch puts the broadcast shape first when the
    # indexed axes are not adjacent, and at the first of them when they are)
    out = _out(node)
    idx = [cv.cast(indices[p], torch.int64) for p in pos]
    brank = max(t.rank for t in idx)
    rest = [d for d in range(x.rank) if d not in pos]
    nb = out.dim() - len(rest)  # the broadcast index shape, read off the output
    adjacent = pos == list(range(pos[0], pos[0] + len(pos)))
    start = pos[0] if adjacent else 0
    bshape = list(out.shape[start:start + nb])
    full = cv.shape_of(list(bshape))
    stacked = [cv.op("Unsqueeze", [cv.op("Expand", [t, full]), cv.i64([brank])]) for t in idx]
    ind = stacked[0] if len(stacked) == 1 else cv.op("Concat", stacked, {"axis": brank})
    perm = pos + rest
    xt = x.h if perm == list(range(x.rank)) else cv.op("Transpose", [x], {"perm": perm})
    g = cv.op("GatherND", [xt, ind])  # shape: bshape + x.shape[rest]
    if adjacent and pos[0] > 0:
        nb, lead = len(bshape), pos[0]
        perm2 = list(range(nb, nb + lead)) + list(range(nb)) + list(range(nb + lead, nb + len(rest)))
        g = cv.op("Transpose", [g], {"perm": perm2})
    return g


@_reg(*_ov(aten.gather, "default"))
def _gather(cv, node, x, dim, index, sparse_grad=False):
    return cv.op("GatherElements", [x, cv.cast(index, torch.int64)], {"axis": _axis(dim, x.rank)})


@_reg(*_ov(aten.constant_pad_nd, "default"))
def _pad(cv, node, x, pad, value=0):
    begins = [0] * x.rank
    ends = [0] * x.rank
    for i in range(len(pad) // 2):
        d = x.rank - 1 - i
        begins[d], ends[d] = int(pad[2 * i]), int(pad[2 * i + 1])
    return cv.op("Pad", [x, cv.i64(begins + ends), cv.scalar(value, x.dtype)], {"mode": "constant"})


@_reg(*_ov(aten.repeat, "default"))
def _repeat(cv, node, x, repeats):
    reps = [int(r) for r in repeats]
    h = x.h
    if len(reps) > x.rank:
        h = cv.op("Reshape", [x, cv.shape_of([1] * (len(reps) - x.rank) + list(x.shape))])
    return cv.op("Tile", [h, cv.i64(reps)])


def _tri(upper: int) -> Callable[..., Any]:
    def h(cv, node, x, diagonal=0):
        return cv.op("Trilu", [x, cv.i64_scalar(int(diagonal))], {"upper": upper})
    return h


_reg(*_ov(aten.tril, "default"))(_tri(0))
_reg(*_ov(aten.triu, "default"))(_tri(1))


@_reg(*_ov(aten.flip, "default"))
def _flip(cv, node, x, dims):
    axes = [_axis(int(d), x.rank) for d in dims]
    k = len(axes)
    return cv.op("Slice", [x, cv.i64([-1] * k), cv.i64([_INT64_MIN] * k), cv.i64(axes), cv.i64([-1] * k)])


def _scatter_check(node: fx.Node) -> Optional[str]:
    x = _val(node.args[0])
    dim = node.args[2] if len(node.args) > 2 else node.kwargs.get("dim", 0)
    if _static(x.shape[_axis(dim, x.dim())]) is None:
        return "scatter along a symbolic size"
    if node.target is aten.slice_scatter.default:
        step = node.args[5] if len(node.args) > 5 else node.kwargs.get("step", 1)
        start = node.args[3] if len(node.args) > 3 else node.kwargs.get("start")
        end = node.args[4] if len(node.args) > 4 else node.kwargs.get("end")
        if step != 1 or any(v is not None and _static(v) is None for v in (start, end)):
            return "slice_scatter with a step or symbolic bounds"
    elif _static(node.args[3] if len(node.args) > 3 else node.kwargs.get("index")) is None:
        return "select_scatter at a symbolic index"
    return None


def _replace_range(cv: _Converter, x: _V, src: Any, ax: int, lo: int, hi: int) -> int:
    """x with x[lo:hi] along ax replaced by src: a Concat of the kept pieces and src."""
    n = int(_static(x.shape[ax]))
    parts: List[Any] = []
    if lo > 0:
        parts.append(cv.op("Slice", [x, cv.i64([0]), cv.i64([lo]), cv.i64([ax])]))
    parts.append(src)
    if hi < n:
        parts.append(cv.op("Slice", [x, cv.i64([hi]), cv.i64([n]), cv.i64([ax])]))
    return parts[0].h if len(parts) == 1 and isinstance(parts[0], _V) else (
        parts[0] if len(parts) == 1 else cv.op("Concat", parts, {"axis": ax}))


@_reg(*_ov(aten.slice_scatter, "default"), check=_scatter_check)
def _slice_scatter(cv, node, x, src, dim=0, start=None, end=None, step=1):
    ax = _axis(dim, x.rank)
    n = int(_static(x.shape[ax]))
    lo, hi, _ = slice(_static(start) if start is not None else None,
                      _static(end) if end is not None else None).indices(n)
    hi = max(hi, lo)
    return _replace_range(cv, x, cv.cast(src, x.dtype), ax, lo, hi)


@_reg(*_ov(aten.select_scatter, "default"), check=_scatter_check)
def _select_scatter(cv, node, x, src, dim, index):
    ax = _axis(dim, x.rank)
    n = int(_static(x.shape[ax]))
    i = int(_static(index)) % n
    u = cv.op("Unsqueeze", [cv.cast(src, x.dtype), cv.i64([ax])])
    return _replace_range(cv, x, u, ax, i, i + 1)


def _as_strided_check(node: fx.Node) -> Optional[str]:
    x = _val(node.args[0])
    size, stride = node.args[1], node.args[2]
    if any(_static(d) is None for d in list(x.shape) + list(size) + list(stride)) or \
            any(_static(d) is None for d in x.stride()):
        return "as_strided with symbolic sizes"
    off = node.args[3] if len(node.args) > 3 else node.kwargs.get("storage_offset")
    if off is not None and _static(off) is None:
        return "as_strided at a symbolic offset"
    if not _dense(x):
        return "as_strided of a tensor that does not cover its storage densely"
    return None


def _dense(x: torch.Tensor) -> bool:
    """x's elements fill x.numel() storage slots exactly (a permutation of a contiguous layout)."""
    dims = sorted((int(st), int(sz)) for st, sz in zip(x.stride(), x.shape) if int(sz) != 1)
    expect = 1
    for st, sz in dims:
        if st != expect:
            return False
        expect *= sz
    return True


@_reg(*_ov(aten.as_strided, "default"), check=_as_strided_check)
def _as_strided(cv, node, x, size, stride, storage_offset=None):
    # tessel's values are dense in logical order; eager's is laid out with the strides
    # that the fake value records. The logical index of each element as_strided reads
    # is found by laying out 0..n-1 with those strides and reading it the same way.
    xm = _val(node.args[0])
    shape = [int(_static(d)) for d in xm.shape]
    n = int(np.prod(shape)) if shape else 1
    lay = torch.empty_strided(shape, [int(_static(d)) for d in xm.stride()], dtype=torch.int64)
    lay.copy_(torch.arange(n, dtype=torch.int64).reshape(shape))
    base = torch.as_strided(lay, [int(_static(d)) for d in size], [int(_static(d)) for d in stride],
                            0 if storage_offset is None else int(_static(storage_offset)) - int(xm.storage_offset()))
    idx = base.contiguous()
    out_shape = [int(_static(d)) for d in size]
    if idx.numel() == n and torch.equal(idx.reshape(-1), torch.arange(n)):
        return cv.op("Reshape", [x, cv.i64(out_shape)]) if out_shape != shape else x
    flat = cv.op("Reshape", [x, cv.i64([-1])])
    return cv.op("Gather", [flat, cv.constant_tensor(idx).h], {"axis": 0})


# -- tensor factories ---------------------------------------------------------------------

def _on_target_device(dev: Any) -> bool:
    """Tensors made or copied onto `dev` inside a compiled part live where the part runs:
    on the CPU, or on the GPU of a CUDA part (_device_refusal picks the target from the
    graph's tensors; a part never mixes the two)."""
    return dev is None or torch.device(dev).type in ("cpu", "cuda")


def _same_device(node: fx.Node) -> bool:
    """A copy that stays on its device (a dtype cast, or .to() of a tensor already there)."""
    src, out = _val(node.args[0]), _val(node)
    return isinstance(src, torch.Tensor) and isinstance(out, torch.Tensor) and src.device == out.device


def _factory_check(node: fx.Node) -> Optional[str]:
    if not _on_target_device(node.kwargs.get("device")):
        return "a tensor made on another device"
    return None


def _fill(cv: _Converter, node: fx.Node, shape: Sequence[Any], value: Any) -> int:
    out = _out(node)
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        if _static(value) is None:
            v = cv.as_value(value, out.dtype)
            return cv.op("Expand", [v, cv.shape_of(shape)])
        value = _static(value)
    if all(_static(d) is not None for d in shape):
        return cv.constant_tensor(torch.full([_static(d) for d in shape], value, dtype=out.dtype)).h
    v = cv.scalar(value, out.dtype)
    return cv.op("Expand", [v, cv.shape_of(shape)])


@_reg(*_ov(aten.full, "default"), check=_factory_check)
def _full(cv, node, size, fill_value, **kw):
    return _fill(cv, node, list(_out(node).shape), fill_value)


@_reg(*_ov(aten.full_like, "default"), check=_factory_check)
def _full_like(cv, node, x, fill_value, **kw):
    return _fill(cv, node, list(_out(node).shape), fill_value)


@_reg(*_ov(aten.zeros_like, "default"), *_ov(aten.empty_like, "default"), check=_factory_check)
def _zeros_like(cv, node, x, **kw):
    return _fill(cv, node, list(_out(node).shape), 0)


@_reg(*_ov(aten.ones_like, "default"), check=_factory_check)
def _ones_like(cv, node, x, **kw):
    return _fill(cv, node, list(_out(node).shape), 1)


@_reg(*_ov(aten.zeros, "default"), *_ov(aten.empty, "memory_format"), *_ov(aten.new_zeros, "default"),
      *_ov(aten.new_empty, "default"), *_ov(_aten("empty_strided"), "default"), check=_factory_check)
def _zeros(cv, node, *args, **kw):
    return _fill(cv, node, list(_out(node).shape), 0)


@_reg(*_ov(aten.ones, "default"), *_ov(aten.new_ones, "default"), check=_factory_check)
def _ones(cv, node, *args, **kw):
    return _fill(cv, node, list(_out(node).shape), 1)


@_reg(*_ov(aten.scalar_tensor, "default"), check=_factory_check)
def _scalar_tensor(cv, node, value, **kw):
    return _fill(cv, node, [], value)


@_reg(*_ov(aten.arange, "default", "start", "start_step"), check=_factory_check)
def _arange(cv, node, *args, **kw):
    out = _out(node)
    nums = list(args) + [1] * (3 - len(args)) if len(args) >= 2 else [0, args[0], 1]
    start, end, step = nums[:3]
    if all(_static(v) is not None or isinstance(v, float) for v in (start, end, step)):
        vals = [_static(v) if _static(v) is not None else v for v in (start, end, step)]
        return cv.constant_tensor(torch.arange(*vals, dtype=out.dtype)).h
    ct = out.dtype if _is_float(out.dtype) else torch.int64
    r = cv.op("Range", [cv.as_value(start, ct), cv.as_value(end, ct), cv.as_value(step, ct)])
    return cv.cast(_V(r, ct, out.shape), out.dtype).h


@_reg(*_ov(aten.copy, "default"))
def _copy(cv, node, dst, src, non_blocking=False):
    s = cv.cast(src, dst.dtype)
    if _same_shape(s.shape, dst.shape):
        return cv.op("Identity", [s])
    return cv.op("Expand", [s, cv.op("Shape", [dst])])


# -- attention ----------------------------------------------------------------------------

def _sdpa_check(node: fx.Node) -> Optional[str]:
    dropout_at = 4 if node.target is aten.scaled_dot_product_attention.default else 3
    return _sdpa_check_common(node, dropout_at)


def _sdpa_check_common(node: fx.Node, dropout_at: int) -> Optional[str]:
    q, k = _val(node.args[0]), _val(node.args[1])
    if q.dim() < 2 or _static(q.shape[-1]) is None:
        return "attention with a symbolic head size"
    if q.dim() >= 3 and k.dim() == q.dim() and _static(q.shape[-3]) != _static(k.shape[-3]):
        hq, hk = _static(q.shape[-3]), _static(k.shape[-3])
        if q.dim() != 4 or hq is None or hk is None or hq % hk:
            return "attention with grouped key/value heads of these sizes"
    dropout = node.args[dropout_at] if len(node.args) > dropout_at else node.kwargs.get("dropout_p", 0.0)
    if dropout:
        return "attention with dropout"
    return None


def _repeat_heads(cv: _Converter, x: _V, heads: int) -> _V:
    """Grouped key/value heads [B, Hkv, S, E] repeated to [B, heads, S, E] (each head heads/Hkv times)."""
    b, hk, s, e = x.shape
    rep = heads // int(_static(hk))
    u = cv.op("Unsqueeze", [x, cv.i64([2])])
    u = cv.op("Expand", [u, cv.shape_of([b, hk, rep, s, e])])
    return _V(cv.op("Reshape", [u, cv.shape_of([b, heads, s, e])]), x.dtype, (b, heads, s, e))


def _attention(cv: _Converter, q: _V, k: _V, v: _V, mask: Any, is_causal: bool, scale: Any) -> int:
    e = int(_static(q.shape[-1]))
    sc = float(scale) if scale is not None else 1.0 / math.sqrt(e)
    if q.rank == 4 and _static(q.shape[1]) != _static(k.shape[1]):
        k, v = _repeat_heads(cv, k, int(_static(q.shape[1]))), _repeat_heads(cv, v, int(_static(q.shape[1])))
    perm = list(range(k.rank))
    perm[-1], perm[-2] = perm[-2], perm[-1]
    s = cv.op("MatMul", [q, cv.op("Transpose", [k], {"perm": perm})])
    s = cv.op("Mul", [s, cv.scalar(sc, q.dtype)])
    masked = False
    if is_causal:
        L, S = q.shape[-2], k.shape[-2]
        if _static(L) is not None and _static(S) is not None:
            tri = cv.constant_tensor(torch.ones(int(L), int(S), dtype=torch.bool).tril())
        else:
            ones = cv.op("Expand", [cv.scalar(True, torch.bool), cv.shape_of([L, S])])
            tri = _V(cv.op("Trilu", [cv.op("Cast", [ones], {"to": 6}), cv.i64_scalar(0)], {"upper": 0}),
                     torch.int32, ())
            tri = cv.cast(tri, torch.bool)
        s = cv.op("Where", [tri, s, cv.scalar(float("-inf"), q.dtype)])
        masked = True
    if mask is not None:
        if mask.dtype == torch.bool:
            s = cv.op("Where", [mask, s, cv.scalar(float("-inf"), q.dtype)])
            masked = True
        else:
            s = cv.op("Add", [s, cv.cast(mask, q.dtype)])
    sv = _V(s, q.dtype, ())
    p = _safe_softmax_of(cv, sv, q.rank - 1) if masked else cv.op("Softmax", [sv], {"axis": q.rank - 1})
    return cv.op("MatMul", [p, v])


@_reg(*_ov(_aten("_scaled_dot_product_flash_attention_for_cpu"), "default"), check=_sdpa_check)
def _sdpa_flash_cpu(cv, node, q, k, v, dropout_p=0.0, is_causal=False, attn_mask=None, scale=None):
    return (_attention(cv, q, k, v, attn_mask, is_causal, scale), None)


# The CUDA kernels that scaled_dot_product_attention becomes on a GPU: (q, k, v,
# [attn_bias, compute_log_sumexp,] dropout_p, is_causal, ...); tessel computes the
# attention output, not the log-sum-exp and seeds beside it.
_CUDA_SDPA_ARGS = {  # op name -> (index of attn_bias or None, index of dropout_p)
    "_scaled_dot_product_flash_attention": (None, 3),
    "_scaled_dot_product_efficient_attention": (3, 5),
    "_scaled_dot_product_cudnn_attention": (3, 5),
}


def _cuda_sdpa_check(node: fx.Node) -> Optional[str]:
    why = _sdpa_check_common(node, _CUDA_SDPA_ARGS[node.target.__name__.split(".")[0]][1])
    if why is None and any(u.target is operator.getitem and u.args[1] != 0 and u.users for u in node.users):
        why = "attention whose log-sum-exp is used"
    return why


def _cuda_sdpa(cv, node, q, k, v, *rest, **kw):
    bias_at, dropout_at = _CUDA_SDPA_ARGS[node.target.__name__.split(".")[0]]
    args = list(rest)

    def arg(i, name, default):
        return args[i - 3] if len(args) > i - 3 else kw.get(name, default)
    mask = arg(bias_at, "attn_bias", None) if bias_at is not None else None
    out = _attention(cv, q, k, v, mask, bool(arg(dropout_at + 1, "is_causal", False)), kw.get("scale"))
    return (out,) + (None,) * (len(_val(node)) - 1)


for _name in _CUDA_SDPA_ARGS:
    _reg(*_ov(_aten(_name), "default"), check=_cuda_sdpa_check)(_cuda_sdpa)


@_reg(*_ov(aten.scaled_dot_product_attention, "default"), check=_sdpa_check)
def _sdpa(cv, node, q, k, v, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    return _attention(cv, q, k, v, attn_mask, is_causal, scale)


def supported_ops() -> List[str]:
    """The ATen operators (overloads) that the converter writes into tessel's IR."""
    return sorted(str(o) for o in _HANDLERS)


# ---- which nodes tessel takes -------------------------------------------------------------

# Sizes and other scalar arithmetic stay in Python (they are cheap, and a part of
# the graph takes them as inputs); they are neither compiled nor counted.
_SCALAR_OPS = {operator.add, operator.sub, operator.mul, operator.floordiv, operator.truediv, operator.mod,
               operator.neg, operator.pow, operator.eq, operator.ne, operator.lt, operator.le, operator.gt,
               operator.ge, math.ceil, math.floor}
# Operators that compute nothing; a part made of these alone is not worth a call.
_NON_COMPUTE = {
    "aten.view.default", "aten._unsafe_view.default", "aten.reshape.default", "aten.permute.default",
    "aten.t.default", "aten.transpose.int", "aten.expand.default", "aten.unsqueeze.default",
    "aten.squeeze.default", "aten.squeeze.dim", "aten.squeeze.dims", "aten.slice.Tensor", "aten.select.int",
    "aten.clone.default", "aten.alias.default", "aten.detach.default", "aten.lift_fresh_copy.default",
    "aten._to_copy.default", "aten.full.default", "aten.scalar_tensor.default", "aten.arange.start_step",
    "aten.arange.default", "aten.arange.start", "aten.zeros.default", "aten.ones.default",
    "<built-in function getitem>",
}


def _is_scalar_node(node: fx.Node) -> bool:
    if node.op != "call_function":
        return False
    if node.target in _SCALAR_OPS:
        return True
    name = str(node.target)
    if name.startswith("aten.sym_") or name.startswith("aten._assert") or "sym_constrain" in name:
        return True
    if name.startswith("aten._assert") or name in ("aten._assert_tensor_metadata.default",):
        return True
    v = _val(node)
    return v is not None and not isinstance(v, (torch.Tensor, tuple, list)) and node.target is not operator.getitem


def _tensor_vals(x: Any) -> List[torch.Tensor]:
    if isinstance(x, torch.Tensor):
        return [x]
    if isinstance(x, (list, tuple)):
        return [t for e in x for t in _tensor_vals(e)]
    return []


def _why_not(node: fx.Node) -> Optional[str]:
    """None when tessel takes this node, else the reason it does not."""
    if node.target is operator.getitem:
        src = node.args[0]
        return None if isinstance(src, fx.Node) and _why_not(src) is None else "its producer runs eagerly"
    entry = _HANDLERS.get(node.target)
    if entry is None:
        return "no tessel conversion for this operator"
    vals = _tensor_vals(_val(node))
    for a in node.all_input_nodes:
        vals += _tensor_vals(_val(a))
    for t in vals:
        if t.dtype not in _IR_DTYPE:
            return f"dtype {t.dtype}"
        if t.device.type not in ("cpu", "cuda"):  # which of the two the target takes: _device_refusal
            return f"a tensor on {t.device}"
        for d in t.shape:
            if isinstance(d, torch.SymInt) and any(str(s).startswith("u") for s in d.node.expr.free_symbols):
                return "a data-dependent size"
    check = entry[1]
    if check is not None:
        try:
            return check(node)
        except Exception as e:  # noqa: BLE001 - a check that cannot read the node declines it
            return f"cannot read the node ({e})"
    return None


# ---- one compiled part of a graph ---------------------------------------------------------

def _version(t: torch.Tensor) -> Optional[int]:
    """The tensor's version counter; None for an inference tensor (made under
    torch.inference_mode), which has none: only its identity can be checked."""
    return None if t.is_inference() else t._version


class _Frozen:
    """A parameter or buffer baked into a compiled graph, with what it was when it was baked."""
    __slots__ = ("tensor", "version", "name")

    def __init__(self, tensor: torch.Tensor, name: str):
        self.tensor, self.version, self.name = tensor, _version(tensor), name

    def same(self, t: Any) -> bool:
        return t is self.tensor and _version(t) == self.version


def _convert(gm: fx.GraphModule, consts: Mapping[int, Any], names: Sequence[str], opts: Mapping[str, Any],
             sym_names: Optional[Mapping[str, str]] = None, outputs: Optional[Sequence[int]] = None
             ) -> Tuple[Executable, List[Tuple[int, str]], Counter, List[Any]]:
    """Writes gm into a Builder and compiles it.

    consts: placeholder index -> the tensor (or number) it is, baked in as a constant;
    the other tensor placeholders become inputs, named after `names`. Returns the
    executable, its run plan (placeholder index, "tensor" | "sym") in input order,
    the operators converted, and the graph's output structure.
    """
    cv = _Converter(sym_names)
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    plan: List[Tuple[int, str]] = []
    syms: List[Tuple[int, fx.Node]] = []
    for i, ph in enumerate(phs):
        val = _val(ph)
        if i in consts:
            c = consts[i]
            cv.env[ph] = cv.constant_tensor(c, names[i]) if isinstance(c, torch.Tensor) else c
        elif isinstance(val, torch.Tensor):
            cv.env[ph] = cv.tensor_input(names[i], val)
            plan.append((i, "tensor"))
        else:
            syms.append((i, ph))
            cv.env[ph] = val
    for i, ph in syms:
        val = _val(ph)
        if isinstance(val, torch.SymInt) and _static(val) is None:
            e = sympy.expand(_expr(val))

            def make(i: int = i, name: str = names[i]) -> int:
                plan.append((i, "sym"))
                h = cv.b.input(name, "i64", [1])
                cv.leaves.add(h)
                return h
            cv.sym_inputs.setdefault(e, make)
        elif isinstance(val, (torch.SymFloat, torch.SymBool)):
            raise _Unsupported(f"input {ph.name}: a symbolic {type(val).__name__}")
    out_node = None
    for n in gm.graph.nodes:
        if n.op == "call_function" and _is_scalar_node(n):
            cv.env[n] = _val(n)   # sizes and checks: sizes are taken from fake values where used
        elif n.op == "call_function":
            try:
                cv.emit(n)
            except _Unsupported as e:
                raise _Unsupported(f"{n.target}: {e}") from None
            except CompileError:
                raise
            except Exception as e:  # noqa: BLE001 - a converter that fails declines the node
                raise _Unsupported(f"{n.target}: the converter failed ({type(e).__name__}: {e})") from None
        elif n.op == "output":
            out_node = n
        elif n.op not in ("placeholder",):
            raise _Unsupported(f"graph node {n.op} {n.target}")
    results = out_node.args[0]
    flat = list(results) if isinstance(results, (list, tuple)) else [results]
    if outputs is not None:
        flat = [flat[i] for i in outputs]
    handles: List[int] = []
    seen: set = set()
    for r in flat:
        if not isinstance(r, fx.Node) or not isinstance(cv.env.get(r), _V):
            raise _Unsupported(f"graph output {r} is not a tensor")
        v = cv.env[r]
        h = v.h
        # an output that is an input, a constant or another output gets a node of its own
        if h in cv.leaves or h in seen:
            h = cv.b.node("Identity", [h], 1, {})[0]
        seen.add(h)
        handles.append(h)
    cv.b.outputs(handles)
    native = cv.b.compile(_compile_args(opts))
    return Executable(native), plan, cv.ops, flat


_PARTS: "weakref.WeakSet[_Part]" = weakref.WeakSet()


@atexit.register
def _release_parts() -> None:
    # Dynamo's caches keep compiled graphs, and so tessel's executables, alive past
    # the interpreter's teardown of tessel._core (nanobind then reports leaks): the
    # executables go first.
    for p in list(_PARTS):
        p.native = p.exe = None


class _Part(torch.nn.Module):
    """A part of an FX graph compiled by tessel; called like the part's GraphModule."""

    def __init__(self, name: str, gm: fx.GraphModule, frozen: Dict[int, _Frozen], consts: Dict[int, Any],
                 opts: Mapping[str, Any]):
        super().__init__()
        self.part_name = name
        self.gm = gm                # the part as FX (kept to recompile after a parameter changes)
        self.frozen = frozen        # placeholder index -> parameter/buffer baked in
        self.consts = consts        # placeholder index -> graph constant baked in
        self.opts = dict(opts)
        out = [n for n in gm.graph.nodes if n.op == "output"][0].args[0]
        self.as_tuple = isinstance(out, (list, tuple))
        self._lock = threading.Lock()  # one recompile at a time when threads share the part
        self._compile()

    def _compile(self) -> None:
        phs = [n for n in self.gm.graph.nodes if n.op == "placeholder"]
        consts: Dict[int, Any] = dict(self.consts)
        consts.update({i: f.tensor for i, f in self.frozen.items()})
        names = [f"{self.part_name}_{p.name}" for p in phs]
        self.exe, self.plan, ops, _ = _convert(self.gm, consts, names, self.opts)
        self.native = self.exe._exe
        self.device_runs = self.native.target == "cuda"
        self.ops = ops
        _PARTS.add(self)

    def _refreeze(self, args: Sequence[Any]) -> None:
        with self._lock:
            changed = [f.name for i, f in self.frozen.items() if not f.same(args[i])]
            if changed:
                self._recompile(args, changed)

    def _recompile(self, args: Sequence[Any], changed: List[str]) -> None:
        log.warning("tessel: %s changed since it was compiled (replaced or updated in place); recompiling %s",
                    ", ".join(changed[:4]) + (" ..." if len(changed) > 4 else ""), self.part_name)
        _STATS.add("refreezes")
        self.frozen = {i: _Frozen(args[i], f.name) for i, f in self.frozen.items()}
        self._compile()

    def forward(self, *args: Any) -> Any:
        # Freezing: the part was compiled with these tensors as constants. A module
        # whose parameter was replaced (a new object) or changed in place (its
        # version counter moved, e.g. load_state_dict or an optimizer step) gets the
        # part compiled again with the new values rather than stale results.
        for i, f in self.frozen.items():
            a = args[i]
            if not f.same(a):
                self._refreeze(args)
                break
        arrays = []
        for i, kind in self.plan:
            a = args[i]
            if kind == "tensor":
                arrays.append(a.detach() if a.requires_grad else a)
            else:
                arrays.append(torch.tensor([int(a)], dtype=torch.int64))
        outs = self.exe._run_arrays(arrays) if self.device_runs else self.native.run(arrays, 1)
        return tuple(outs) if self.as_tuple else outs[0]


# ---- torch.compile backend ----------------------------------------------------------------

def _decompositions() -> Dict[Any, Any]:
    from torch._decomp import core_aten_decompositions
    table = core_aten_decompositions()
    table = dict(table.items()) if not isinstance(table, dict) else dict(table)
    # Attention stays one operator (_attention writes it): torch's decomposition of the
    # CPU flash kernel gives its output other strides than the kernel, and a later
    # .view() of it then fails while torch.export decomposes (GPT-2's c_proj).
    for name in ("_scaled_dot_product_flash_attention_for_cpu", "scaled_dot_product_attention"):
        for o in _ov(_aten(name), "default"):
            table.pop(o, None)
    return table


def _is_param_or_buffer(ph: fx.Node, example: Any) -> bool:
    if isinstance(example, torch.nn.Parameter):
        return True
    ga = ph.meta.get("grapharg")
    src = getattr(ga, "source", None) or getattr(ph, "_dynamo_source", None)
    if src is None:
        return False
    try:
        from torch._dynamo.source import is_from_unspecialized_param_buffer_source
        if is_from_unspecialized_param_buffer_source(src):
            return True
    except ImportError:  # pragma: no cover - older torch
        pass
    name = src.name if isinstance(getattr(src, "name", None), str) else str(src)
    return "_parameters" in name or "_buffers" in name


def _source_name(ph: fx.Node) -> str:
    """Where Dynamo read an input, e.g. L['self']._modules['fc']._parameters['weight']."""
    src = getattr(ph.meta.get("grapharg"), "source", None) or getattr(ph, "_dynamo_source", None)
    name = getattr(src, "name", None)
    if callable(name):
        name = name()
    return name if isinstance(name, str) else ph.name


def _needs_grad(gm: fx.GraphModule, example_inputs: Sequence[Any]) -> int:
    if not torch.is_grad_enabled():
        return 0
    n = sum(1 for x in example_inputs if isinstance(x, torch.Tensor) and x.requires_grad)
    return n + sum(1 for p in gm.parameters() if p.requires_grad)


def _eager(gm: fx.GraphModule) -> Callable[..., Any]:
    return gm.forward


def tessel_backend(gm: fx.GraphModule, example_inputs: Sequence[Any], **kwargs: Any) -> Callable[..., Any]:
    """The Dynamo backend behind torch.compile(model, backend="tessel", options={...})."""
    opts = _options(kwargs.get("options"))
    _STATS.add("compiles")
    n_grad = _needs_grad(gm, example_inputs)
    if n_grad:
        _STATS.add("training_graphs")
        msg = (f"tessel's torch.compile backend compiles inference graphs only, and this graph needs gradients "
               f"(grad mode is on and {n_grad} of its inputs require grad, parameters included). Run the model "
               f"under torch.no_grad() or torch.inference_mode(), or pass options={{'training': 'eager'}} to run "
               f"such graphs eagerly.")
        if opts["training"] == "eager":
            log.warning("tessel: %s Running this graph eagerly.", msg)
            _STATS.add("eager_graphs")
            return _eager(gm)
        raise TrainingNotSupported(msg)
    devices = {x.device for x in list(example_inputs) + list(gm.parameters()) + list(gm.buffers())
               if isinstance(x, torch.Tensor)}
    reason = _device_refusal(devices, opts)
    if reason is not None:
        if not opts["fallback"]:
            raise CompileError(reason)
        log.warning("tessel: %s; running it eagerly", reason)
        _STATS.add("eager_graphs")
        return _eager(gm)

    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    static = {i for i, (ph, x) in enumerate(zip(phs, example_inputs))
              if isinstance(x, torch.Tensor) and _is_param_or_buffer(ph, x)}
    real = {i: example_inputs[i] for i in static}  # only these: user inputs are not kept alive

    def fw_compiler(fx_g: fx.GraphModule, fake_inputs: Sequence[Any]) -> Callable[..., Any]:
        frozen: Dict[int, _Frozen] = {}
        if opts["freeze"]:
            from torch._functorch._aot_autograd.descriptors import BufferAOTInput, ParamAOTInput, PlainAOTInput
            # a buffer that the graph updates (a counter, a cache) stays an input: frozen,
            # it would be recompiled after every call
            meta = getattr(torch._guards.TracingContext.try_get(), "fw_metadata", None)
            info = list(getattr(meta, "input_info", None) or [])
            for j, ph in enumerate(n for n in fx_g.graph.nodes if n.op == "placeholder"):
                if j < len(info) and (info[j].mutates_data or info[j].mutates_metadata):
                    continue
                desc = ph.meta.get("desc")
                t = None
                if isinstance(desc, PlainAOTInput) and desc.idx in static:
                    t, name = real[desc.idx], _source_name(phs[desc.idx])
                elif isinstance(desc, ParamAOTInput):
                    t, name = gm.get_parameter(desc.target), desc.target
                elif isinstance(desc, BufferAOTInput):
                    t, name = gm.get_buffer(desc.target), desc.target
                fake = _val(ph)
                if (t is not None and isinstance(fake, torch.Tensor) and _same_shape(tuple(t.shape), tuple(fake.shape))
                        and t.dtype == fake.dtype):
                    frozen[j] = _Frozen(t, name)
        from torch._functorch.aot_autograd import make_boxed_func
        from torch._subclasses.fake_tensor import unset_fake_temporarily
        with unset_fake_temporarily():  # AOTAutograd calls this under its fake mode; constants are real
            return make_boxed_func(_partition_and_compile(fx_g, frozen, opts))

    from torch._dynamo.backends.common import aot_autograd
    return aot_autograd(fw_compiler=fw_compiler, decompositions=_decompositions())(gm, example_inputs)


def _device_refusal(devices: Set[Any], opts: Dict[str, Any]) -> Optional[str]:
    """Sets opts["target"] from the tensors' devices ("auto"); why tessel cannot take them, if it cannot."""
    kinds = {d.type for d in devices}
    if opts["target"] == "auto":
        opts["target"] = "cuda" if "cuda" in kinds else "cpu"
    want = {"cpu"} if opts["target"] == "cpu" else {"cpu", "cuda"}
    if not kinds <= want:
        return f"target {opts['target']!r} takes tensors on {' or '.join(sorted(want))}; this graph has " \
               f"tensors on {', '.join(sorted(str(d) for d in devices))}"
    if any(d.type == "cuda" and (d.index or 0) != 0 for d in devices):
        return f"tessel runs on cuda:0; this graph has tensors on {', '.join(sorted(str(d) for d in devices))}"
    return None


def _attr(gm: fx.GraphModule, target: str) -> Any:
    obj: Any = gm
    for part in target.split("."):
        obj = getattr(obj, part)
    return obj


def _refused_by_converter(gm: fx.GraphModule) -> Dict[fx.Node, str]:
    """Nodes that pass _why_not but that the converter still refuses (a size it cannot
    compute, a converter error), found by writing the whole graph into a scratch
    Builder with every other value as an input; nothing is compiled."""
    cv = _Converter()
    refused: Dict[fx.Node, str] = {}
    names = (f"v{i}" for i in itertools.count())

    def as_input(n: fx.Node) -> None:
        val = _val(n)
        if val is None and n.op == "get_attr":
            val = _attr(gm, str(n.target))
        if isinstance(val, torch.Tensor) and val.dtype in _IR_DTYPE:
            cv.env[n] = cv.tensor_input(next(names), val)
        elif isinstance(val, (list, tuple)) and all(isinstance(v, torch.Tensor) and v.dtype in _IR_DTYPE for v in val):
            cv.env[n] = tuple(cv.tensor_input(next(names), v) for v in val)
        else:
            cv.env[n] = val
            if isinstance(val, torch.SymInt) and _static(val) is None:  # a part takes it as an input
                name = next(names)
                cv.sym_inputs.setdefault(sympy.expand(_expr(val)), lambda name=name: cv.b.input(name, "i64", [1]))

    for n in gm.graph.nodes:
        if n.op != "call_function":
            if n.op in ("placeholder", "get_attr"):
                as_input(n)
            continue
        if _is_scalar_node(n) or _why_not(n) is not None:
            as_input(n)
            continue
        try:
            cv.emit(n)
        except Exception as e:  # noqa: BLE001 - any failure refuses the node
            if n.target is not operator.getitem:
                refused[n] = f"the converter refused it ({e})"
            as_input(n)
    return refused


def _partition_and_compile(fx_g: fx.GraphModule, frozen: Dict[int, _Frozen],
                           opts: Mapping[str, Any]) -> Callable[..., Any]:
    from torch.fx.passes.infra.partitioner import CapabilityBasedPartitioner
    from torch.fx.passes.operator_support import OperatorSupportBase

    fallbacks: Counter = Counter()
    reasons: Dict[str, str] = {}
    refused = _refused_by_converter(fx_g)

    class Support(OperatorSupportBase):
        """The nodes that tessel takes."""

        def is_node_supported(self, submodules: Any, node: fx.Node) -> bool:
            if node.op != "call_function" or node in refused or _is_scalar_node(node):
                return False
            if node.target is operator.getitem and node.args[0] in refused:
                return False
            return _why_not(node) is None

    for n in fx_g.graph.nodes:
        if n.op == "call_function" and not _is_scalar_node(n):
            why = refused.get(n) or _why_not(n)
            if why is not None and n.target is not operator.getitem:
                fallbacks[str(n.target)] += 1
                reasons.setdefault(str(n.target), why)
    if fallbacks and not opts["fallback"]:
        raise CompileError("tessel cannot compile these operators (options={'fallback': False}): " +
                           "; ".join(f"{op} x{c}: {reasons[op]}" for op, c in fallbacks.items()))

    # fusing copies the graph's nodes: placeholders are found again by name
    ph_index = {n.name: i for i, n in enumerate(n for n in fx_g.graph.nodes if n.op == "placeholder")}

    partitioner = CapabilityBasedPartitioner(fx_g, Support(), allows_single_node_partition=True)
    partitions = partitioner.propose_partitions()
    keep = []
    for p in partitions:
        compute = [n for n in p.nodes if str(n.target) not in _NON_COMPUTE]
        if len(compute) >= max(1, int(opts["min_ops"])):
            keep.append(p)
    fused = partitioner.fuse_partitions(keep, prefix="tessel_part_") if keep else fx_g
    compiled = 0
    for node in list(fused.graph.nodes):
        if node.op != "call_module" or not str(node.target).startswith("tessel_part_"):
            continue
        sub = fused.get_submodule(node.target)
        part_frozen: Dict[int, _Frozen] = {}
        part_consts: Dict[int, Any] = {}
        for i, a in enumerate(node.args):
            if isinstance(a, fx.Node) and a.op == "placeholder" and ph_index.get(a.name) in frozen:
                part_frozen[i] = frozen[ph_index[a.name]]
            elif isinstance(a, fx.Node) and a.op == "get_attr":
                part_consts[i] = _attr(fused, str(a.target))  # a constant of the graph (torch.tensor(...))
        ops_in = Counter(str(n.target) for n in sub.graph.nodes
                         if n.op == "call_function" and n.target is not operator.getitem)
        try:
            part = _Part(str(node.target), sub, part_frozen, part_consts, opts)
        except (_Unsupported, CompileError) as e:
            if not opts["fallback"]:
                raise CompileError(f"tessel could not compile {node.target}: {e}") from None
            log.warning("tessel: a part of %d operators runs eagerly: %s", sum(ops_in.values()), e)
            _STATS.add("failed_partitions")
            for op, c in ops_in.items():
                fallbacks[op] += c
                reasons.setdefault(op, f"its part failed to compile: {e}")
            continue
        fused.add_submodule(str(node.target), part)
        compiled += 1
        with _STATS.lock:
            _STATS.ops_compiled.update(part.ops)
    _STATS.add("partitions", compiled)
    for op, c in fallbacks.items():
        _STATS.fallback(op, reasons[op], c)
    if fallbacks:
        log.warning("tessel: %d operator(s) run eagerly: %s", sum(fallbacks.values()),
                    ", ".join(f"{op} x{c} ({reasons[op]})" for op, c in fallbacks.items()))
    if compiled == 0:
        _STATS.add("eager_graphs")
    fused.recompile()
    return fused.forward


# ---- tessel.export ---------------------------------------------------------------------------

def _dim_names(module: Any, args: Sequence[Any], kwargs: Mapping[str, Any], dynamic_shapes: Any,
               user_phs: List[fx.Node]) -> Dict[str, str]:
    """torch's symbols (s0, ...) -> the names of the export.Dim objects the user gave."""
    if dynamic_shapes is None:
        return {}
    import inspect
    specs: List[Any] = []
    if isinstance(dynamic_shapes, dict):
        try:
            sig = inspect.signature(module.forward)
            bound = sig.bind(*args, **kwargs)
            for name in bound.arguments:
                specs.append(dynamic_shapes.get(name))
        except (TypeError, ValueError):
            return {}
    else:
        specs = list(dynamic_shapes)
    out: Dict[str, str] = {}
    for spec, ph in zip(specs, user_phs):
        val = _val(ph)
        if not isinstance(val, torch.Tensor) or spec is None:
            continue
        items = spec.items() if isinstance(spec, dict) else enumerate(spec)
        for axis, dim in items:
            name = getattr(dim, "__name__", None)
            if not isinstance(name, str) or axis >= val.dim():
                continue
            d = val.shape[axis]
            if isinstance(d, torch.SymInt) and isinstance(d.node.expr, sympy.Symbol):
                out[str(d.node.expr)] = name
    return out


def export(module: torch.nn.Module, example_inputs: Sequence[Any], dynamic_shapes: Any = None, *,
           kwargs: Optional[Mapping[str, Any]] = None, strict: bool = False, target: str = "auto",
           precision: str = "fp32", dims: Optional[Mapping[str, int]] = None, threads: int = 0,
           tuning_db: Any = None, knobs: Sequence[str] = ()) -> Executable:
    """Exports module with torch.export and compiles the whole program with tessel.

    example_inputs: a tuple of the module's positional inputs; kwargs: its keyword inputs.
    dynamic_shapes: as torch.export.export takes it; a dimension given as
    torch.export.Dim("batch") becomes the tessel symbol "batch", so the executable runs
    every batch size without compiling again. Parameters and buffers are baked in as
    constants (the executable does not see later changes to the module). Returns a
    tessel.Executable over the flattened tensor inputs (in order: positional, then
    keyword) and outputs; Executable.save writes it as an artifact. target "auto" is
    "cuda" when the module or its inputs are on CUDA, else "cpu".
    Raises CompileError naming the operators tessel cannot take.
    """
    if not isinstance(example_inputs, tuple):
        example_inputs = tuple(example_inputs) if isinstance(example_inputs, list) else (example_inputs,)
    kwargs = dict(kwargs or {})
    opts = _options({"target": target, "precision": precision, "threads": threads, "tuning_db": tuning_db,
                     "knobs": knobs})
    tensors = [x for x in list(example_inputs) + list(kwargs.values()) if isinstance(x, torch.Tensor)]
    reason = _device_refusal({x.device for x in tensors + list(module.parameters()) + list(module.buffers())}, opts)
    if reason is not None:
        raise CompileError(f"tessel.export: {reason}")
    with torch.no_grad():
        ep = torch.export.export(module, example_inputs, kwargs=kwargs, dynamic_shapes=dynamic_shapes, strict=strict)
        ep = ep.run_decompositions(_decompositions())
    gm = ep.graph_module
    sig = ep.graph_signature
    from torch.export.graph_signature import InputKind, OutputKind
    phs = [n for n in gm.graph.nodes if n.op == "placeholder"]
    consts: Dict[int, Any] = {}
    names: List[str] = []
    user_phs: List[fx.Node] = []
    for i, (spec, ph) in enumerate(zip(sig.input_specs, phs)):
        names.append(ph.name)
        if spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            t = ep.state_dict.get(spec.target)
            consts[i] = t if t is not None else ep.constants[spec.target]
        elif spec.kind == InputKind.CONSTANT_TENSOR:
            consts[i] = ep.constants[spec.target]
        elif spec.kind == InputKind.USER_INPUT:
            user_phs.append(ph)
            val = _val(ph)
            if not isinstance(val, (torch.Tensor, torch.SymInt)):
                consts[i] = val
        else:
            raise CompileError(f"tessel.export: inputs of kind {spec.kind.name} are not supported")
    outs = []
    for j, spec in enumerate(sig.output_specs):
        if spec.kind == OutputKind.USER_OUTPUT:
            outs.append(j)
        elif spec.kind == OutputKind.BUFFER_MUTATION:
            raise CompileError("tessel.export: the program changes a buffer (a module in training mode?); "
                               "call module.eval() first")
    bad: Counter = Counter()
    why: Dict[str, str] = {}
    for n in gm.graph.nodes:
        if n.op == "call_function" and not _is_scalar_node(n):
            r = _why_not(n)
            if r is not None and n.target is not operator.getitem:
                bad[str(n.target)] += 1
                why.setdefault(str(n.target), r)
    if bad:
        raise CompileError("tessel.export: tessel cannot compile these operators: " +
                           "; ".join(f"{op} x{c}: {why[op]}" for op, c in bad.items()))
    sym_names = _dim_names(module, example_inputs, kwargs, dynamic_shapes, user_phs)
    try:
        exe, plan, ops, _ = _convert(gm, consts, names, opts, sym_names=sym_names, outputs=outs)
    except _Unsupported as e:
        raise CompileError(f"tessel.export: {e}") from None
    if any(kind == "sym" for _, kind in plan):
        raise CompileError("tessel.export: a symbolic size input that no tensor input carries is not supported")
    _STATS.add("exports")
    with _STATS.lock:
        _STATS.ops_compiled.update(ops)
    return exe


# ---- registration ---------------------------------------------------------------------------

def _register() -> None:
    """Registers "tessel" with Dynamo unless the installed package's entry point provides it."""
    try:
        from importlib.metadata import entry_points
        eps = entry_points(group="torch_dynamo_backends")
        if any(ep.name == "tessel" for ep in eps):
            return
        from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend
        if "tessel" not in _COMPILER_FNS:
            register_backend(tessel_backend, name="tessel")
    except Exception as e:  # noqa: BLE001 - registration is a convenience; the entry point is the way
        log.debug("tessel: could not register the Dynamo backend: %s", e)


_register()
