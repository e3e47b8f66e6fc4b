"""CUDA tensors through the package and torch.compile (target "cuda"): run on the GPU machine.

Device runs read the caller's tensors in place, write outputs allocated on the
device, follow the caller's current stream and never copy through the host;
the five models of test_torch_backend.py run through torch.compile(backend=
"tessel") in bf16 within the error of eager bf16 against an fp32 reference.
Skips where torch has no CUDA device (CI never has one).
"""
import os
import threading

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)

import tessel  # noqa: E402
from tessel import torch_backend as tb  # noqa: E402
from test_torch_backend import MODELS, first, fresh, tokens  # noqa: E402,F401 - fresh: the autouse fixture

DEV = torch.device("cuda", 0)


def build(dtype, op, shape=("n", 8)):
    """x -> op(x) (and x*... for numbers), compiled for CUDA."""
    b = tessel._core.Builder()
    x = b.input("x", dtype, list(shape))
    b.outputs([op(b, x)], ["y"])
    return tessel.Executable(b.compile(tessel._args("cuda", "fp32", None, 0, None, ())))


def double(b, x):
    return b.node("Add", [x, x])[0]


def negate(b, x):
    return b.node("Not", [x])[0]


ROUND_TRIPS = [
    ("f32", torch.float32, double), ("f16", torch.float16, double), ("bf16", torch.bfloat16, double),
    ("i32", torch.int32, double), ("i64", torch.int64, double), ("i8", torch.int8, double),
    ("u8", torch.uint8, double), ("bool", torch.bool, negate),
]


@pytest.mark.parametrize("name,dtype,op", ROUND_TRIPS, ids=[r[0] for r in ROUND_TRIPS])
def test_cuda_tensors_round_trip_in_place(name, dtype, op):
    exe = build(name, op)
    if dtype == torch.bool:
        x = torch.rand(5, 8, device=DEV) > 0.5
        want = ~x
    else:
        x = (torch.randn(5, 8, device=DEV) * 20).to(dtype)
        want = x + x
    y = exe(x)
    assert isinstance(y, torch.Tensor) and y.device == DEV and y.dtype == dtype and y.shape == want.shape
    assert torch.equal(y, want)
    # zero-copy: the kernels were given the caller's input and the returned output
    assert exe._exe.bound_addresses() == [x.data_ptr(), y.data_ptr()]


def test_device_runs_follow_the_callers_stream():
    exe = build("f32", double, shape=(1024, 1024))
    src = torch.randn(1024, 1024, device=DEV)
    s = torch.cuda.Stream()
    for _ in range(3):
        x = torch.zeros(1024, 1024, device=DEV)
        torch.cuda.synchronize()
        with torch.cuda.stream(s):
            torch.cuda._sleep(50_000_000)  # ~tens of ms: a run on another stream would read zeros
            x.copy_(src)
            y = exe(x)
            y2 = y * 1  # and the caller's next kernel sees tessel's output
        s.synchronize()
        assert torch.equal(y2, src + src)


def test_host_and_device_runs_mix():
    exe = build("f32", double)
    x = torch.randn(4, 8)
    assert torch.equal(exe(x), x + x)                       # host tensors: the host path
    assert torch.equal(exe(x.to(DEV)).cpu(), x + x)         # device tensors
    assert np.array_equal(exe(x.numpy()), (x + x).numpy())  # numpy again


def test_threads_share_one_cuda_executable():
    exe = build("f32", double)
    errors = []

    def work(seed):
        try:
            g = torch.Generator(device=DEV).manual_seed(seed)
            for _ in range(50):
                x = torch.randn(7, 8, device=DEV, generator=g)
                y = exe(x)
                torch.cuda.current_stream().synchronize()
                assert torch.equal(y, x + x)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert not errors, errors


def test_bad_cuda_inputs_are_input_errors():
    exe = build("f32", double)
    with pytest.raises(tessel.InputError, match="expected dtype"):
        exe(torch.zeros(2, 8, device=DEV, dtype=torch.float16))
    with pytest.raises(tessel.InputError, match="expected shape"):
        exe(torch.zeros(2, 9, device=DEV))
    with pytest.raises(tessel.InputError, match="expected shape"):
        exe(torch.zeros(8, device=DEV))
    x = torch.randn(3, 8, device=DEV)
    assert torch.equal(exe(x), x + x)  # and the executable goes on


