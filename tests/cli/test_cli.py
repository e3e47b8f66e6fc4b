#!/usr/bin/env python3
"""Tests of the `tessel` command-line contract (docs/cli.md).

    test_cli.py [--tessel BIN] [unittest options]

Every test runs tessel in a fresh empty working folder and checks that the
folder stays empty. Models are built here with onnx.helper.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
TESSEL = os.environ.get("TESSEL_BIN", os.path.join(ROOT, "build", "bin", "tessel"))
OPSET = 21

try:
    import ml_dtypes  # noqa: F401
except ImportError:  # the raw V encodings are still tested without it
    ml_dtypes = None


def make_model(nodes, inputs, outputs, initializers=(), opset=OPSET):
    g = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def add_model():
    """y = x + x, z = Identity(x); x: f32[batch, 3]."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
    z = helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 3])
    return make_model([helper.make_node("Add", ["x", "x"], ["y"]), helper.make_node("Identity", ["x"], ["z"])],
                      [x], [y, z])


def identity_model(elem_type, shape=(2, 3), opset=OPSET):
    x = helper.make_tensor_value_info("x", elem_type, list(shape))
    y = helper.make_tensor_value_info("y", elem_type, list(shape))
    return make_model([helper.make_node("Identity", ["x"], ["y"])], [x], [y], opset=opset)


def gather_model():
    """Embedding lookup: ids (i64[batch, seq]) -> Cast -> Gather(table[5, 2])."""
    ids = helper.make_tensor_value_info("ids", TensorProto.INT64, ["batch", "seq"])
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, ["batch", "seq", 2])
    table = numpy_helper.from_array(np.arange(10, dtype=np.float32).reshape(5, 2), "table")
    nodes = [helper.make_node("Cast", ["ids"], ["ids32"], to=TensorProto.INT32),
             helper.make_node("Gather", ["table", "ids32"], ["out"], axis=0)]
    return make_model(nodes, [ids], [out], [table])


def linear_model(k=48, n=80):
    """y = relu(x @ w + b); x: f32[batch, k], w a constant [k, n]: one GEMM kernel."""
    rng = np.random.default_rng(3)
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", k])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", n])
    w = numpy_helper.from_array(rng.standard_normal((k, n)).astype(np.float32), "w")
    b = numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "b")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["xw"]), helper.make_node("Add", ["xw", "b"], ["xwb"]),
             helper.make_node("Relu", ["xwb"], ["y"])]
    return make_model(nodes, [x], [y], [w, b])


class CliTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="tessel_cli_")
        self.cwd = os.path.join(self.tmp, "cwd")
        os.mkdir(self.cwd)
        self.files = os.path.join(self.tmp, "files")
        os.mkdir(self.files)
        self.env = dict(os.environ)
        self.env["TESSEL_CACHE_DIR"] = os.path.join(self.tmp, "cache")
        self.env["HOME"] = os.path.join(self.tmp, "home")

    def tearDown(self):
        leftovers = os.listdir(self.cwd)
        shutil.rmtree(self.tmp, ignore_errors=True)
        self.assertEqual(leftovers, [], "tessel wrote into the working folder")

    # ---- helpers ----------------------------------------------------------
    def path(self, name):
        return os.path.join(self.files, name)

    def save_model(self, model, name="m.onnx"):
        p = self.path(name)
        onnx.save(model, p)
        return p

    def tessel(self, *args, expect=None):
        p = subprocess.run([TESSEL] + [str(a) for a in args], cwd=self.cwd, env=self.env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, timeout=300)
        out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
        if expect is not None:
            self.assertEqual(p.returncode, expect, f"exit {p.returncode}\nstdout: {out}\nstderr: {err}")
        return p.returncode, out, err

    def assert_one_error_line(self, err, file=None):
        lines = [l for l in err.splitlines() if l.strip()]
        self.assertEqual(len(lines), 1, f"expected one error line, got: {err!r}")
        self.assertTrue(lines[0].startswith("error: "), lines[0])
        if file is not None:
            self.assertTrue(lines[0].startswith(f"error: {file}: "), lines[0])
        return lines[0]

    # ---- basics -------------------------------------------------------------
    def test_version_and_help(self):
        _, out, _ = self.tessel("--version", expect=0)
        self.assertIn("tessel", out)
        _, out, _ = self.tessel("--help", expect=0)
        for sub in ("run", "inspect", "compile", "bench", "test-onnx", "demo"):
            self.assertIn(sub, out)
        for sub in ("run", "inspect", "compile", "bench", "test-onnx", "demo"):
            _, out, _ = self.tessel(sub, "--help", expect=0)
            self.assertIn("--target", out)

    def test_usage_errors_exit_2(self):
        code, _, err = self.tessel()
        self.assertEqual(code, 2)
        code, _, err = self.tessel("frobnicate")
        self.assertEqual(code, 2)
        code, _, err = self.tessel("run")
        self.assertEqual(code, 2)
        self.assertIn("MODEL", err)

    # ---- bad model files --------------------------------------------------------
    def test_bad_model_files(self):
        good = add_model().SerializeToString()
        cases = {
            "missing.onnx": None,
            "empty.onnx": b"",
            "text.onnx": b"this is not a protobuf file\n" * 10,
            "random.onnx": bytes(np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8)),
            "truncated.onnx": good[: len(good) // 2],
        }
        for name, data in cases.items():
            with self.subTest(name=name):
                p = self.path(name)
                if data is not None:
                    with open(p, "wb") as f:
                        f.write(data)
                out_dir = self.path(name + ".out")
                code, out, err = self.tessel("run", p, "--save-outputs", out_dir)
                self.assertEqual(code, 1, err)
                self.assert_one_error_line(err, p)
                self.assertFalse(os.path.exists(out_dir), "wrote outputs for a model that failed to load")
                code, out, err = self.tessel("run", p, "--json")
                self.assertEqual(code, 1)
                self.assert_one_error_line(err, p)
                doc = json.loads(out)
                self.assertIn("error", doc)
                code, out, err = self.tessel("inspect", p)
                self.assertEqual(code, 1)
                self.assert_one_error_line(err, p)

    def test_directory_as_model(self):
        code, _, err = self.tessel("run", self.files)
        self.assertEqual(code, 1)
        self.assert_one_error_line(err, self.files)

    # ---- run ---------------------------------------------------------------------
    def test_run_json_is_one_object(self):
        p = self.save_model(add_model())
        x = self.path("x.npy")
        np.save(x, np.arange(6, dtype=np.float32).reshape(2, 3))
        _, out, err = self.tessel("run", p, "--input", f"x={x}", "--json", expect=0)
        doc = json.loads(out)  # exactly one object: json.loads rejects trailing data
        self.assertIsInstance(doc, dict)
        self.assertEqual([o["name"] for o in doc["outputs"]], ["y", "z"])
        self.assertEqual(doc["outputs"][0]["dtype"], "f32")
        self.assertEqual(doc["outputs"][0]["shape"], [2, 3])
        self.assertEqual(doc["target"], "cpu")
        self.assertIn("time_ms", doc)
        self.assertEqual(doc["interpreter_ops"], [])  # Add and Identity have compiled forms

    def test_run_json_lists_interpreter_ops(self):
        # NonZero's output size depends on the data: it runs on the interpreter.
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
        y = helper.make_tensor_value_info("y", TensorProto.INT64, [2, "n"])
        p = self.save_model(make_model([helper.make_node("NonZero", ["x"], ["y"])], [x], [y]))
        _, out, _ = self.tessel("run", p, "--json", expect=0)
        self.assertEqual(json.loads(out)["interpreter_ops"], ["NonZero"])

    def test_run_summary(self):
        p = self.save_model(add_model())
        _, out, err = self.tessel("run", p, "--dim", "batch=2", expect=0)
        self.assertIn("y: f32[2,3]", out)
        self.assertIn("random", err)

    def test_save_outputs(self):
        p = self.save_model(add_model())
        x = self.path("x.npy")
        xv = np.arange(6, dtype=np.float32).reshape(2, 3)
        np.save(x, xv)
        d = self.path("out/nested")
        self.tessel("run", p, "--input", f"x={x}", "--save-outputs", d, expect=0)
        self.assertEqual(sorted(os.listdir(d)), ["output_0.npy", "output_1.npy"])
        y = np.load(os.path.join(d, "output_0.npy"))
        self.assertEqual(y.dtype, np.float32)
        self.assertEqual(y.shape, (2, 3))
        np.testing.assert_array_equal(y, xv + xv)
        np.testing.assert_array_equal(np.load(os.path.join(d, "output_1.npy")), xv)
        # An existing folder is reused and output files are replaced.
        np.save(x, xv * 2)
        self.tessel("run", p, "--input", f"x={x}", "--save-outputs", d, expect=0)
        np.testing.assert_array_equal(np.load(os.path.join(d, "output_1.npy")), xv * 2)

    def test_winograd_knob_compiles_and_matches_the_reference(self):
        """--knob conv.winograd.on=1: the 3x3 conv becomes Winograd kernels (TileTransform
        groups in the fused plan), compiled by LLVM, within 1e-5 of the output's scale of
        the reference interpreter's direct convolution; without the knob the conv stays (24
        input channels: 16 does not divide them, so the default, Winograd over blocked
        values, does not apply)."""
        rng = np.random.default_rng(4)
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 24, 18, 21])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        w = numpy_helper.from_array((rng.standard_normal((32, 24, 3, 3)) / 15).astype(np.float32), "w")
        b = numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "b")
        p = self.save_model(make_model([helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1]),
                                        helper.make_node("Relu", ["c"], ["y"])], [x], [y], [w, b]))
        _, fused, _ = self.tessel("inspect", p, "--emit", "fused", "--knob", "conv.winograd.on=1", expect=0)
        self.assertEqual(fused.count("TileTransform"), 4, fused)
        self.assertNotIn("Conv", fused)
        _, plain, _ = self.tessel("inspect", p, "--emit", "fused", expect=0)
        self.assertIn("Conv", plain)
        self.assertNotIn("TileTransform", plain)
        outs = {}
        for target, extra in (("reference", []), ("cpu", ["--knob", "conv.winograd.on=1"])):
            d = self.path("out_" + target)
            self.tessel("run", p, "--target", target, "--save-outputs", d, "--quiet", *extra, expect=0)
            outs[target] = np.load(os.path.join(d, "output_0.npy"))
        ref = outs["reference"]
        self.assertEqual(outs["cpu"].shape, (1, 32, 18, 21))
        self.assertLess(np.max(np.abs(outs["cpu"] - ref)), 1e-5 * np.max(np.abs(ref)))

    def test_blocked_layout_knob_compiles_and_matches_the_reference(self):
        """--knob conv.blocked.on=1 (the default): the activations between the convolutions
        of a small residual network are stored channel-blocked (ToBlocked kernels in the fused
        plan, each with the work that makes its value), compiled by LLVM, within 1e-5 of the
        output's scale of the reference interpreter; with conv.blocked.on=0 nothing is blocked."""
        rng = np.random.default_rng(5)
        inits = []

        def weight(name, shape):
            fan_in = int(np.prod(shape[1:]))
            inits.append(numpy_helper.from_array(
                (rng.standard_normal(shape) / np.sqrt(fan_in)).astype(np.float32), name))
            return name

        c = 32
        nodes = [
            helper.make_node("Conv", ["x", weight("w0", (c, 3, 3, 3)), weight("b0", (c,))], ["c0"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c0"], ["r0"]),
            helper.make_node("MaxPool", ["r0"], ["p0"], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
            helper.make_node("Conv", ["p0", weight("w1", (c, c, 3, 3))], ["c1"], pads=[1, 1, 1, 1]),
            helper.make_node("Relu", ["c1"], ["r1"]),
            helper.make_node("Conv", ["r1", weight("w2", (c, c, 1, 1))], ["c2"]),
            helper.make_node("Add", ["c2", "p0"], ["a2"]),
            helper.make_node("Relu", ["a2"], ["r2"]),
            helper.make_node("Conv", ["r2", weight("w3", (2 * c, c, 3, 3))], ["c3"], strides=[2, 2], pads=[1, 1, 1, 1]),
            helper.make_node("Conv", ["r2", weight("w4", (2 * c, c, 1, 1))], ["c4"], strides=[2, 2]),
            helper.make_node("Add", ["c3", "c4"], ["a4"]),
            helper.make_node("Relu", ["a4"], ["r4"]),
            helper.make_node("GlobalAveragePool", ["r4"], ["y"]),
        ]
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 22, 22])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        p = self.save_model(make_model(nodes, [x], [y], inits))
        _, fused, _ = self.tessel("inspect", p, "--emit", "fused", "--knob", "conv.blocked.on=1", expect=0)
        groups = fused.split("group ")[1:]
        blocked = [g for g in groups if g.startswith("k") and "ToBlocked  (root)" in g]
        self.assertGreaterEqual(len(blocked), 6, fused)
        for g in blocked:  # each stores a value its own kernel computes
            self.assertRegex(g, r"= (Conv|Relu|MaxPool|Pad|Slice|Add)\n", g)
        _, default, _ = self.tessel("inspect", p, "--emit", "fused", expect=0)
        self.assertEqual(default.count("ToBlocked  (root)"), len(blocked), "the blocked layout is the default")
        _, plain, _ = self.tessel("inspect", p, "--emit", "fused", "--knob", "conv.blocked.on=0", expect=0)
        self.assertNotIn("Blocked", plain)
        outs = {}
        for target, extra in (("reference", []), ("cpu", ["--knob", "conv.blocked.on=1"])):
            d = self.path("out_" + target)
            self.tessel("run", p, "--target", target, "--save-outputs", d, "--quiet", *extra, expect=0)
            outs[target] = np.load(os.path.join(d, "output_0.npy"))
        ref = outs["reference"]
        self.assertEqual(outs["cpu"].shape, (1, 2 * c, 1, 1))
        self.assertLess(np.max(np.abs(outs["cpu"] - ref)), 1e-5 * np.max(np.abs(ref)))

    def test_random_inputs_are_seeded(self):
        p = self.save_model(add_model())
        outs = []
        for seed in (0, 0, 1):
            d = self.path(f"seed{len(outs)}")
            self.tessel("run", p, "--dim", "batch=4", "--seed", seed, "--save-outputs", d, expect=0)
            outs.append(np.load(os.path.join(d, "output_1.npy")))
        self.assertEqual(outs[0].shape, (4, 3))
        np.testing.assert_array_equal(outs[0], outs[1])
        self.assertFalse(np.array_equal(outs[0], outs[2]))
        self.assertTrue(np.all(outs[0] >= -1) and np.all(outs[0] < 1))

    def test_unbound_symbol_defaults_to_one(self):
        p = self.save_model(add_model())
        d = self.path("o")
        _, _, err = self.tessel("run", p, "--save-outputs", d, expect=0)
        self.assertIn("batch", err)
        self.assertEqual(np.load(os.path.join(d, "output_0.npy")).shape, (1, 3))

    def test_random_indices_stay_in_range(self):
        p = self.save_model(gather_model())
        d = self.path("o")
        self.tessel("run", p, "--dim", "batch=3", "--dim", "seq=50", "--save-outputs", d, expect=0)
        out = np.load(os.path.join(d, "output_0.npy"))
        self.assertEqual(out.shape, (3, 50, 2))

    def test_conflicting_dim_is_an_error(self):
        p = self.save_model(add_model())
        x = self.path("x.npy")
        np.save(x, np.zeros((2, 3), np.float32))
        code, _, err = self.tessel("run", p, "--input", f"x={x}", "--dim", "batch=5")
        self.assertEqual(code, 1)
        line = self.assert_one_error_line(err, p)
        self.assertIn("batch", line)
        # Agreeing is fine.
        self.tessel("run", p, "--input", f"x={x}", "--dim", "batch=2", expect=0)

    def test_input_errors(self):
        p = self.save_model(add_model())
        x = self.path("x.npy")
        np.save(x, np.zeros((2, 3), np.float64))
        code, _, err = self.tessel("run", p, "--input", f"x={x}")
        self.assertEqual(code, 1)
        self.assertIn("does not match", self.assert_one_error_line(err, p))
        np.save(x, np.zeros((2, 4), np.float32))
        code, _, err = self.tessel("run", p, "--input", f"x={x}")
        self.assertEqual(code, 1)
        self.assert_one_error_line(err, p)
        code, _, err = self.tessel("run", p, "--input", f"nope={x}")
        self.assertEqual(code, 1)
        self.assertIn("inputs: x", self.assert_one_error_line(err, p))  # lists the model's inputs
        code, _, err = self.tessel("run", p, "--input", f"x={self.path('missing.npy')}")
        self.assertEqual(code, 1)
        self.assert_one_error_line(err, p)
        code, _, err = self.tessel("run", p, "--dim", "batch=zero")
        self.assertEqual(code, 1)
        self.assert_one_error_line(err, p)

    def test_targets_and_precision(self):
        p = self.save_model(add_model())
        _, out, _ = self.tessel("run", p, "--target", "reference", "--json", expect=0)
        self.assertEqual(json.loads(out)["target"], "reference")
        code, out, err = self.tessel("run", p, "--target", "cuda", "--json")
        if code == 1:  # without a GPU the one error line says what is missing
            self.assertRegex(self.assert_one_error_line(err, p), "--target cuda: no usable NVIDIA GPU")
        else:
            self.assertEqual(code, 0, err)
            self.assertEqual(json.loads(out)["target"], "cuda")
        code, _, err = self.tessel("run", p, "--target", "gpu")
        self.assertEqual(code, 2)
        code, _, err = self.tessel("run", p, "--precision", "fp8")
        self.assertEqual(code, 2)

    # ---- --precision bf16|fp16 ----------------------------------------------------------
    @staticmethod
    def round_bf16(a):
        """f32 -> bf16 -> f32, round to nearest even (finite values)."""
        b = a.astype(np.float32).view(np.uint32).astype(np.uint64)
        b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16 << 16
        return b.astype(np.uint32).view(np.float32)

    def test_precision_runs_low_with_f32_interface(self):
        # y = x + x computed in the low type: 2 * round(x); z = Identity(x): round(x). The
        # inputs carry bits below bf16's and f16's precision, so fp32 would differ.
        p = self.save_model(add_model())
        x = self.path("x.npy")
        xv = (1 + np.arange(12, dtype=np.float32).reshape(4, 3) * np.float32(1 + 2 ** -12) / 7).astype(np.float32)
        np.save(x, xv)
        rounded = {"bf16": self.round_bf16(xv), "fp16": xv.astype(np.float16).astype(np.float32)}
        for prec, r in rounded.items():
            self.assertFalse(np.array_equal(r, xv))
            for target in ("cpu", "reference"):
                with self.subTest(precision=prec, target=target):
                    d = self.path(f"o_{prec}_{target}")
                    _, out, _ = self.tessel("run", p, "--target", target, "--precision", prec, "--input",
                                            f"x={x}", "--save-outputs", d, "--json", expect=0)
                    self.assertEqual([o["dtype"] for o in json.loads(out)["outputs"]], ["f32", "f32"])
                    np.testing.assert_array_equal(np.load(os.path.join(d, "output_0.npy")), r + r)
                    np.testing.assert_array_equal(np.load(os.path.join(d, "output_1.npy")), r)
        # bench and inspect take it too.
        self.tessel("bench", p, "--iters", 2, "--precision", "bf16", "--dim", "batch=2", expect=0)
        _, out, _ = self.tessel("inspect", p, "--precision", "fp16", "--dim", "batch=2", expect=0)
        self.assertIn("f16[2,3]", out)

    def test_precision_artifacts_and_cache_keys(self):
        # The whole-model cache is keyed by the precision: compiling fp32 first
        # must not hand the bf16 compile (or run) the fp32 artifact.
        p = self.save_model(add_model())
        x = self.path("x.npy")
        xv = np.full((2, 3), 1 + 2 ** -12, np.float32)
        np.save(x, xv)
        for prec, want in (("fp32", xv + xv), ("bf16", np.full((2, 3), 2, np.float32)), ("fp32", xv + xv)):
            with self.subTest(precision=prec):
                art = self.path(f"m_{prec}.tsx")
                self.tessel("compile", p, "-o", art, "--precision", prec, expect=0)
                d = self.path(f"oa_{prec}")
                self.tessel("run", art, "--input", f"x={x}", "--save-outputs", d, expect=0)
                np.testing.assert_array_equal(np.load(os.path.join(d, "output_0.npy")), want)
                d = self.path(f"or_{prec}")
                self.tessel("run", p, "--precision", prec, "--input", f"x={x}", "--save-outputs", d, expect=0)
                np.testing.assert_array_equal(np.load(os.path.join(d, "output_0.npy")), want)

    # ---- npy round trips of every dtype -----------------------------------------------
    def roundtrip(self, elem_type, arr, opset=OPSET):
        p = self.save_model(identity_model(elem_type, arr.shape, opset), f"id{elem_type}.onnx")
        x = self.path(f"x{elem_type}.npy")
        np.save(x, arr)
        d = self.path(f"o{elem_type}")
        self.tessel("run", p, "--input", f"x={x}", "--save-outputs", d, expect=0)
        return np.load(os.path.join(d, "output_0.npy"))

    def test_npy_round_trip_numpy_dtypes(self):
        for np_t, onnx_t in [(np.float32, TensorProto.FLOAT), (np.float64, TensorProto.DOUBLE),
                             (np.float16, TensorProto.FLOAT16), (np.int8, TensorProto.INT8),
                             (np.uint8, TensorProto.UINT8), (np.int16, TensorProto.INT16),
                             (np.uint16, TensorProto.UINT16), (np.int32, TensorProto.INT32),
                             (np.uint32, TensorProto.UINT32), (np.int64, TensorProto.INT64),
                             (np.uint64, TensorProto.UINT64), (np.bool_, TensorProto.BOOL)]:
            with self.subTest(dtype=np.dtype(np_t).name):
                a = (np.arange(6).reshape(2, 3) % 2).astype(np_t) if np_t == np.bool_ else \
                    np.arange(-2, 4).reshape(2, 3).astype(np_t)
                b = self.roundtrip(onnx_t, a)
                self.assertEqual(b.dtype, a.dtype)
                np.testing.assert_array_equal(a, b)

    def test_npy_round_trip_strings(self):
        a = np.array([["a", "héllo", ""], ["日本", "x", "zz"]])
        b = self.roundtrip(TensorProto.STRING, a)
        self.assertEqual(b.dtype.kind, "U")
        np.testing.assert_array_equal(a, b)

    def test_npy_round_trip_raw_dtypes(self):
        raw = [(TensorProto.BFLOAT16, 2, "bfloat16", [0x3F80, 0xBF80, 0x4000, 0x7FC0, 0, 0x8000]),
               (TensorProto.FLOAT8E4M3FN, 1, "float8_e4m3fn", [0x38, 0xB8, 0x40, 0x7F, 0, 1]),
               (TensorProto.FLOAT8E5M2, 1, "float8_e5m2", [0x3C, 0xBC, 0x40, 0x7C, 0, 1]),
               (TensorProto.INT4, 1, "int4", [1, 0x0F, 7, 8, 0, 2]),
               (TensorProto.UINT4, 1, "uint4", [1, 15, 7, 8, 0, 2]),
               (TensorProto.FLOAT4E2M1, 1, "float4_e2m1fn", [2, 10, 4, 15, 0, 1])]
        for onnx_t, size, ml_name, bits in raw:
            with self.subTest(dtype=ml_name):
                a = np.array(bits, dtype=np.uint8 if size == 1 else np.uint16).view(f"V{size}").reshape(2, 3)
                b = self.roundtrip(onnx_t, a, opset=23 if onnx_t == TensorProto.FLOAT4E2M1 else OPSET)
                self.assertEqual(b.dtype, np.dtype(f"V{size}"))
                self.assertEqual(b.shape, (2, 3))
                self.assertEqual(a.tobytes(), b.tobytes())
                if ml_dtypes is not None:
                    a2 = a.view(getattr(ml_dtypes, ml_name))
                    b2 = self.roundtrip(onnx_t, a2, opset=23 if onnx_t == TensorProto.FLOAT4E2M1 else OPSET)
                    self.assertEqual(a2.tobytes(), b2.tobytes())

    # ---- inspect -------------------------------------------------------------------
    def test_inspect(self):
        p = self.save_model(add_model())
        _, out, _ = self.tessel("inspect", p, expect=0)
        self.assertIn("Add", out)
        _, out, _ = self.tessel("inspect", p, "--json", expect=0)
        self.assertIn("Add", json.loads(out)["ir"])
        code, _, err = self.tessel("inspect", p, "--emit", "nonsense")
        self.assertEqual(code, 1)
        self.assertIn("graph", self.assert_one_error_line(err, p))  # lists what is available
        code, _, err = self.tessel("inspect", p, "--print-after", "no_such_pass")
        self.assertEqual(code, 1)
        self.assert_one_error_line(err, p)
        # --disable-pass is every subcommand's; an unknown name lists the passes.
        for sub in ("inspect", "run", "bench"):
            code, _, err = self.tessel(sub, p, "--disable-pass", "no_such_pass")
            self.assertEqual(code, 1)
            self.assertIn("merge_matmuls", self.assert_one_error_line(err, p))
        self.tessel("run", p, "--disable-pass", "merge_matmuls", expect=0)

    def test_inspect_tir_round_trip(self):
        p = self.save_model(add_model())
        _, ir, _ = self.tessel("inspect", p, expect=0)
        t = self.path("m.tir")
        with open(t, "w") as f:
            f.write(ir)
        _, ir2, _ = self.tessel("inspect", t, expect=0)
        self.assertEqual(ir, ir2)
        d = self.path("o")
        self.tessel("run", t, "--dim", "batch=2", "--save-outputs", d, expect=0)
        self.assertEqual(np.load(os.path.join(d, "output_0.npy")).shape, (2, 3))

    def test_inspect_plan(self):
        p = self.save_model(add_model())
        _, out, _ = self.tessel("inspect", p, "--emit", "plan", "--dim", "batch=4", expect=0)
        self.assertIn("peak_bytes", out)
        _, out, _ = self.tessel("inspect", p, "--emit", "plan", "--json", expect=0)
        self.assertIsInstance(json.loads(out)["peak_bytes"], int)

    # ---- compile and artifacts ------------------------------------------------------
    def test_compile_artifact_runs_at_every_binding(self):
        p = self.save_model(add_model())
        art = self.path("m.tsx")
        _, out, _ = self.tessel("compile", p, "-o", art, "--json", expect=0)
        doc = json.loads(out)
        self.assertEqual(doc["output"], art)
        self.assertIn("compile_s", doc)
        with open(art, "rb") as f:
            self.assertEqual(f.read(8), b"TESSELX1")
        self.assertEqual(sorted(os.listdir(self.files)), ["m.onnx", "m.tsx"])  # no temporary left behind
        for batch in (1, 5):
            x = self.path("x.npy")
            xv = np.arange(3 * batch, dtype=np.float32).reshape(batch, 3)
            np.save(x, xv)
            d = self.path(f"o{batch}")
            self.tessel("run", art, "--input", f"x={x}", "--save-outputs", d, expect=0)
            np.testing.assert_array_equal(np.load(os.path.join(d, "output_0.npy")), xv + xv)
        _, out, _ = self.tessel("inspect", art, expect=0)
        self.assertIn("Add", out)

    # ---- report -------------------------------------------------------------------
    def test_report_writes_one_page_with_the_data_escaped(self):
        """The page itself; tests/report/test_report.py opens it in a browser."""
        m = linear_model()
        hostile = '</script><img src=x onerror="alert(1)">'
        m.graph.node[0].name = hostile
        p = self.save_model(m)
        page = self.path("r.html")
        _, out, err = self.tessel("report", p, "-o", page, "--dim", "batch=2", "--iters", "2", "--warmup", "0",
                                  "--threads", "1", "--json", "--quiet", expect=0)
        doc = json.loads(out)
        self.assertEqual((doc["model"], doc["output"]), (p, page))
        self.assertGreaterEqual(doc["kernels"], 1)
        with open(page, encoding="utf-8") as f:
            html = f.read()
        self.assertEqual(len(html.encode()), doc["bytes"])
        self.assertEqual(sorted(os.listdir(self.files)), ["m.onnx", "r.html"])  # no temporary file left
        self.assertNotIn("<img", html)
        self.assertEqual(html.count("</script>"), 2)  # the data blob's and the script's
        self.assertNotRegex(html, r"(src|href)=\"(https?:)?//")  # nothing from the network
        blob = re.search(r'<script type="application/json" id="tessel-data">(.*?)</script>', html, re.S).group(1)
        data = json.loads(blob)
        self.assertEqual(data["model"], p)
        self.assertEqual(data["dims"], {"batch": 2})
        names = [n["name"] for g in data["groups"] for n in g["nodes"]]
        self.assertIn(hostile, names)
        gemm = next(s for s in data["steps"] if "MatMul" in s["ops"])
        self.assertEqual(gemm["schedule"], "gemm")
        self.assertTrue(gemm["loop_ir"].startswith("kernel " + gemm["name"] + "("))
        self.assertIn("define", gemm["llvm_ir"])
        self.assertGreater(gemm["flops"], 0)
        self.assertIn(gemm["limiter"], ("compute", "memory", "launch"))
        self.assertIn("fold_constants", [x["name"] for x in data["passes"]])
        self.assertIn("gemm.pack a=0", gemm["schedule_text"])  # a two-row A is not packed by default
        # --no-llvm-ir leaves the LLVM IR out; --knob reaches the schedules shown.
        self.tessel("report", p, "-o", page, "--iters", "1", "--no-llvm-ir", "--knob", "gemm.pack.a=1", "--quiet",
                    expect=0)
        with open(page, encoding="utf-8") as f:
            html = f.read()
        self.assertNotIn('"llvm_ir"', html)
        self.assertIn("gemm.pack a=1", html)

    def test_report_errors(self):
        p = self.save_model(linear_model())
        art = self.path("m.tsx")
        self.tessel("compile", p, "-o", art, "--quiet", expect=0)
        cases = [
            (["-o", self.files], p, "is a directory"),
            (["-o", self.path("missing/r.html")], p, "does not exist"),
            (["-o", os.path.join(p, "r.html")], p, "is not a directory"),
            (["-o", self.path("r.html"), "--iters", "0"], p, "--iters must be at least 1"),
            (["-o", self.path("r.html"), "--target", "reference"], p, "use --target cpu"),
            (["-o", self.path("r.html"), "--input", "x=" + self.path("none.npy")], p, None),
        ]
        if not os.path.exists("/dev/nvidia0"):
            cases.append((["-o", self.path("r.html"), "--target", "cuda"], p, "no usable NVIDIA GPU"))
        if os.geteuid() != 0:  # root may write anywhere
            ro = self.path("ro")
            os.mkdir(ro, 0o555)
            cases.append((["-o", os.path.join(ro, "r.html")], p, "cannot write"))
        for args, model, what in cases:
            code, out, err = self.tessel("report", model, *args, "--quiet")
            self.assertEqual(code, 1, f"{args}: {err}")
            line = self.assert_one_error_line(err, model)
            if what:
                self.assertIn(what, line)
            self.assertEqual(out, "")
        code, _, err = self.tessel("report", art, "-o", self.path("r.html"))
        self.assertEqual(code, 1)
        self.assertIn("compiled artifact", self.assert_one_error_line(err, art))
        code, _, err = self.tessel("report", self.path("missing.onnx"), "-o", self.path("r.html"))
        self.assertEqual(code, 1)
        self.assert_one_error_line(err, self.path("missing.onnx"))
        self.assertFalse(os.path.exists(self.path("r.html")))
        code, out, _ = self.tessel("report", p, "-o", self.files, "--json")
        self.assertEqual(code, 1)
        self.assertIn("is a directory", json.loads(out)["error"])
        code, _, _ = self.tessel("report", p)  # -o is required: a usage error
        self.assertEqual(code, 2)

    def test_compile_for_cuda_needs_no_gpu(self):
        p = self.save_model(add_model())
        art = self.path("k.tsl")
        code, out, err = self.tessel("compile", p, "--target", "cuda", "--cuda-arch", "sm_90a,sm_80", "-o", art,
                                     "--dim", "batch=4", "--json")
        if code != 0 and "NVRTC" in err:
            self.skipTest("NVRTC is not available: " + err.strip())
        self.assertEqual(code, 0, err)
        doc = json.loads(out)
        self.assertEqual((doc["target"], doc["arch"], doc["output"]), ("cuda", "sm_90a,sm_80", art))
        self.assertGreaterEqual(doc["kernels"], 1)
        self.assertEqual(doc["interpreter_nodes"], 0)
        with open(art, "rb") as f:
            data = f.read()
        self.assertEqual(data[:8], b"TESSELX1")  # an artifact, holding a cubin (an ELF image) per architecture
        self.assertEqual(data.count(b"\x7fELF"), 2)
        self.assertEqual(len(data), doc["bytes"])
        # The CPU path refuses it, saying what it is; without a GPU --target cuda says what is missing.
        code, _, err = self.tessel("run", art)
        self.assertEqual(code, 1)
        self.assertIn("is an artifact for cuda (sm_90a, sm_80), not for the CPU", self.assert_one_error_line(err, art))
        if not os.path.exists("/dev/nvidia0"):
            code, _, err = self.tessel("run", art, "--target", "cuda")
            self.assertEqual(code, 1)
            self.assert_one_error_line(err, art)
        # The reference interpreter runs the artifact's model.
        self.tessel("run", art, "--target", "reference", expect=0)
        _, out, _ = self.tessel("inspect", art, expect=0)  # its model, after the pass pipeline
        self.assertIn("Add", out)
        for bad in ("sm_90a,,sm_80", "sm_80,sm_80"):
            code, _, err = self.tessel("compile", p, "--target", "cuda", "--cuda-arch", bad, "-o", self.path("b.tsl"))
            self.assertEqual(code, 1)
            self.assertIn("--cuda-arch", self.assert_one_error_line(err, p))
        self.assertFalse(os.path.exists(self.path("b.tsl")))
        # The GPU plan is inspectable without a GPU; CPU code is not what --target cuda shows.
        _, out, _ = self.tessel("inspect", p, "--target", "cuda", "--emit", "loop", "--dim", "batch=4", expect=0)
        self.assertIn("gpu.", out)
        code, _, err = self.tessel("inspect", p, "--target", "cuda", "--emit", "llvm")
        self.assertEqual(code, 1)
        self.assertIn("--emit cuda or ptx", self.assert_one_error_line(err, p))
        code, _, err = self.tessel("compile", p, "--target", "reference", "-o", self.path("x"))
        self.assertEqual(code, 1)
        self.assert_one_error_line(err, p)

    def test_bad_artifacts_and_failed_compiles_write_nothing(self):
        p = self.save_model(add_model())
        art = self.path("m.tsx")
        self.tessel("compile", p, "-o", art, expect=0)
        with open(art, "rb") as f:
            good = f.read()
        for name, data in {"cut.tsx": good[: len(good) // 2], "header.tsx": good[:10],
                           "flipped.tsx": good[:-40] + bytes([good[-40] ^ 0xFF]) + good[-39:],
                           "other.tsx": b"TESSELX9" + good[8:]}.items():
            with self.subTest(name=name):
                bad = self.path(name)
                with open(bad, "wb") as f:
                    f.write(data)
                for cmd in ("run", "bench", "inspect"):
                    code, _, err = self.tessel(cmd, bad)
                    self.assertEqual(code, 1)
                    self.assertIn("artifact", self.assert_one_error_line(err, bad))
        broken = self.path("broken.onnx")
        with open(broken, "wb") as f:
            f.write(b"garbage")
        out = self.path("never.tsx")
        code, _, err = self.tessel("compile", broken, "-o", out)
        self.assertEqual(code, 1)
        self.assert_one_error_line(err, broken)
        self.assertFalse(os.path.exists(out))
        self.assertEqual([f for f in os.listdir(self.files) if "tmp" in f], [])

    # ---- progress ------------------------------------------------------------------------
    def test_progress_on_stderr_and_quiet(self):
        """compile, run and bench show their compile's progress on stderr (plain lines, as stderr is no
        terminal here), nothing with --quiet or from the model cache; stdout is the same either way."""
        p = self.save_model(linear_model())
        final = r"(?m)^compile: 1 groups, 1 distinct kernels( \(code from the cache\))? in \d+\.\ds$"
        outs = {}
        for quiet in (False, True):
            self.env["TESSEL_CACHE_DIR"] = os.path.join(self.tmp, f"cache_{quiet}")  # a real compile each time
            flag = ["--quiet"] if quiet else []
            _, out, err = self.tessel("compile", p, "-o", self.path(f"m{quiet}.tsx"), "--dim", "batch=4", "--json",
                                      *flag, expect=0)
            outs[quiet] = json.loads(out)  # stdout is one JSON object still
            if quiet:
                self.assertEqual(err, "")
            else:
                self.assertRegex(err, final)
                self.assertNotIn("\r", err)
                self.assertTrue(all(l.startswith("compile: ") for l in err.splitlines()), err)
            _, out, err = self.tessel("run", p, "--dim", "batch=4", *flag, expect=0)
            self.assertNotIn("compile:", out)
            if quiet:
                self.assertNotIn("compile:", err)
            else:
                self.assertRegex(err, final)
            self.env["TESSEL_CACHE_DIR"] = os.path.join(self.tmp, f"bench_{quiet}")
            _, out, err = self.tessel("bench", p, "--dim", "batch=4", "--iters", 1, "--json", *flag, expect=0)
            self.assertIn("median_ms", json.loads(out))
            self.assertEqual(bool(re.search(final, err)), not quiet, err)
        for key in ("kernels", "interpreter_nodes", "cpu", "model_cache_hit"):
            self.assertEqual(outs[False][key], outs[True][key])
        # A hit in the model cache compiles nothing and says nothing.
        self.env["TESSEL_CACHE_DIR"] = os.path.join(self.tmp, "cache_False")
        _, out, err = self.tessel("compile", p, "-o", self.path("again.tsx"), "--dim", "batch=4", expect=0)
        self.assertIn("from the model cache", out)
        self.assertEqual(err, "")

    # ---- bench -----------------------------------------------------------------------
    def test_bench_json(self):
        p = self.save_model(add_model())
        _, out, _ = self.tessel("bench", p, "--warmup", 1, "--iters", 5, "--dim", "batch=8", "--threads", 2,
                                "--json", expect=0)
        doc = json.loads(out)
        for key in ("median_ms", "p10_ms", "p90_ms", "min_ms", "compile_s", "iters", "threads", "target"):
            self.assertIn(key, doc)
        self.assertEqual(doc["iters"], 5)
        self.assertEqual(doc["threads"], 2)
        self.assertLessEqual(doc["p10_ms"], doc["median_ms"])
        self.assertLessEqual(doc["median_ms"], doc["p90_ms"])
        _, out, _ = self.tessel("bench", p, "--iters", 3, "--target", "reference", expect=0)
        self.assertIn("median", out)
        # --profile: the slowest steps, each with its median and share of the run.
        _, out, _ = self.tessel("bench", p, "--iters", 3, "--dim", "batch=4", "--profile", 5, "--json", expect=0)
        rows = json.loads(out)["profile"]
        self.assertGreaterEqual(len(rows), 1)
        self.assertLessEqual(len(rows), 5)
        for r in rows:
            self.assertIn("what", r)
            self.assertGreaterEqual(r["median_ms"], 0)
            # Add at batch 4: a kernel moves its operands and result; no contraction flops.
            self.assertGreater(r["bytes"], 0)
            self.assertEqual(r["flops"], 0)
        self.assertEqual([r["median_ms"] for r in rows], sorted((r["median_ms"] for r in rows), reverse=True))
        self.assertLessEqual(sum(r["share"] for r in rows), 1.0 + 1e-9)
        code, _, err = self.tessel("bench", p, "--iters", 3, "--profile", 5, "--target", "reference")
        self.assertEqual(code, 1)
        self.assertIn("--profile", self.assert_one_error_line(err))
        code, _, err = self.tessel("bench", p, "--iters", 0)
        self.assertEqual(code, 1)
        self.assert_one_error_line(err, p)

    def test_bench_profile_roofline(self):
        """Each step against the machine's ceilings: a GEMM is compute-bound, a large Relu memory-bound."""
        p = self.save_model(linear_model(k=512, n=512))
        _, out, err = self.tessel("bench", p, "--iters", 3, "--dim", "batch=512", "--threads", 2, "--profile", 50,
                                  "--json", expect=0)
        self.assertIn("measuring this machine's ceilings", err)  # a fresh cache folder: measured once
        doc = json.loads(out)
        rows, roof = doc["profile"], doc["roofline"]
        levels = [lv["name"] for lv in roof["ceilings"]["sets"][-1]["levels"]]
        for r in rows:
            for key in ("intensity", "achieved_flops_per_s", "achieved_bytes_per_s", "bound_ms",
                        "attainable_flops_per_s", "of_bound", "why"):
                self.assertIn(key, r)
            self.assertIn(r["limiter"], ("compute", "memory", "launch"))
            self.assertIn(r["level"], levels)
            self.assertGreater(r["bound_ms"], 0)
            self.assertAlmostEqual(r["of_bound"], r["bound_ms"] / r["median_ms"], delta=1e-9 + 1e-6 * r["of_bound"])
            self.assertAlmostEqual(r["bound_ms"], r["launch_ms"] + max(r["compute_ms"], r["memory_ms"]), delta=1e-12)
        gemm = [r for r in rows if "MatMul" in r["what"]]
        self.assertEqual(len(gemm), 1)
        # 2 x 512^3 flops over 3 MB: 85 FLOP/B, far past any ridge point.
        self.assertEqual(gemm[0]["flops"], 2 * 512 ** 3)
        self.assertEqual(gemm[0]["limiter"], "compute")
        self.assertGreater(gemm[0]["attainable_flops_per_s"], 0)
        # The summary covers every step (all listed here): time and bound by limiter.
        by = roof["by_limiter"]
        self.assertEqual(sorted(by), ["compute", "launch", "memory"])
        self.assertEqual(sum(v["steps"] for v in by.values()), len(rows))
        self.assertAlmostEqual(roof["steps_ms"], sum(r["median_ms"] for r in rows), delta=1e-6)
        self.assertAlmostEqual(roof["bound_ms"], sum(r["bound_ms"] for r in rows), delta=1e-6)
        # A Relu over 48 MB moves bytes and computes nothing: memory-bound. The ceilings come from the cache now.
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])
        relu = self.save_model(make_model([helper.make_node("Relu", ["x"], ["y"])], [x], [y]), "relu.onnx")
        _, out, err = self.tessel("bench", relu, "--iters", 3, "--dim", f"batch={4 << 20}", "--threads", 2,
                                  "--profile", 5, "--json", expect=0)
        self.assertNotIn("measuring", err)
        rows = json.loads(out)["profile"]
        self.assertEqual(rows[0]["flops"], 0)
        self.assertEqual(rows[0]["bytes"], 2 * 4 * 3 * (4 << 20))
        self.assertEqual(rows[0]["limiter"], "memory")
        self.assertEqual(rows[0]["level"], "DRAM")
        # Text: a header with the roofline columns, one line per step, the summary after them.
        _, out, _ = self.tessel("bench", p, "--iters", 3, "--dim", "batch=512", "--threads", 2, "--profile", 3,
                                expect=0)
        self.assertIn("FLOP/B  level  bound ms  %bound  limiter", out)
        self.assertIn("time by limiter: compute", out)
        self.assertIn("at the bounds the", out)

    # ---- ceilings ---------------------------------------------------------------------
    def test_ceilings(self):
        _, out, err = self.tessel("ceilings", "--threads", 2, "--json", expect=0)
        doc = json.loads(out)
        self.assertFalse(doc["cached"])
        self.assertIn("measuring this machine's ceilings", err)
        self.assertTrue(doc["cache_file"].startswith(self.env["TESSEL_CACHE_DIR"]))
        self.assertEqual([s["threads"] for s in doc["sets"]], [1, 2])
        for s in doc["sets"]:
            self.assertGreater(s["fma_flops_per_s"], 0)
            self.assertGreaterEqual(s["launch_s"], 0)
            names = [lv["name"] for lv in s["levels"]]
            self.assertEqual((names[0], names[1], names[-1]), ("L1", "L2", "DRAM"))
            for lv in s["levels"]:
                self.assertGreater(lv["read_bytes_per_s"], 0)
        # Read from the cache the second time: the same figures, nothing measured.
        _, out, err = self.tessel("ceilings", "--threads", 2, "--json", expect=0)
        again = json.loads(out)
        self.assertTrue(again["cached"])
        self.assertEqual(again["sets"], doc["sets"])
        self.assertEqual(err, "")
        _, out, _ = self.tessel("ceilings", "--threads", 2, expect=0)
        self.assertIn("FMA GFLOP/s  L1 GB/s  L2 GB/s", out)
        self.assertEqual([l.split()[0] for l in out.splitlines()[2:4]], ["1", "2"])  # a row per thread count
        # A damaged cache file: one warning line, measured again (and rewritten), exit 0.
        with open(doc["cache_file"], "wb") as f:
            f.write(b"garbage")
        _, out, err = self.tessel("ceilings", "--threads", 2, "--json", expect=0)
        self.assertFalse(json.loads(out)["cached"])
        self.assertEqual(len([l for l in err.splitlines() if l.startswith("warning: ceilings cache")]), 1, err)
        _, out, _ = self.tessel("ceilings", "--threads", 2, "--refresh", "--json", expect=0)
        self.assertFalse(json.loads(out)["cached"])

    def test_ceilings_errors(self):
        code, out, err = self.tessel("ceilings", "--target", "cuda", "--json")
        self.assertEqual(code, 1)
        self.assertIn("GPU ceilings are not measured yet", self.assert_one_error_line(err, "ceilings"))
        self.assertIn("error", json.loads(out))
        code, _, err = self.tessel("ceilings", "--target", "tpu")
        self.assertEqual(code, 2)
        self.assertIn("usage", err)
        code, _, err = self.tessel("ceilings", "--threads", -1)
        self.assertEqual(code, 1)
        self.assertIn("--threads", self.assert_one_error_line(err))

    # ---- tune, --tuning-db, --knob --------------------------------------------------------
    def test_tune_and_use_the_database(self):
        p = self.save_model(linear_model())
        x = np.random.default_rng(1).standard_normal((64, 48)).astype(np.float32)
        np.save(self.path("x.npy"), x)
        db = self.path("t.db")
        _, out, err = self.tessel("tune", p, "--input", f"x={self.path('x.npy')}", "--budget", "30s", "--trials", 8,
                                  "--threads", 2, "--db", db, "--trials-out", self.path("trials.jsonl"), "--json",
                                  expect=0)
        doc = json.loads(out)
        self.assertGreaterEqual(doc["kernels"], 1)
        self.assertGreater(doc["measured"], doc["kernels"])  # the default and candidates
        self.assertEqual(doc["wrong"], 0)
        # Progress on stderr (not a terminal: lines), ending with the kernels and trials.
        self.assertRegex(err, r"(?m)^tune: \d+ kernels, \d+ improved, \d+ trials in \d")
        # The records are written when the whole model with them is no slower
        # than before (a whole-model check after the search, when a kernel
        # improved); otherwise none is.
        lines = []
        if os.path.exists(db):
            with open(db) as f:
                lines = f.read().splitlines()
            self.assertEqual(lines[0], "tessel-tuning-db 1")
        check = doc.get("whole_model")
        if check is not None:
            self.assertGreater(check["runs"], 0)
            self.assertGreater(check["before_ms"], 0)
            self.assertGreater(check["tuned_ms"], 0)
            self.assertEqual(check["kept"], check["tuned_ms"] <= check["before_ms"])
            self.assertLessEqual(check["kept_kernels"], check["improved"])
            self.assertEqual(check["kept_kernels"] > 0, check["kept"])
        if check is None or check["kept"]:
            self.assertGreaterEqual(len(lines), 2, "no record written")
        with open(self.path("trials.jsonl")) as f:
            trials = [json.loads(l) for l in f]
        self.assertEqual(len(trials), doc["measured"])
        self.assertTrue(all(t["measured_us"] > 0 and t["schedule"].startswith("schedule ") for t in trials))
        # The tuned model, a --knob and the default compute what the interpreter does.
        want = os.path.join(self.files, "want")
        self.tessel("run", p, "--input", f"x={self.path('x.npy')}", "--target", "reference", "--save-outputs", want,
                    expect=0)
        ref = np.load(os.path.join(want, "output_0.npy"))
        for i, extra in enumerate((["--tuning-db", db], ["--knob", "gemm.pack.a=1", "--knob", "gemm.pack.b=1"])):
            got_dir = os.path.join(self.files, f"got{i}")
            self.tessel("run", p, "--input", f"x={self.path('x.npy')}", "--save-outputs", got_dir, *extra, expect=0)
            np.testing.assert_allclose(np.load(os.path.join(got_dir, "output_0.npy")), ref, rtol=1e-4, atol=1e-4)
        # inspect shows the knobs in effect (the default reads the prepacked
        # B in place; whether it packs A depends on the CPU's vector width)
        # and the tuned schedules parse.
        _, out, _ = self.tessel("inspect", p, "--dim", "batch=64", "--emit", "schedule", expect=0)
        self.assertRegex(out, r"gemm\.pack a=[01] b=0")
        _, out, _ = self.tessel("inspect", p, "--dim", "batch=64", "--emit", "schedule", "--knob", "gemm.pack.a=1",
                                "--knob", "gemm.pack.b=1", expect=0)
        self.assertIn("gemm.pack a=1 b=1", out)
        self.tessel("inspect", p, "--dim", "batch=64", "--emit", "schedule", "--tuning-db", db, expect=0)
        # Bad knobs and budgets: one error line, exit 1.
        for bad in (["run", p, "--knob", "gemm.pack.a"], ["run", p, "--knob", "gpu.gemm.speed=2"],
                    ["run", p, "--knob", "gpu.flash.on=2"], ["tune", p, "--budget", "0s", "--db", db],
                    ["tune", p, "--budget", "soon", "--db", db], ["tune", p, "--target", "cuda", "--db", db]):
            code, _, err = self.tessel(*bad)
            self.assertEqual(code, 1, bad)
            self.assert_one_error_line(err)
        # A knob that parses but does not fit the kernel fails when the model
        # compiles: proof that run and bench hand --knob to the compiler.
        for sub in ("run", "bench"):
            code, _, err = self.tessel(sub, p, "--dim", "batch=64", "--knob", "gemm.tile.mr=999")
            self.assertEqual(code, 1, sub)
            self.assert_one_error_line(err)
            self.assertIn("mr=999 is outside", err)

    # ---- test-onnx -------------------------------------------------------------------------
    def write_case(self, root, name, model, inputs, outputs):
        d = os.path.join(root, name)
        os.makedirs(os.path.join(d, "test_data_set_0"))
        onnx.save(model, os.path.join(d, "model.onnx"))
        for kind, values in (("input", inputs), ("output", outputs)):
            for i, v in enumerate(values):
                with open(os.path.join(d, "test_data_set_0", f"{kind}_{i}.pb"), "wb") as f:
                    f.write(numpy_helper.from_array(v).SerializeToString())
        return d

    def test_test_onnx(self):
        root = self.path("cases")
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        self.write_case(root, "test_good", add_model(), [x], [x + x, x])
        self.write_case(root, "test_wrong", add_model(), [x], [x + x + 1, x])
        self.write_case(root, "test_bad_dtype", add_model(), [x], [(x + x).astype(np.float64), x])
        bad = os.path.join(root, "test_broken")
        os.makedirs(os.path.join(bad, "test_data_set_0"))
        with open(os.path.join(bad, "model.onnx"), "wb") as f:
            f.write(b"garbage")
        code, out, err = self.tessel("test-onnx", root, "--target", "reference", "--json")
        self.assertEqual(code, 1)
        doc = json.loads(out)
        status = {c["name"]: c["status"] for c in doc["cases"]}
        self.assertEqual(status, {"test_good": "pass", "test_wrong": "fail", "test_bad_dtype": "fail",
                                  "test_broken": "error"})
        self.assertEqual(doc["passed"], 1)
        self.assertEqual(doc["failed"], 3)
        good = [c for c in doc["cases"] if c["name"] == "test_good"][0]
        self.assertEqual(sorted(good["interpreter_nodes"]), ["Add", "Identity"])
        for c in doc["cases"]:
            self.assertIn("message", c)
        # One case folder, plain text.
        code, out, _ = self.tessel("test-onnx", os.path.join(root, "test_good"), expect=0)
        self.assertIn("PASS test_good", out)
        self.assertIn("1/1 passed", out)
        code, _, err = self.tessel("test-onnx", self.path("nowhere"))
        self.assertEqual(code, 1)
        self.assert_one_error_line(err)

    # ---- bisect --------------------------------------------------------------------------
    def test_bisect_clean_model(self):
        m = self.save_model(linear_model())
        x = self.path("x.npy")
        np.save(x, np.random.default_rng(5).standard_normal((2, 48)).astype(np.float32))
        repro = self.path("repro.tir")
        _, out, _ = self.tessel("bisect", m, "--input", f"x={x}", "--emit-repro", repro, expect=0)
        # One GEMM kernel (Relu(x @ w + b)); a clean model writes no reproducer.
        self.assertRegex(out, r"clean: \d+ passes \(\d+ interpreted\), 1 groups checked")
        self.assertIn("prepack_weights: ok", out)
        self.assertFalse(os.path.exists(repro))
        self.assertEqual(sorted(os.listdir(self.files)), ["m.onnx", "x.npy"])
        _, out, _ = self.tessel("bisect", m, "--dim", "batch=3", "--json", expect=0)
        j = json.loads(out)
        self.assertTrue(j["clean"])
        self.assertIsNone(j["bad_pass"])
        self.assertIsNone(j["bad_group"])
        self.assertEqual(len(j["groups"]), 1)
        self.assertEqual(j["groups"][0]["mismatch"], "")
        self.assertEqual(j["passes"][0], {"pass": "bind_dims", "changed": True, "checked": True, "mismatch": ""})

    def test_bisect_errors(self):
        m = self.save_model(linear_model())
        code, _, err = self.tessel("bisect", self.path("missing.onnx"))
        self.assertEqual(code, 1)
        self.assert_one_error_line(err, self.path("missing.onnx"))
        code, _, err = self.tessel("bisect", m, "--target", "reference")
        self.assertEqual(code, 1)
        self.assertIn("--target cpu or cuda", self.assert_one_error_line(err, m))
        code, _, err = self.tessel("bisect", m, "--input", f"nope={self.path('x.npy')}")
        self.assertEqual(code, 1)
        self.assert_one_error_line(err, m)
        code, out, err = self.tessel("bisect", m, "--input", f"x={self.path('absent.npy')}", "--json")
        self.assertEqual(code, 1)
        self.assertIn("error", json.loads(out))
        self.assertEqual(self.tessel("bisect")[0], 2)  # no MODEL: usage

    # ---- demo ----------------------------------------------------------------------------
    def test_demo(self):
        _, out, _ = self.tessel("demo", expect=0)
        self.assertIn("demo: OK", out)
        _, out, _ = self.tessel("demo", "--json", expect=0)
        self.assertTrue(json.loads(out)["ok"])


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--tessel":
        TESSEL = os.path.abspath(sys.argv[2])
        del sys.argv[1:3]
    if not os.path.isfile(TESSEL):
        sys.exit(f"tessel binary not found: {TESSEL}")
    unittest.main()
