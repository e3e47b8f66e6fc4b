// Losses: NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
//
// Both take scores of shape [N, C, d1..dk] and integer targets [N, d1..dk].
// The loss of one position is -w[t] * logp[n, t, d] (0 where t equals
// ignore_index); "mean" divides the weighted sum by the sum of the weights
// that were applied, as the spec's function bodies do.
#include <cmath>

#include "tessel/ops/math_util.h"
#include "tessel/ops/registry.h"

namespace tessel {

namespace {

using namespace mathops;

enum class Reduction { None, Sum, Mean };

Reduction reduction_of(const Node& n) {
  const std::string r = n.attr_string("reduction", "mean");
  if (r == "none") return Reduction::None;
  if (r == "sum") return Reduction::Sum;
  if (r == "mean") return Reduction::Mean;
  fail(n.describe(), ": reduction must be none, sum or mean, got '", r, "'");
}

bool is_index_type(DType t) { return t == DType::I32 || t == DType::I64; }

// Applies the NLL rule to log-probabilities `logp` laid out as [N, C, D].
Tensor nll(const Node& n, const std::vector<double>& logp, const std::vector<int64_t>& score_shape,
           const Tensor& target, const Tensor* weight, DType out_t) {
  TS_CHECK(score_shape.size() >= 2, n.describe(), ": input must have rank >= 2, got ", dims_str(score_shape));
  const int64_t N = score_shape[0], C = score_shape[1];
  std::vector<int64_t> want(score_shape);
  want.erase(want.begin() + 1);
  TS_CHECK(target.shape() == want, n.describe(), ": target has shape ", dims_str(target.shape()), ", expected ",
           dims_str(want));
  check_dtype(n, 1, target.dtype(), is_index_type, "int32|int64");
  const int64_t D = N == 0 ? 0 : target.numel() / N;
  std::vector<double> w;
  if (weight) {
    require_dtype(n, 2, weight->dtype(), kFloatTypes);
    TS_CHECK(weight->rank() == 1 && weight->numel() == C, n.describe(), ": weight must have shape [", C, "], got ",
             dims_str(weight->shape()));
    w = to_doubles(*weight);
  }
  const bool has_ii = n.has_attr("ignore_index");
  const int64_t ii = n.attr_int("ignore_index", 0);
  std::vector<double> loss(static_cast<size_t>(target.numel()));
  double wsum = 0, lsum = 0;
  for (int64_t b = 0; b < N; ++b)
    for (int64_t d = 0; d < D; ++d) {
      const int64_t i = b * D + d;
      const int64_t t = target.get_i64(i);
      if (has_ii && t == ii) {
        loss[i] = 0;
        continue;
      }
      TS_CHECK(t >= 0 && t < C, n.describe(), ": target value ", t, " is out of range [0, ", C, ")");
      const double wt = weight ? w[t] : 1.0;
      loss[i] = -logp[(b * C + t) * D + d] * wt;
      wsum += wt;
      lsum += loss[i];
    }
  switch (reduction_of(n)) {
    case Reduction::None: return tensor_from_doubles(out_t, target.shape(), loss);
    case Reduction::Sum: return tensor_from_doubles(out_t, {}, {lsum});
    case Reduction::Mean: return tensor_from_doubles(out_t, {}, {lsum / wsum});
  }
  fail("unreachable");
}

void nll_kernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.input(0);
  require_dtype(n, 0, x.dtype(), kFloatTypes);
  c.set_output(0, nll(n, to_doubles(x), x.shape(), c.input(1), c.has_input(2) ? &c.input(2) : nullptr, x.dtype()));
}

void sce_kernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.input(0);
  require_dtype(n, 0, x.dtype(), kFloatTypes);
  TS_CHECK(x.rank() >= 2, n.describe(), ": scores must have rank >= 2, got ", dims_str(x.shape()));
  // log_softmax along the class axis (1).
  const AxisSplit s = split_at_axis(x.shape(), 1);
  std::vector<double> v = to_doubles(x);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      double* base = v.data() + o * s.n * s.inner + i;
      double m = -INFINITY;
      for (int64_t k = 0; k < s.n; ++k) m = std::fmax(m, base[k * s.inner]);
      double sum = 0;
      for (int64_t k = 0; k < s.n; ++k) sum += std::exp(base[k * s.inner] - m);
      const double lse = m + std::log(sum);
      for (int64_t k = 0; k < s.n; ++k) base[k * s.inner] -= lse;
    }
  c.set_output(0, nll(n, v, x.shape(), c.input(1), c.has_input(2) ? &c.input(2) : nullptr, x.dtype()));
  if (c.output_wanted(1)) c.set_output(1, tensor_from_doubles(x.dtype(), x.shape(), v));
}

void loss_infer(InferContext& c) {
  const Node& n = c.node;
  const DType dt = c.input_dtype(0);
  if (dt != DType::Undefined) require_dtype(n, 0, dt, kFloatTypes);
  if (c.input_dtype(1) != DType::Undefined) check_dtype(n, 1, c.input_dtype(1), is_index_type, "int32|int64");
  if (c.has_input(2) && c.input_dtype(2) != DType::Undefined) require_dtype(n, 2, c.input_dtype(2), kFloatTypes);
  const Reduction red = reduction_of(n);
  if (c.has_shape(0)) {
    const Shape& s = c.input_shape(0);
    TS_CHECK(s.size() >= 2, n.describe(), ": input must have rank >= 2, got ", shape_str(s));
    if (c.has_shape(1))
      TS_CHECK(c.input_shape(1).size() + 1 == s.size(), n.describe(), ": target must have rank ", s.size() - 1);
    if (c.out_types.size() > 1) c.set_output(1, dt, s);
  } else if (c.out_types.size() > 1) {
    c.set_output_unknown_shape(1, dt);
  }
  if (red != Reduction::None) c.set_output(0, dt, {});
  else if (c.has_shape(1)) c.set_output(0, dt, c.input_shape(1));
  else c.set_output_unknown_shape(0, dt);
}

OpSchema loss_schema(const char* name, KernelFn k, int max_out) {
  OpSchema s;
  s.name = name;
  s.min_inputs = 2;
  s.max_inputs = 3;
  s.max_outputs = max_out;
  s.infer = loss_infer;
  s.kernel = k;
  s.since_version = 12;
  return s;
}

}  // namespace

void register_loss_ops(OpRegistry& r) {
  r.add(loss_schema("NegativeLogLikelihoodLoss", nll_kernel, 1));
  r.add(loss_schema("SoftmaxCrossEntropyLoss", sce_kernel, 2));
}

}  // namespace tessel
