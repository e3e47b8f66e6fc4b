// Normalisation ops: BatchNormalization (inference and training mode),
// InstanceNormalization, LayerNormalization, GroupNormalization,
// RMSNormalization, LpNormalization, MeanVarianceNormalization and LRN.
// Dropout lives in norm_dropout.cpp.
//
// Statistics are computed in double with two passes (mean, then the mean of
// squared deviations), so the variance never goes negative through
// cancellation.
#include <cmath>

#include "tessel/ops/math_util.h"
#include "tessel/ops/registry.h"

namespace tessel {

void register_dropout_ops(OpRegistry& r);  // norm_dropout.cpp
void register_loss_ops(OpRegistry& r);     // loss.cpp

namespace {

using namespace mathops;

// ---- shared helpers -------------------------------------------------------------

// A per-channel parameter: exactly C values (any shape holding C elements in
// a row, e.g. [C] or [C,1,1]).
std::vector<double> channel_param(const Node& n, const Tensor& p, int64_t C, size_t input, const char* what) {
  TS_CHECK(p.numel() == C, n.describe(), ": ", what, " (input ", input, ") must have ", C, " elements, got shape ",
           dims_str(p.shape()));
  return to_doubles(p);
}

// `p` broadcast (unidirectionally, numpy rules) to `shape`, as a dense vector.
std::vector<double> expand_to(const Node& n, const Tensor& p, const std::vector<int64_t>& shape, const char* what) {
  const std::vector<int64_t>& ps = p.shape();
  TS_CHECK(ps.size() <= shape.size(), n.describe(), ": ", what, " of shape ", dims_str(ps),
           " does not broadcast to ", dims_str(shape));
  for (size_t i = 0; i < ps.size(); ++i) {
    const int64_t want = shape[shape.size() - ps.size() + i];
    TS_CHECK(ps[i] == want || ps[i] == 1, n.describe(), ": ", what, " of shape ", dims_str(ps),
             " does not broadcast to ", dims_str(shape));
  }
  const std::vector<double> v = to_doubles(p);
  const int64_t total = checked_numel(shape);
  std::vector<double> out(static_cast<size_t>(total));
  const BroadcastIndexer bi(ps, shape);
  for (int64_t i = 0; i < total; ++i) out[i] = v[bi(i)];
  return out;
}

// Scale/bias of LayerNorm and RMSNorm: usually shaped like the normalised
// trailing dims, then one `cols`-sized copy serves every row; otherwise (a
// parameter that varies along leading dims) it is expanded to all of X.
struct RowParam {
  std::vector<double> v;
  int64_t period = 0;  // element i uses v[i % period]
};
RowParam row_param(const Node& n, const Tensor& p, const std::vector<int64_t>& xs, int64_t axis, const char* what) {
  const std::vector<int64_t> tail(xs.begin() + axis, xs.end());
  const size_t lead = p.rank() > tail.size() ? p.rank() - tail.size() : 0;
  bool fits_tail = true;
  for (size_t i = 0; i < lead; ++i) fits_tail = fits_tail && p.shape()[i] == 1;
  RowParam r;
  if (fits_tail) {
    r.v = expand_to(n, p.reshaped(std::vector<int64_t>(p.shape().begin() + lead, p.shape().end())), tail, what);
    r.period = checked_numel(tail);
  } else {
    r.v = expand_to(n, p, xs, what);
    r.period = checked_numel(xs);
  }
  return r;
}

// Mean and variance (population) of m values at base[0], base[stride], ...
void moments(const double* base, int64_t m, int64_t stride, double* mean, double* var) {
  double s = 0;
  for (int64_t k = 0; k < m; ++k) s += base[k * stride];
  const double mu = s / static_cast<double>(m);
  double q = 0;
  for (int64_t k = 0; k < m; ++k) {
    const double d = base[k * stride] - mu;
    q += d * d;
  }
  *mean = mu;
  *var = q / static_cast<double>(m);
}

// X of layout [N, C, spatial...]: N, C and the spatial size.
struct NCS {
  int64_t N, C, S;
};
NCS ncs_of(const Node& n, const std::vector<int64_t>& s, size_t min_rank) {
  TS_CHECK(s.size() >= min_rank, n.describe(), ": input must have rank >= ", min_rank, ", got ", dims_str(s));
  NCS r{s[0], s.size() > 1 ? s[1] : 1, 1};
  for (size_t d = 2; d < s.size(); ++d) r.S *= s[d];
  return r;
}

void require_float_input(const Node& n, size_t i, const Tensor& t) { require_dtype(n, i, t.dtype(), kFloatTypes); }

// Same-shape float output; `extra` float inputs are validated when known.
void infer_same_float(InferContext& c, std::initializer_list<size_t> extra = {}) {
  const Node& n = c.node;
  const DType dt = c.input_dtype(0);
  if (dt != DType::Undefined) require_dtype(n, 0, dt, kFloatTypes);
  for (size_t i : extra)
    if (c.has_input(i) && c.input_dtype(i) != DType::Undefined) require_dtype(n, i, c.input_dtype(i), kFloatTypes);
  if (c.has_shape(0)) c.set_output(0, dt, c.input_shape(0));
  else c.set_output_unknown_shape(0, dt);
}

OpSchema make_schema(const char* name, int min_in, int max_in, InferFn inf, KernelFn k, int since = 1,
                     int max_out = 1) {
  OpSchema s;
  s.name = name;
  s.min_inputs = min_in;
  s.max_inputs = max_in;
  s.max_outputs = max_out;
  s.infer = inf;
  s.kernel = k;
  s.since_version = since;
  return s;
}

// ---- BatchNormalization -------------------------------------------------------------

void batchnorm_kernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.input(0);
  for (size_t i = 0; i < 5; ++i) require_float_input(n, i, c.input(i));
  const NCS d = ncs_of(n, x.shape(), 2);
  const std::vector<double> scale = channel_param(n, c.input(1), d.C, 1, "scale");
  const std::vector<double> bias = channel_param(n, c.input(2), d.C, 2, "B");
  std::vector<double> mean = channel_param(n, c.input(3), d.C, 3, "input_mean");
  std::vector<double> var = channel_param(n, c.input(4), d.C, 4, "input_var");
  const double eps = n.attr_float("epsilon", 1e-5f);
  const bool training = n.attr_int("training_mode", 0) != 0;
  std::vector<double> v = to_doubles(x);
  std::vector<double> run_mean = mean, run_var = var;
  if (training) {
    // Batch statistics per channel over N and the spatial dims.
    const double momentum = n.attr_float("momentum", 0.9f);
    const double m = static_cast<double>(d.N * d.S);
    for (int64_t ch = 0; ch < d.C; ++ch) {
      double s = 0, q = 0;
      for (int64_t b = 0; b < d.N; ++b)
        for (int64_t k = 0; k < d.S; ++k) s += v[(b * d.C + ch) * d.S + k];
      const double mu = s / m;
      for (int64_t b = 0; b < d.N; ++b)
        for (int64_t k = 0; k < d.S; ++k) {
          const double dv = v[(b * d.C + ch) * d.S + k] - mu;
          q += dv * dv;
        }
      run_mean[ch] = mean[ch] * momentum + mu * (1 - momentum);
      run_var[ch] = var[ch] * momentum + (q / m) * (1 - momentum);
      mean[ch] = mu;
      var[ch] = q / m;
    }
  }
  for (int64_t b = 0; b < d.N; ++b)
    for (int64_t ch = 0; ch < d.C; ++ch) {
      const double k = scale[ch] / std::sqrt(var[ch] + eps);
      double* p = v.data() + (b * d.C + ch) * d.S;
      for (int64_t s = 0; s < d.S; ++s) p[s] = (p[s] - mean[ch]) * k + bias[ch];
    }
  c.set_output(0, tensor_from_doubles(x.dtype(), x.shape(), v));
  // running_mean / running_var: updated in training mode, passed through otherwise.
  if (c.output_wanted(1))
    c.set_output(1, tensor_from_doubles(c.input(3).dtype(), c.input(3).shape(), run_mean));
  if (c.output_wanted(2))
    c.set_output(2, tensor_from_doubles(c.input(4).dtype(), c.input(4).shape(), run_var));
}

void batchnorm_infer(InferContext& c) {
  infer_same_float(c, {1, 2, 3, 4});
  for (size_t i = 1; i < 3 && i < c.out_types.size(); ++i) {
    const size_t src = i + 2;
    if (c.has_shape(src)) c.set_output(i, c.input_dtype(src), c.input_shape(src));
    else if (c.has_input(src)) c.set_output_unknown_shape(i, c.input_dtype(src));
  }
  if (c.has_shape(0)) {
    const Shape& s = c.input_shape(0);
    TS_CHECK(s.size() >= 2, c.node.describe(), ": input must have rank >= 2, got ", shape_str(s));
  }
}

// Before opset 14 the node had is_test/spatial/consumed_inputs attributes and
// up to five outputs (saved_mean/saved_var are training-only, dropped here).
void batchnorm_upgrade(Node& n, int64_t opset) {
  if (opset >= 14) return;
  TS_CHECK(n.attr_int("spatial", 1) == 1, n.describe(), ": BatchNormalization with spatial=0 is not supported");
  drop_attrs(n, {"spatial", "is_test", "consumed_inputs"});
  for (size_t i = 3; i < n.outputs.size(); ++i)
    if (Value* v = n.outputs[i]) {
      v->producer = nullptr;
      v->producer_output = -1;
    }
  if (n.outputs.size() > 3) n.outputs.resize(3);
}

// ---- InstanceNormalization ---------------------------------------------------------

void instancenorm_kernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.input(0);
  for (size_t i = 0; i < 3; ++i) require_float_input(n, i, c.input(i));
  const NCS d = ncs_of(n, x.shape(), 3);
  const std::vector<double> scale = channel_param(n, c.input(1), d.C, 1, "scale");
  const std::vector<double> bias = channel_param(n, c.input(2), d.C, 2, "B");
  const double eps = n.attr_float("epsilon", 1e-5f);
  std::vector<double> v = to_doubles(x);
  for (int64_t b = 0; b < d.N; ++b)
    for (int64_t ch = 0; ch < d.C; ++ch) {
      double* p = v.data() + (b * d.C + ch) * d.S;
      double mu, var;
      moments(p, d.S, 1, &mu, &var);
      const double k = scale[ch] / std::sqrt(var + eps);
      for (int64_t s = 0; s < d.S; ++s) p[s] = (p[s] - mu) * k + bias[ch];
    }
  c.set_output(0, tensor_from_doubles(x.dtype(), x.shape(), v));
}

