// The GPU search spaces (tune/gpu_space.h) on small models of each kind: a
// tensor-core GEMM (gpu_mma), flash attention (gpu_attention), a row
// reduction and a flat elementwise kernel (gpu): the default first, no
// duplicates, every candidate valid and lowered to a kernel with that
// schedule, several different codes among them, a sample compiled by NVRTC
// (where it is available), the cap and the architecture respected. No GPU
// needed: the device is an H100's values.
#include <gtest/gtest.h>

#include <functional>
#include <iostream>
#include <set>

#include "tessel/codegen/cuda/nvrtc.h"
#include "tessel/driver/cuda_compiler.h"
#include "tessel/ir/builder.h"
#include "tessel/ops/registry.h"
#include "tessel/passes/pass_manager.h"
#include "tessel/support/strings.h"
#include "tessel/tune/gpu_space.h"

namespace tessel {
namespace {

std::unique_ptr<Model> prepared(const std::function<void(GraphBuilder&)>& build, int opset = 0) {
  auto m = std::make_unique<Model>();
  if (opset) m->opsets[""] = opset;
  GraphBuilder b(*m);
  build(b);
  run_pipeline(*m, PassOptions{});
  return m;
}

// A bf16 MatMul [m, k] x [k, n].
std::unique_ptr<Model> bf16_matmul_of(int64_t m, int64_t k, int64_t n) {
  return prepared([=](GraphBuilder& b) {
    Value* x = b.input("x", DType::BF16, {Dim(m), Dim(k)});
    Value* w = b.input("w", DType::BF16, {Dim(k), Dim(n)});
    b.output(b.op("MatMul", {x, w}));
  });
}

std::unique_ptr<Model> bf16_matmul() { return bf16_matmul_of(512, 1024, 768); }

std::unique_ptr<Model> attention() {
  return prepared([](GraphBuilder& b) {
    std::vector<Value*> qkv;
    for (const char* n : {"q", "k", "v"}) qkv.push_back(b.input(n, DType::BF16, {Dim(1), Dim(2), Dim(1024), Dim(64)}));
    b.output(b.op("Attention", qkv));
  }, 23);
}

std::unique_ptr<Model> softmax_rows() {
  return prepared([](GraphBuilder& b) {
    b.output(b.op("Softmax", {b.input("x", DType::F32, {Dim(64), Dim(4096)})}, {{"axis", Attribute::of_int(-1)}}));
  });
}

std::unique_ptr<Model> elementwise() {
  return prepared([](GraphBuilder& b) {
    Value* x = b.input("x", DType::BF16, {Dim(256), Dim(1024)});
    b.output(b.op("Relu", {b.op("Add", {x, x})}));
  });
}

// The model's first kernel of `kind` and its group.
struct Found {
  const FusionGroup* group = nullptr;
  const LoweredGroup* lowered = nullptr;
};
Found first_of_kind(const CompiledModel& c, const std::string& kind) {
  size_t next = 0;
  for (const FusionGroup& g : c.plan.groups) {
    if (!g.compiled) continue;
    const LoweredGroup& lg = c.lowered.at(next++);
    if (lg.schedule == kind) return {&g, &lg};
  }
  return {};
}

struct SpaceCase {
  const char* what;
  std::function<std::unique_ptr<Model>()> model;
  const char* kind;
  bool row_blocks;
};

TEST(GpuSpace, EveryKindsCandidatesAreValidLowerAndCompile) {
  const std::vector<SpaceCase> cases = {
      {"GEMM", bf16_matmul, "gpu_mma", false},
      {"attention", attention, "gpu_attention", false},
      {"row reduction", softmax_rows, "gpu", true},
      {"elementwise", elementwise, "gpu", false},
  };
  std::string why;
  const bool nvrtc = cuda::nvrtc_available(&why);
  if (!nvrtc) std::cout << "NVRTC not available (" << why << "): candidates are lowered, not compiled\n";
  const OpRegistry& reg = OpRegistry::global();
  for (const SpaceCase& sc : cases) {
    SCOPED_TRACE(sc.what);
    const std::unique_ptr<Model> m = sc.model();
    const CompiledModel c = lower_for_cuda(*m);
    const Found k = first_of_kind(c, sc.kind);
    ASSERT_TRUE(k.lowered) << "no " << sc.kind << " kernel";
    const KernelFacts f = gpu_kernel_facts(k.lowered->kernel, k.lowered->schedule);
    EXPECT_EQ(f.gpu_row_blocks, sc.row_blocks);
    EXPECT_GT(f.out_elements, 0);
    const std::vector<Schedule> space = gpu_search_space(k.lowered->sched, f, GpuDevice{});
    ASSERT_GT(space.size(), 2u);
    EXPECT_LE(space.size(), kGpuSpaceCap);
    EXPECT_EQ(space.front(), k.lowered->sched);
    EXPECT_EQ(gpu_search_space(k.lowered->sched, f, GpuDevice{}), space) << "not deterministic";
    std::set<std::string> texts, sources;
    for (size_t i = 0; i < space.size(); ++i) {
      const Schedule& s = space[i];
      SCOPED_TRACE(print_schedule(s));
      EXPECT_TRUE(texts.insert(print_schedule(s)).second) << "a duplicate";
      EXPECT_NO_THROW(check_schedule(s));
      LoweredGroup lg;
      ASSERT_NO_THROW(lg = lower_cuda_group(*k.group, reg, "sm_90a", s, {}));
      EXPECT_EQ(lg.sched, s);
      EXPECT_EQ(lg.default_hash, k.lowered->default_hash);
      // The whole model with this candidate for its kernel.
      LowerOptions lo;
      const std::string hash = k.lowered->default_hash;
      lo.schedules = [&](const std::string& h, const std::string&) {
        return h == hash ? std::optional<Schedule>(s) : std::nullopt;
      };
      const std::string source = emit_cuda(*m, "sm_90a", lo);
      sources.insert(source);
      // A sample (every fifth, and the last) through NVRTC.
      if (nvrtc && (i % 5 == 0 || i + 1 == space.size()))
        EXPECT_NO_THROW(cuda::compile_to_ptx(source, cuda::NvrtcOptions{}));
    }
    EXPECT_GE(sources.size(), 2u) << "no candidate changes the code";
  }
}

TEST(GpuSpace, KnobsFollowTheKernelAndTheArchitecture) {
  const std::unique_ptr<Model> gemm = bf16_matmul(), att = attention(), rows = softmax_rows(), flat = elementwise();
  // The kernel's default for the device's architecture, and its space.
  const auto space_of = [](const Model& m, const char* kind, const GpuDevice& d) {
    const CompiledModel c = lower_for_cuda(m);
    const LoweredGroup lg = lower_cuda_group(*first_of_kind(c, kind).group, OpRegistry::global(), d.arch, {}, {});
    return gpu_search_space(lg.sched, gpu_kernel_facts(lg.kernel, lg.schedule), d);
  };
  const auto any = [](const std::vector<Schedule>& space, const char* prim, const char* key, const char* value) {
    for (const Schedule& s : space)
      if (const Primitive* p = s.find(prim); p && p->attr(key) == value) return true;
    return false;
  };
  const GpuDevice h100;
  // sm_90a: wgmma on and off, TMA on and off, overlap on and off.
  const std::vector<Schedule> g = space_of(*gemm, "gpu_mma", h100);
  for (const char* key : {"wgmma", "tma", "overlap"})
    for (const char* v : {"0", "1"}) EXPECT_TRUE(any(g, "gpu.gemm", key, v)) << key << "=" << v;
  EXPECT_TRUE(any(g, "gpu.gemm", "fill_blocks", "132")) << "one wave of the device's multiprocessors";
  // Another architecture has no wgmma: the GEMM's space has none, the flash kernel has one form.
  GpuDevice ampere;
  ampere.arch = "sm_80";
  ampere.sm_count = 108;
  EXPECT_FALSE(any(space_of(*gemm, "gpu_mma", ampere), "gpu.gemm", "wgmma", "1"));
  EXPECT_TRUE(any(space_of(*gemm, "gpu_mma", ampere), "gpu.gemm", "fill_blocks", "108"));
  EXPECT_EQ(space_of(*att, "gpu_attention", ampere).size(), 1u);
  EXPECT_TRUE(any(space_of(*att, "gpu_attention", h100), "gpu.flash", "wgmma", "0"));
  // A row reduction tries its row cache and a thread per row; a flat kernel its block size and vector width.
  const std::vector<Schedule> r = space_of(*rows, "gpu", h100), e = space_of(*flat, "gpu", h100);
  EXPECT_TRUE(any(r, "gpu.rows", "row_cache", "0"));
  EXPECT_TRUE(any(r, "gpu.rows", "lanes", "0"));
  EXPECT_FALSE(any(e, "gpu.rows", "row_cache", "0"));
  EXPECT_FALSE(any(e, "gpu.rows", "lanes", "0"));
  for (const char* t : {"64", "1024"}) EXPECT_TRUE(any(e, "gpu.rows", "threads", t)) << t;
  for (const char* v : {"4", "8", "16"}) EXPECT_TRUE(any(e, "gpu.rows", "vector_bytes", v)) << v;
  GpuDevice small = h100;
  small.max_threads_per_block = 256;
  EXPECT_FALSE(any(space_of(*flat, "gpu", small), "gpu.rows", "threads", "512"));
}

// The tile knobs (gpu.gemm bk, stages, tma_bn), one at a time, with only
// the values that change the kernel's plan.
TEST(GpuSpace, TileKnobsOnlyWhereTheyChangeThePlan) {
  const auto tile_values = [](const Model& m) {
    const CompiledModel c = lower_for_cuda(m);
    const LoweredGroup& lg = *first_of_kind(c, "gpu_mma").lowered;
    std::set<std::string> out;
    for (const Schedule& s : gpu_search_space(lg.sched, gpu_kernel_facts(lg.kernel, lg.schedule), GpuDevice{})) {
      const Primitive* g = s.find("gpu.gemm");
      for (const char* key : {"bk", "stages", "tma_bn"})
        if (g && g->attr(key) && g->attr(key) != lg.sched.find("gpu.gemm")->attr(key))
          out.insert(str_cat(key, "=", *g->attr(key)));
    }
    return out;
  };
  // 512 x 768 in 32 x 64 tiles (mma.sync, K 1024 in steps of 64, 4 stages): BK 32 and fewer stages change it.
  EXPECT_EQ(tile_values(*bf16_matmul()), (std::set<std::string>{"bk=32", "stages=2", "stages=3"}));
  // 2048 x 2048 on the TMA kernel (BN 256, 4 stages): BN 128 and fewer stages; BK is always 64 there.
  EXPECT_EQ(tile_values(*bf16_matmul_of(2048, 1024, 2048)),
            (std::set<std::string>{"stages=2", "stages=3", "tma_bn=128"}));
}

TEST(GpuSpace, TheCapKeepsTheDefaultAndTheNearestCandidates) {
  const std::unique_ptr<Model> m = bf16_matmul();
  const CompiledModel c = lower_for_cuda(*m);
  const LoweredGroup& lg = *first_of_kind(c, "gpu_mma").lowered;
  const KernelFacts f = gpu_kernel_facts(lg.kernel, lg.schedule);
  const std::vector<Schedule> all = gpu_search_space(lg.sched, f, GpuDevice{}, 1000);
  ASSERT_GT(all.size(), kGpuSpaceCap) << "the test wants a space the cap cuts";
  const std::vector<Schedule> five = gpu_search_space(lg.sched, f, GpuDevice{}, 5);
  ASSERT_EQ(five.size(), 5u);
  EXPECT_TRUE(std::equal(five.begin(), five.end(), all.begin())) << "the cap keeps a prefix of the order";
  // Single-knob changes come first.
  for (size_t i = 1; i < five.size(); ++i) {
    size_t changed = 0;
    const Primitive& a = *five[i].find("gpu.gemm");
    for (const auto& [key, value] : a.attrs) changed += lg.sched.find("gpu.gemm")->attr(key) != value;
    EXPECT_EQ(changed, 1u) << print_schedule(five[i]);
  }
  // A kind without a space: only its default.
  Schedule nest{"nest", {}};
  EXPECT_EQ(gpu_search_space(nest, KernelFacts{}, GpuDevice{}), std::vector<Schedule>{nest});
}

}  // namespace
}  // namespace tessel
