// The CUDA code-generation switches that were environment variables
// (TESSEL_CUDA_WGMMA, _TMA, _TMA_MIN_K, _WGMMA_OVERLAP, _FLASH, _FLASH_WGMMA,
// _ROW_CACHE) are knobs of the compile options: each, set on a model that
// exercises it, changes the generated CUDA source (and so the NVRTC cubin
// cache key, a digest of the source) and the whole-model cache key's mode.
// No GPU needed: this is code generation only.
#include <gtest/gtest.h>

#include <functional>

#include "tessel/driver/cuda_compiler.h"
#include "tessel/driver/model_cache.h"
#include "tessel/ir/builder.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

using ModelFn = std::function<std::unique_ptr<Model>()>;

// A bf16 MatMul [m, k] x [k, n] of inputs (the GPU GEMM templates).
ModelFn matmul(int64_t m, int64_t k, int64_t n) {
  return [=] {
    auto model = std::make_unique<Model>();
    GraphBuilder b(*model);
    Value* x = b.input("x", DType::BF16, {Dim(m), Dim(k)});
    Value* w = b.input("w", DType::BF16, {Dim(k), Dim(n)});
    b.output(b.op("MatMul", {x, w}));
    run_pipeline(*model, PassOptions{});
    return model;
  };
}

// One bf16 Attention node (opset 23) over `keys` keys, head size 64.
ModelFn attention(int64_t keys) {
  return [=] {
    auto model = std::make_unique<Model>();
    model->opsets[""] = 23;
    GraphBuilder b(*model);
    Value* q = b.input("q", DType::BF16, {Dim(1), Dim(2), Dim(keys), Dim(64)});
    Value* k = b.input("k", DType::BF16, {Dim(1), Dim(2), Dim(keys), Dim(64)});
    Value* v = b.input("v", DType::BF16, {Dim(1), Dim(2), Dim(keys), Dim(64)});
    b.output(b.op("Attention", {q, k, v}));
    run_pipeline(*model, PassOptions{});
    return model;
  };
}

// Softmax over rows of 4096 (the GPU row schedule).
ModelFn softmax_rows() {
  return [] {
    auto model = std::make_unique<Model>();
    GraphBuilder b(*model);
    Value* x = b.input("x", DType::F32, {Dim(64), Dim(4096)});
    b.output(b.op("Softmax", {x}, {{"axis", Attribute::of_int(-1)}}));
    run_pipeline(*model, PassOptions{});
    return model;
  };
}

std::vector<Primitive> knobs(std::initializer_list<const char*> texts) {
  std::vector<Primitive> out;
  for (const char* t : texts) out.push_back(parse_knob(t));
  return out;
}

struct FormerSwitch {
  const char* env;           // the environment variable it replaces
  ModelFn model;             // a model whose code depends on it
  std::vector<Primitive> base;  // knobs both sides share (e.g. TMA off to reach the cp.async path)
  const char* knob;
};

TEST(CudaKnobs, EachFormerEnvironmentSwitchChangesTheCodeAndTheCacheKey) {
  const std::vector<FormerSwitch> switches = {
      {"TESSEL_CUDA_WGMMA", matmul(2048, 1024, 2048), {}, "gpu.gemm.wgmma=0"},
      {"TESSEL_CUDA_TMA", matmul(2048, 1024, 2048), {}, "gpu.gemm.tma=0"},
      // With a cheap epilogue, tma_min_k_cheap decides; made unreachable, tma_min_k does.
      {"TESSEL_CUDA_TMA_MIN_K", matmul(2048, 1024, 2048), knobs({"gpu.gemm.tma_min_k_cheap=100000"}),
       "gpu.gemm.tma_min_k=100000"},
      {"TESSEL_CUDA_WGMMA_OVERLAP", matmul(2048, 512, 512), knobs({"gpu.gemm.tma=0"}), "gpu.gemm.overlap=0"},
      {"TESSEL_CUDA_FLASH", attention(256), {}, "gpu.flash.on=0"},
      {"TESSEL_CUDA_FLASH_WGMMA", attention(1024), {}, "gpu.flash.wgmma=0"},
      {"TESSEL_CUDA_ROW_CACHE", softmax_rows(), {}, "gpu.rows.row_cache=0"},
  };
  for (const FormerSwitch& s : switches) {
    SCOPED_TRACE(std::string(s.env) + " -> --knob " + s.knob);
    std::vector<Primitive> with = s.base;
    with.push_back(parse_knob(s.knob));
    const std::string before = emit_cuda(*s.model(), "sm_90a", s.base);
    const std::string after = emit_cuda(*s.model(), "sm_90a", with);
    EXPECT_TRUE(before != after) << "the knob did not change the generated CUDA";
    DriverOptions o;
    o.target = Target::Cuda;
    o.knobs = s.base;
    const std::string mode_before = model_cache_mode("compile", o);
    o.knobs = with;
    EXPECT_TRUE(mode_before != model_cache_mode("compile", o)) << "the knob is not in the cache key";
  }
}

// The same knob given twice: the last one wins, as on the command line.
TEST(CudaKnobs, TheLastValueOfAKnobWins) {
  const ModelFn m = matmul(2048, 1024, 2048);
  EXPECT_TRUE(emit_cuda(*m(), "sm_90a", knobs({"gpu.gemm.tma=0", "gpu.gemm.tma=1"})) ==
              emit_cuda(*m(), "sm_90a", {}));
  EXPECT_TRUE(emit_cuda(*m(), "sm_90a", knobs({"gpu.gemm.tma=1", "gpu.gemm.tma=0"})) ==
              emit_cuda(*m(), "sm_90a", knobs({"gpu.gemm.tma=0"})));
}

}  // namespace
}  // namespace tessel
