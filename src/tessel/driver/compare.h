// Comparing computed values with expected ones (test-onnx, demo).
//
// Floating types: |a - b| <= atol + rtol * |b| where b is the expected value;
// NaN matches NaN; an infinity must match exactly. Integers, bool and
// strings must match exactly. Dtypes and shapes must match.
#pragma once

#include <string>

#include "tessel/ops/registry.h"

namespace tessel {

struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-7;
};

// rtol, and an atol of `share` of the largest finite |expected| plus `floor`:
// for values computed in another order (f32 sums against the interpreter's
// double, another GEMM tile or pipeline), whose error scales with the
// output's magnitude rather than each element's. Non-float tensors: exact.
Tolerance scaled_tolerance(const Tensor& expected, double rtol, double share, double floor = 0);

// Returns "" when `actual` matches `expected`, else a one-line description
// of the mismatch (count of differing elements, the first one, the largest
// error).
std::string compare_tensors(const Tensor& actual, const Tensor& expected, const Tolerance& tol = {});
std::string compare_values(const RtValue& actual, const RtValue& expected, const Tolerance& tol = {});

}  // namespace tessel
