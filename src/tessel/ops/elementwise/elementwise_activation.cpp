// Activation functions: Relu LeakyRelu PRelu Elu Selu Celu Sigmoid
// HardSigmoid HardSwish Softplus Softsign Mish Gelu Swish ThresholdedRelu
// Shrink SwiGLU.
#include <cmath>

#include "tessel/ops/elementwise/elementwise.h"

namespace tessel::ew {

namespace {

// Numerically safe logistic function: exp never overflows.
double sigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + std::exp(-x));
  const double e = std::exp(x);
  return e / (1.0 + e);
}

// log(1 + exp(x)) without overflow for large x.
double softplus(double x) { return std::fmax(x, 0.0) + std::log1p(std::exp(-std::fabs(x))); }

struct ReluFn {
  explicit ReluFn(const Node&) {}
  static DTypeSet types() { return kSignedNumeric; }
  double operator()(double x) const { return x < 0 ? 0.0 : x; }  // NaN passes through
  template <class T>
  T on_int(T v) const { return v < 0 ? T{0} : v; }
  std::optional<Dim> on_dim(const Dim& d) const {
    if (auto c = d.const_value()) return Dim(*c < 0 ? 0 : *c);
    if (dim_nonneg(d)) return d;
    return std::nullopt;
  }
};

struct LeakyReluFn {
  double alpha;
  explicit LeakyReluFn(const Node& n) : alpha(n.attr_float("alpha", 0.01f)) {}
  double operator()(double x) const { return x < 0 ? alpha * x : x; }
};

struct EluFn {
  double alpha;
  explicit EluFn(const Node& n) : alpha(n.attr_float("alpha", 1.0f)) {}
  double operator()(double x) const { return x < 0 ? alpha * std::expm1(x) : x; }
};

struct SeluFn {
  double alpha, gamma;
  explicit SeluFn(const Node& n)
      : alpha(n.attr_float("alpha", 1.67326319217681884765625f)),
        gamma(n.attr_float("gamma", 1.05070102214813232421875f)) {}
  double operator()(double x) const { return x <= 0 ? gamma * alpha * std::expm1(x) : gamma * x; }
};

struct CeluFn {
  double alpha;
  explicit CeluFn(const Node& n) : alpha(n.attr_float("alpha", 1.0f)) {
    TS_CHECK(alpha != 0, n.describe(), ": alpha must be non-zero");
  }
  double operator()(double x) const {
    return std::fmax(0.0, x) + std::fmin(0.0, alpha * std::expm1(x / alpha));
  }
};

struct SigmoidFn {
  explicit SigmoidFn(const Node&) {}
  double operator()(double x) const { return sigmoid(x); }
};

struct HardSigmoidFn {
  double alpha, beta;
  explicit HardSigmoidFn(const Node& n) : alpha(n.attr_float("alpha", 0.2f)), beta(n.attr_float("beta", 0.5f)) {}
  double operator()(double x) const {
    if (std::isnan(x)) return x;
    return std::fmax(0.0, std::fmin(1.0, alpha * x + beta));
  }
};

struct HardSwishFn {
  explicit HardSwishFn(const Node&) {}
  double operator()(double x) const {
    if (std::isnan(x)) return x;
    return x * std::fmax(0.0, std::fmin(1.0, x / 6.0 + 0.5));
  }
};

struct SoftplusFn {
  explicit SoftplusFn(const Node&) {}
  double operator()(double x) const { return std::isnan(x) ? x : softplus(x); }
};

struct SoftsignFn {
  explicit SoftsignFn(const Node&) {}
  double operator()(double x) const { return x / (1.0 + std::fabs(x)); }
};

struct MishFn {
  explicit MishFn(const Node&) {}
  double operator()(double x) const { return std::isnan(x) ? x : x * std::tanh(softplus(x)); }
};

struct GeluFn {
  bool tanh_approx;
  explicit GeluFn(const Node& n) {
    const std::string a = n.attr_string("approximate", "none");
    TS_CHECK(a == "none" || a == "tanh", n.describe(), ": approximate must be 'none' or 'tanh', got '", a, "'");
    tanh_approx = a == "tanh";
  }
  double operator()(double x) const {
    if (tanh_approx) {
      const double k = std::sqrt(2.0 / M_PI);
      return 0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x)));
    }
    return 0.5 * x * (1.0 + std::erf(x / std::sqrt(2.0)));
  }
};

struct SwishFn {
  double alpha;
  explicit SwishFn(const Node& n) : alpha(n.attr_float("alpha", 1.0f)) {}
  double operator()(double x) const { return x * sigmoid(alpha * x); }
};

