// Compiled forms of the elementwise family: unary math, activations, binary
// arithmetic/comparison/logic with broadcasting, variadic ops, Where, Clip,
// Cast. Arithmetic is done in compute_type (f32 for f16/bf16) and rounded
// once to the output type; the interpreter rounds after every op, so fused
// f16 chains are (slightly) more accurate than the oracle, within the f16
// tolerance. Transcendentals are intrinsic calls that loop/math_expand
// replaces by polynomials.
#include <cmath>

#include "tessel/ops/elementwise/elementwise.h"
#include "tessel/ops/lowering.h"
#include "tessel/ops/registry.h"

namespace tessel {
namespace {

using namespace lower_expr;

Expr k(const Expr& like, double v) { return constant(like.dtype(), v); }
Expr fabs_(const Expr& x) { return intrinsic("fabs", x); }
Expr exp_(const Expr& x) { return intrinsic("exp", x); }
Expr sigmoid_(const Expr& x) { return intrinsic("sigmoid", x); }
Expr softplus_(const Expr& x) { return loop::max(x, k(x, 0)) + intrinsic("log", k(x, 1) + exp_(-fabs_(x))); }
Expr clamp01(const Expr& x) { return loop::max(k(x, 0), loop::min(k(x, 1), x)); }
double attr_f(const Node& n, const char* name, double def) { return n.attr_float(name, static_cast<float>(def)); }

void require_float(LowerContext& ctx, const Expr& x) {
  if (!is_float(x.dtype())) ctx.unsupported(str_cat("dtype ", dtype_name(x.dtype())));
}

// ---- unary ops: F maps (node, x in compute type) to the result ------------------------

template <Expr (*F)(const Node&, const Expr&)>
Expr lower_unary(LowerContext& ctx, size_t, const Idx& idx) {
  Expr x = input_as_compute(ctx, 0, idx);
  return loop::cast(ctx.out_dtype(), F(ctx.node, x));
}

// Float-only unary op that is one intrinsic call.
template <const char* Name>
Expr lower_intrinsic(LowerContext& ctx, size_t, const Idx& idx) {
  Expr x = input_as_compute(ctx, 0, idx);
  require_float(ctx, x);
  return loop::cast(ctx.out_dtype(), intrinsic(Name, x));
}

Expr abs_(const Node&, const Expr& x) {
  if (is_float(x.dtype())) return fabs_(x);
  if (is_unsigned_int(x.dtype())) return x;
  return loop::select(lt(x, k(x, 0)), -x, x);
}
Expr neg_(const Node&, const Expr& x) { return -x; }
Expr reciprocal_(const Node&, const Expr& x) { return div(k(x, 1), x); }
Expr sign_(const Node&, const Expr& x) {
  if (is_unsigned_int(x.dtype())) return loop::select(gt(x, k(x, 0)), k(x, 1), k(x, 0));
  return loop::select(gt(x, k(x, 0)), k(x, 1), loop::select(lt(x, k(x, 0)), k(x, -1), x));
}
Expr isinf_(const Node& n, const Expr& x) {
  const bool pos = n.attr_int("detect_positive", 1) != 0, neg = n.attr_int("detect_negative", 1) != 0;
  Expr inf = loop::call("isinf", DType::Bool, {x});
  if (pos && neg) return inf;
  if (!pos && !neg) return loop::bool_imm(false);
  return and_(inf, pos ? gt(x, k(x, 0)) : lt(x, k(x, 0)));
}
Expr not_(const Node&, const Expr& x) { return loop::unary(loop::UnaryOp::Not, x); }
Expr relu_(const Node&, const Expr& x) { return loop::select(lt(x, k(x, 0)), k(x, 0), x); }
Expr leaky_relu_(const Node& n, const Expr& x) {
  return loop::select(lt(x, k(x, 0)), k(x, attr_f(n, "alpha", 0.01)) * x, x);
}
Expr elu_(const Node& n, const Expr& x) {
  return loop::select(lt(x, k(x, 0)), k(x, attr_f(n, "alpha", 1.0)) * (exp_(x) - k(x, 1)), x);
}
Expr selu_(const Node& n, const Expr& x) {
  const double alpha = attr_f(n, "alpha", 1.67326319217681884765625), gamma = attr_f(n, "gamma", 1.05070102214813232421875);
  return loop::select(le(x, k(x, 0)), k(x, gamma * alpha) * (exp_(x) - k(x, 1)), k(x, gamma) * x);
}
Expr celu_(const Node& n, const Expr& x) {
  const double alpha = attr_f(n, "alpha", 1.0);
  Expr e = k(x, alpha) * (exp_(div(x, k(x, alpha))) - k(x, 1));
  return loop::max(k(x, 0), x) + loop::min(k(x, 0), e);
}
Expr sigmoid_op(const Node&, const Expr& x) { return sigmoid_(x); }
Expr hard_sigmoid_(const Node& n, const Expr& x) {
  return clamp01(k(x, attr_f(n, "alpha", 0.2)) * x + k(x, attr_f(n, "beta", 0.5)));
}
Expr hard_swish_(const Node&, const Expr& x) { return x * clamp01(div(x, k(x, 6)) + k(x, 0.5)); }
Expr softplus_op(const Node&, const Expr& x) { return loop::select(is_nan(x), x, softplus_(x)); }
Expr softsign_(const Node&, const Expr& x) { return div(x, k(x, 1) + fabs_(x)); }
Expr mish_(const Node&, const Expr& x) { return loop::select(is_nan(x), x, x * intrinsic("tanh", softplus_(x))); }
Expr gelu_(const Node& n, const Expr& x) {
  const std::string a = n.attr_string("approximate", "none");
  TS_CHECK(a == "none" || a == "tanh", n.describe(), ": approximate must be 'none' or 'tanh', got '", a, "'");
  if (a == "tanh") {
    Expr inner = k(x, std::sqrt(2.0 / M_PI)) * (x + k(x, 0.044715) * x * x * x);
    return k(x, 0.5) * x * (k(x, 1) + intrinsic("tanh", inner));
  }
  return k(x, 0.5) * x * (k(x, 1) + intrinsic("erf", x * k(x, M_SQRT1_2)));
}
Expr swish_(const Node& n, const Expr& x) { return x * sigmoid_(k(x, attr_f(n, "alpha", 1.0)) * x); }
Expr thresholded_relu_(const Node& n, const Expr& x) {
  return loop::select(gt(x, k(x, attr_f(n, "alpha", 1.0))), x, loop::select(is_nan(x), x, k(x, 0)));
}
Expr shrink_(const Node& n, const Expr& x) {
  const double l = attr_f(n, "lambd", 0.5), b = attr_f(n, "bias", 0.0);
  return loop::select(lt(x, k(x, -l)), x + k(x, b), loop::select(gt(x, k(x, l)), x - k(x, b), k(x, 0)));
}

// ---- binary ops with numpy broadcasting ------------------------------------------------

struct Operands {
  Expr a, b;
};
Operands binary_operands(LowerContext& ctx, const Idx& idx) {
  return {input_as_compute(ctx, 0, broadcast_index(ctx, 0, idx)),
          input_as_compute(ctx, 1, broadcast_index(ctx, 1, idx))};
}

template <Expr (*F)(LowerContext&, const Expr&, const Expr&)>
Expr lower_binary(LowerContext& ctx, size_t, const Idx& idx) {
  Operands o = binary_operands(ctx, idx);
  return loop::cast(ctx.out_dtype(), F(ctx, o.a, o.b));
}

// SwiGLU: Swish(A) * B (same shapes).
Expr swiglu_(LowerContext& ctx, const Expr& a, const Expr& b) {
  if (!is_float(a.dtype())) ctx.unsupported("non-float input");
  return swish_(ctx.node, a) * b;
}

template <BinaryOp Op>
Expr plain(LowerContext&, const Expr& a, const Expr& b) { return loop::binary(Op, a, b); }

Expr div_(LowerContext& ctx, const Expr& a, const Expr& b) {
  if (is_float(a.dtype())) return div(a, b);
  ctx.check(ne(b, k(b, 0)), str_cat(ctx.node.describe(), ": integer division by zero"));
  if (is_unsigned_int(a.dtype())) return div(a, b);
  // INT_MIN / -1 wraps, as in the interpreter; both select arms are
  // evaluated, so the division itself never sees -1 (x86 idiv would trap).
  Expr minus_one = eq(b, k(b, -1));
  return loop::select(minus_one, -a, div(a, loop::select(minus_one, k(b, 1), b)));
}

Expr mod_(LowerContext& ctx, const Expr& a, const Expr& b) {
  const bool c_style = ctx.node.attr_int("fmod", 0) == 1;
  if (is_float(a.dtype())) {
    Expr r = loop::binary(BinaryOp::Mod, a, b);
    if (c_style) return r;
    Expr fixed = loop::select(ne(lt(r, k(r, 0)), lt(b, k(b, 0))), r + b, r);
    return loop::select(is_nan(r), r, loop::select(eq(r, k(r, 0)), intrinsic("copysign", k(r, 0), b), fixed));
  }
  ctx.check(ne(b, k(b, 0)), str_cat(ctx.node.describe(), ": integer modulo by zero"));
  if (is_unsigned_int(a.dtype())) return loop::binary(BinaryOp::Mod, a, b);
  Expr minus_one = eq(b, k(b, -1));
  Expr safe_b = loop::select(minus_one, k(b, 1), b);
  Expr r = loop::binary(c_style ? BinaryOp::Mod : BinaryOp::FloorMod, a, safe_b);
  return loop::select(minus_one, k(a, 0), r);
}

Expr pow_(LowerContext& ctx, const Expr& a, const Expr& b) {
  if (!is_float(a.dtype())) ctx.unsupported("integer base");
  return intrinsic("pow", a, loop::cast(a.dtype(), b));
}

Expr bitshift_(LowerContext& ctx, const Expr& a, const Expr& b) {
  const bool left = ctx.node.attr_string("direction", "") == "LEFT";
  Expr shifted = loop::binary(left ? BinaryOp::Shl : BinaryOp::Shr, a, b);
  // Shifting by the width or more (the interpreter's rule): left gives 0,
  // right gives the sign fill (0 or -1 for signed types).
  Expr overflow = left || is_unsigned_int(a.dtype()) ? k(a, 0) : loop::select(lt(a, k(a, 0)), k(a, -1), k(a, 0));
  return loop::select(ge(b, k(b, int_bits(a.dtype()))), overflow, shifted);
}

Expr prelu_(LowerContext&, const Expr& x, const Expr& slope) {
  return loop::select(lt(x, k(x, 0)), slope * x, x);
}

// ---- variadic, Where, Clip, Cast ----------------------------------------------------------

template <BinaryOp Op>
Expr lower_variadic(LowerContext& ctx, size_t, const Idx& idx) {
  Expr acc;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    Expr v = input_as_compute(ctx, i, broadcast_index(ctx, i, idx));
    acc = acc.defined() ? loop::binary(Op, acc, v) : v;
  }
  return loop::cast(ctx.out_dtype(), acc);
}

Expr lower_mean(LowerContext& ctx, size_t, const Idx& idx) {
  Expr acc;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    Expr v = input_as_compute(ctx, i, broadcast_index(ctx, i, idx));
    acc = acc.defined() ? acc + v : v;
  }
  return loop::cast(ctx.out_dtype(), div(acc, k(acc, static_cast<double>(ctx.num_inputs()))));
}

