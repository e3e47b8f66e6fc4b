// Unary math ops: Abs Neg Reciprocal Sqrt Exp Log, trigonometric and
// hyperbolic functions (Tanh included), Erf, Ceil Floor Round Sign, IsNaN IsInf, Not BitwiseNot.
#include <cmath>

#include "tessel/ops/elementwise/elementwise.h"

namespace tessel::ew {

namespace {

// ---- float-only functions --------------------------------------------------------------

// One struct per op so that float_unary_kernel<Op> is one kernel function.
#define TS_FLOAT_FN(Name, expr)                                     \
  struct Name {                                                     \
    explicit Name(const Node&) {}                                   \
    double operator()(double x) const { return expr; }             \
  };

TS_FLOAT_FN(ReciprocalFn, 1.0 / x)
TS_FLOAT_FN(SqrtFn, std::sqrt(x))
TS_FLOAT_FN(ExpFn, std::exp(x))
TS_FLOAT_FN(LogFn, std::log(x))
TS_FLOAT_FN(SinFn, std::sin(x))
TS_FLOAT_FN(CosFn, std::cos(x))
TS_FLOAT_FN(TanFn, std::tan(x))
TS_FLOAT_FN(AsinFn, std::asin(x))
TS_FLOAT_FN(AcosFn, std::acos(x))
TS_FLOAT_FN(AtanFn, std::atan(x))
TS_FLOAT_FN(SinhFn, std::sinh(x))
TS_FLOAT_FN(CoshFn, std::cosh(x))
TS_FLOAT_FN(AsinhFn, std::asinh(x))
TS_FLOAT_FN(AcoshFn, std::acosh(x))
TS_FLOAT_FN(AtanhFn, std::atanh(x))
TS_FLOAT_FN(TanhFn, std::tanh(x))
TS_FLOAT_FN(ErfFn, std::erf(x))
TS_FLOAT_FN(CeilFn, std::ceil(x))
TS_FLOAT_FN(FloorFn, std::floor(x))
// nearbyint rounds halves to even in the default rounding mode, as Round wants.
TS_FLOAT_FN(RoundFn, std::nearbyint(x))
#undef TS_FLOAT_FN

// ---- ops over floats and integers ----------------------------------------------------------

struct AbsFn {
  explicit AbsFn(const Node&) {}
  static DTypeSet types() { return kNumeric; }
  double operator()(double x) const { return std::fabs(x); }
  template <class T>
  T on_int(T v) const {
    if constexpr (std::is_signed_v<T>) return v < 0 ? wrap_neg(v) : v;  // INT_MIN stays INT_MIN
    return v;
  }
  std::optional<Dim> on_dim(const Dim& d) const {
    if (auto c = d.const_value()) return Dim(*c < 0 ? -*c : *c);
    if (dim_nonneg(d)) return d;
    return std::nullopt;
  }
};

struct NegFn {
  explicit NegFn(const Node&) {}
  static DTypeSet types() { return kSignedNumeric; }
  double operator()(double x) const { return -x; }
  template <class T>
  T on_int(T v) const { return wrap_neg(v); }
  std::optional<Dim> on_dim(const Dim& d) const { return -d; }
};

struct SignFn {
  explicit SignFn(const Node&) {}
  static DTypeSet types() { return kNumeric; }
  double operator()(double x) const { return x > 0 ? 1.0 : x < 0 ? -1.0 : x; }  // keeps 0 and NaN
  template <class T>
  T on_int(T v) const { return static_cast<T>(v > 0 ? 1 : v < 0 ? -1 : 0); }
  std::optional<Dim> on_dim(const Dim& d) const {
    if (auto c = d.const_value()) return Dim(*c > 0 ? 1 : *c < 0 ? -1 : 0);
    return std::nullopt;
  }
};

// ---- predicates and logic ----------------------------------------------------------------

// IsNaN/IsInf also accept the float8 types, read through get_f64.
constexpr DTypeSet kFloatWithF8 = {DType::F16,      DType::F32,        DType::F64,    DType::BF16,
                                   DType::F8E4M3FN, DType::F8E4M3FNUZ, DType::F8E5M2, DType::F8E5M2FNUZ};

void predicate_infer(InferContext& ctx) {
  require_dtype(ctx.node, 0, ctx.input_dtype(0), kFloatWithF8);
  infer_same_shape(ctx, DType::Bool);
}

template <class Pred>
Tensor predicate_map(const Tensor& x, Pred pred) {
  Tensor out(DType::Bool, x.shape());
  uint8_t* po = out.mutable_data<uint8_t>();
  const int64_t n = x.numel();
  for (int64_t i = 0; i < n; ++i) po[i] = pred(x.get_f64(i)) ? 1 : 0;
  return out;
}

void isnan_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_dtype(ctx.node, 0, x.dtype(), kFloatWithF8);
  ctx.set_output(0, predicate_map(x, [](double v) { return std::isnan(v); }));
}

void isinf_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_dtype(ctx.node, 0, x.dtype(), kFloatWithF8);
  const bool neg = ctx.node.attr_int("detect_negative", 1) != 0;
  const bool pos = ctx.node.attr_int("detect_positive", 1) != 0;
  ctx.set_output(0, predicate_map(x, [&](double v) { return std::isinf(v) && (v > 0 ? pos : neg); }));
}

