// What every GPU test shares: skip (GTEST_SKIP, reported as skipped) where
// there is no usable GPU or no NVRTC, saying which is missing.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "tessel/codegen/cuda/driver_api.h"
#include "tessel/codegen/cuda/nvrtc.h"
#include "tessel/ir/builder.h"
#include "tessel/passes/pass_manager.h"
#include "tessel/support/error.h"

#define SKIP_WITHOUT_GPU()                                                                          \
  do {                                                                                              \
    std::string why_;                                                                               \
    if (!::tessel::cuda::cuda_available(&why_)) GTEST_SKIP() << "no usable GPU: " << why_;         \
    if (!::tessel::cuda::nvrtc_available(&why_)) GTEST_SKIP() << "NVRTC not available: " << why_;  \
  } while (0)

namespace tessel::testing {

inline Tensor random_f32(std::vector<int64_t> shape, uint64_t seed) {
  Tensor t(DType::F32, std::move(shape));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> d;
  for (int64_t i = 0; i < t.numel(); ++i) t.mutable_data<float>()[i] = d(rng);
  return t;
}

// |a - b| <= 1e-4 * max|b| + 1e-4 * |b| elementwise (f32 GEMMs on the GPU
// sum in another order than the interpreter).
inline void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  double max_ref = 0;
  for (int64_t i = 0; i < want.numel(); ++i) max_ref = std::max(max_ref, std::fabs(want.get_f64(i)));
  int bad = 0;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double a = got.get_f64(i), b = want.get_f64(i);
    if (!(std::fabs(a - b) <= 1e-4 * max_ref + 1e-4 * std::fabs(b)) && bad++ < 5)
      ADD_FAILURE() << what << "[" << i << "]: gpu " << a << ", reference " << b;
  }
  EXPECT_EQ(bad, 0) << what;
}

// x[batch, in] -> MatMul(in x out) + bias -> Relu -> Softmax, and a row sum:
// a contraction with an epilogue, a reduction, and constants; `po` the
// passes (e.g. precision bf16 for the tensor-core GEMMs).
inline std::unique_ptr<Model> small_mlp(const PassOptions& po = {}, int64_t in = 16, int64_t out = 24) {
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::F32, {Dim::sym("batch"), Dim(in)});
  Value* w = b.constant(random_f32({in, out}, 7), "w");
  Value* bias = b.constant(random_f32({out}, 8), "bias");
  Value* h = b.op("Relu", {b.op("Add", {b.op("MatMul", {x, w}), bias})});
  b.output(b.op("Softmax", {h}, {{"axis", Attribute::of_int(-1)}}));
  b.output(b.op("ReduceSum", {h, b.const_i64({1})}, {{"keepdims", Attribute::of_int(0)}}));
  run_pipeline(*m, po);
  return m;
}

}  // namespace tessel::testing