Expr lower_where(LowerContext& ctx, size_t, const Idx& idx) {
  return loop::select(ctx.input(0, broadcast_index(ctx, 0, idx)), ctx.input(1, broadcast_index(ctx, 1, idx)),
                      ctx.input(2, broadcast_index(ctx, 2, idx)));
}

Expr lower_clip(LowerContext& ctx, size_t, const Idx& idx) {
  Expr x = input_as_compute(ctx, 0, idx);
  // Bounds are scalars (inputs 1 and 2, optional).
  if (ctx.has_input(1)) x = loop::max(x, input_as_compute(ctx, 1, {}));
  if (ctx.has_input(2)) x = loop::min(x, input_as_compute(ctx, 2, {}));
  return loop::cast(ctx.out_dtype(), x);
}

Expr lower_cast(LowerContext& ctx, size_t, const Idx& idx) { return loop::cast(ctx.out_dtype(), ctx.input(0, idx)); }

Expr lower_identity(LowerContext& ctx, size_t, const Idx& idx) { return ctx.input(0, idx); }

// BitCast between loop-IR types of one width (bool's byte is not a number).
Expr lower_bitcast(LowerContext& ctx, size_t, const Idx& idx) {
  const Expr x = ctx.input(0, idx);
  if (x.dtype() == DType::Bool || ctx.out_dtype() == DType::Bool) ctx.unsupported("bool operand");
  if (x.dtype() == ctx.out_dtype()) return x;
  return loop::bitcast(ctx.out_dtype(), x);
}

