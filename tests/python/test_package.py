"""The Python package, as a user meets it after `pip install .` (docs/python.md).

Run by ctest (python_package) with the interpreter of build/pyenv, into
which scripts/test.sh installs the package. References are numpy arithmetic
written out here, or ONNX Runtime for the real models.
"""
import os
import subprocess
import sys
import threading

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import tessel

OPSET = [helper.make_opsetid("", 17)]


def save(model, tmp_path, name="m.onnx"):
    p = tmp_path / name
    onnx.save(model, str(p))
    return p


def linear_relu(batch="N", k=48, n=32, seed=0):
    """y = relu(x @ w + b) with a symbolic batch."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((k, n)).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["t"]), helper.make_node("Add", ["t", "b"], ["u"]),
         helper.make_node("Relu", ["u"], ["y"])],
        "linear_relu", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, k])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, n])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(g, opset_imports=OPSET), w, b


def reference(x, w, b):
    return np.maximum(x.astype(np.float64) @ w + b, 0).astype(np.float32)


def close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.fixture(scope="module")
def linear(tmp_path_factory):
    model, w, b = linear_relu()
    p = save(model, tmp_path_factory.mktemp("linear"))
    return tessel.compile(p, threads=2), w, b, p, model


# ---- compile from a path, bytes or a ModelProto ------------------------------------------

def test_compile_each_way_of_giving_a_model(linear):
    exe, w, b, path, model = linear
    x = np.random.default_rng(1).standard_normal((5, 48)).astype(np.float32)
    for e in (exe, tessel.compile(str(path)), tessel.compile(path.read_bytes()), tessel.compile(model)):
        y = e(x)
        assert isinstance(y, np.ndarray) and y.dtype == np.float32 and y.shape == (5, 32)
        close(y, reference(x, w, b))
    assert exe.target == "cpu"
    assert exe.interpreter_ops == []  # every node compiled


def test_metadata(linear):
    exe = linear[0]
    (x,), (y,) = exe.inputs, exe.outputs
    assert (x.name, x.dtype, x.shape) == ("x", "f32", ["N", 48])
    assert (y.name, y.dtype, y.shape) == ("y", "f32", ["N", 32])
    assert "x: f32[N,48]" in repr(exe)


def test_inputs_by_name_and_run_returns_a_list(linear):
    exe, w, b = linear[:3]
    x = np.ones((2, 48), np.float32)
    outs = exe.run(x=x)
    assert isinstance(outs, list) and len(outs) == 1
    close(outs[0], reference(x, w, b))


def test_symbolic_batch_runs_at_every_size_without_recompiling(linear):
    exe, w, b = linear[:3]
    for n in (1, 3, 7, 64):
        x = np.random.default_rng(n).standard_normal((n, 48)).astype(np.float32)
        close(exe(x), reference(x, w, b))


# ---- dtypes and zero copy ---------------------------------------------------------------

DTYPES = [np.float32, np.float64, np.float16, np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16,
          np.uint32, np.uint64, np.bool_]


def two_outputs_model(np_dtype):
    """(Identity(x), Concat(x, x)) for one dtype: every dtype the package maps."""
    code = helper.np_dtype_to_tensor_dtype(np.dtype(np_dtype))
    g = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["same"]), helper.make_node("Concat", ["x", "x"], ["twice"], axis=0)],
        "g", [helper.make_tensor_value_info("x", code, [3, 4])],
        [helper.make_tensor_value_info("same", code, [3, 4]), helper.make_tensor_value_info("twice", code, [6, 4])])
    return helper.make_model(g, opset_imports=OPSET)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_numpy_round_trip_of_every_dtype(dt):
    exe = tessel.compile(two_outputs_model(dt))
    x = (np.random.default_rng(2).standard_normal((3, 4)) * 50).astype(dt)
    same, twice = exe(x)
    assert same.dtype == np.dtype(dt) and twice.dtype == np.dtype(dt)
    np.testing.assert_array_equal(same, x)
    np.testing.assert_array_equal(twice, np.concatenate([x, x]))


class DLPackOnly:
    """A producer that offers nothing but the DLPack protocol."""

    def __init__(self, a):
        self._a = a

    def __dlpack__(self, **kwargs):
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self):
        return self._a.__dlpack_device__()


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_dlpack_round_trip(dt):
    exe = tessel.compile(two_outputs_model(dt))
    x = (np.random.default_rng(3).standard_normal((3, 4)) * 50).astype(dt)
    same, twice = exe(DLPackOnly(x))
    assert not isinstance(same, np.ndarray) and hasattr(same, "__dlpack__")  # outputs speak DLPack back
    np.testing.assert_array_equal(np.from_dlpack(same), x)
    np.testing.assert_array_equal(np.from_dlpack(twice), np.concatenate([x, x]))


def test_zero_copy_on_the_cpu(linear):
    exe = linear[0]
    x = np.random.default_rng(4).standard_normal((4, 48)).astype(np.float32)
    in_ptrs, out_ptrs, (y,) = exe._exe.run_traced([x])
    assert in_ptrs == [x.ctypes.data]        # the kernels read the caller's array in place
    assert out_ptrs == [y.ctypes.data]       # the output array is the executable's buffer
    close(y, reference(x, *linear[1:3]))
    before = exe.stats()
    exe(x)
    after = exe.stats()
    assert after["inputs_borrowed"] == before["inputs_borrowed"] + 1
    assert after["inputs_copied"] == before["inputs_copied"]


def test_a_strided_input_is_copied_once_and_computes_the_same(linear):
    exe, w, b = linear[:3]
    big = np.random.default_rng(5).standard_normal((6, 96)).astype(np.float32)
    x = big[:, ::2]  # not contiguous
    before = exe.stats()["inputs_copied"]
    close(exe(x), reference(np.ascontiguousarray(x), w, b))
    assert exe.stats()["inputs_copied"] == before + 1
    xt = np.asfortranarray(big[:, :48])
    close(exe(xt), reference(np.ascontiguousarray(xt), w, b))


def test_outputs_outlive_the_executable():
    model, w, b = linear_relu()
    exe = tessel.compile(model)
    x = np.ones((3, 48), np.float32)
    y = exe(x)
    del exe
    close(y, reference(x, w, b))


# ---- errors --------------------------------------------------------------------------------

def test_errors_are_python_exceptions_with_the_clis_messages(linear, tmp_path):
    exe = linear[0]
    assert issubclass(tessel.CompileError, tessel.Error) and issubclass(tessel.InputError, tessel.Error)
    assert issubclass(tessel.Error, RuntimeError)
    with pytest.raises(tessel.CompileError, match="no such file"):
        tessel.compile(tmp_path / "missing.onnx")
    with pytest.raises(tessel.CompileError):
        tessel.compile(b"\x08\x07garbage that is not a model")
    with pytest.raises(tessel.CompileError, match="target"):
        tessel.compile(linear[3], target="tpu")
    with pytest.raises(tessel.CompileError, match="knob"):
        tessel.compile(linear[3], knobs=["gemm.tile.zz=3"])
    with pytest.raises(tessel.CompileError):
        tessel.compile(12345)
    with pytest.raises(tessel.InputError, match="input 'x'"):
        exe(np.ones((2, 47), np.float32))  # wrong shape
    with pytest.raises(tessel.InputError, match="input 'x'"):
        exe(np.ones((2, 48), np.int32))  # wrong dtype
    with pytest.raises(tessel.InputError, match="takes 1 inputs"):
        exe(np.ones((2, 48), np.float32), np.ones(1, np.float32))
    with pytest.raises(tessel.InputError, match="missing"):
        exe()
    with pytest.raises(tessel.InputError, match="no input 'z'"):
        exe(z=np.ones((2, 48), np.float32))
    with pytest.raises(tessel.InputError):
        exe(np.array([["a"] * 48], dtype=object))
    with pytest.raises(tessel.CompileError, match="not a tessel artifact"):
        tessel.load(linear[3])
    # The executable still works after every error above.
    close(exe(np.ones((1, 48), np.float32)), reference(np.ones((1, 48), np.float32), *linear[1:3]))


def test_a_hostile_model_does_not_take_the_interpreter_down(tmp_path):
    # Run in a child: a crash would kill it, not the test run.
    code = ("import tessel\n"
            "for data in (b'', b'\\xff' * 64, b'model m { garbage', bytes(range(256)) * 8):\n"
            "    try:\n"
            "        tessel.compile(data)\n"
            "    except tessel.CompileError:\n"
            "        pass\n"
            "print('survived')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "survived" in r.stdout, r.stderr


# ---- threads, profile, save/load ----------------------------------------------------------

def test_one_executable_from_many_threads(linear):
    exe, w, b = linear[:3]
    errors = []

    def work(seed):
        rng = np.random.default_rng(seed)
        try:
            for _ in range(20):
                x = rng.standard_normal((int(rng.integers(1, 9)), 48)).astype(np.float32)
                np.testing.assert_allclose(exe(x), reference(x, w, b), rtol=1e-4, atol=1e-4)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_profile_times_each_step(linear):
    exe = linear[0]
    steps = exe.profile(np.ones((8, 48), np.float32), warmup=1, iters=3)
    assert steps and all(s.kind in ("kernel", "interpreter") and s.seconds > 0 for s in steps)


def test_save_and_load_give_the_same_results(linear, tmp_path):
    exe = linear[0]
    p = tmp_path / "m.tsl"
    exe.save(p)
    loaded = tessel.load(p, threads=1)
    x = np.random.default_rng(6).standard_normal((3, 48)).astype(np.float32)
    np.testing.assert_array_equal(loaded(x), exe(x))
    # A loaded artifact saves again, byte for byte.
    p2 = tmp_path / "again.tsl"
    loaded.save(p2)
    assert p2.read_bytes() == p.read_bytes()


# ---- real models against ONNX Runtime -------------------------------------------------------

MODELS_DIR = os.environ.get("TESSEL_MODELS_DIR", "")


@pytest.mark.skipif(not MODELS_DIR, reason="TESSEL_MODELS_DIR is set by ctest (python_package)")
@pytest.mark.parametrize("name", ["resnet18.ts17", "bert_base.ts17"])
def test_real_models_match_onnxruntime(name):
    import onnxruntime as ort

    path = os.path.join(MODELS_DIR, name + ".onnx")
    exe = tessel.compile(path, threads=2)  # symbolic: batch and seq bind at the call
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(7)
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else (1 if "batch" in str(d) else 16) for d in i.shape]
        if "mask" in i.name:
            feeds[i.name] = np.ones(shape, np.int64)
        elif "int64" in i.type:
            feeds[i.name] = rng.integers(0, 1000, shape).astype(np.int64)
        else:
            feeds[i.name] = rng.standard_normal(shape).astype(np.float32)
    want = sess.run(None, feeds)
    got = exe.run(**feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=2e-3, atol=2e-3)


# ---- torch tensors (DLPack) -----------------------------------------------------------------

def torch_or_skip():
    """torch is in build/pyenv (scripts/python_env.sh --torch); elsewhere its tests skip."""
    try:
        import torch as t
    except ImportError:
        if os.environ.get("TESSEL_REQUIRE_TORCH"):  # ctest's run: torch must be there
            pytest.fail("torch is not installed in build/pyenv (scripts/python_env.sh --torch)")
        pytest.skip("torch is not installed in this environment")
    return t


def test_torch_tensors_in_and_out_without_copies(linear):
    t = torch_or_skip()
    exe, w, b = linear[:3]
    x = t.randn(4, 48)
    y = exe(x)
    assert isinstance(y, t.Tensor) and y.dtype == t.float32 and tuple(y.shape) == (4, 32)
    close(y.numpy(), reference(x.numpy(), w, b))
    in_ptrs, out_ptrs, _ = exe._exe.run_traced([x])
    assert in_ptrs == [x.data_ptr()]  # read in place
    copied = exe.stats()["inputs_copied"]
    xt = t.randn(48, 4).t()  # a transposed view: copied once, same result
    close(exe(xt).numpy(), reference(xt.contiguous().numpy(), w, b))
    assert exe.stats()["inputs_copied"] == copied + 1


@pytest.mark.parametrize("name", ["float32", "bfloat16", "float16", "int64", "bool"])
def test_torch_round_trip_of_dtypes(name):
    t = torch_or_skip()
    dt = getattr(t, name)
    code = {"float32": TensorProto.FLOAT, "bfloat16": TensorProto.BFLOAT16, "float16": TensorProto.FLOAT16,
            "int64": TensorProto.INT64, "bool": TensorProto.BOOL}[name]
    g = helper.make_graph(
        [helper.make_node("Identity", ["x"], ["same"]), helper.make_node("Concat", ["x", "x"], ["twice"], axis=0)],
        "g", [helper.make_tensor_value_info("x", code, [3, 4])],
        [helper.make_tensor_value_info("same", code, [3, 4]), helper.make_tensor_value_info("twice", code, [6, 4])])
    exe = tessel.compile(helper.make_model(g, opset_imports=OPSET))
    x = (t.randn(3, 4) * 50).to(dt)
    same, twice = exe(x)
    assert same.dtype == dt and twice.dtype == dt
    assert t.equal(same, x) and t.equal(twice, t.cat([x, x]))