void not_infer(InferContext& ctx) {
  require_dtype(ctx.node, 0, ctx.input_dtype(0), kBool);
  infer_same_shape(ctx, DType::Bool);
  infer_sym_nary(ctx, {0}, [](const std::vector<Dim>& a) -> std::optional<Dim> {
    if (auto c = a[0].const_value()) return Dim(*c == 0 ? 1 : 0);
    return std::nullopt;
  });
}

void not_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_dtype(ctx.node, 0, x.dtype(), kBool);
  ctx.set_output(0, map_unary<uint8_t, uint8_t>(x, DType::Bool, [](uint8_t v) -> uint8_t { return v ? 0 : 1; }));
}

void bitwise_not_infer(InferContext& ctx) {
  require_dtype(ctx.node, 0, ctx.input_dtype(0), kInt);
  infer_same_shape(ctx, ctx.input_dtype(0));
}

void bitwise_not_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_dtype(ctx.node, 0, x.dtype(), kInt);
  ctx.set_output(0, visit_int(x.dtype(), ctx.node, [&]<class T>() {
    return map_unary<T, T>(x, x.dtype(), [](T v) { return static_cast<T>(~v); });
  }));
}

// ---- registration ----------------------------------------------------------------------

OpSchema unary(const char* name, InferFn infer, KernelFn kernel, int since, UpgradeFn upgrade = nullptr) {
  return OpSchema{.name = name, .domain = "", .min_inputs = 1, .max_inputs = 1, .min_outputs = 1,
                  .max_outputs = 1, .infer = infer, .kernel = kernel, .upgrade = upgrade,
                  .since_version = since};
}

}  // namespace

void register_unary_ops(OpRegistry& r) {
  // Ops whose opset-1 form carried the obsolete `consumed_inputs` attribute.
  r.add(unary("Abs", numeric_unary_infer<AbsFn>, numeric_unary_kernel<AbsFn>, 1, upgrade_legacy_unary));
  r.add(unary("Neg", numeric_unary_infer<NegFn>, numeric_unary_kernel<NegFn>, 1, upgrade_legacy_unary));
  r.add(unary("Reciprocal", infer_float_unary, float_unary_kernel<ReciprocalFn>, 1, upgrade_legacy_unary));
  r.add(unary("Sqrt", infer_float_unary, float_unary_kernel<SqrtFn>, 1, upgrade_legacy_unary));
  r.add(unary("Exp", infer_float_unary, float_unary_kernel<ExpFn>, 1, upgrade_legacy_unary));
  r.add(unary("Log", infer_float_unary, float_unary_kernel<LogFn>, 1, upgrade_legacy_unary));
  r.add(unary("Ceil", infer_float_unary, float_unary_kernel<CeilFn>, 1, upgrade_legacy_unary));
  r.add(unary("Floor", infer_float_unary, float_unary_kernel<FloorFn>, 1, upgrade_legacy_unary));
  r.add(unary("Tanh", infer_float_unary, float_unary_kernel<TanhFn>, 1, upgrade_legacy_unary));

  r.add(unary("Sin", infer_float_unary, float_unary_kernel<SinFn>, 7));
  r.add(unary("Cos", infer_float_unary, float_unary_kernel<CosFn>, 7));
  r.add(unary("Tan", infer_float_unary, float_unary_kernel<TanFn>, 7));
  r.add(unary("Asin", infer_float_unary, float_unary_kernel<AsinFn>, 7));
  r.add(unary("Acos", infer_float_unary, float_unary_kernel<AcosFn>, 7));
  r.add(unary("Atan", infer_float_unary, float_unary_kernel<AtanFn>, 7));
  r.add(unary("Sinh", infer_float_unary, float_unary_kernel<SinhFn>, 9));
  r.add(unary("Cosh", infer_float_unary, float_unary_kernel<CoshFn>, 9));
  r.add(unary("Asinh", infer_float_unary, float_unary_kernel<AsinhFn>, 9));
  r.add(unary("Acosh", infer_float_unary, float_unary_kernel<AcoshFn>, 9));
  r.add(unary("Atanh", infer_float_unary, float_unary_kernel<AtanhFn>, 9));
  r.add(unary("Erf", infer_float_unary, float_unary_kernel<ErfFn>, 9));
  r.add(unary("Round", infer_float_unary, float_unary_kernel<RoundFn>, 11));
  r.add(unary("Sign", numeric_unary_infer<SignFn>, numeric_unary_kernel<SignFn>, 9));

  r.add(unary("IsNaN", predicate_infer, isnan_kernel, 9));
  r.add(unary("IsInf", predicate_infer, isinf_kernel, 10));
  r.add(unary("Not", not_infer, not_kernel, 1));
  r.add(unary("BitwiseNot", bitwise_not_infer, bitwise_not_kernel, 18));
}

}  // namespace tessel::ew
