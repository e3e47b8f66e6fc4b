#!/usr/bin/env python3
"""The deployable runtime end to end (docs/deploy.md).

    test_deploy.py --build BUILD_DIR --models MODELS_DIR [unittest options]
    test_deploy.py --prefix RUNTIME_PREFIX --tessel TESSEL --target cuda --models DIR   (the GPU machine)

Installs BUILD_DIR (`cmake --install`, components runtime and cli) into a
scratch prefix (or takes an installed runtime's --prefix and a --tessel
binary), builds examples/c_app and examples/cpp_app against the installed
tree with find_package(tessel), and checks that:
  - libtessel_runtime and both programs need no LLVM, protobuf or CUDA
    library (the CUDA driver is opened at run time), and the runtime exports
    the C API alone;
  - ResNet-18 and BERT artifacts (--target cpu: compiled for the CPU;
    --target cuda: for the GPU, run through the same C API) run through both
    programs with outputs bitwise equal to `tessel run` of the same artifact
    and inputs;
  - damaged, foreign and missing artifacts, a CUDA artifact without a GPU
    and one for another GPU architecture end the C program with one error
    line and exit status 1.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
ARGS = None
FORBIDDEN = ("llvm", "protobuf", "nvrtc", "libcuda", "onnx")


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def read_bytes(path):
    with open(path, "rb") as f:
        return f.read()


def check(cmd, **kw):
    r = run(cmd, **kw)
    if r.returncode != 0:
        raise AssertionError(f"{' '.join(cmd)} exited {r.returncode}:\n{r.stdout}\n{r.stderr}")
    return r


class Deploy(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="tessel_deploy_")
        if ARGS.prefix:
            cls.prefix = os.path.abspath(ARGS.prefix)
        else:
            cls.prefix = os.path.join(cls.tmp, "prefix")
            for comp in ("runtime", "cli"):
                check(["cmake", "--install", ARGS.build, "--prefix", cls.prefix, "--component", comp, "--strip"])
        cls.tessel = os.path.abspath(ARGS.tessel) if ARGS.tessel else os.path.join(cls.prefix, "bin", "tessel")
        cls.target = ["--target", ARGS.target]
        gen = ["-G", "Ninja"] if shutil.which("ninja") else []
        cls.apps = {}
        for app in ("c_app", "cpp_app"):
            b = os.path.join(cls.tmp, "build-" + app)
            check(["cmake", "-S", os.path.join(ROOT, "examples", app), "-B", b, *gen,
                   "-DCMAKE_PREFIX_PATH=" + cls.prefix, "-DCMAKE_BUILD_TYPE=Release"])
            check(["cmake", "--build", b])
            cls.apps[app] = os.path.join(b, app)
        cls.runtime = os.path.realpath(os.path.join(cls.prefix, "lib", "libtessel_runtime.so"))

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_runtime_and_programs_need_no_compiler_libraries(self):
        for f in [self.runtime, *self.apps.values()]:
            deps = check(["ldd", f]).stdout.lower()
            for bad in FORBIDDEN:
                self.assertNotIn(bad, deps, f"{f} needs a {bad} library:\n{deps}")
        self.assertIn("libtessel_runtime.so", check(["ldd", self.apps["c_app"]]).stdout)
        size = os.path.getsize(self.runtime)
        self.assertLess(size, 8 << 20, f"libtessel_runtime is {size} bytes stripped")
        exported = [l.split()[-1] for l in check(["nm", "-D", "--defined-only", self.runtime]).stdout.splitlines()]
        self.assertIn("tessel_run", exported)
        self.assertEqual([s for s in exported if not s.startswith("tessel_")], [], "symbols beyond the C API")

    def compile_artifact(self, model, dims):
        src = os.path.join(ARGS.models, model + ".onnx")
        if not os.path.exists(src):
            self.fail(f"{src} is missing: materialize the models first (ctest fixture models_files)")
        out = os.path.join(self.tmp, model + ".tsl")
        check([self.tessel, "compile", src, *self.target, *sum((["--dim", d] for d in dims), []), "-o", out])
        return out

    def same_outputs(self, artifact, inputs):
        """`tessel run` and both programs on the same inputs; bitwise equal outputs."""
        work = tempfile.mkdtemp(dir=self.tmp)
        npy_args, bin_args = [], []
        for name, a in inputs.items():
            np.save(os.path.join(work, name + ".npy"), a)
            a.tofile(os.path.join(work, name + ".bin"))
            npy_args += ["--input", f"{name}={os.path.join(work, name + '.npy')}"]
            bin_args.append(f"{name}={os.path.join(work, name + '.bin')}")
        ref = os.path.join(work, "ref")
        check([self.tessel, "run", artifact, *self.target, *npy_args, "--save-outputs", ref])
        want = np.load(os.path.join(ref, "output_0.npy"))
        for app, exe in self.apps.items():
            out = os.path.join(work, app)
            os.makedirs(out)
            check([exe, artifact, out, *bin_args])
            got = np.fromfile(os.path.join(out, "output_0.bin"), dtype=want.dtype)
            self.assertEqual(got.size, want.size, app)
            self.assertTrue(np.array_equal(got.view(np.uint8), want.reshape(-1).view(np.uint8)),
                            f"{app}: outputs differ from tessel run (max |d| {np.abs(got - want.reshape(-1)).max()})")

    def test_resnet18_bitwise_like_tessel_run(self):
        art = self.compile_artifact("resnet18.ts17", ["batch=1"])
        x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
        self.same_outputs(art, {"input": x})

    def test_bert_bitwise_like_tessel_run(self):
        art = self.compile_artifact("bert_base.ts17", ["batch=1", "seq=128"])
        rng = np.random.default_rng(2)
        ids = rng.integers(0, 1000, (1, 128), dtype=np.int64)
        mask = np.ones((1, 128), dtype=np.int64)
        mask[0, 100:] = 0
        self.same_outputs(art, {"input_ids": ids, "attention_mask": mask})

    def test_portable_artifact_runs_and_foreign_cpu_is_refused(self):
        if ARGS.target != "cpu":
            self.skipTest("CPU artifacts (this run checks --target cuda)")
        # x86-64-v3 (AVX2, FMA) runs on every CPU these tests run on.
        art = os.path.join(self.tmp, "r18_v3.tsl")
        check([self.tessel, "compile", os.path.join(ARGS.models, "resnet18.ts17.onnx"), "--dim", "batch=1",
               "--cpu", "x86-64-v3", "-o", art])
        x = np.random.default_rng(4).standard_normal((1, 3, 224, 224)).astype(np.float32)
        self.same_outputs(art, {"input": x})
        with open("/proc/cpuinfo") as f:
            has_avx512 = " avx512f" in f.read()
        if has_avx512:
            return  # no x86-64-v4 feature is missing here to be refused (ArtifactTest covers the check)
        v4 = os.path.join(self.tmp, "r18_v4.tsl")
        check([self.tessel, "compile", os.path.join(ARGS.models, "resnet18.ts17.onnx"), "--dim", "batch=1",
               "--cpu", "x86-64-v4", "-o", v4])
        r = run([self.apps["c_app"], v4, self.tmp])
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("+avx512f", r.stderr)
        self.assertIn("which this CPU lacks (compiled for x86-64-v4)", r.stderr)

    def one_error_line(self, artifact, expect):
        r = run([self.apps["c_app"], artifact, self.tmp])
        self.assertEqual(r.returncode, 1, r.stderr)
        lines = r.stderr.strip().splitlines()
        self.assertEqual(len(lines), 1, r.stderr)
        self.assertIn("error: load: load error:", lines[0])
        self.assertIn(expect, lines[0])

    def test_cuda_artifact_without_a_gpu_or_for_another_gpu_is_refused(self):
        src = os.path.join(ARGS.models, "resnet18.ts17.onnx")
        art = os.path.join(self.tmp, "r18_sm80.tsl")
        r = run([self.tessel, "compile", src, "--target", "cuda", "--cuda-arch", "sm_80", "--dim", "batch=1", "-o", art])
        if r.returncode != 0 and "NVRTC" in r.stderr:
            self.skipTest("NVRTC is not available: " + r.stderr.strip())
        self.assertEqual(r.returncode, 0, r.stderr)
        if os.path.exists("/dev/nvidia0"):
            self.one_error_line(art, "compiled for sm_80, which this GPU")  # an H100/H200 runs sm_90 code only
        else:
            self.one_error_line(art, "CUDA")

    def test_hostile_artifacts_end_with_one_error(self):
        art = self.compile_artifact("resnet18.ts17", ["batch=1"])
        good = read_bytes(art)
        cases = {
            "truncated": (good[: len(good) // 2], "truncated artifact"),
            "magic": (b"XXXXXXXX" + good[8:], "not a tessel artifact"),
            "version": (good[:8] + (99).to_bytes(4, "little") + good[12:], "artifact format version 99"),
            "checksum": (good[:-100] + bytes(b ^ 0xFF for b in good[-100:]), "corrupt artifact"),
            "onnx": (read_bytes(os.path.join(ARGS.models, "resnet18.ts17.onnx")), "tessel compile MODEL -o FILE"),
        }
        for name, (data, expect) in cases.items():
            p = os.path.join(self.tmp, "bad_" + name + ".tsl")
            with open(p, "wb") as f:
                f.write(data)
            with self.subTest(name):
                self.one_error_line(p, expect)
        r = run([self.apps["c_app"], os.path.join(self.tmp, "no_such.tsl"), self.tmp])
        self.assertEqual(r.returncode, 1)
        self.assertIn("no such file", r.stderr)


def main():
    global ARGS
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--models", default=os.path.join(ROOT, "build", "models"))
    ap.add_argument("--prefix", help="an installed runtime (component runtime) to build the programs against")
    ap.add_argument("--tessel", help="the tessel CLI (default: PREFIX/bin/tessel)")
    ap.add_argument("--target", choices=("cpu", "cuda"), default="cpu", help="what the artifacts are compiled for")
    ARGS, rest = ap.parse_known_args()
    unittest.main(argv=[sys.argv[0], *rest], verbosity=2)


if __name__ == "__main__":
    main()
