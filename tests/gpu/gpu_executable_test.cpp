// The GPU runtime (runtime/cuda/gpu_executable.h) on device 0: whole small
// models compiled for --target cuda agree with the reference interpreter at
// several bindings of their symbols (one arena, constants uploaded once, a
// CUDA graph per binding), interpreter steps between kernels work, a failed
// kernel assert is reported and the next run works, running out of device
// memory is one clear error. Device runs (run_device) read and write the
// caller's buffers on the caller's stream: graph kernel nodes take new
// addresses, host runs in between use the executable's own buffers, inputs,
// constants and repeated values among the outputs are copied, a failed
// assert surfaces on synchronize(). Every test skips where there is no usable GPU
// or no NVRTC.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <set>

#include "gpu_test_util.h"
#include "tessel/codegen/cuda/driver_api.h"
#include "tessel/codegen/cuda/nvrtc.h"
#include "tessel/driver/cuda_compiler.h"
#include "tessel/interp/interpreter.h"
#include "tessel/ir/builder.h"
#include "tessel/passes/pass_manager.h"
#include "tessel/support/error.h"

namespace tessel {
namespace {

using testing::expect_close;
using testing::random_f32;
using testing::small_mlp;

void expect_matches_interpreter(const Model& m, const GpuExecutable& exe, const std::vector<RtValue>& in) {
  const std::vector<RtValue> got = exe.run(in);
  const std::vector<RtValue> want = Interpreter().run(*m.graph, in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) expect_close(got[i].tensor, want[i].tensor, str_cat("output ", i));
}

TEST(GpuExecutable, MatchesTheInterpreterAtSeveralBindings) {
  SKIP_WITHOUT_GPU();
  auto m = small_mlp();
  auto c = compile_for_cuda(*m, DriverOptions{});
  EXPECT_TRUE(c->exe->interpreter_ops().empty());
  EXPECT_TRUE(c->exe->uses_graph());
  // New bindings make new instances (arena, graph); 3 again replays the first.
  for (int64_t batch : {3, 1, 130, 3})
    expect_matches_interpreter(*m, *c->exe, {RtValue(random_f32({batch, 16}, static_cast<uint64_t>(batch)))});
}

TEST(GpuExecutable, TimesCopiesAndReplays) {
  SKIP_WITHOUT_GPU();
  auto m = small_mlp();
  auto c = compile_for_cuda(*m, DriverOptions{});
  const std::vector<RtValue> in = {RtValue(random_f32({64, 16}, 1))};
  GpuRunTimes t;
  c->exe->run(in, &t);
  EXPECT_GT(t.device_ms, 0);
  EXPECT_GE(t.upload_ms, 0);
  EXPECT_GE(t.download_ms, 0);
  const std::vector<double> ms = c->exe->time_on_device(in, 2, 5);
  ASSERT_EQ(ms.size(), 5u);
  for (double v : ms) EXPECT_GT(v, 0);
  // The per-step profile: every step of every run timed on the device.
  const std::vector<RunProfile> prof = c->exe->profile_steps(in, 1, 3);
  ASSERT_EQ(prof.size(), 3u);
  for (const RunProfile& r : prof) {
    ASSERT_EQ(r.step_seconds.size(), c->exe->steps().size());
    for (double s : r.step_seconds) EXPECT_GT(s, 0);
  }
  // Timing leaves the executable usable and its results right.
  expect_matches_interpreter(*m, *c->exe, in);
}

TEST(GpuExecutable, InterpreterStepsBetweenKernels) {
  SKIP_WITHOUT_GPU();
  // Det has no compiled form: the host runs it between two kernels.
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::F32, {5, 3, 3});
  Value* d = b.op("Det", {b.op("Mul", {x, b.scalar_f32(2.0f)})});
  b.output(b.op("Add", {d, b.scalar_f32(1.0f)}));
  run_pipeline(*m, PassOptions{});
  auto c = compile_for_cuda(*m, DriverOptions{});
  EXPECT_EQ(c->exe->interpreter_ops(), std::vector<std::string>{"Det"});
  EXPECT_FALSE(c->exe->uses_graph());
  expect_matches_interpreter(*m, *c->exe, {RtValue(random_f32({5, 3, 3}, 3))});
}

TEST(GpuExecutable, FailedAssertIsReportedAndTheNextRunWorks) {
  SKIP_WITHOUT_GPU();
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* idx = b.input("i", DType::I64, {4});
  Value* table = b.constant(random_f32({5, 8}, 2), "table");
  b.output(b.op("Gather", {table, idx}, {{"axis", Attribute::of_int(0)}}));
  run_pipeline(*m, PassOptions{});
  auto c = compile_for_cuda(*m, DriverOptions{});
  try {
    c->exe->run({RtValue(Tensor::from_i64({0, 1, 100, 2}))});
    ADD_FAILURE() << "an out-of-range index ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index out of range"), std::string::npos) << e.what();
  }
  expect_matches_interpreter(*m, *c->exe, {RtValue(Tensor::from_i64({4, 0, -1, 2}))});
}