void instancenorm_infer(InferContext& c) { infer_same_float(c, {1, 2}); }

void drop_consumed_inputs(Node& n, int64_t opset) {
  if (opset < 6) drop_attrs(n, {"consumed_inputs"});
}

// ---- LayerNormalization / RMSNormalization -----------------------------------------

// Dtype of LayerNormalization's Mean/InvStdDev outputs (stash_type).
DType stash_dtype(const Node& n) {
  DType t = DType::Undefined;
  const int64_t code = n.attr_int("stash_type", 1);
  TS_CHECK(dtype_from_onnx(static_cast<int>(code), &t) && dtype_in(t, {DType::F32, DType::BF16, DType::F16, DType::F64}),
           n.describe(), ": unsupported stash_type ", code);
  return t;
}

template <bool kRms>
void rownorm_kernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.input(0);
  require_float_input(n, 0, x);
  require_float_input(n, 1, c.input(1));
  const int64_t rank = static_cast<int64_t>(x.rank());
  const int64_t axis = normalize_axis(n.attr_int("axis", -1), rank, n);
  const AxisSplit sp = split_at_axis(x.shape(), axis);
  const int64_t rows = sp.outer, cols = sp.n * sp.inner;
  const double eps = n.attr_float("epsilon", 1e-5f);
  const RowParam scale = row_param(n, c.input(1), x.shape(), axis, "scale");
  std::optional<RowParam> bias;
  if (!kRms && c.has_input(2)) {
    require_float_input(n, 2, c.input(2));
    bias = row_param(n, c.input(2), x.shape(), axis, "B");
  }
  std::vector<double> v = to_doubles(x);
  std::vector<double> means(static_cast<size_t>(rows)), inv_std(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    double* p = v.data() + r * cols;
    double mu = 0, var;
    if (kRms) {
      double q = 0;
      for (int64_t k = 0; k < cols; ++k) q += p[k] * p[k];
      var = q / static_cast<double>(cols);
    } else {
      moments(p, cols, 1, &mu, &var);
    }
    const double is = 1.0 / std::sqrt(var + eps);
    means[r] = mu;
    inv_std[r] = is;
    for (int64_t k = 0; k < cols; ++k) {
      const int64_t flat = r * cols + k;
      double y = (p[k] - mu) * is * scale.v[flat % scale.period];
      if (bias) y += bias->v[flat % bias->period];
      p[k] = y;
    }
  }
  c.set_output(0, tensor_from_doubles(x.dtype(), x.shape(), v));
  if (kRms) return;
  std::vector<int64_t> stat_shape(x.shape().begin(), x.shape().begin() + axis);
  stat_shape.resize(x.rank(), 1);
  if (c.output_wanted(1)) c.set_output(1, tensor_from_doubles(stash_dtype(n), stat_shape, means));
  if (c.output_wanted(2)) c.set_output(2, tensor_from_doubles(stash_dtype(n), stat_shape, inv_std));
}

