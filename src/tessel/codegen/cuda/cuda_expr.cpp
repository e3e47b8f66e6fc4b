// Loop IR expressions as C expressions. Every operator goes through the
// semantics of loop/scalar.h: integer helpers from the prelude, floats in
// their own precision, f16/bf16 computed in float and rounded after each
// inexact operation.
#include <bit>
#include <cinttypes>
#include <climits>
#include <cmath>
#include <cstdio>

#include "tessel/codegen/cuda/emitter.h"
#include "tessel/loop/intrinsics.h"
#include "tessel/loop/scalar.h"
#include "tessel/support/error.h"

namespace tessel::cuda::detail {

using loop::BinaryOp;
using loop::Expr;
using loop::ExprKind;
using loop::ExprNode;
using loop::UnaryOp;

namespace {

bool is_half(DType t) { return t == DType::F16 || t == DType::BF16; }

// The value of a float-register expression rounded to f16/bf16 (unchanged for f32/f64).
std::string rounded(DType t, const std::string& v) {
  if (t == DType::F16) return "ts_h(" + v + ")";
  if (t == DType::BF16) return "ts_bf(" + v + ")";
  return v;
}

// Integer helpers are called with explicit template arguments, except for
// i64 (the index type), whose operands are always `long long` already.
std::string int_call(const char* fn, DType t, const std::string& a, const std::string& b) {
  const std::string targs = t == DType::I64 ? "" : str_cat("<", register_type(t), ">");
  return str_cat(fn, targs, "(", a, ", ", b, ")");
}

std::string hex_float(double v, const char* suffix) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", v);
  const std::string s = str_cat(buf, suffix);
  return v < 0 || std::signbit(v) ? "(" + s + ")" : s;
}

const char* f32_math(const std::string& name) {
  if (name == "sqrt") return "sqrtf";
  if (name == "fabs") return "fabsf";
  if (name == "floor") return "floorf";
  if (name == "ceil") return "ceilf";
  if (name == "trunc") return "truncf";
  if (name == "rint") return "rintf";
  if (name == "fma") return "fmaf";
  if (name == "copysign") return "copysignf";
  return nullptr;
}

}  // namespace

std::string ExprEmitter::emit(const Expr& e) {
  const ExprNode& n = *e;
  switch (n.kind) {
    case ExprKind::IntImm: case ExprKind::FloatImm: return immediate(n);
    case ExprKind::Var: return var_name(n.name);
    case ExprKind::Unary: return unary(n);
    case ExprKind::Binary: return fits_i32(e) ? "((long long)" + emit_i32(e) + ")" : binary(n);
    case ExprKind::Select:
      return str_cat("(", emit(n.args[0]), " ? ", emit(n.args[1]), " : ", emit(n.args[2]), ")");
    case ExprKind::Cast: return cast(n.dtype, n.args[0]);
    case ExprKind::Bitcast: return bitcast(n.dtype, n.args[0]);
    case ExprKind::Load: return load(n);
    case ExprKind::Call: return call(n);
  }
  fail("cuda codegen: unknown expression kind");
}

std::string ExprEmitter::immediate(const ExprNode& n) {
  const DType t = n.dtype;
  if (n.kind == ExprKind::FloatImm) {
    // An immediate may hold a value its type cannot (1e19bf16): the
    // evaluator rounds it to the type first, and so must the source.
    const double v = loop::Scalar::of_float(t, n.float_value).f;
    if (t == DType::F64) {
      if (std::isfinite(v)) return hex_float(v, "");
      return str_cat("__longlong_as_double(0x", std::hex, std::bit_cast<uint64_t>(v), "ll)");
    }
    const float f = static_cast<float>(v);  // f16/bf16 values are exact floats
    if (std::isfinite(f)) return hex_float(f, "f");
    return str_cat("__uint_as_float(0x", std::hex, std::bit_cast<uint32_t>(f), "u)");
  }
  if (t == DType::Bool) return n.int_value ? "true" : "false";
  if (t == DType::U64) return str_cat(static_cast<uint64_t>(n.int_value), "ull");
  // INT64_MIN has no literal of its own.
  const std::string lit = n.int_value == INT64_MIN ? "(-9223372036854775807ll - 1ll)"
                          : n.int_value < 0        ? str_cat("(", n.int_value, "ll)")
                                                   : str_cat(n.int_value, "ll");
  return t == DType::I64 ? lit : str_cat("((", register_type(t), ")", lit, ")");
}

