// GEMM kernels (loop IR Contract statements) that the tensor-core tests
// share: tests/unit/codegen_cuda_mma_test.cpp compiles them with NVRTC and
// runs some through a host emulation of the generated code; tests/gpu/
// runs them on the GPU. Both compare with the loop IR evaluator within the
// bounds below.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "tessel/ir/tensor.h"
#include "tessel/loop/eval.h"
#include "tessel/loop/parser.h"
#include "tessel/support/error.h"

namespace tessel::mma_testing {

// out[bb, i, j] = epilogue(Σ_k a(bb, i, k) b(bb, k, j)) with a stored
// [batch, M, K] (or [batch, K, M] when a_trans) and b stored [batch, K, N]
// (or [batch, N, K] when b_trans), of type `in`; the epilogue is acc, or
// max(acc + bias[j], 0) with bias_relu, cast to `out`.
struct GemmCase {
  std::string name;
  DType in = DType::F32;
  int64_t batch = 1, M = 1, N = 1, K = 1;
  bool a_trans = false, b_trans = false;
  bool bias_relu = false;
  DType out = DType::F32;
  bool m_symbolic = false;  // M is the sym "m" (else a constant, which picks the tile size)
  // D > 0: A is stored [batch, K / D, M, D] and read as a[bb, k / D, i, k % D]
  // (attention's heads joined into K: contiguous in runs of 8, not affine in k).
  int64_t a_heads = 0;
};

inline std::string gemm_case_text(const GemmCase& c, bool abs_operands) {
  const std::string t(dtype_name(c.in)), ot(dtype_name(abs_operands ? DType::F32 : c.out));
  const std::string M = c.m_symbolic ? "m" : std::to_string(c.M);
  const std::string B = std::to_string(c.batch), N = std::to_string(c.N), K = std::to_string(c.K);
  const auto operand = [&](const std::string& load) {
    const std::string v = c.in == DType::F32 ? load : "cast<f32>(" + load + ")";
    return abs_operands ? "fabs(" + v + ")" : v;
  };
  const std::string D = std::to_string(c.a_heads);
  const std::string a = operand(c.a_heads > 0 ? "a[bb, floordiv(k, " + D + "), i, floormod(k, " + D + ")]"
                                : c.a_trans  ? "a[bb, k, i]"
                                             : "a[bb, i, k]");
  const std::string b = operand(c.b_trans ? "b[bb, j, k]" : "b[bb, k, j]");
  std::string value = c.bias_relu && !abs_operands ? "max(acc + bias[j], 0.0f32)" : "acc";
  if (!abs_operands && c.out != DType::F32) value = "cast<" + ot + ">(" + value + ")";
  const std::string a_dims = c.a_heads > 0 ? str_cat(c.K / c.a_heads, ", ", M, ", ", D)
                             : c.a_trans    ? K + ", " + M
                                            : M + ", " + K;
  return str_cat("kernel ", c.name, abs_operands ? "_abs" : "", "(in %a: ", t, "[", B, ", ", a_dims,
                 "], in %b: ", t, "[", B, ", ",
                 c.b_trans ? N + ", " + K : K + ", " + N, "], in %bias: f32[", N, "], out %o: ", ot, "[", B, ", ", M,
                 ", ", N, "])", c.m_symbolic ? " syms(m)" : "", " {\n  contract bb in [0, ", B, "), i in [0, ", M,
                 "), j in [0, ", N, "), k in [0, ", K, "): acc = dot(", a, ", ", b, ") {\n    o[bb, i, j] = ", value,
                 "\n  }\n}\n");
}

inline loop::Kernel gemm_case_kernel(const GemmCase& c) { return loop::parse_kernel(gemm_case_text(c, false)); }

// The same sums over |a| |b| (f32 out, no epilogue): the scale of each
// output's rounding error.
inline loop::Kernel gemm_case_abs_kernel(const GemmCase& c) { return loop::parse_kernel(gemm_case_text(c, true)); }

inline std::map<std::string, int64_t> gemm_case_syms(const GemmCase& c) {
  if (!c.m_symbolic) return {};
  return {{"m", c.M}};
}

// Uniform in [-1, 1] (exact in the input type), one buffer per param.
inline std::vector<std::vector<uint8_t>> gemm_case_inputs(const GemmCase& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  const auto fill = [&](DType t, int64_t n) {
    std::vector<uint8_t> d(static_cast<size_t>(n) * dtype_storage_size(t));
    for (int64_t i = 0; i < n; ++i) {
      const float f = u(rng);
      if (t == DType::F32) {
        std::memcpy(d.data() + 4 * i, &f, 4);
      } else {
        const uint16_t h = t == DType::F16 ? f32_to_f16_bits(f) : f32_to_bf16_bits(f);
        std::memcpy(d.data() + 2 * i, &h, 2);
      }
    }
    return d;
  };
  std::vector<std::vector<uint8_t>> bufs;
  bufs.push_back(fill(c.in, c.batch * c.M * c.K));
  bufs.push_back(fill(c.in, c.batch * c.K * c.N));
  bufs.push_back(fill(DType::F32, c.N));
  bufs.push_back(std::vector<uint8_t>(static_cast<size_t>(c.batch * c.M * c.N) * dtype_storage_size(c.out), 0xff));
  return bufs;
}

inline std::vector<void*> pointers(std::vector<std::vector<uint8_t>>& bufs) {
  std::vector<void*> p;
  for (auto& b : bufs) p.push_back(b.data());
  return p;
}

inline double element(const std::vector<uint8_t>& b, DType t, size_t i) {
  if (t == DType::F32) {
    float f;
    std::memcpy(&f, b.data() + 4 * i, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, b.data() + 2 * i, 2);
  return t == DType::F16 ? f16_bits_to_f32(h) : bf16_bits_to_f32(h);
}

// The reference: the evaluator's result and Σ_k |a| |b| per output.
struct GemmReference {
  std::vector<uint8_t> out;
  std::vector<float> scale;
};

inline GemmReference gemm_reference(const GemmCase& c, std::vector<std::vector<uint8_t>> inputs) {
  const std::vector<int64_t> syms = c.m_symbolic ? std::vector<int64_t>{c.M} : std::vector<int64_t>{};
  GemmReference r;
  TS_CHECK(loop::run_kernel(gemm_case_kernel(c), pointers(inputs), syms) == 0, "reference run failed");
  r.out = inputs[3];
  r.scale.resize(static_cast<size_t>(c.batch * c.M * c.N));
  inputs[3].assign(r.scale.size() * 4, 0);
  TS_CHECK(loop::run_kernel(gemm_case_abs_kernel(c), pointers(inputs), syms) == 0, "scale run failed");
  std::memcpy(r.scale.data(), inputs[3].data(), inputs[3].size());
  return r;
}

// "" when every output is within the bound, else the first that is not.
// The bound: |got - want| <= rel * Σ_k |a b| + one ulp of the output type at
// |want| (2^-23, 2^-10 or 2^-7 times |want| for f32, f16, bf16: the
// epilogue's last rounding may go either way when the sums differ), where
// rel covers both f32 summation orders: the evaluator's (k ascending, up to
// K 2^-24 relative to Σ|a b|, about sqrt(K) 2^-24 in practice) and the
// tensor cores' (short chunks summed per mma) plus, for f32, 3xTF32's
// dropped a_small b_small term and the residuals of the split (about
// 3 * 2^-22 relative per product).
inline std::string compare_gemm(const GemmCase& c, const std::vector<uint8_t>& got, const GemmReference& want,
                                double rel = 1e-5) {
  const double out_ulp = std::ldexp(1.0, c.out == DType::BF16 ? -7 : c.out == DType::F16 ? -10 : -23);
  for (size_t i = 0; i < want.scale.size(); ++i) {
    const double g = element(got, c.out, i), w = element(want.out, c.out, i);
    const double bound = rel * want.scale[i] + out_ulp * std::fabs(w) + 1e-30;
    if (!(std::fabs(g - w) <= bound))
      return str_cat(c.name, ": output ", i, " is ", g, ", expected ", w, " (bound ", bound, ", scale ",
                     want.scale[i], ")");
  }
  return "";
}

// Shapes with every size of {1, 7, 64, 129, 300} in every dimension, both
// layouts of each operand, batches of 3, the bias+relu epilogue, symbolic
// and constant M (constant M <= 64 picks the smaller tiles).
inline std::vector<GemmCase> gemm_cases(DType in) {
  const std::string p(dtype_name(in));
  const DType out = in;
  return {
      {p + "_1x7x64", in, 3, 1, 7, 64, false, false, false, out, false},
      {p + "_7x1x300", in, 3, 7, 1, 300, true, false, true, out, false},
      {p + "_64x129x7", in, 3, 64, 129, 7, false, true, false, DType::F32, true},
      {p + "_129x300x1", in, 3, 129, 300, 1, true, true, true, out, true},
      {p + "_300x64x129", in, 3, 300, 64, 129, false, false, true, DType::F32, true},
      {p + "_1x300x300", in, 1, 1, 300, 300, false, true, false, out, false},
      {p + "_300x1x64", in, 3, 300, 1, 64, true, false, false, out, true},
      {p + "_129x129x129", in, 3, 129, 129, 129, false, false, true, out, true},
      {p + "_64x64x64", in, 3, 64, 64, 64, true, true, false, DType::F32, false},
      {p + "_7x300x129", in, 3, 7, 300, 129, false, true, true, out, false},
      {p + "_300x129x300", in, 3, 300, 129, 300, false, false, false, DType::F32, true},
      // Heads joined into K (the pipeline's per-step index path), N <= 64 (128 x 64 tiles).
      {p + "_heads_200x96x256", in, 2, 200, 96, 256, false, false, true, out, false, 64},
      {p + "_heads_300x64x96", in, 2, 300, 64, 96, false, false, false, DType::F32, false, 32},
  };
}

}  // namespace tessel::mma_testing