constexpr char kSqrt[] = "sqrt", kExp[] = "exp", kLog[] = "log", kCeil[] = "ceil", kFloor[] = "floor",
               kTanh[] = "tanh", kSin[] = "sin", kCos[] = "cos", kTan[] = "tan", kAsin[] = "asin",
               kAcos[] = "acos", kAtan[] = "atan", kSinh[] = "sinh", kCosh[] = "cosh", kAsinh[] = "asinh",
               kAcosh[] = "acosh", kAtanh[] = "atanh", kErf[] = "erf", kRint[] = "rint";

}  // namespace

void register_elementwise_lowerings(OpRegistry& r) {
  const auto ew = [&](const char* name, LowerFn f) { r.set_lowering("", name, FusionKind::Elementwise, f); };
  ew("Abs", lower_unary<abs_>);
  ew("Neg", lower_unary<neg_>);
  ew("Reciprocal", lower_unary<reciprocal_>);
  ew("Sign", lower_unary<sign_>);
  ew("IsInf", lower_unary<isinf_>);
  ew("IsNaN", [](LowerContext& c, size_t, const Idx& i) { return is_nan(input_as_compute(c, 0, i)); });
  ew("Not", lower_unary<not_>);
  ew("BitwiseNot", lower_unary<not_>);
  ew("Sqrt", lower_intrinsic<kSqrt>);
  ew("Exp", lower_intrinsic<kExp>);
  ew("Log", lower_intrinsic<kLog>);
  ew("Ceil", lower_intrinsic<kCeil>);
  ew("Floor", lower_intrinsic<kFloor>);
  ew("Round", lower_intrinsic<kRint>);
  ew("Tanh", lower_intrinsic<kTanh>);
  ew("Sin", lower_intrinsic<kSin>);
  ew("Cos", lower_intrinsic<kCos>);
  ew("Tan", lower_intrinsic<kTan>);
  ew("Asin", lower_intrinsic<kAsin>);
  ew("Acos", lower_intrinsic<kAcos>);
  ew("Atan", lower_intrinsic<kAtan>);
  ew("Sinh", lower_intrinsic<kSinh>);
  ew("Cosh", lower_intrinsic<kCosh>);
  ew("Asinh", lower_intrinsic<kAsinh>);
  ew("Acosh", lower_intrinsic<kAcosh>);
  ew("Atanh", lower_intrinsic<kAtanh>);
  ew("Erf", lower_intrinsic<kErf>);

  ew("Relu", lower_unary<relu_>);
  ew("LeakyRelu", lower_unary<leaky_relu_>);
  ew("Elu", lower_unary<elu_>);
  ew("Selu", lower_unary<selu_>);
  ew("Celu", lower_unary<celu_>);
  ew("Sigmoid", lower_unary<sigmoid_op>);
  ew("HardSigmoid", lower_unary<hard_sigmoid_>);
  ew("HardSwish", lower_unary<hard_swish_>);
  ew("Softplus", lower_unary<softplus_op>);
  ew("Softsign", lower_unary<softsign_>);
  ew("Mish", lower_unary<mish_>);
  ew("Gelu", lower_unary<gelu_>);
  ew("Swish", lower_unary<swish_>);
  ew("ThresholdedRelu", lower_unary<thresholded_relu_>);
  ew("Shrink", lower_unary<shrink_>);

  ew("Add", lower_binary<plain<BinaryOp::Add>>);
  ew("Sub", lower_binary<plain<BinaryOp::Sub>>);
  ew("Mul", lower_binary<plain<BinaryOp::Mul>>);
  ew("Div", lower_binary<div_>);
  ew("Mod", lower_binary<mod_>);
  ew("Pow", lower_binary<pow_>);
  ew("BitShift", lower_binary<bitshift_>);
  ew("PRelu", lower_binary<prelu_>);
  ew("SwiGLU", lower_binary<swiglu_>);
  ew("Equal", lower_binary<plain<BinaryOp::Eq>>);
  ew("Less", lower_binary<plain<BinaryOp::Lt>>);
  ew("LessOrEqual", lower_binary<plain<BinaryOp::Le>>);
  ew("Greater", lower_binary<plain<BinaryOp::Gt>>);
  ew("GreaterOrEqual", lower_binary<plain<BinaryOp::Ge>>);
  ew("And", lower_binary<plain<BinaryOp::And>>);
  ew("Or", lower_binary<plain<BinaryOp::Or>>);
  ew("Xor", lower_binary<plain<BinaryOp::Xor>>);
  ew("BitwiseAnd", lower_binary<plain<BinaryOp::And>>);
  ew("BitwiseOr", lower_binary<plain<BinaryOp::Or>>);
  ew("BitwiseXor", lower_binary<plain<BinaryOp::Xor>>);

  ew("Sum", lower_variadic<BinaryOp::Add>);
  ew("Max", lower_variadic<BinaryOp::Max>);
  ew("Min", lower_variadic<BinaryOp::Min>);
  ew("Mean", lower_mean);
  ew("Where", lower_where);
  ew("Clip", lower_clip);
  ew("Cast", lower_cast);
  ew("CastLike", lower_cast);
  ew("Identity", lower_identity);
  ew("BitCast", lower_bitcast);
}

}  // namespace tessel