struct ThresholdedReluFn {
  double alpha;
  explicit ThresholdedReluFn(const Node& n) : alpha(n.attr_float("alpha", 1.0f)) {}
  double operator()(double x) const { return x > alpha ? x : (std::isnan(x) ? x : 0.0); }
};

// ---- Shrink (floats and integers) ---------------------------------------------------------

constexpr DTypeSet kShrinkTypes = {DType::F16, DType::F32, DType::F64, DType::I8,  DType::I16, DType::I32,
                                   DType::I64, DType::U8,  DType::U16, DType::U32, DType::U64};

struct ShrinkFn {
  double lambd, bias;
  explicit ShrinkFn(const Node& n) : lambd(n.attr_float("lambd", 0.5f)), bias(n.attr_float("bias", 0.0f)) {}
  static DTypeSet types() { return kShrinkTypes; }
  double operator()(double x) const { return x < -lambd ? x + bias : x > lambd ? x - bias : 0.0; }
  // Integers: compared and shifted by the float attributes, then truncated
  // back into the type (as a float computation cast to T would).
  template <class T>
  T on_int(T v) const {
    const double x = static_cast<double>(v);
    const double y = x < -lambd ? x + bias : x > lambd ? x - bias : 0.0;
    if (y == x) return v;  // exact for 64-bit values beyond double precision
    return static_cast<T>(static_cast<int64_t>(std::trunc(y)));
  }
  std::optional<Dim> on_dim(const Dim&) const { return std::nullopt; }
};

// ---- PRelu: slope broadcast unidirectionally to X ---------------------------------------

constexpr DTypeSet kPReluTypes = {DType::F16, DType::F32, DType::F64, DType::BF16,
                                  DType::I32, DType::I64, DType::U32, DType::U64};

void prelu_infer(InferContext& ctx) {
  require_dtype(ctx.node, 0, ctx.input_dtype(0), kPReluTypes);
  require_same_dtype(ctx.node, 1, ctx.input_dtype(0), ctx.input_dtype(1));
  if (ctx.has_shape(0) && ctx.has_shape(1)) {
    const Shape out = broadcast_shapes(ctx.input_shape(0), ctx.input_shape(1), ctx.node);
    TS_CHECK(out.size() == ctx.input_shape(0).size(), ctx.node.describe(), ": slope of shape ",
             shape_str(ctx.input_shape(1)), " does not broadcast to X of shape ", shape_str(ctx.input_shape(0)));
  }
  infer_same_shape(ctx, ctx.input_dtype(0));
}

void prelu_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& slope = ctx.input(1);
  require_dtype(ctx.node, 0, x.dtype(), kPReluTypes);
  require_same_dtype(ctx.node, 1, x.dtype(), slope.dtype());
  TS_CHECK(broadcast_dims(x.shape(), slope.shape(), ctx.node) == x.shape(), ctx.node.describe(), ": slope of shape ",
           dims_str(slope.shape()), " does not broadcast to X of shape ", dims_str(x.shape()));
  if (is_float(x.dtype())) {
    ctx.set_output(0, visit_float(x.dtype(), ctx.node, [&]<class IO>() {
      using S = typename IO::S;
      return broadcast_binary<S, S, S>(x, slope, x.dtype(), ctx.node, [](S a, S s) {
        const double v = IO::load(a);
        return v < 0 ? IO::store(v * IO::load(s)) : a;
      });
    }));
    return;
  }
  ctx.set_output(0, visit_int(x.dtype(), ctx.node, [&]<class T>() {
    return broadcast_binary<T, T, T>(x, slope, x.dtype(), ctx.node,
                                     [](T a, T s) { return a < 0 ? wrap_mul(a, s) : a; });
  }));
}

// Before opset 7 a 1-D slope of size C applied per channel of X [N,C,...];
// reshapes a constant slope to [C,1,...,1] so numpy broadcasting does the same.
void prelu_upgrade(Node& node, int64_t opset) {
  drop_consumed_inputs(node);
  if (opset >= 7) return;
  Value* x = node.input(0);
  Value* s = node.input(1);
  if (!x || !s || !s->constant || s->constant->rank() != 1 || s->constant->numel() <= 1) return;
  if (!x->type.has_shape() || x->type.shape->size() < 3) return;
  std::vector<int64_t> shape(x->type.shape->size() - 1, 1);
  shape[0] = s->constant->numel();
  Graph* g = node.owner;
  node.inputs[1] = g->add_initializer(g->fresh_name(s->name + "_chw"), s->constant->reshaped(shape));
}