template <bool kRms>
void rownorm_infer(InferContext& c) {
  infer_same_float(c, {1, 2});
  if (!c.has_shape(0)) {
    for (size_t i = 1; i < c.out_types.size(); ++i) c.set_output_unknown_shape(i, stash_dtype(c.node));
    return;
  }
  const Shape& s = c.input_shape(0);
  const int64_t axis = normalize_axis(c.node.attr_int("axis", -1), static_cast<int64_t>(s.size()), c.node);
  if (kRms) return;
  Shape stat(s.begin(), s.begin() + axis);
  stat.resize(s.size(), Dim(1));
  for (size_t i = 1; i < c.out_types.size(); ++i) c.set_output(i, stash_dtype(c.node), stat);
}

// ---- GroupNormalization ------------------------------------------------------------

// scale/bias have C elements (opset 21); a GroupNormalization-18 model gives
// one per group instead, which is accepted as such (unambiguous: when G == C
// the two meanings coincide), so no upgrade is needed.
std::vector<double> group_param(const Node& n, const Tensor& p, int64_t C, int64_t G, size_t input, const char* what) {
  TS_CHECK(p.numel() == C || p.numel() == G, n.describe(), ": ", what, " (input ", input, ") must have ", C,
           " elements, got shape ", dims_str(p.shape()));
  std::vector<double> v = to_doubles(p);
  if (p.numel() == C) return v;
  std::vector<double> per_channel(static_cast<size_t>(C));
  for (int64_t ch = 0; ch < C; ++ch) per_channel[ch] = v[ch / (C / G)];
  return per_channel;
}

