// Det: determinant of each square matrix in the last two dims, by LU
// decomposition with partial pivoting in double.
#include <cmath>
#include <utility>

#include "tessel/ops/math_util.h"
#include "tessel/ops/registry.h"

namespace tessel {

namespace {

using namespace mathops;

// Determinant of the m x m row-major matrix `a` (destroyed).
double det_lu(double* a, int64_t m) {
  double det = 1;
  for (int64_t col = 0; col < m; ++col) {
    int64_t piv = col;
    for (int64_t r = col + 1; r < m; ++r)
      if (std::fabs(a[r * m + col]) > std::fabs(a[piv * m + col])) piv = r;
    if (a[piv * m + col] == 0) return 0.0;
    if (piv != col) {
      for (int64_t k = 0; k < m; ++k) std::swap(a[piv * m + k], a[col * m + k]);
      det = -det;
    }
    const double p = a[col * m + col];
    det *= p;
    for (int64_t r = col + 1; r < m; ++r) {
      const double f = a[r * m + col] / p;
      for (int64_t k = col; k < m; ++k) a[r * m + k] -= f * a[col * m + k];
    }
  }
  return det;
}

void det_kernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.input(0);
  require_dtype(n, 0, x.dtype(), kFloatTypes);
  const size_t r = x.rank();
  TS_CHECK(r >= 2 && x.shape()[r - 1] == x.shape()[r - 2], n.describe(),
           ": Det needs square matrices in the last two dims, got ", dims_str(x.shape()));
  const int64_t m = x.shape()[r - 1];
  std::vector<int64_t> out_shape(x.shape().begin(), x.shape().end() - 2);
  const int64_t nb = checked_numel(out_shape);
  std::vector<double> v = to_doubles(x);
  std::vector<double> out(static_cast<size_t>(nb));
  for (int64_t b = 0; b < nb; ++b) out[b] = det_lu(v.data() + b * m * m, m);
  c.set_output(0, tensor_from_doubles(x.dtype(), out_shape, out));
}

void det_infer(InferContext& c) {
  const Node& n = c.node;
  const DType dt = c.input_dtype(0);
  if (dt != DType::Undefined) require_dtype(n, 0, dt, kFloatTypes);
  if (!c.has_shape(0)) {
    c.set_output_unknown_shape(0, dt);
    return;
  }
  const Shape& s = c.input_shape(0);
  const size_t r = s.size();
  TS_CHECK(r >= 2, n.describe(), ": Det needs rank >= 2, got ", shape_str(s));
  TS_CHECK(s[r - 1] == s[r - 2] || !s[r - 1].is_const() || !s[r - 2].is_const(), n.describe(),
           ": Det needs square matrices, got ", shape_str(s));
  c.set_output(0, dt, Shape(s.begin(), s.end() - 2));
}

}  // namespace

void register_det_ops(OpRegistry& r) {
  OpSchema s;
  s.name = "Det";
  s.min_inputs = s.max_inputs = 1;
  s.infer = det_infer;
  s.kernel = det_kernel;
  s.since_version = 11;
  r.add(s);
}

}  // namespace tessel