// ---- SwiGLU: Swish(A) * B, no broadcasting --------------------------------------------------

void swiglu_infer(InferContext& ctx) {
  require_dtype(ctx.node, 0, ctx.input_dtype(0), kFloat);
  require_same_dtype(ctx.node, 1, ctx.input_dtype(0), ctx.input_dtype(1));
  if (ctx.has_shape(0) && ctx.has_shape(1)) {
    const Shape& a = ctx.input_shape(0);
    const Shape& b = ctx.input_shape(1);
    bool ok = a.size() == b.size();
    for (size_t i = 0; ok && i < a.size(); ++i) ok = a[i] == b[i] || !a[i].is_const() || !b[i].is_const();
    TS_CHECK(ok, ctx.node.describe(), ": A ", shape_str(a), " and B ", shape_str(b), " must have the same shape");
  }
  infer_same_shape(ctx, ctx.input_dtype(0));
}

void swiglu_kernel(KernelContext& ctx) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  require_dtype(ctx.node, 0, a.dtype(), kFloat);
  require_same_dtype(ctx.node, 1, a.dtype(), b.dtype());
  TS_CHECK(a.shape() == b.shape(), ctx.node.describe(), ": A ", dims_str(a.shape()), " and B ", dims_str(b.shape()),
           " must have the same shape");
  const SwishFn swish(ctx.node);
  ctx.set_output(0, visit_float(a.dtype(), ctx.node, [&]<class IO>() {
    using S = typename IO::S;
    return broadcast_binary<S, S, S>(a, b, a.dtype(), ctx.node,
                                     [&](S x, S y) { return IO::store(swish(IO::load(x)) * IO::load(y)); });
  }));
}

// ---- registration --------------------------------------------------------------------------

OpSchema op(const char* name, int inputs, InferFn infer, KernelFn kernel, int since, UpgradeFn upgrade = nullptr) {
  return OpSchema{.name = name, .domain = "", .min_inputs = inputs, .max_inputs = inputs, .min_outputs = 1,
                  .max_outputs = 1, .infer = infer, .kernel = kernel, .upgrade = upgrade,
                  .since_version = since};
}

}  // namespace

void register_activation_ops(OpRegistry& r) {
  r.add(op("Relu", 1, numeric_unary_infer<ReluFn>, numeric_unary_kernel<ReluFn>, 1, upgrade_legacy_unary));
  r.add(op("LeakyRelu", 1, infer_float_unary, float_unary_kernel<LeakyReluFn>, 1, upgrade_legacy_unary));
  r.add(op("Elu", 1, infer_float_unary, float_unary_kernel<EluFn>, 1, upgrade_legacy_unary));
  r.add(op("Selu", 1, infer_float_unary, float_unary_kernel<SeluFn>, 1, upgrade_legacy_unary));
  r.add(op("Sigmoid", 1, infer_float_unary, float_unary_kernel<SigmoidFn>, 1, upgrade_legacy_unary));
  r.add(op("HardSigmoid", 1, infer_float_unary, float_unary_kernel<HardSigmoidFn>, 1, upgrade_legacy_unary));
  r.add(op("Celu", 1, infer_float_unary, float_unary_kernel<CeluFn>, 12));
  r.add(op("HardSwish", 1, infer_float_unary, float_unary_kernel<HardSwishFn>, 14));
  r.add(op("Softplus", 1, infer_float_unary, float_unary_kernel<SoftplusFn>, 1));
  r.add(op("Softsign", 1, infer_float_unary, float_unary_kernel<SoftsignFn>, 1));
  r.add(op("Mish", 1, infer_float_unary, float_unary_kernel<MishFn>, 18));
  r.add(op("Gelu", 1, infer_float_unary, float_unary_kernel<GeluFn>, 20));
  r.add(op("Swish", 1, infer_float_unary, float_unary_kernel<SwishFn>, 24));
  r.add(op("ThresholdedRelu", 1, infer_float_unary, float_unary_kernel<ThresholdedReluFn>, 10));
  r.add(op("Shrink", 1, numeric_unary_infer<ShrinkFn>, numeric_unary_kernel<ShrinkFn>, 9));
  r.add(op("PRelu", 2, prelu_infer, prelu_kernel, 1, prelu_upgrade));
  r.add(op("SwiGLU", 2, swiglu_infer, swiglu_kernel, 28));
}

}  // namespace tessel::ew