void groupnorm_kernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.input(0);
  for (size_t i = 0; i < 3; ++i) require_float_input(n, i, c.input(i));
  const NCS d = ncs_of(n, x.shape(), 2);
  const int64_t G = n.attr_int("num_groups", 0);
  TS_CHECK(G > 0 && d.C % G == 0, n.describe(), ": num_groups (", G, ") must be positive and divide the ", d.C,
           " channels");
  const std::vector<double> scale = group_param(n, c.input(1), d.C, G, 1, "scale");
  const std::vector<double> bias = group_param(n, c.input(2), d.C, G, 2, "bias");
  const double eps = n.attr_float("epsilon", 1e-5f);
  const int64_t cpg = d.C / G, m = cpg * d.S;
  std::vector<double> v = to_doubles(x);
  for (int64_t b = 0; b < d.N; ++b)
    for (int64_t g = 0; g < G; ++g) {
      double* p = v.data() + (b * d.C + g * cpg) * d.S;  // the group is contiguous
      double mu, var;
      moments(p, m, 1, &mu, &var);
      const double is = 1.0 / std::sqrt(var + eps);
      for (int64_t k = 0; k < m; ++k) {
        const int64_t ch = g * cpg + k / d.S;
        p[k] = (p[k] - mu) * is * scale[ch] + bias[ch];
      }
    }
  c.set_output(0, tensor_from_doubles(x.dtype(), x.shape(), v));
}

