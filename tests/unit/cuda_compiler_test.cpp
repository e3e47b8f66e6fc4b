// The CUDA driver path without a GPU (driver/cuda_compiler.h): a model's
// groups lowered for the GPU with re-planning (nodes without a GPU kernel go
// to the interpreter), identical kernels shared, one translation unit whose
// kernels cover every step, compiled by NVRTC to one cubin and cached.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>
#include <unistd.h>

#include "tessel/codegen/cuda/nvrtc.h"
#include "tessel/driver/cuda_compiler.h"
#include "tessel/ir/builder.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

// Two identical Add+Relu layers (one distinct kernel), a MatMul, and Det,
// which has no compiled form.
std::unique_ptr<Model> layered_model() {
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::F32, {Dim::sym("n"), 3, 3});
  Value* bias = b.const_f32({3}, {1, 2, 3}, "bias");
  Value* h = b.op("Relu", {b.op("Add", {x, bias})});
  Value* h2 = b.op("Relu", {b.op("Add", {b.op("Neg", {h}), bias})});
  Value* p = b.op("MatMul", {h2, h2});
  b.output(b.op("Det", {p}));
  b.output(b.op("Relu", {b.op("Add", {p, bias})}));
  run_pipeline(*m, PassOptions{});
  return m;
}

TEST(CudaCompiler, LowersEveryGroupButTheOnesWithoutAKernel) {
  auto m = layered_model();
  const CompiledModel c = lower_for_cuda(*m);
  size_t compiled = 0;
  std::set<std::string> interpreted;
  for (const FusionGroup& g : c.plan.groups) {
    if (g.compiled) ++compiled;
    else interpreted.insert(g.root->op);
  }
  EXPECT_EQ(interpreted, std::set<std::string>{"Det"});
  ASSERT_EQ(c.lowered.size(), compiled);
  for (const LoweredGroup& lg : c.lowered) {
    EXPECT_EQ(lg.schedule.rfind("gpu", 0), 0u) << lg.kernel.name << ": " << lg.schedule;
    // Every kernel has its compiled body among the distinct ones.
    const std::string& entry = c.entry.at(lg.kernel.name);
    bool found = false;
    for (const loop::Kernel& k : c.unique_kernels) found |= k.name == entry;
    EXPECT_TRUE(found) << entry;
  }
  EXPECT_LE(c.unique_kernels.size(), c.lowered.size());
}

// A bf16 Attention node becomes the flash kernel when its head size is a
// multiple of 16, and keeps the composed lowering (still a GPU kernel,
// nothing on the interpreter) when the kernel refuses it; with
// --knob gpu.flash.on=0 it is always the composed one.
TEST(CudaCompiler, FlashAttentionWhereTheKernelTakesIt) {
  const auto schedules = [](int64_t d, const std::vector<Primitive>& knobs = {}) {
    Model m;
    m.opsets[""] = 23;
    GraphBuilder b(m);
    std::vector<Value*> qkv;
    for (const char* n : {"q", "k", "v"}) qkv.push_back(b.input(n, DType::BF16, {Dim(1), Dim(2), Dim(40), Dim(d)}));
    b.output(b.op("Attention", qkv));
    run_pipeline(m, PassOptions{});
    std::set<std::string> out;
    LowerOptions lo;
    lo.knobs = knobs;
    const CompiledModel c = lower_for_cuda(m, lo);
    for (const LoweredGroup& lg : c.lowered) out.insert(lg.schedule);
    for (const FusionGroup& g : c.plan.groups) EXPECT_TRUE(g.compiled) << g.root->op;
    return out;
  };
  EXPECT_TRUE(cuda_flash_attention());
  EXPECT_EQ(schedules(32), std::set<std::string>{"gpu_attention"});
  EXPECT_EQ(schedules(8), std::set<std::string>{"gpu"});  // head size 8: the composed lowering
  const std::vector<Primitive> off{parse_knob("gpu.flash.on=0")};
  EXPECT_FALSE(cuda_flash_attention(off));
  EXPECT_EQ(schedules(32, off), std::set<std::string>{"gpu"});
}

TEST(CudaCompiler, CompilesOneCubinAndCachesIt) {
  std::string why;
  if (!cuda::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  const auto dir = std::filesystem::temp_directory_path() / ("tessel_cuda_compiler_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  ::setenv("TESSEL_CACHE_DIR", dir.c_str(), 1);
  auto m = layered_model();
  auto first = compile_cuda_kernels(*m, "sm_90a");
  auto second = compile_cuda_kernels(*m, "sm_90a");
  ::unsetenv("TESSEL_CACHE_DIR");
  std::filesystem::remove_all(dir);
  EXPECT_EQ(first->arch, "sm_90a");
  ASSERT_GE(first->cubin.size(), 4u);
  EXPECT_EQ(first->cubin.substr(0, 4), "\x7f" "ELF");
  EXPECT_FALSE(first->from_cache);
  EXPECT_TRUE(second->from_cache);
  EXPECT_EQ(first->cubin, second->cubin);
  // One KernelSource per distinct kernel, in order, each with its symbol in the source.
  ASSERT_EQ(first->source.kernels.size(), first->lowered.unique_kernels.size());
  for (size_t i = 0; i < first->source.kernels.size(); ++i) {
    EXPECT_EQ(first->source.kernels[i].kernel_name, first->lowered.unique_kernels[i].name);
    EXPECT_NE(first->source.code.find(first->source.kernels[i].symbol), std::string::npos);
  }
}

}  // namespace
}  // namespace tessel
