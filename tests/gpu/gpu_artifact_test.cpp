// CUDA artifacts on the GPU (runtime/cuda/gpu_artifact.h, the C API): a
// model compiled into an artifact, loaded without NVRTC, runs bitwise like
// the in-process compile (same cubin, same launches), TMA tensor maps
// included; the C API runs it from host memory and from device memory on
// the caller's stream.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "gpu_test_util.h"
#include "tessel/driver/artifact.h"
#include "tessel/driver/cuda_compiler.h"
#include "tessel/interp/interpreter.h"
#include "tessel/runtime/cuda/gpu_artifact.h"
#include "tessel/tessel.h"

namespace tessel {
namespace {

using testing::random_f32;

std::string temp_path(const std::string& tag) {
  return (std::filesystem::temp_directory_path() /
          ("tessel_gpu_artifact_" + std::to_string(::getpid()) + "_" + tag + ".tsl"))
      .string();
}

// Writes `m`'s CUDA artifact for these architectures; returns its path.
std::string write_cuda_artifact(const Model& m, const std::vector<std::string>& archs, const std::string& tag) {
  std::vector<std::unique_ptr<CudaCompiledModel>> compiles;
  std::vector<const CudaCompiledModel*> views;
  for (const std::string& a : archs) {
    compiles.push_back(compile_cuda_kernels(m, a));
    views.push_back(compiles.back().get());
  }
  const std::string path = temp_path(tag);
  write_file_atomically(path, encode_artifact(make_cuda_artifact(m, views)));
  return path;
}

void expect_bitwise(const std::vector<RtValue>& got, const std::vector<RtValue>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i].tensor.shape(), want[i].tensor.shape()) << what << " output " << i;
    ASSERT_EQ(got[i].tensor.nbytes(), want[i].tensor.nbytes()) << what << " output " << i;
    EXPECT_EQ(std::memcmp(got[i].tensor.raw(), want[i].tensor.raw(), got[i].tensor.nbytes()), 0)
        << what << " output " << i;
  }
}

TEST(GpuArtifact, RunsBitwiseLikeTheInProcessCompile) {
  SKIP_WITHOUT_GPU();
  auto m = testing::small_mlp();  // symbolic batch: one artifact for every binding
  auto c = compile_for_cuda(*m, DriverOptions{});
  // Another architecture beside the GPU's: the loader takes the GPU's cubin.
  const std::string path = write_cuda_artifact(*m, {"sm_80", cuda::device_arch()}, "mlp");
  std::unique_ptr<GpuExecutable> loaded = load_cuda_artifact(path);
  std::filesystem::remove(path);  // the executable keeps what it needs
  for (int64_t batch : {1, 3, 8}) {
    const std::vector<RtValue> in = {RtValue(random_f32({batch, 16}, static_cast<uint64_t>(batch)))};
    expect_bitwise(loaded->run(in), c->exe->run(in), "batch " + std::to_string(batch));
  }
}

TEST(GpuArtifact, TensorCoreGemmThroughTmaMaps) {
  SKIP_WITHOUT_GPU();
  // tests/unit/cuda_artifact_test.cpp's model: on sm_90a its GEMM reads
  // through TMA tensor maps, which the artifact must carry.
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::BF16, {2048, 512});
  Value* w = b.constant(random_f32({512, 1024}, 11).cast(DType::BF16), "w");
  Value* y = b.op("MatMul", {x, w});
  b.output(b.op("Softmax", {b.op("Cast", {y}, {{"to", Attribute::of_int(1)}})}, {{"axis", Attribute::of_int(-1)}}));
  run_pipeline(*m, PassOptions{});
  auto c = compile_for_cuda(*m, DriverOptions{});
  size_t compiled_maps = 0;
  for (const cuda::KernelSource& k : c->source.kernels) compiled_maps += k.tensor_maps.size();
  const std::string path = write_cuda_artifact(*m, {cuda::device_arch()}, "gemm");
  const ArtifactContents a = read_artifact(path);
  size_t maps = 0;
  for (const ArtifactLaunch& l : a.cuda[0].launches) maps += l.tensor_maps.size();
  EXPECT_EQ(maps, compiled_maps);
  if (cuda::device_arch() == "sm_90a") {
    EXPECT_GT(maps, 0u);
  }
  std::unique_ptr<GpuExecutable> loaded = load_cuda_artifact(path);
  std::filesystem::remove(path);
  const std::vector<RtValue> in = {RtValue(random_f32({2048, 512}, 12).cast(DType::BF16))};
  expect_bitwise(loaded->run(in), c->exe->run(in), "bf16 GEMM");
}