void groupnorm_infer(InferContext& c) {
  infer_same_float(c, {1, 2});
  TS_CHECK(c.node.attr_int("num_groups", 0) > 0, c.node.describe(), ": num_groups must be a positive integer");
}

// ---- LpNormalization ----------------------------------------------------------------

void lpnorm_kernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.input(0);
  require_float_input(n, 0, x);
  const int64_t p = n.attr_int("p", 2);
  TS_CHECK(p == 1 || p == 2, n.describe(), ": p must be 1 or 2, got ", p);
  const int64_t axis = normalize_axis(n.attr_int("axis", -1), static_cast<int64_t>(x.rank()), n);
  const AxisSplit s = split_at_axis(x.shape(), axis);
  std::vector<double> v = to_doubles(x);
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      double* base = v.data() + o * s.n * s.inner + i;
      double acc = 0;
      for (int64_t k = 0; k < s.n; ++k) acc += p == 1 ? std::fabs(base[k * s.inner]) : base[k * s.inner] * base[k * s.inner];
      const double norm = p == 1 ? acc : std::sqrt(acc);
      // A zero vector stays zero instead of becoming 0/0.
      for (int64_t k = 0; k < s.n; ++k) base[k * s.inner] = norm == 0 ? 0.0 : base[k * s.inner] / norm;
    }
  c.set_output(0, tensor_from_doubles(x.dtype(), x.shape(), v));
}

void lpnorm_infer(InferContext& c) {
  infer_same_float(c);
  const int64_t p = c.node.attr_int("p", 2);
  TS_CHECK(p == 1 || p == 2, c.node.describe(), ": p must be 1 or 2, got ", p);
  if (c.has_shape(0))
    normalize_axis(c.node.attr_int("axis", -1), static_cast<int64_t>(c.input_shape(0).size()), c.node);
}

// ---- MeanVarianceNormalization -------------------------------------------------------

void mvn_kernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.input(0);
  require_float_input(n, 0, x);
  const int64_t rank = static_cast<int64_t>(x.rank());
  const std::vector<int64_t> axes = normalize_axes(n.attr_ints("axes", {0, 2, 3}), rank, n);
  std::vector<bool> red(static_cast<size_t>(rank), false);
  for (int64_t a : axes) red[a] = true;
  // Group id of each element: its index over the kept dims.
  std::vector<int64_t> gstride(static_cast<size_t>(rank), 0);
  int64_t groups = 1;
  for (int64_t d = rank; d-- > 0;)
    if (!red[d]) {
      gstride[d] = groups;
      groups *= x.shape()[d];
    }
  const int64_t total = x.numel();
  std::vector<int64_t> gid(static_cast<size_t>(total));
  const std::vector<int64_t> st = strides_of(x.shape());
  for (int64_t i = 0; i < total; ++i) {
    int64_t g = 0;
    for (int64_t d = 0; d < rank; ++d) g += (i / st[d]) % x.shape()[d] * gstride[d];
    gid[i] = g;
  }
  std::vector<double> v = to_doubles(x);
  std::vector<double> sum(static_cast<size_t>(groups), 0), sq(static_cast<size_t>(groups), 0),
      cnt(static_cast<size_t>(groups), 0);
  for (int64_t i = 0; i < total; ++i) {
    sum[gid[i]] += v[i];
    cnt[gid[i]] += 1;
  }
  for (int64_t g = 0; g < groups; ++g) sum[g] /= cnt[g];
  for (int64_t i = 0; i < total; ++i) sq[gid[i]] += (v[i] - sum[gid[i]]) * (v[i] - sum[gid[i]]);
  // The spec's function adds 1e-9 to the standard deviation.
  for (int64_t i = 0; i < total; ++i)
    v[i] = (v[i] - sum[gid[i]]) / (std::sqrt(sq[gid[i]] / cnt[gid[i]]) + 1e-9);
  c.set_output(0, tensor_from_doubles(x.dtype(), x.shape(), v));
}