def test_failed_check_is_raised_by_synchronize():
    b = tessel._core.Builder()
    i = b.input("i", "i64", [4])
    table = b.constant(np.arange(40, dtype=np.float32).reshape(5, 8), "table")
    b.outputs([b.node("Gather", [table, i], 1, {"axis": 0})[0]])
    exe = tessel.Executable(b.compile(tessel._args("cuda", "fp32", None, 0, None, ())))
    exe(torch.tensor([0, 1, 100, 2], device=DEV))
    with pytest.raises(tessel.Error, match="index out of range"):
        exe.synchronize()
    y = exe(torch.tensor([4, 0, 1, 2], device=DEV))
    exe.synchronize()
    assert torch.equal(y.cpu(), torch.arange(40.0).reshape(5, 8)[[4, 0, 1, 2]])


def test_non_contiguous_cuda_input_is_made_contiguous():
    exe = build("f32", double)
    x = torch.randn(8, 6, device=DEV).t()  # 6x8, not contiguous
    assert torch.equal(exe(x), x + x)


def test_other_dlpack_cuda_arrays():
    cp = pytest.importorskip("cupy")
    exe = build("f32", double)
    x = cp.random.rand(3, 8, dtype=cp.float32)
    y = cp.from_dlpack(exe(x))
    cp.cuda.Device().synchronize()
    assert cp.array_equal(y, x + x)


# ---- torch.compile on the GPU, bf16 ------------------------------------------------------

def on_device(args, kwargs, dtype):
    def move(t):
        return t.to(DEV, dtype) if t.is_floating_point() else t.to(DEV)
    return tuple(move(a) for a in args), {k: move(v) for k, v in kwargs.items()}


@pytest.mark.parametrize("name", list(MODELS))
def test_compile_on_cuda_in_bf16_is_as_close_as_eager(name):
    if not os.environ.get("TESSEL_REQUIRE_TORCH"):
        pytest.importorskip("torchvision" if name in ("resnet18", "mobilenet_v2") else "transformers")
    m, args, kwargs = MODELS[name]()
    with torch.no_grad():
        m32 = m.to(DEV)
        a32, k32 = on_device(args, kwargs, torch.float32)
        ref = first(m32(*a32, **k32)).float()
        m16 = m32.to(torch.bfloat16)
        a16, k16 = on_device(args, kwargs, torch.bfloat16)
        eager = first(m16(*a16, **k16)).float()
        got = first(torch.compile(m16, backend="tessel")(*a16, **k16))
    assert got.device == DEV and got.dtype == torch.bfloat16
    scale = ref.abs().max().item()
    err, eager_err = (got.float() - ref).abs().max().item(), (eager - ref).abs().max().item()
    assert err <= max(3 * eager_err, 2e-2 * scale), f"tessel {err:.3g}, eager bf16 {eager_err:.3g}, scale {scale:.3g}"
    s = tb.stats()
    assert s["compiles"] == 1 and s["partitions"] >= 1 and s["eager_graphs"] == 0
    assert s["fallback_ops"] == {}, s["fallback_reasons"]


def test_dynamic_batch_on_cuda_compiles_once():
    m, _, _ = MODELS["bert"]()
    m = m.to(DEV)
    c = torch.compile(m, backend="tessel")
    with torch.no_grad():
        for b in (2, 3, 5):
            ids, mask = tokens(b, 16)
            ids, mask = ids.to(DEV), mask.to(DEV)
            torch._dynamo.mark_dynamic(ids, 0)
            torch._dynamo.mark_dynamic(mask, 0)
            got, want = first(c(ids, attention_mask=mask)), first(m(ids, attention_mask=mask))
            assert (got - want).abs().max().item() <= 1e-3 * want.abs().max().item()
    assert tb.stats()["compiles"] == 1


def test_export_on_cuda():
    m, args, kwargs = MODELS["resnet18"]()
    with torch.no_grad():
        m = m.to(DEV)
        x = args[0].to(DEV)
        exe = tessel.export(m, (x,))
        assert exe.target == "cuda"
        got, want = exe(x), m(x)
    assert got.device == DEV
    assert (got - want).abs().max().item() <= 1e-3 * want.abs().max().item()