// Device buffers for the C API test, on the stream it runs on.
struct DeviceBuffers {
  cuda::Stream stream;
  std::vector<std::unique_ptr<cuda::DeviceMemory>> memory;
  uint64_t put(const Tensor& t) {
    memory.push_back(std::make_unique<cuda::DeviceMemory>(t.nbytes()));
    stream.upload(*memory.back(), t.raw(), t.nbytes());
    return memory.back()->ptr();
  }
  uint64_t room(size_t bytes) {
    memory.push_back(std::make_unique<cuda::DeviceMemory>(bytes));
    return memory.back()->ptr();
  }
};

TEST(GpuArtifact, CApiRunsFromHostAndDeviceMemory) {
  SKIP_WITHOUT_GPU();
  auto m = testing::small_mlp();  // x: f32[batch, 16] -> softmax f32[batch, 24], row sums f32[batch]
  auto c = compile_for_cuda(*m, DriverOptions{});
  const std::string path = write_cuda_artifact(*m, {cuda::device_arch()}, "capi");
  tessel_model* model = nullptr;
  tessel_load_options o{sizeof o, 0, TESSEL_DEVICE_CUDA};
  ASSERT_EQ(tessel_load(path.c_str(), &o, &model), TESSEL_OK) << tessel_last_error();
  std::filesystem::remove(path);
  EXPECT_EQ(tessel_model_device(model), TESSEL_DEVICE_CUDA);

  const int64_t batch = 5;
  Tensor x = random_f32({batch, 16}, 4);
  const std::vector<RtValue> want = c->exe->run({RtValue(x)});
  int64_t x_shape[2] = {batch, 16}, shape0[TESSEL_MAX_RANK], shape1[TESSEL_MAX_RANK];
  // From host memory: copied in and out, waited for.
  std::vector<float> y0(batch * 24), y1(batch);
  tessel_tensor in{TESSEL_F32, 2, x_shape, x.mutable_raw(), static_cast<size_t>(x.nbytes())};
  tessel_tensor out[2] = {{TESSEL_F32, 0, shape0, y0.data(), y0.size() * sizeof(float)},
                          {TESSEL_F32, 0, shape1, y1.data(), y1.size() * sizeof(float)}};
  ASSERT_EQ(tessel_run(model, &in, 1, out, 2), TESSEL_OK) << tessel_last_error();
  EXPECT_EQ(std::memcmp(y0.data(), want[0].tensor.raw(), want[0].tensor.nbytes()), 0);
  EXPECT_EQ(std::memcmp(y1.data(), want[1].tensor.raw(), want[1].tensor.nbytes()), 0);

  // From device memory on the caller's stream.
  DeviceBuffers d;
  tessel_tensor din{TESSEL_F32, 2, x_shape, reinterpret_cast<void*>(d.put(x)), static_cast<size_t>(x.nbytes())};
  tessel_tensor dout[2] = {{TESSEL_F32, 0, shape0, reinterpret_cast<void*>(d.room(y0.size() * 4)), y0.size() * 4},
                           {TESSEL_F32, 0, shape1, reinterpret_cast<void*>(d.room(y1.size() * 4)), y1.size() * 4}};
  ASSERT_EQ(tessel_run_device(model, &din, 1, dout, 2, d.stream.handle()), TESSEL_OK) << tessel_last_error();
  EXPECT_EQ(std::vector<int64_t>(shape0, shape0 + dout[0].rank), (std::vector<int64_t>{batch, 24}));
  ASSERT_EQ(tessel_synchronize(model), TESSEL_OK) << tessel_last_error();
  std::vector<float> g0(y0.size()), g1(y1.size());
  d.stream.copy_to_host(g0.data(), d.memory[1]->ptr(), g0.size() * 4);
  d.stream.copy_to_host(g1.data(), d.memory[2]->ptr(), g1.size() * 4);
  d.stream.synchronize();
  EXPECT_EQ(std::memcmp(g0.data(), want[0].tensor.raw(), want[0].tensor.nbytes()), 0);
  EXPECT_EQ(std::memcmp(g1.data(), want[1].tensor.raw(), want[1].tensor.nbytes()), 0);

  // An output buffer too small for the result: refused before anything runs, its shape written.
  dout[1].nbytes = 4;
  EXPECT_EQ(tessel_run_device(model, &din, 1, dout, 2, d.stream.handle()), TESSEL_ERROR_OUTPUT);
  EXPECT_NE(std::string(tessel_last_error()).find("output 1: buffer of 4 bytes, the result needs 20"), std::string::npos)
      << tessel_last_error();
  tessel_free(model);
}

}  // namespace
}  // namespace tessel