ExprEmitter::Scope::Scope(ExprEmitter& ex, const std::string& var, std::optional<loop::Interval> range)
    : ex_(ex), var_(var) {
  auto it = ex_.bounds_.find(var);
  if (it != ex_.bounds_.end()) saved_ = it->second;
  if (range) {
    ex_.bounds_[var] = *range;
  } else {
    ex_.bounds_.erase(var);
  }
}

ExprEmitter::Scope::~Scope() {
  if (saved_) {
    ex_.bounds_[var_] = *saved_;
  } else {
    ex_.bounds_.erase(var_);
  }
}

std::optional<loop::Interval> ExprEmitter::bounds(const Expr& e) const { return loop::bounds_of(e, bounds_); }

bool ExprEmitter::fits_i32(const Expr& e) const { return loop::fits_int32(e, bounds_); }

// `e` (fits_i32) as an int expression: the operators loop::const_bounds
// bounds, on operands that cannot overflow, so plain C arithmetic.
std::string ExprEmitter::emit_i32(const Expr& e) {
  int64_t c = 0;
  if (loop::as_const_int(e, &c)) return c < 0 ? str_cat("(", c, ")") : str_cat(c);
  if (e->kind == ExprKind::Var) return "(int)" + var_name(e->name);
  TS_CHECK(e->kind == ExprKind::Binary, "cuda codegen: 32-bit index expression of an unexpected kind");
  const std::string a = emit_i32(e->args[0]), b = emit_i32(e->args[1]);
  switch (e->binary) {
    case BinaryOp::Add: return str_cat("(", a, " + ", b, ")");
    case BinaryOp::Sub: return str_cat("(", a, " - ", b, ")");
    case BinaryOp::Mul: return str_cat("(", a, " * ", b, ")");
    case BinaryOp::FloorDiv: case BinaryOp::FloorMod: {
      // The divisor is a positive constant (const_bounds knows no other).
      const bool div = e->binary == BinaryOp::FloorDiv;
      if (bounds(e->args[0])->lo >= 0)
        return str_cat("((int)((unsigned)", a, div ? " / " : " % ", "(unsigned)", b, "))");
      return str_cat(div ? "ts_floordiv<int>(" : "ts_floormod<int>(", a, ", ", b, ")");
    }
    case BinaryOp::Min: return str_cat("ts_min<int>(", a, ", ", b, ")");
    case BinaryOp::Max: return str_cat("ts_max<int>(", a, ", ", b, ")");
    default: break;
  }
  fail("cuda codegen: 32-bit index expression with an unexpected operator");
}

std::string ExprEmitter::unary(const ExprNode& n) {
  const DType t = n.dtype;
  const std::string a = emit(n.args[0]);
  switch (n.unary) {
    case UnaryOp::Neg:
      if (is_float(t)) return "(-" + a + ")";  // exact, also for f16/bf16
      return t == DType::I64 ? "ts_neg(" + a + ")" : str_cat("ts_neg<", register_type(t), ">(", a, ")");
    case UnaryOp::Not: return t == DType::Bool ? "(!" + a + ")" : str_cat("((", register_type(t), ")~", a, ")");
  }
  fail("cuda codegen: unknown unary operator");
}

