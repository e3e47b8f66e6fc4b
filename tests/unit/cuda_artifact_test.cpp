// CUDA artifacts without a GPU (driver/artifact.h make_cuda_artifact,
// runtime/cuda/gpu_artifact.h): launch records round-trip through the
// artifact's text form, the loader picks the cubin the GPU can run, a CPU
// loader refuses a CUDA artifact and the reverse, and a model compiled for
// two architectures keeps a cubin and launch table for each. Running them is
// in tests/gpu/gpu_artifact_test.cpp.
#include <gtest/gtest.h>

#include <filesystem>
#include <unistd.h>

#include "cuda_test_util.h"
#include "runtime_test_util.h"
#include "tessel/codegen/cuda/driver_api.h"
#include "tessel/driver/artifact.h"
#include "tessel/ir/builder.h"
#include "tessel/loop/printer.h"
#include "tessel/passes/pass_manager.h"
#include "tessel/runtime/cuda/gpu_artifact.h"

namespace tessel {
namespace {

std::vector<std::string> printed(const std::vector<loop::Expr>& v) {
  std::vector<std::string> out;
  for (const loop::Expr& e : v) out.push_back(loop::print(e));
  return out;
}

// Field by field, expressions by their text.
void expect_same_launch(const cuda::KernelSource& got, const cuda::KernelSource& want) {
  EXPECT_EQ(got.kernel_name, want.kernel_name);
  EXPECT_EQ(got.symbol, want.symbol);
  EXPECT_EQ(got.narrow_symbol, want.narrow_symbol);
  EXPECT_EQ(got.narrow_limit, want.narrow_limit);
  EXPECT_EQ(printed({got.launch.grid.begin(), got.launch.grid.end()}),
            printed({want.launch.grid.begin(), want.launch.grid.end()}));
  EXPECT_EQ(printed({got.launch.block.begin(), got.launch.block.end()}),
            printed({want.launch.block.begin(), want.launch.block.end()}));
  EXPECT_EQ(got.launch.shared_bytes, want.launch.shared_bytes);
  ASSERT_EQ(got.tensor_maps.size(), want.tensor_maps.size());
  for (size_t i = 0; i < got.tensor_maps.size(); ++i) {
    EXPECT_EQ(got.tensor_maps[i].param, want.tensor_maps[i].param);
    EXPECT_EQ(got.tensor_maps[i].offset, want.tensor_maps[i].offset);
    EXPECT_EQ(printed(got.tensor_maps[i].dims), printed(want.tensor_maps[i].dims));
    EXPECT_EQ(got.tensor_maps[i].strides, want.tensor_maps[i].strides);
    EXPECT_EQ(got.tensor_maps[i].box, want.tensor_maps[i].box);
  }
}

cuda::KernelSource sample_launch() {
  const loop::Expr n = loop::var("n"), s = loop::var("seq");
  cuda::KernelSource k;
  k.kernel_name = "fused_matmul_3";
  k.symbol = "tessel_fused_matmul_3";
  k.narrow_symbol = "tessel_fused_matmul_3_narrow";
  k.narrow_limit = 1 << 20;
  k.launch.grid = {loop::floordiv(n * s + loop::int_imm(DType::I64, 127), loop::int_imm(DType::I64, 128)),
                   loop::int_imm(DType::I64, 4), loop::Expr(1)};
  k.launch.block = {loop::int_imm(DType::I64, 384), loop::Expr(1), loop::Expr(1)};
  k.launch.shared_bytes = 197632;
  k.tensor_maps.push_back({1, -64, {n * s, loop::int_imm(DType::I64, 512)}, {1024}, {64, 128}});
  return k;
}

TEST(CudaArtifact, LaunchRecordsRoundTripThroughTheFile) {
  const cuda::KernelSource k = sample_launch();
  ArtifactContents a;
  a.model_ir = "model text";
  a.cuda.push_back({"sm_90a", std::string("\x7f" "ELF cubin bytes\0with a zero", 28), {artifact_launch(k, {"n", "seq"})}});
  a.cuda.push_back({"sm_80", "another image", {}});
  const ArtifactContents b = decode_artifact(encode_artifact(a));
  ASSERT_EQ(b.cuda.size(), 2u);
  EXPECT_EQ(b.cuda[0].arch, "sm_90a");
  EXPECT_EQ(b.cuda[0].image, a.cuda[0].image);
  EXPECT_EQ(b.cuda[1].image, "another image");
  ASSERT_EQ(b.cuda[0].launches.size(), 1u);
  expect_same_launch(kernel_launch(b.cuda[0].launches[0]), k);
  EXPECT_EQ(artifact_target(b), "cuda (sm_90a, sm_80)");
}

TEST(CudaArtifact, DamagedLaunchRecordsAreCorruptArtifacts) {
  ArtifactLaunch l = artifact_launch(sample_launch(), {"n", "seq"});
  ArtifactLaunch unknown = l;
  unknown.grid[0] = "batch * 2";  // not one of the launch's syms
  EXPECT_THROW(kernel_launch(unknown), Error);
  ArtifactLaunch garbled = l;
  garbled.tensor_maps[0].dims[0] = "n *";
  try {
    kernel_launch(garbled);
    ADD_FAILURE() << "a garbled expression was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("corrupt artifact (launch of 'fused_matmul_3'"), std::string::npos)
        << e.what();
  }
  ArtifactLaunch big_box = l;
  big_box.tensor_maps[0].box[0] = 1 << 20;
  EXPECT_THROW(kernel_launch(big_box), Error);
}

TEST(CudaArtifact, PicksTheCubinTheGpuRuns) {
  std::vector<ArtifactCubin> c = {{"sm_80", "", {}}, {"sm_86", "", {}}, {"sm_90a", "", {}}};
  EXPECT_EQ(pick_cubin(c, "sm_90a").arch, "sm_90a");  // its own
  EXPECT_EQ(pick_cubin(c, "sm_89").arch, "sm_86");    // same major, the highest minor not above
  EXPECT_EQ(pick_cubin(c, "sm_86").arch, "sm_86");
  // sm_90a code runs on sm_90a only; an sm_80 cubin does not run on sm_90.
  try {
    pick_cubin({{"sm_90a", "", {}}, {"sm_80", "", {}}}, "sm_100a");
    ADD_FAILURE() << "an sm_100a GPU was given a cubin";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("compiled for sm_90a, sm_80, which this GPU (sm_100a) cannot run"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(pick_cubin({{"sm_86", "", {}}}, "sm_80"), Error);  // no running newer code on an older GPU
  // The device's own version whatever the suffixes: device_arch() says
  // sm_100 on a B200, whose arch-specific cubin is sm_100a.
  EXPECT_EQ(pick_cubin({{"sm_90a", "", {}}, {"sm_100a", "", {}}}, "sm_100").arch, "sm_100a");
  EXPECT_EQ(pick_cubin({{"sm_80", "", {}}, {"sm_90", "", {}}}, "sm_90a").arch, "sm_90");
  EXPECT_EQ(pick_cubin({{"sm_100f", "", {}}}, "sm_103").arch, "sm_100f");  // family code on a later minor
  EXPECT_THROW(pick_cubin({{"sm_100a", "", {}}}, "sm_103"), Error);
  EXPECT_THROW(pick_cubin({}, "sm_90a"), Error);
}

// A model with an f32 MLP (row kernels) and a bf16 GEMM (on sm_90a: TMA
// tensor maps and wgmma), compiled for two architectures.
class CudaArtifactCompile : public ::testing::Test {
 protected:
  void SetUp() override {
    SKIP_WITHOUT_NVRTC();
    model_ = std::make_unique<Model>();
    GraphBuilder b(*model_);
    // Sizes that fill the H100's multiprocessors: the TMA kernel's condition.
    Value* x = b.input("x", DType::BF16, {2048, 512});
    Value* w = b.constant(testing::seeded_weights({512, 1024}, 3).cast(DType::BF16), "w");
    Value* y = b.op("MatMul", {x, w});
    b.output(b.op("Softmax", {b.op("Cast", {y}, {{"to", Attribute::of_int(1)}})}, {{"axis", Attribute::of_int(-1)}}));
    run_pipeline(*model_, PassOptions{});
    for (const char* arch : {"sm_90a", "sm_80"}) compiles_.push_back(compile_cuda_kernels(*model_, arch));
    path_ = (std::filesystem::temp_directory_path() / ("tessel_cuda_artifact_" + std::to_string(::getpid()) + "_" +
                                                       ::testing::UnitTest::GetInstance()->current_test_info()->name()))
                .string();
    write_file_atomically(path_, encode_artifact(make_cuda_artifact(*model_, {compiles_[0].get(), compiles_[1].get()})));
  }
  void TearDown() override {
    if (!path_.empty()) std::filesystem::remove(path_);
  }

  std::unique_ptr<Model> model_;
  std::vector<std::unique_ptr<CudaCompiledModel>> compiles_;
  std::string path_;
};

TEST_F(CudaArtifactCompile, HoldsEachArchitecturesCubinAndLaunches) {
  EXPECT_TRUE(is_cuda_artifact_file(path_));
  const ArtifactContents a = read_artifact(path_);
  ASSERT_EQ(a.cuda.size(), 2u);
  EXPECT_TRUE(a.cpu_name.empty() && a.object.empty());
  bool tensor_maps = false;
  for (size_t v = 0; v < 2; ++v) {
    const CudaCompiledModel& c = *compiles_[v];
    EXPECT_EQ(a.cuda[v].arch, c.arch);
    EXPECT_EQ(a.cuda[v].image, c.cubin);
    ASSERT_EQ(a.cuda[v].launches.size(), c.source.kernels.size());
    for (size_t k = 0; k < c.source.kernels.size(); ++k) {
      expect_same_launch(kernel_launch(a.cuda[v].launches[k]), c.source.kernels[k]);
      tensor_maps = tensor_maps || !c.source.kernels[k].tensor_maps.empty();
    }
    // Every kernel step finds its launch record.
    for (const ArtifactStep& s : a.steps) {
      if (!s.is_kernel) continue;
      bool found = false;
      for (const ArtifactLaunch& l : a.cuda[v].launches) found = found || l.entry == s.kernel.entry;
      EXPECT_TRUE(found) << s.kernel.entry << " for " << a.cuda[v].arch;
    }
  }
  EXPECT_TRUE(tensor_maps) << "the sm_90a GEMM was expected to read through TMA tensor maps";
  // The steps are the ones a CPU artifact would list: kernels over the model's values.
  const std::unique_ptr<Model> m = artifact_model(a);
  EXPECT_EQ(artifact_steps(a, *m->graph).size(), a.steps.size());
}

TEST_F(CudaArtifactCompile, EachLoaderRefusesTheOtherTarget) {
  try {
    load_artifact(path_, ExecutableOptions{});
    ADD_FAILURE() << "the CPU loader took a CUDA artifact";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is an artifact for cuda (sm_90a, sm_80), not for the CPU"), std::string::npos)
        << e.what();
  }
  ArtifactContents cpu;
  cpu.cpu_name = "znver3";
  try {
    load_cuda_artifact(cpu);
    ADD_FAILURE() << "the CUDA loader took a CPU artifact";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is an artifact for cpu (znver3), not for a GPU"), std::string::npos)
        << e.what();
  }
  if (cuda::cuda_available()) return;  // the rest is about a machine without a GPU
  try {
    load_cuda_artifact(path_);
    ADD_FAILURE() << "loaded without a GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CUDA"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessel
