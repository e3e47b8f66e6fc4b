// Tensor-core GEMMs (codegen/cuda/mma_gemm.h) on the GPU against the loop
// IR evaluator: every shape of mma_test_kernels.h's gemm_cases (sizes 1, 7,
// 64, 129, 300 in every dimension, batches of 3, both layouts of each
// operand, bias+relu epilogues) in f32 (3xTF32), bf16 and f16, within
// compare_gemm's bound (1e-5 of Σ_k |a b| plus one ulp of the output type);
// K = 0; a batch beyond gridDim.y's limit; a failing epilogue assert; and
// the lowered groups of small models (MatMul, Gemm+bias+Relu, attention,
// Conv+bias+Relu, bf16 MatMul) within the f32 tolerance of the model tests.
// Every test skips where there is no GPU or no NVRTC.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "gpu_test_util.h"
#include "cuda_test_kernels.h"
#include "mma_test_kernels.h"
#include "tessel/codegen/cuda/driver_api.h"
#include "tessel/codegen/cuda/gpu_runner.h"
#include "tessel/codegen/cuda/nvrtc.h"
#include "tessel/loop/printer.h"

namespace tessel::cuda {
namespace {

using namespace tessel::mma_testing;  // NOLINT

std::vector<int64_t> syms_of(const GemmCase& c) {
  return c.m_symbolic ? std::vector<int64_t>{c.M} : std::vector<int64_t>{};
}

void expect_cases_match(const std::vector<GemmCase>& cases) {
  std::vector<loop::Kernel> ks;
  for (const GemmCase& c : cases) ks.push_back(gemm_case_kernel(c));
  GpuKernels gpu(ks);
  // One seed: the evaluator's reference is the slow part (about 50M
  // multiply-adds per precision, twice).
  for (const GemmCase& c : cases) {
    std::vector<std::vector<uint8_t>> bufs = gemm_case_inputs(c, 1);
    const GemmReference want = gemm_reference(c, bufs);
    ASSERT_EQ(gpu.run(c.name, pointers(bufs), syms_of(c)), 0) << c.name;
    EXPECT_EQ(compare_gemm(c, bufs[3], want), "") << loop::print(gemm_case_kernel(c));
  }
}

// wgmma (sm_90a only): the tiles of the host emulation's cases
// (MmaEmulation.Wgmma) and larger ones, planned for a machine of 4
// multiprocessors so that small grids still take 128 x 128 tiles.
std::vector<GemmCase> wgmma_cases() {
  return {
      {"wg_128x128", DType::BF16, 2, 130, 136, 600, false, false, true, DType::BF16, false},
      {"wg_128x64_t", DType::F16, 4, 70, 64, 96, false, true, false, DType::F32, false},
      {"wg_64x128", DType::BF16, 2, 60, 136, 72, false, false, false, DType::F32, false},
      {"wg_64x64_t", DType::BF16, 4, 40, 56, 24, false, true, true, DType::F32, false},
      {"wg_big", DType::BF16, 1, 300, 512, 520, false, false, false, DType::F32, false},
      {"wg_big_t", DType::F16, 3, 200, 264, 520, false, true, true, DType::F16, false},
  };
}

GemmTarget small_hopper() {
  GemmTarget t;
  t.wgmma = true;
  t.tma = false;  // the cp.async pipeline (TmaMatchesTheEvaluator has the TMA kernel)
  t.fill_blocks = 4;
  return t;
}

// The warp-specialised TMA kernel (MmaPlan::tma) for every GEMM of these
// cases: a machine of 3 multiprocessors, so that each block walks several
// tiles and the stage ring wraps from one tile into the next.
GemmTarget tma_hopper() {
  GemmTarget t;
  t.wgmma = true;
  t.fill_blocks = 1;
  t.tma_min_k = t.tma_min_k_cheap = 0;
  t.sm_count = 3;
  return t;
}

// Both B layouts (N-major: 64-column TMA boxes; K-major: one box), 128- and
// 256-column tiles (N <= 128 or not), batches (3-d tensor maps), edges in
// every dimension (M, N not multiples of the tile, K of 64, K < 64), bf16
// and f16, epilogues with bias + ReLU and narrow outputs.
std::vector<GemmCase> tma_cases() {
  return {
      {"tma_n256", DType::BF16, 2, 200, 264, 200, false, false, true, DType::BF16, false},
      {"tma_n256_t", DType::F16, 3, 130, 264, 136, false, true, true, DType::F16, false},
      {"tma_n128", DType::BF16, 2, 130, 128, 136, false, false, false, DType::F32, false},
      {"tma_n128_t", DType::BF16, 1, 70, 72, 24, false, true, false, DType::F32, false},
      {"tma_long_k", DType::BF16, 1, 130, 136, 1000, false, false, false, DType::F32, false},
  };
}

TEST(GpuMma, WgmmaMatchesTheEvaluator) {
  SKIP_WITHOUT_GPU();
  if (!arch_has_wgmma(device_arch())) GTEST_SKIP() << "wgmma needs sm_90a, the device is " << device_arch();
  const std::vector<GemmCase> cases = wgmma_cases();
  std::vector<loop::Kernel> ks;
  for (const GemmCase& c : cases) ks.push_back(gemm_case_kernel(c));
  GpuKernels gpu(ks, small_hopper());
  EXPECT_NE(gpu.source().code.find("wgmma on 128-byte swizzled tiles"), std::string::npos);
  for (const GemmCase& c : cases) {
    std::vector<std::vector<uint8_t>> bufs = gemm_case_inputs(c, 3);
    const GemmReference want = gemm_reference(c, bufs);
    ASSERT_EQ(gpu.run(c.name, pointers(bufs), syms_of(c)), 0) << c.name;
    EXPECT_EQ(compare_gemm(c, bufs[3], want), "") << c.name;
  }
}

TEST(GpuMma, TmaMatchesTheEvaluator) {
  SKIP_WITHOUT_GPU();
  if (!arch_has_wgmma(device_arch())) GTEST_SKIP() << "wgmma needs sm_90a, the device is " << device_arch();
  const std::vector<GemmCase> cases = tma_cases();
  std::vector<loop::Kernel> ks;
  for (const GemmCase& c : cases) ks.push_back(gemm_case_kernel(c));
  GpuKernels gpu(ks, tma_hopper());
  for (const KernelSource& k : gpu.source().kernels) EXPECT_EQ(k.tensor_maps.size(), 2u) << k.kernel_name;
  for (const GemmCase& c : cases) {
    std::vector<std::vector<uint8_t>> bufs = gemm_case_inputs(c, 5);
    const GemmReference want = gemm_reference(c, bufs);
    ASSERT_EQ(gpu.run(c.name, pointers(bufs), syms_of(c)), 0) << c.name;
    EXPECT_EQ(compare_gemm(c, bufs[3], want), "") << c.name;
  }
}

// The SASS (cuobjdump --dump-sass, from the toolkit) of `ks` for sm_90a.
std::string sass_of(const std::vector<loop::Kernel>& ks, const GemmTarget& target) {
  NvrtcOptions o;
  o.arch = "sm_90a";
  const Cubin cubin = compile_to_cubin(emit_cuda_source(ks, target).code, o);
  const std::string path = ::testing::TempDir() + "tessel_wgmma.cubin";
  {
    FILE* f = std::fopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    if (!f) return "";
    std::fwrite(cubin.image.data(), 1, cubin.image.size(), f);
    std::fclose(f);
  }
  FILE* p = popen(("cuobjdump --dump-sass " + path).c_str(), "r");
  EXPECT_NE(p, nullptr);
  std::string sass;
  if (!p) return sass;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) sass.append(buf, n);
  EXPECT_EQ(pclose(p), 0);
  std::remove(path.c_str());
  return sass;
}

size_t occurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = 0; (at = text.find(what, at)) != std::string::npos; ++at) ++n;
  return n;
}

// The wgmma kernels' SASS holds HGMMA: the warpgroup instructions, not
// mma.sync's HMMA; the TMA kernels' also the tensor copies (UTMALDG), the
// register reallocation (USETMAXREG) and m64n256 wgmmas.
TEST(GpuMma, WgmmaIsHgmmaInTheSass) {
  SKIP_WITHOUT_GPU();
  if (!arch_has_wgmma(device_arch())) GTEST_SKIP() << "wgmma needs sm_90a, the device is " << device_arch();
  if (std::system("cuobjdump --version > /dev/null 2>&1") != 0) GTEST_SKIP() << "no cuobjdump on PATH";
  std::vector<loop::Kernel> ks;
  for (const GemmCase& c : wgmma_cases()) ks.push_back(gemm_case_kernel(c));
  const std::string sass = sass_of(ks, small_hopper());
  EXPECT_GE(occurrences(sass, "HGMMA.64x"), 4 * ks.size()) << sass.substr(0, 2000);
  std::vector<loop::Kernel> tma;
  for (const GemmCase& c : tma_cases()) tma.push_back(gemm_case_kernel(c));
  const std::string tma_sass = sass_of(tma, tma_hopper());
  EXPECT_GE(occurrences(tma_sass, "HGMMA.64x256x16"), 4u);
  EXPECT_GE(occurrences(tma_sass, "UTMALDG"), 2 * tma.size());
  EXPECT_GE(occurrences(tma_sass, "USETMAXREG"), 2 * tma.size());
}

// The flash-attention kernels (codegen/cuda/flash_attention.cpp) against the
// evaluator's attention statement, within the half type's rounding of each
// probability: bf16 with a mask that empties a row, f16 at head size 128
// with a causal bias over several key tiles and query blocks (mma.sync:
// fewer keys than GemmTarget::flash_wgmma_min_keys); on sm_90a, 600 keys
// take the warp-specialised wgmma form, without a bias (the scale in the
// exponent, full tiles copied unclamped) and with a mask.
TEST(GpuFlash, MatchesTheEvaluator) {
  SKIP_WITHOUT_GPU();
  struct Flash {
    const char* t;
    int64_t batch, m, n, d, e;
    const char* bias;
  };
  const Flash cases[] = {{"bf16", 3, 70, 100, 32, 16, "select(i == 5 | j > i + 40, -inff32, 0.0f32)"},
                         {"f16", 2, 130, 300, 128, 128, "select(j > i + 170, -inff32, 0.0f32)"},
                         {"bf16", 2, 200, 600, 128, 128, "0.0f32"},
                         {"bf16", 3, 140, 600, 64, 64, "select(j > i + 400, -inff32, 0.0f32)"}};
  std::vector<loop::Kernel> ks;
  for (const Flash& f : cases) {
    ks.push_back(loop::parse_kernel(str_cat(
        "kernel flash_", f.t, "_", f.n, "_", f.d, "(in %q: ", f.t, "[", f.batch, ", ", f.m, ", ", f.d, "], in %k: ", f.t, "[", f.batch, ", ",
        f.n, ", ", f.d, "], in %v: ", f.t, "[", f.batch, ", ", f.n, ", ", f.e, "], out %o: f32[", f.batch, ", ", f.m,
        ", ", f.e, "]) {\n  attention bh in [0, ", f.batch, "), i in [0, ", f.m, "), j in [0, ", f.n, "), d in [0, ",
        f.d, "), e in [0, ", f.e, "): acc = softmax_dot(cast<f32>(q[bh, i, d]), cast<f32>(k[bh, j, d]), "
        "cast<f32>(v[bh, j, e]), 0.125f32, ", f.bias, ", ", f.t, ") {\n    o[bh, i, e] = acc\n  }\n}\n")));
  }
  GpuKernels gpu(ks);
  if (arch_has_wgmma(device_arch())) {
    const size_t ws = occurrences(gpu.source().code, "wgmma, warp-specialised");
    EXPECT_EQ(ws, 2u);
  }
  std::mt19937_64 rng(9);
  std::uniform_real_distribution<float> dist(-2.0f, 2.0f);
  for (size_t c = 0; c < ks.size(); ++c) {
    const Flash& f = cases[c];
    const bool bf = std::string(f.t) == "bf16";
    const auto halves = [&](int64_t n) {
      std::vector<uint8_t> b(static_cast<size_t>(2 * n));
      for (int64_t i = 0; i < n; ++i) {
        const float x = dist(rng);
        const uint16_t h = bf ? f32_to_bf16_bits(x) : f32_to_f16_bits(x);
        std::memcpy(&b[static_cast<size_t>(2 * i)], &h, 2);
      }
      return b;
    };
    std::vector<std::vector<uint8_t>> bufs = {halves(f.batch * f.m * f.d), halves(f.batch * f.n * f.d),
                                              halves(f.batch * f.n * f.e),
                                              std::vector<uint8_t>(static_cast<size_t>(4 * f.batch * f.m * f.e), 0xff)};
    std::vector<float> want(static_cast<size_t>(f.batch * f.m * f.e));
    ASSERT_EQ(loop::run_kernel(ks[c], {bufs[0].data(), bufs[1].data(), bufs[2].data(), want.data()}, {}), 0);
    ASSERT_EQ(gpu.run(ks[c].name, pointers(bufs), {}), 0) << ks[c].name;
    std::vector<float> got(want.size());
    std::memcpy(got.data(), bufs[3].data(), bufs[3].size());
    double worst = 0;
    for (size_t x = 0; x < got.size(); ++x)
      worst = std::max(worst, std::fabs(static_cast<double>(got[x]) - want[x]) / (1.0 + std::fabs(want[x])));
    EXPECT_LT(worst, 1e-2) << ks[c].name;
  }
}

TEST(GpuMma, Tf32x3MatchesTheEvaluator) {
  SKIP_WITHOUT_GPU();
  expect_cases_match(gemm_cases(DType::F32));
}

TEST(GpuMma, Bf16MatchesTheEvaluator) {
  SKIP_WITHOUT_GPU();
  expect_cases_match(gemm_cases(DType::BF16));
}

TEST(GpuMma, F16MatchesTheEvaluator) {
  SKIP_WITHOUT_GPU();
  expect_cases_match(gemm_cases(DType::F16));
}

// K = 0: every output is the epilogue of 0; M = 0: nothing runs.
TEST(GpuMma, EmptyKAndEmptyM) {
  SKIP_WITHOUT_GPU();
  GemmCase empty_k{"empty_k", DType::F32, 3, 5, 7, 0, false, false, true, DType::F32, true};
  expect_cases_match({empty_k});
  GemmCase empty_m{"empty_m", DType::BF16, 3, 0, 7, 9, false, false, false, DType::BF16, true};
  expect_cases_match({empty_m});
}

// 70000 batch entries of one 16-row tile: more than gridDim.y's 65535, so
// the kernel's grid-stride loop takes the rest.
TEST(GpuMma, BatchBeyondTheGridLimit) {
  SKIP_WITHOUT_GPU();
  expect_cases_match({{"many", DType::BF16, 70000, 1, 8, 8, false, false, false, DType::F32, false}});
}

TEST(GpuMma, EpilogueAssertReturnsItsNumber) {
  SKIP_WITHOUT_GPU();
  const loop::Kernel k = loop::parse_kernel(
      "kernel asserting(in %a: f32[40, 20], in %b: f32[20, 30], out %o: f32[40, 30]) {\n"
      "  assert true, \"first\"\n"
      "  contract bb in [0, 1), i in [0, 40), j in [0, 30), k in [0, 20): acc = dot(a[i, k], b[k, j]) {\n"
      "    assert acc < 1000.0f32, \"too large\"\n    o[i, j] = acc\n  }\n}\n");
  GpuKernels gpu({k});
  std::vector<float> a(800, 0.5f), b(600, 0.5f), o(1200);
  EXPECT_EQ(gpu.run(k.name, {a.data(), b.data(), o.data()}, {}), 0);
  EXPECT_EQ(o[0], 5.0f);
  a[7 * 20 + 3] = 1e6f;  // row 7 exceeds the bound
  EXPECT_EQ(gpu.run(k.name, {a.data(), b.data(), o.data()}, {}), 2);
  a[7 * 20 + 3] = 0.5f;
  EXPECT_EQ(gpu.run(k.name, {a.data(), b.data(), o.data()}, {}), 0);  // the next launch is fine
}