std::string ExprEmitter::binary(const ExprNode& n) {
  const DType t = n.args[0].dtype();
  const std::string a = emit(n.args[0]), b = emit(n.args[1]);
  auto infix = [&](const char* op) { return str_cat("(", a, " ", op, " ", b, ")"); };
  auto bitwise = [&](const char* op) { return str_cat("((", register_type(t), ")(", a, " ", op, " ", b, "))"); };
  const bool f = is_float(t), boolean = t == DType::Bool;
  switch (n.binary) {
    case BinaryOp::Add: return f ? rounded(t, infix("+")) : int_call("ts_add", t, a, b);
    case BinaryOp::Sub: return f ? rounded(t, infix("-")) : int_call("ts_sub", t, a, b);
    case BinaryOp::Mul: return f ? rounded(t, infix("*")) : int_call("ts_mul", t, a, b);
    case BinaryOp::Div: return f ? rounded(t, infix("/")) : int_call("ts_div", t, a, b);
    // fmod is exact, so an f16/bf16 remainder needs no rounding.
    case BinaryOp::Mod: return f ? str_cat(t == DType::F64 ? "fmod(" : "fmodf(", a, ", ", b, ")")
                                 : int_call("ts_mod", t, a, b);
    case BinaryOp::FloorDiv: return int_call("ts_floordiv", t, a, b);
    case BinaryOp::FloorMod: return int_call("ts_floormod", t, a, b);
    case BinaryOp::Min: return f ? str_cat("ts_min(", a, ", ", b, ")") : int_call("ts_min", t, a, b);
    case BinaryOp::Max: return f ? str_cat("ts_max(", a, ", ", b, ")") : int_call("ts_max", t, a, b);
    case BinaryOp::And: return boolean ? infix("&&") : bitwise("&");
    case BinaryOp::Or: return boolean ? infix("||") : bitwise("|");
    case BinaryOp::Xor: return boolean ? infix("!=") : bitwise("^");
    case BinaryOp::Shl: return int_call("ts_shl", t, a, b);
    case BinaryOp::Shr: return int_call("ts_shr", t, a, b);
    // C comparisons are ordered for floats, except != (true with a NaN).
    case BinaryOp::Eq: return infix("==");
    case BinaryOp::Ne: return infix("!=");
    case BinaryOp::Lt: return infix("<");
    case BinaryOp::Le: return infix("<=");
    case BinaryOp::Gt: return infix(">");
    case BinaryOp::Ge: return infix(">=");
  }
  fail("cuda codegen: unknown binary operator");
}

// Tensor::cast semantics: through double; float -> int truncates with NaN -> 0
// and saturation to i64 (then wraps), u64 saturating to its own range;
// f64 -> f16/bf16 narrows to f32 first, as the interpreter does.
std::string ExprEmitter::cast(DType to, const Expr& arg) {
  const DType from = arg.dtype();
  const std::string a = emit(arg);
  if (from == to) return a;
  if (to == DType::Bool) return str_cat("(", a, is_float(from) ? " != 0.0)" : " != 0)");
  std::string as_float;  // the value as a float register, when `to` is f32/f16/bf16
  if (is_float(from)) {
    if (!is_float(to)) {
      if (to == DType::U64) return str_cat("ts_d2u((double)", a, ")");
      return str_cat("((", register_type(to), ")ts_d2i((double)", a, "))");
    }
    if (to == DType::F64) return str_cat("((double)", a, ")");
    as_float = from == DType::F64 ? str_cat("((float)", a, ")") : a;
  } else {
    if (!is_float(to)) return str_cat("((", register_type(to), ")", a, ")");
    if (to == DType::F64) return str_cat("((double)", a, ")");
    as_float = str_cat("((float)(double)", a, ")");
  }
  return rounded(to, as_float);
}

std::string ExprEmitter::bitcast(DType to, const Expr& arg) {
  const DType from = arg.dtype();
  const std::string a = emit(arg);
  if (from == to) return a;
  std::string bits;
  switch (from) {
    case DType::F32: bits = "__float_as_uint(" + a + ")"; break;
    case DType::F64: bits = "__double_as_longlong(" + a + ")"; break;
    case DType::F16: bits = "ts_f2h(" + a + ")"; break;
    case DType::BF16: bits = "ts_f2bf(" + a + ")"; break;
    case DType::Bool: bits = "((unsigned char)" + a + ")"; break;
    default: bits = a; break;
  }
  switch (to) {
    case DType::F32: return "__uint_as_float((unsigned)" + bits + ")";
    case DType::F64: return "__longlong_as_double((long long)" + bits + ")";
    case DType::F16: return "ts_h2f((unsigned short)" + bits + ")";
    case DType::BF16: return "ts_bf2f((unsigned short)" + bits + ")";
    case DType::Bool: return "(" + bits + " != 0)";
    default: return str_cat("((", register_type(to), ")", bits, ")");
  }
}