// The caller's side of a device run: its stream and its buffers.
struct CallerBuffers {
  cuda::Stream stream;
  std::vector<std::unique_ptr<cuda::DeviceMemory>> in, out;
  std::vector<DeviceTensorRef> refs;
  std::vector<uint64_t> out_ptrs;
  std::vector<std::vector<int64_t>> out_dims;
  std::vector<DType> out_dtypes;

  CallerBuffers(const GpuExecutable& exe, const std::vector<RtValue>& inputs) {
    for (const RtValue& v : inputs) {
      in.push_back(std::make_unique<cuda::DeviceMemory>(v.tensor.nbytes()));
      stream.upload(*in.back(), v.tensor.raw(), v.tensor.nbytes());
      refs.push_back({v.tensor.dtype(), v.tensor.shape(), in.back()->ptr(), nullptr});
    }
    out_dims = exe.output_dims(refs);
    for (size_t o = 0; o < out_dims.size(); ++o) {
      out_dtypes.push_back(exe.model().graph->outputs[o]->type.dtype);
      Tensor t(out_dtypes.back(), out_dims[o]);
      out.push_back(std::make_unique<cuda::DeviceMemory>(t.nbytes()));
      out_ptrs.push_back(out.back()->ptr());
    }
  }
  std::vector<RtValue> outputs() {
    std::vector<RtValue> r;
    for (size_t o = 0; o < out.size(); ++o) {
      Tensor t(out_dtypes[o], out_dims[o]);
      stream.download(t.mutable_raw(), *out[o], t.nbytes());
      r.emplace_back(std::move(t));
    }
    stream.synchronize();
    return r;
  }
};

void expect_device_run_matches(const Model& m, const GpuExecutable& exe, const std::vector<RtValue>& in) {
  CallerBuffers c(exe, in);
  exe.run_device(c.refs, c.out_ptrs, c.stream.handle());
  // The kernels were given the caller's addresses: nothing was staged.
  std::vector<uint64_t> want_addresses;
  for (const DeviceTensorRef& r : c.refs) want_addresses.push_back(r.device);
  // Outputs are written in place, except constants, inputs and a value's
  // second appearance among the outputs (copied: 0, not compared).
  std::set<const Value*> seen;
  for (size_t o = 0; o < c.out_ptrs.size(); ++o) {
    const Value* v = m.graph->outputs[o];
    const bool in_place = !v->constant &&
                          std::find(m.graph->inputs.begin(), m.graph->inputs.end(), v) == m.graph->inputs.end() &&
                          seen.insert(v).second;
    want_addresses.push_back(in_place ? c.out_ptrs[o] : 0);
  }
  const std::vector<uint64_t> got_addresses = exe.bound_addresses();
  ASSERT_EQ(got_addresses.size(), want_addresses.size());
  for (size_t i = 0; i < want_addresses.size(); ++i) {
    if (want_addresses[i]) {
      EXPECT_EQ(got_addresses[i], want_addresses[i]) << "address " << i;
    }
  }
  const std::vector<RtValue> got = c.outputs();
  exe.synchronize();
  const std::vector<RtValue> want = Interpreter().run(*m.graph, in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) expect_close(got[i].tensor, want[i].tensor, str_cat("device output ", i));
}

TEST(GpuExecutable, DeviceRunsUseTheCallersBuffersAndStream) {
  SKIP_WITHOUT_GPU();
  auto m = small_mlp();
  auto c = compile_for_cuda(*m, DriverOptions{});
  ASSERT_TRUE(c->exe->uses_graph());
  // New buffers each time (the graph's nodes take the new addresses), a new
  // binding, host runs in between (back on the executable's own buffers).
  for (int64_t batch : {8, 8, 3, 8}) {
    const std::vector<RtValue> in = {RtValue(random_f32({batch, 16}, static_cast<uint64_t>(batch) + 20))};
    expect_device_run_matches(*m, *c->exe, in);
    expect_matches_interpreter(*m, *c->exe, in);
  }
  // Many runs in flight on one stream, each into its own outputs.
  const std::vector<RtValue> in = {RtValue(random_f32({8, 16}, 5))};
  std::vector<std::unique_ptr<CallerBuffers>> runs;
  for (int r = 0; r < 4; ++r) {
    runs.push_back(std::make_unique<CallerBuffers>(*c->exe, in));
    c->exe->run_device(runs.back()->refs, runs.back()->out_ptrs, runs.back()->stream.handle());
  }
  const std::vector<RtValue> want = Interpreter().run(*m->graph, in);
  for (auto& r : runs) {
    const std::vector<RtValue> got = r->outputs();
    for (size_t i = 0; i < got.size(); ++i) expect_close(got[i].tensor, want[i].tensor, "in-flight output");
  }
}