// |got - want| <= rel (max |want| + |want|) per output of a lowered group.
std::string compare_group_outputs(const loop::Kernel& k, cuda_testing::HostBuffers& got,
                                  cuda_testing::HostBuffers& want, double rel) {
  for (size_t p = k.num_inputs; p < k.params.size(); ++p) {
    const DType t = k.params[p]->dtype;
    const size_t n = want.data[p].size() / dtype_storage_size(t);
    double max_abs = 0;
    for (size_t i = 0; i < n; ++i) max_abs = std::max(max_abs, std::fabs(element(want.data[p], t, i)));
    for (size_t i = 0; i < n; ++i) {
      const double g = element(got.data[p], t, i), w = element(want.data[p], t, i);
      if (!(std::fabs(g - w) <= rel * (max_abs + std::fabs(w))))
        return str_cat(k.name, ": output ", k.params[p]->name, "[", i, "] is ", g, ", expected ", w);
    }
  }
  return "";
}

TEST(GpuMma, LoweredGroupsMatchTheEvaluator) {
  SKIP_WITHOUT_GPU();
  struct GroupCase {
    const char* name;
    DType t;
    std::function<void(GraphBuilder&, DType)> build;
  };
  const std::vector<GroupCase> cases = {
      {"matmul", DType::F32, [](GraphBuilder& b, DType t) {
         b.output(b.op("MatMul", {b.input("x", t, {37, 129}), b.input("w", t, {129, 300})}));
       }},
      {"gemm_bias_relu", DType::F32, [](GraphBuilder& b, DType t) {
         Value* g = b.op("Gemm", {b.input("x", t, {64, 300}), b.input("w", t, {7, 300}), b.input("bias", t, {7})},
                         {{"transB", Attribute::of_int(1)}});
         b.output(b.op("Relu", {g}));
       }},
      {"attention", DType::F32, [](GraphBuilder& b, DType t) {
         Value* k = b.op("Transpose", {b.input("k", t, {2, 3, 129, 64})}, {{"perm", Attribute::of_ints({0, 1, 3, 2})}});
         b.output(b.op("MatMul", {b.input("q", t, {2, 3, 129, 64}), k}));
       }},
      {"conv_bias_relu", DType::F32, [](GraphBuilder& b, DType t) {
         Value* c = b.op("Conv", {b.input("x", t, {2, 16, 15, 13}), b.input("w", t, {24, 16, 3, 3}),
                                  b.input("b", t, {24})},
                         {{"pads", Attribute::of_ints({1, 1, 1, 1})}, {"strides", Attribute::of_ints({2, 1})}});
         b.output(b.op("Relu", {c}));
       }},
      {"matmul_bf16", DType::BF16, [](GraphBuilder& b, DType t) {
         b.output(b.op("MatMul", {b.input("x", t, {9, 300}), b.input("w", t, {300, 129})}));
       }},
  };
  for (const GroupCase& gc : cases) {
    Model m;
    GraphBuilder b(m);
    gc.build(b, gc.t);
    std::vector<loop::Kernel> ks;
    for (const LoweredGroup& lg : cuda_testing::lowered_gpu_groups(m)) ks.push_back(lg.kernel);
    ASSERT_FALSE(ks.empty()) << gc.name;
    GpuKernels gpu(ks);
    for (const loop::Kernel& k : ks) {
      cuda_testing::HostBuffers want = cuda_testing::random_buffers(k, {}, 3, false);
      cuda_testing::HostBuffers got = want;
      ASSERT_EQ(loop::run_kernel(k, want.ptrs(), {}), 0);
      ASSERT_EQ(gpu.run(k.name, got.ptrs(), {}), 0);
      // f32: the model tests' tolerance scaled down to 1e-5; bf16 outputs: one bf16 rounding.
      EXPECT_EQ(compare_group_outputs(k, got, want, gc.t == DType::F32 ? 1e-5 : std::ldexp(1.0, -7)), "")
          << gc.name;
    }
  }
}

}  // namespace
}  // namespace tessel::cuda