void mvn_infer(InferContext& c) {
  infer_same_float(c);
  if (c.has_shape(0))
    normalize_axes(c.node.attr_ints("axes", {0, 2, 3}), static_cast<int64_t>(c.input_shape(0).size()), c.node);
}

// ---- LRN ------------------------------------------------------------------------------

void lrn_kernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.input(0);
  require_float_input(n, 0, x);
  const NCS d = ncs_of(n, x.shape(), 2);
  const int64_t size = n.attr_int("size", 0);
  TS_CHECK(size > 0, n.describe(), ": size must be a positive integer, got ", size);
  const double alpha = n.attr_float("alpha", 1e-4f), beta = n.attr_float("beta", 0.75f),
               bias = n.attr_float("bias", 1.0f);
  const int64_t before = (size - 1) / 2, after = size - 1 - before;  // floor / ceil of (size-1)/2
  const std::vector<double> v = to_doubles(x);
  std::vector<double> y(v.size());
  for (int64_t b = 0; b < d.N; ++b)
    for (int64_t ch = 0; ch < d.C; ++ch) {
      const int64_t lo = std::max<int64_t>(0, ch - before), hi = std::min(d.C - 1, ch + after);
      for (int64_t s = 0; s < d.S; ++s) {
        double sq = 0;
        for (int64_t k = lo; k <= hi; ++k) {
          const double e = v[(b * d.C + k) * d.S + s];
          sq += e * e;
        }
        const int64_t i = (b * d.C + ch) * d.S + s;
        y[i] = v[i] / std::pow(bias + alpha / static_cast<double>(size) * sq, beta);
      }
    }
  c.set_output(0, tensor_from_doubles(x.dtype(), x.shape(), y));
}

void lrn_infer(InferContext& c) {
  infer_same_float(c);
  TS_CHECK(c.node.attr_int("size", 0) > 0, c.node.describe(), ": size must be a positive integer");
}

}  // namespace

void register_norm_ops(OpRegistry& r) {
  OpSchema bn = make_schema("BatchNormalization", 5, 5, batchnorm_infer, batchnorm_kernel, 1, 3);
  bn.upgrade = batchnorm_upgrade;
  r.add(bn);
  OpSchema in = make_schema("InstanceNormalization", 3, 3, instancenorm_infer, instancenorm_kernel);
  in.upgrade = drop_consumed_inputs;
  r.add(in);
  r.add(make_schema("LayerNormalization", 2, 3, rownorm_infer<false>, rownorm_kernel<false>, 17, 3));
  r.add(make_schema("RMSNormalization", 2, 2, rownorm_infer<true>, rownorm_kernel<true>, 23));
  r.add(make_schema("GroupNormalization", 3, 3, groupnorm_infer, groupnorm_kernel, 18));
  r.add(make_schema("LpNormalization", 1, 1, lpnorm_infer, lpnorm_kernel));
  r.add(make_schema("MeanVarianceNormalization", 1, 1, mvn_infer, mvn_kernel, 9));
  r.add(make_schema("LRN", 1, 1, lrn_infer, lrn_kernel));
  register_dropout_ops(r);
  register_loss_ops(r);
}

}  // namespace tessel
