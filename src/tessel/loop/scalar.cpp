#include "tessel/loop/scalar.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "tessel/ir/tensor.h"
#include "tessel/support/error.h"

namespace tessel::loop {

namespace {

int width(DType t) { return t == DType::Bool ? 1 : int_bits(t); }

int64_t wrap(DType t, uint64_t v) {
  if (t == DType::Bool) return v != 0;
  const int bits = int_bits(t);
  if (bits == 64) return static_cast<int64_t>(v);
  const uint64_t mask = (uint64_t{1} << bits) - 1;
  v &= mask;
  if (is_signed_int(t) && (v >> (bits - 1))) v |= ~mask;
  return static_cast<int64_t>(v);
}

// Rounds a double to a float type's value set.
double round_to(DType t, double v) {
  switch (t) {
    case DType::F64: return v;
    case DType::F32: return static_cast<float>(v);
    case DType::F16: return f16_bits_to_f32(f32_to_f16_bits(static_cast<float>(v)));
    case DType::BF16: return bf16_bits_to_f32(f32_to_bf16_bits(static_cast<float>(v)));
    default: fail("loop IR: ", dtype_name(t), " is not a float type the loop IR computes with");
  }
}

bool less(const Scalar& a, const Scalar& b) {
  if (a.is_float()) return a.f < b.f;
  if (is_unsigned_int(a.type)) return static_cast<uint64_t>(a.i) < static_cast<uint64_t>(b.i);
  return a.i < b.i;
}

Scalar boolean(bool v) { return Scalar::of_int(DType::Bool, v); }

// Min/Max: NaN wins, and -0 orders below +0.
Scalar float_min_max(BinaryOp op, const Scalar& a, const Scalar& b) {
  if (std::isnan(a.f)) return a;
  if (std::isnan(b.f)) return b;
  if (a.f == b.f) {
    const bool a_neg = std::signbit(a.f);
    return (op == BinaryOp::Min) == a_neg ? a : b;
  }
  return (op == BinaryOp::Min) == (a.f < b.f) ? a : b;
}

template <class T>
T float_arith(BinaryOp op, T a, T b) {
  switch (op) {
    case BinaryOp::Add: return a + b;
    case BinaryOp::Sub: return a - b;
    case BinaryOp::Mul: return a * b;
    case BinaryOp::Div: return a / b;
    case BinaryOp::Mod: return std::fmod(a, b);
    default: fail("loop IR: not a float arithmetic operator");
  }
}

Scalar float_binary(BinaryOp op, const Scalar& a, const Scalar& b) {
  const DType t = a.type;
  switch (op) {
    case BinaryOp::Add: case BinaryOp::Sub: case BinaryOp::Mul: case BinaryOp::Div: case BinaryOp::Mod:
      if (t == DType::F64) return Scalar::of_float(t, float_arith<double>(op, a.f, b.f));
      return Scalar::of_float(t, float_arith<float>(op, static_cast<float>(a.f), static_cast<float>(b.f)));
    case BinaryOp::Min: case BinaryOp::Max: return float_min_max(op, a, b);
    case BinaryOp::Eq: return boolean(a.f == b.f);
    case BinaryOp::Ne: return boolean(!(a.f == b.f));
    case BinaryOp::Lt: return boolean(a.f < b.f);
    case BinaryOp::Le: return boolean(a.f <= b.f);
    case BinaryOp::Gt: return boolean(a.f > b.f);
    case BinaryOp::Ge: return boolean(a.f >= b.f);
    case BinaryOp::FloorDiv: case BinaryOp::FloorMod: case BinaryOp::And: case BinaryOp::Or:
    case BinaryOp::Xor: case BinaryOp::Shl: case BinaryOp::Shr:
      break;
  }
  fail("loop IR: integer-only operator applied to floats");
}

struct DivMod {
  uint64_t q, r;
};

// Truncating division on the wrapped values; INT64_MIN / -1 wraps.
DivMod trunc_divmod(DType t, int64_t a, int64_t b) {
  TS_CHECK(b != 0, "loop IR: integer division by zero");
  if (is_unsigned_int(t) || t == DType::Bool) {
    auto ua = static_cast<uint64_t>(a), ub = static_cast<uint64_t>(b);
    return {ua / ub, ua % ub};
  }
  if (a == std::numeric_limits<int64_t>::min() && b == -1) return {static_cast<uint64_t>(a), 0};
  return {static_cast<uint64_t>(a / b), static_cast<uint64_t>(a % b)};
}

DivMod floor_divmod(DType t, int64_t a, int64_t b) {
  DivMod d = trunc_divmod(t, a, b);
  if (is_signed_int(t) && d.r != 0 && ((static_cast<int64_t>(d.r) < 0) != (b < 0))) {
    d.q -= 1;
    d.r += static_cast<uint64_t>(b);
  }
  return d;
}

int64_t shift_amount(const Scalar& b) {
  const int bits = width(b.type);
  const bool ok = is_unsigned_int(b.type) ? static_cast<uint64_t>(b.i) < static_cast<uint64_t>(bits)
                                          : b.i >= 0 && b.i < bits;
  TS_CHECK(ok, "loop IR: shift by ", b.i, " bits of a ", bits, "-bit value");
  return b.i;
}

Scalar int_binary(BinaryOp op, const Scalar& a, const Scalar& b) {
  const DType t = a.type;
  const auto ua = static_cast<uint64_t>(a.i), ub = static_cast<uint64_t>(b.i);
  auto make = [&](uint64_t v) { return Scalar::of_int(t, static_cast<int64_t>(v)); };
  switch (op) {
    case BinaryOp::Add: return make(ua + ub);
    case BinaryOp::Sub: return make(ua - ub);
    case BinaryOp::Mul: return make(ua * ub);
    case BinaryOp::Div: return make(trunc_divmod(t, a.i, b.i).q);
    case BinaryOp::Mod: return make(trunc_divmod(t, a.i, b.i).r);
    case BinaryOp::FloorDiv: return make(floor_divmod(t, a.i, b.i).q);
    case BinaryOp::FloorMod: return make(floor_divmod(t, a.i, b.i).r);
    case BinaryOp::Min: return less(b, a) ? b : a;
    case BinaryOp::Max: return less(a, b) ? b : a;
    case BinaryOp::And: return make(ua & ub);
    case BinaryOp::Or: return make(ua | ub);
    case BinaryOp::Xor: return make(ua ^ ub);
    case BinaryOp::Shl: return make(ua << shift_amount(b));
    case BinaryOp::Shr:
      // a.i is sign-extended for signed types and zero-extended for unsigned ones.
      return is_signed_int(t) ? make(static_cast<uint64_t>(a.i >> shift_amount(b))) : make(ua >> shift_amount(b));
    case BinaryOp::Eq: return boolean(a.i == b.i);
    case BinaryOp::Ne: return boolean(a.i != b.i);
    case BinaryOp::Lt: return boolean(less(a, b));
    case BinaryOp::Le: return boolean(!less(b, a));
    case BinaryOp::Gt: return boolean(less(b, a));
    case BinaryOp::Ge: return boolean(!less(a, b));
  }
  fail("loop IR: unknown binary operator");
}

uint64_t bits_of(const Scalar& s) {
  switch (s.type) {
    case DType::F64: return std::bit_cast<uint64_t>(s.f);
    case DType::F32: return std::bit_cast<uint32_t>(static_cast<float>(s.f));
    case DType::F16: return f32_to_f16_bits(static_cast<float>(s.f));
    case DType::BF16: return f32_to_bf16_bits(static_cast<float>(s.f));
    default: return static_cast<uint64_t>(s.i) & (width(s.type) == 64 ? ~uint64_t{0} : (uint64_t{1} << width(s.type)) - 1);
  }
}

Scalar from_bits(DType t, uint64_t b) {
  switch (t) {
    case DType::F64: return Scalar::of_float(t, std::bit_cast<double>(b));
    case DType::F32: return Scalar::of_float(t, std::bit_cast<float>(static_cast<uint32_t>(b)));
    case DType::F16: return Scalar::of_float(t, f16_bits_to_f32(static_cast<uint16_t>(b)));
    case DType::BF16: return Scalar::of_float(t, bf16_bits_to_f32(static_cast<uint16_t>(b)));
    default: return Scalar::of_int(t, static_cast<int64_t>(b));
  }
}

template <class T>
T load_raw(const void* base, int64_t index) {
  T v;
  std::memcpy(&v, static_cast<const char*>(base) + index * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}

template <class T>
void store_raw(void* base, T v, int64_t index) {
  std::memcpy(static_cast<char*>(base) + index * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

long double reference_unary(const std::string& n, long double x) {
  if (n == "exp") return std::exp(x);
  if (n == "expm1") return std::expm1(x);
  if (n == "log") return std::log(x);
  if (n == "log1p") return std::log1p(x);
  if (n == "sigmoid") return 1.0L / (1.0L + std::exp(-x));
  if (n == "tanh") return std::tanh(x);
  if (n == "erf") return std::erf(x);
  if (n == "sin") return std::sin(x);
  if (n == "cos") return std::cos(x);
  if (n == "tan") return std::tan(x);
  if (n == "atan") return std::atan(x);
  if (n == "asin") return std::asin(x);
  if (n == "acos") return std::acos(x);
  if (n == "sinh") return std::sinh(x);
  if (n == "cosh") return std::cosh(x);
  if (n == "asinh") return std::asinh(x);
  if (n == "acosh") return std::acosh(x);
  if (n == "atanh") return std::atanh(x);
  fail("loop IR: unknown intrinsic '", n, "'");
}

// A primitive intrinsic in the type's own precision (f16/bf16: in f32).
template <class T>
double primitive(const std::string& n, const std::vector<Scalar>& a) {
  const T x = static_cast<T>(a[0].f);
  if (n == "sqrt") return std::sqrt(x);
  if (n == "fabs") return std::fabs(x);
  if (n == "floor") return std::floor(x);
  if (n == "ceil") return std::ceil(x);
  if (n == "trunc") return std::trunc(x);
  if (n == "rint") return std::rint(x);
  if (n == "copysign") return std::copysign(x, static_cast<T>(a[1].f));
  if (n == "fma") return std::fma(x, static_cast<T>(a[1].f), static_cast<T>(a[2].f));
  fail("loop IR: unknown intrinsic '", n, "'");
}

}  // namespace

Scalar Scalar::of_int(DType t, int64_t v) {
  Scalar s;
  s.type = t;
  s.i = wrap(t, static_cast<uint64_t>(v));
  return s;
}

Scalar Scalar::of_float(DType t, double v) {
  Scalar s;
  s.type = t;
  s.f = round_to(t, v);
  return s;
}

double Scalar::as_double() const {
  if (is_float()) return f;
  if (type == DType::U64) return static_cast<double>(static_cast<uint64_t>(i));
  return static_cast<double>(i);
}

Scalar from_immediate(const Expr& e) {
  if (e->kind == ExprKind::FloatImm) return Scalar::of_float(e->dtype, e->float_value);
  TS_CHECK(e->kind == ExprKind::IntImm, "loop IR: not an immediate");
  return Scalar::of_int(e->dtype, e->int_value);
}

Expr to_immediate(const Scalar& s) { return s.is_float() ? float_imm(s.type, s.f) : int_imm(s.type, s.i); }

Scalar apply_unary(UnaryOp op, const Scalar& a) {
  switch (op) {
    case UnaryOp::Neg:
      if (a.is_float()) return Scalar::of_float(a.type, -a.f);
      return Scalar::of_int(a.type, static_cast<int64_t>(0 - static_cast<uint64_t>(a.i)));
    case UnaryOp::Not:
      TS_CHECK(!a.is_float(), "loop IR: 'not' of a float");
      return a.type == DType::Bool ? boolean(a.i == 0) : Scalar::of_int(a.type, ~a.i);
  }
  fail("loop IR: unknown unary operator");
}

Scalar apply_binary(BinaryOp op, const Scalar& a, const Scalar& b) {
  TS_CHECK(a.type == b.type, "loop IR: binary operands differ in type");
  return a.is_float() ? float_binary(op, a, b) : int_binary(op, a, b);
}

Scalar apply_cast(DType to, const Scalar& a) {
  if (is_float(to)) return Scalar::of_float(to, a.as_double());
  if (to == DType::Bool) return boolean(a.is_float() ? a.f != 0 : a.i != 0);
  if (!a.is_float()) return Scalar::of_int(to, a.i);
  if (to == DType::U64) {
    const double v = a.f;
    const uint64_t u = std::isnan(v) || v <= 0 ? 0 : v >= 1.8446744073709552e19 ? UINT64_MAX : static_cast<uint64_t>(v);
    return Scalar::of_int(to, static_cast<int64_t>(u));
  }
  return Scalar::of_int(to, double_to_i64(a.f));
}

Scalar apply_bitcast(DType to, const Scalar& a) {
  TS_CHECK(dtype_storage_size(to) == dtype_storage_size(a.type), "loop IR: bitcast between sizes");
  return from_bits(to, bits_of(a));
}

Scalar apply_intrinsic(const std::string& n, DType result, const std::vector<Scalar>& a) {
  TS_CHECK(!a.empty() && a[0].is_float(), "loop IR: intrinsic ", n, " needs float operands");
  const DType t = a[0].type;
  if (n == "isnan") return boolean(std::isnan(a[0].f));
  if (n == "isinf") return boolean(std::isinf(a[0].f));
  if (n == "pow") return Scalar::of_float(t, static_cast<double>(std::pow(static_cast<long double>(a[0].f),
                                                                         static_cast<long double>(a[1].f))));
  if (is_primitive_intrinsic(n))
    return Scalar::of_float(t, t == DType::F64 ? primitive<double>(n, a) : primitive<float>(n, a));
  return Scalar::of_float(t, static_cast<double>(reference_unary(n, a[0].f)));
}

Scalar load_scalar(const void* base, DType t, int64_t index) {
  switch (t) {
    case DType::F64: return Scalar::of_float(t, load_raw<double>(base, index));
    case DType::F32: return Scalar::of_float(t, load_raw<float>(base, index));
    case DType::F16: case DType::BF16: return from_bits(t, load_raw<uint16_t>(base, index));
    case DType::Bool: return boolean(load_raw<uint8_t>(base, index) != 0);
    default: break;
  }
  switch (int_bits(t)) {
    case 8: return Scalar::of_int(t, load_raw<uint8_t>(base, index));
    case 16: return Scalar::of_int(t, load_raw<uint16_t>(base, index));
    case 32: return Scalar::of_int(t, load_raw<uint32_t>(base, index));
    case 64: return Scalar::of_int(t, load_raw<int64_t>(base, index));
    default: fail("loop IR: cannot load ", dtype_name(t));
  }
}

void store_scalar(void* base, const Scalar& v, int64_t index) {
  const uint64_t b = bits_of(v);
  switch (dtype_storage_size(v.type)) {
    case 1: store_raw<uint8_t>(base, static_cast<uint8_t>(b), index); return;
    case 2: store_raw<uint16_t>(base, static_cast<uint16_t>(b), index); return;
    case 4: store_raw<uint32_t>(base, static_cast<uint32_t>(b), index); return;
    case 8: store_raw<uint64_t>(base, b, index); return;
    default: fail("loop IR: cannot store ", dtype_name(v.type));
  }
}

}  // namespace tessel::loop