std::string ExprEmitter::flat_index(const loop::Buffer& b, const std::vector<Expr>& indices) {
  if (lane_buffers_.count(&b)) {
    TS_CHECK(!lane_slot_.empty(), "cuda codegen: lane-distributed buffer ", b.name, " outside an unrolled lanes loop");
    return lane_slot_;
  }
  auto it = strides_.find(&b);
  TS_CHECK(it != strides_.end(), "cuda codegen: buffer ", b.name, " is not in scope");
  const std::vector<std::string>& strides = it->second;
  TS_CHECK(indices.size() == strides.size(), "cuda codegen: ", b.name, " indexed with ", indices.size(),
           " indices, rank ", strides.size());
  if (indices.empty()) return "0";
  if (std::string f = flat_index_i32(strides, indices); !f.empty()) return f;
  std::string flat;
  for (size_t d = 0; d < indices.size(); ++d) {
    const std::string term = strides[d] == "1" ? emit(indices[d]) : str_cat(emit(indices[d]), " * ", strides[d]);
    flat += (d == 0 ? "" : " + ") + term;
  }
  return flat;
}

// The flat offset in int arithmetic when the strides are constants and every
// partial sum provably fits; "" otherwise.
std::string ExprEmitter::flat_index_i32(const std::vector<std::string>& strides, const std::vector<Expr>& indices) {
  int64_t lo = 0, hi = 0;
  std::vector<int64_t> stride(indices.size());
  for (size_t d = 0; d < indices.size(); ++d) {
    const std::optional<loop::Interval> r = bounds(indices[d]);
    if (!r || !fits_i32(indices[d]) || std::sscanf(strides[d].c_str(), "%" SCNd64, &stride[d]) != 1 || stride[d] <= 0)
      return "";
    int64_t a = 0, b = 0;
    if (__builtin_mul_overflow(r->lo, stride[d], &a) || __builtin_mul_overflow(r->hi, stride[d], &b) ||
        __builtin_add_overflow(lo, a, &lo) || __builtin_add_overflow(hi, b, &hi) || lo < INT_MIN || hi > INT_MAX)
      return "";
  }
  std::string flat;
  for (size_t d = 0; d < indices.size(); ++d) {
    const std::string i = emit_i32(indices[d]);
    flat += (d == 0 ? "" : " + ") + (stride[d] == 1 ? i : str_cat(i, " * ", stride[d]));
  }
  return "(" + flat + ")";
}

std::string ExprEmitter::load(const ExprNode& n) {
  const std::string v = str_cat(buffer_name(n.buffer->name), "[", flat_index(*n.buffer, n.args), "]");
  switch (n.buffer->dtype) {
    case DType::F16: return "ts_h2f(" + v + ")";
    case DType::BF16: return "ts_bf2f(" + v + ")";
    case DType::Bool: return "(" + v + " != 0)";
    default: return v;
  }
}

std::string ExprEmitter::to_storage(DType t, const std::string& v) {
  switch (t) {
    case DType::F16: return "ts_f2h(" + v + ")";
    case DType::BF16: return "ts_f2bf(" + v + ")";
    case DType::Bool: return "(unsigned char)(" + v + ")";
    default: return v;
  }
}

std::string ExprEmitter::call(const ExprNode& n) {
  const DType t = n.args.at(0).dtype();
  std::vector<std::string> args;
  for (const Expr& a : n.args) args.push_back(emit(a));
  if (n.name == "isnan") return "(" + args[0] + " != " + args[0] + ")";
  if (n.name == "isinf") return "ts_isinf(" + args[0] + ")";
  const loop::IntrinsicInfo* info = loop::find_intrinsic(n.name);
  const char* fn = f32_math(n.name);
  TS_CHECK(fn || (info && info->cuda_native), "cuda codegen: call to '", n.name,
           "' is neither primitive nor in CUDA's math library (run math expansion first)");
  TS_CHECK(!is_half(t) || fn, "cuda codegen: ", n.name, " of ", dtype_name(t), " (math expansion widens it to f32)");
  // CUDA's names are C's: the float version ends in 'f', the double one not.
  std::string name = n.name == "sigmoid" ? "ts_sigmoid" : fn ? std::string(fn) : n.name + "f";
  if (t == DType::F64 && n.name != "sigmoid") name.pop_back();
  std::string c = name + "(";
  for (size_t i = 0; i < args.size(); ++i) c += (i ? ", " : "") + args[i];
  c += ")";
  // Only sqrt and fma are inexact in float for f16/bf16 operands.
  return is_half(t) && (n.name == "sqrt" || n.name == "fma") ? rounded(t, c) : c;
}

}  // namespace tessel::cuda::detail