TEST(GpuExecutable, DeviceRunsCopyInputsConstantsAndRepeatedOutputs) {
  SKIP_WITHOUT_GPU();
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::F32, {Dim::sym("n"), 4});
  Value* y = b.op("Mul", {x, b.scalar_f32(3.0f)});
  b.output(y);
  b.output(x);
  b.output(b.constant(random_f32({2, 2}, 9), "k"));
  b.output(y);
  run_pipeline(*m, PassOptions{});
  auto c = compile_for_cuda(*m, DriverOptions{});
  expect_device_run_matches(*m, *c->exe, {RtValue(random_f32({5, 4}, 6))});
  // A host input (a size, say) is copied in on the caller's stream.
  const Tensor host = random_f32({2, 4}, 7);
  CallerBuffers cb(*c->exe, {RtValue(host)});
  cb.refs[0] = {DType::F32, {2, 4}, 0, host.raw()};
  c->exe->run_device(cb.refs, cb.out_ptrs, cb.stream.handle());
  const std::vector<RtValue> got = cb.outputs();
  expect_close(got[1].tensor, host, "host input");
}

TEST(GpuExecutable, DeviceRunsWithInterpreterSteps) {
  SKIP_WITHOUT_GPU();
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::F32, {5, 3, 3});
  b.output(b.op("Add", {b.op("Det", {b.op("Mul", {x, b.scalar_f32(2.0f)})}), b.scalar_f32(1.0f)}));
  run_pipeline(*m, PassOptions{});
  auto c = compile_for_cuda(*m, DriverOptions{});
  ASSERT_FALSE(c->exe->uses_graph());
  expect_device_run_matches(*m, *c->exe, {RtValue(random_f32({5, 3, 3}, 3))});
}

TEST(GpuExecutable, DeviceRunsOfATensorCoreGemm) {
  SKIP_WITHOUT_GPU();
  // bf16 in and out: the GEMM reads the caller's input (through a TMA
  // tensor map where the schedule uses them, encoded again per address).
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::BF16, {Dim::sym("m"), 256});
  Value* w = b.constant(random_f32({256, 512}, 11).cast(DType::BF16), "w");
  b.output(b.op("MatMul", {x, w}));
  run_pipeline(*m, PassOptions{});
  auto c = compile_for_cuda(*m, DriverOptions{});
  for (int64_t rows : {256, 256, 128}) {
    const std::vector<RtValue> in = {RtValue(random_f32({rows, 256}, 12).cast(DType::BF16))};
    CallerBuffers cb(*c->exe, in);
    c->exe->run_device(cb.refs, cb.out_ptrs, cb.stream.handle());
    const Tensor got = cb.outputs()[0].tensor.cast(DType::F32);
    const Tensor want = c->exe->run(in)[0].tensor.cast(DType::F32);  // the host path, same kernels
    ASSERT_EQ(got.shape(), want.shape());
    for (int64_t i = 0; i < got.numel(); ++i)
      ASSERT_EQ(got.data<float>()[i], want.data<float>()[i]) << "element " << i << " at m=" << rows;
  }
}

TEST(GpuExecutable, DeviceRunAssertSurfacesOnSynchronize) {
  SKIP_WITHOUT_GPU();
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* idx = b.input("i", DType::I64, {4});
  b.output(b.op("Gather", {b.constant(random_f32({5, 8}, 2), "table"), idx}, {{"axis", Attribute::of_int(0)}}));
  run_pipeline(*m, PassOptions{});
  auto c = compile_for_cuda(*m, DriverOptions{});
  CallerBuffers cb(*c->exe, {RtValue(Tensor::from_i64({0, 1, 100, 2}))});
  c->exe->run_device(cb.refs, cb.out_ptrs, cb.stream.handle());
  try {
    c->exe->synchronize();
    ADD_FAILURE() << "an out-of-range index ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("index out of range"), std::string::npos) << e.what();
  }
  c->exe->synchronize();  // reported once
  expect_device_run_matches(*m, *c->exe, {RtValue(Tensor::from_i64({4, 0, -1, 2}))});
}

TEST(GpuExecutable, OutOfMemoryIsOneErrorAndTheProcessGoesOn) {
  SKIP_WITHOUT_GPU();
  try {
    cuda::DeviceMemory huge(size_t{1} << 50);  // 1 PiB
    ADD_FAILURE() << "allocated 1 PiB";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of device memory"), std::string::npos) << e.what();
  }
  cuda::DeviceMemory small(1024);
  EXPECT_NE(small.ptr(), 0u);
  // A model whose output does not fit fails the same way, on its first run
  // (when its buffers are allocated); other executables still run.
  auto big = std::make_unique<Model>();
  GraphBuilder bb(*big);
  Value* x = bb.input("x", DType::F32, {1});
  bb.output(bb.op("Expand", {x, bb.const_i64({int64_t{1} << 38})}));  // 1 TiB of f32
  run_pipeline(*big, PassOptions{});
  auto cb = compile_for_cuda(*big, DriverOptions{});
  try {
    cb->exe->run({RtValue(random_f32({1}, 1))});
    ADD_FAILURE() << "a 1 TiB output was allocated";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("out of device memory"), std::string::npos) << e.what();
  }
  auto m = small_mlp();
  auto c = compile_for_cuda(*m, DriverOptions{});
  expect_matches_interpreter(*m, *c->exe, {RtValue(random_f32({8, 16}, 4))});
}

}  // namespace
}  // namespace tessel
