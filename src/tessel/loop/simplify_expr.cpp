// Expression rules of the simplifier. Each rule is written as a comment
// `pattern => result` above the code that applies it.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>

#include "tessel/loop/scalar.h"
#include "tessel/loop/simplify.h"
#include "tessel/loop/visit.h"
#include "tessel/support/error.h"

namespace tessel::loop {

namespace {

bool is_imm(const Expr& e) { return e->kind == ExprKind::IntImm || e->kind == ExprKind::FloatImm; }

bool is_float_const(const Expr& e, double v) {
  return e->kind == ExprKind::FloatImm && e->float_value == v && std::signbit(e->float_value) == std::signbit(v);
}

bool is_binary(const Expr& e, BinaryOp op) { return e->kind == ExprKind::Binary && e->binary == op; }

// The integer constant c of `e`, if it is one.
std::optional<int64_t> int_const(const Expr& e) {
  int64_t c;
  if (as_const_int(e, &c)) return c;
  return std::nullopt;
}

// Rules that need no overflow (see simplify.h) apply to i64 only.
bool no_overflow(DType t) { return t == DType::I64; }

// Folds an operator over immediates; nothing when the operation is undefined
// (division by zero, bad shift), which must stay for run time to report.
std::optional<Expr> fold(const Expr& e) {
  for (const Expr& a : e->args)
    if (!is_imm(a)) return std::nullopt;
  try {
    switch (e->kind) {
      case ExprKind::Unary: return to_immediate(apply_unary(e->unary, from_immediate(e->args[0])));
      case ExprKind::Binary:
        return to_immediate(apply_binary(e->binary, from_immediate(e->args[0]), from_immediate(e->args[1])));
      case ExprKind::Cast: return to_immediate(apply_cast(e->dtype, from_immediate(e->args[0])));
      case ExprKind::Bitcast: return to_immediate(apply_bitcast(e->dtype, from_immediate(e->args[0])));
      case ExprKind::Call:
        // Transcendental calls are left for math_expand, whose polynomials
        // differ from scalar.h's long double reference in the last bits.
        if (!is_primitive_intrinsic(e->name)) return std::nullopt;
        {
          std::vector<Scalar> args;
          for (const Expr& a : e->args) args.push_back(from_immediate(a));
          return to_immediate(apply_intrinsic(e->name, e->dtype, args));
        }
      case ExprKind::IntImm: case ExprKind::FloatImm: case ExprKind::Var: case ExprKind::Select:
      case ExprKind::Load:
        return std::nullopt;
    }
  } catch (const Error&) {
  }
  return std::nullopt;
}

bool commutative(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: case BinaryOp::Mul: case BinaryOp::Min: case BinaryOp::Max: case BinaryOp::And:
    case BinaryOp::Or: case BinaryOp::Xor: case BinaryOp::Eq: case BinaryOp::Ne:
      return true;
    case BinaryOp::Sub: case BinaryOp::Div: case BinaryOp::Mod: case BinaryOp::FloorDiv: case BinaryOp::FloorMod:
    case BinaryOp::Shl: case BinaryOp::Shr: case BinaryOp::Lt: case BinaryOp::Le: case BinaryOp::Gt:
    case BinaryOp::Ge:
      return false;
  }
  return false;
}

class Rules {
 public:
  explicit Rules(const Bounds& b) : bounds_(b) {}

  std::optional<Expr> binary_rule(const Expr& e) {
    const Expr& a = e->args[0];
    const Expr& b = e->args[1];
    const DType t = a.dtype();
    // c op x => x op c (commutative op; constants gather on the right)
    if (commutative(e->binary) && is_imm(a) && !is_imm(b)) return binary(e->binary, b, a);
    switch (e->binary) {
      case BinaryOp::Add: return add(a, b, t);
      case BinaryOp::Sub: return sub(a, b, t);
      case BinaryOp::Mul: return mul(a, b, t);
      case BinaryOp::Div: return div(a, b, t);
      case BinaryOp::Mod: return mod(a, b, t);
      case BinaryOp::FloorDiv: return floor_div(a, b, t);
      case BinaryOp::FloorMod: return floor_mod(a, b, t);
      case BinaryOp::Min: case BinaryOp::Max: return min_max(e->binary, a, b);
      case BinaryOp::And: case BinaryOp::Or: return and_or(e->binary, a, b, t);
      case BinaryOp::Xor: case BinaryOp::Shl: case BinaryOp::Shr: return shift_xor(a, b);
      case BinaryOp::Eq: case BinaryOp::Ne: case BinaryOp::Lt: case BinaryOp::Le: case BinaryOp::Gt:
      case BinaryOp::Ge:
        return compare(e->binary, a, b, t);
    }
    return std::nullopt;
  }

  std::optional<Expr> unary_rule(const Expr& e) {
    const Expr& a = e->args[0];
    // -(-x) => x ; !(!x) => x
    if (a->kind == ExprKind::Unary && a->unary == e->unary) return a->args[0];
    return std::nullopt;
  }

  std::optional<Expr> select_rule(const Expr& e) {
    const Expr &c = e->args[0], &x = e->args[1], &y = e->args[2];
    // select(true, x, y) => x ; select(false, x, y) => y
    if (auto v = int_const(c)) return *v ? x : y;
    // select(c, x, x) => x
    if (equal(x, y)) return x;
    return std::nullopt;
  }

 private:
  std::optional<Expr> add(const Expr& a, const Expr& b, DType t) {
    const auto c = int_const(b);
    // x + 0 => x (integers; for floats only -0.0 is an identity)
    if (c == 0 || is_float_const(b, -0.0)) return a;
    // (x + c1) + c2 => x + (c1 + c2)
    if (c && !is_float(t) && is_binary(a, BinaryOp::Add) && int_const(a->args[1]))
      return a->args[0] + int_imm(t, static_cast<int64_t>(static_cast<uint64_t>(*int_const(a->args[1])) +
                                                          static_cast<uint64_t>(*c)));
    // (x - y) + y => x
    if (!is_float(t) && is_binary(a, BinaryOp::Sub) && equal(a->args[1], b)) return a->args[0];
    return std::nullopt;
  }

  std::optional<Expr> sub(const Expr& a, const Expr& b, DType t) {
    // x - 0 => x ; x - 0.0 => x
    if (is_const(b, 0) || is_float_const(b, 0.0)) return a;
    if (is_float(t)) return std::nullopt;
    // x - x => 0
    if (equal(a, b)) return int_imm(t, 0);
    // (x + y) - y => x ; (x + y) - x => y
    if (is_binary(a, BinaryOp::Add) && equal(a->args[1], b)) return a->args[0];
    if (is_binary(a, BinaryOp::Add) && equal(a->args[0], b)) return a->args[1];
    // x - c => x + (-c)
    if (auto c = int_const(b)) return a + int_imm(t, static_cast<int64_t>(0 - static_cast<uint64_t>(*c)));
    return std::nullopt;
  }

  std::optional<Expr> mul(const Expr& a, const Expr& b, DType t) {
    const auto c = int_const(b);
    // x * 1 => x ; x * 1.0 => x
    if (c == 1 || is_float_const(b, 1.0)) return a;
    if (is_float(t) || !c) return std::nullopt;
    // x * 0 => 0 (integers only: for floats 0 * inf is NaN)
    if (*c == 0) return b;
    // (x * c1) * c2 => x * (c1 * c2)
    if (is_binary(a, BinaryOp::Mul) && int_const(a->args[1]))
      return a->args[0] * int_imm(t, static_cast<int64_t>(static_cast<uint64_t>(*int_const(a->args[1])) *
                                                          static_cast<uint64_t>(*c)));
    return std::nullopt;
  }

  std::optional<Expr> div(const Expr& a, const Expr& b, DType t) {
    // x / 1 => x ; x / 1.0 => x
    if (is_const(b, 1) || is_float_const(b, 1.0)) return a;
    return std::nullopt;
  }

  std::optional<Expr> mod(const Expr& a, const Expr& b, DType t) {
    // x % 1 => 0 (integers)
    if (is_const(b, 1)) return int_imm(t, 0);
    return std::nullopt;
  }

  // Matches x * c or c * x with c an integer constant.
  static bool mul_by(const Expr& e, int64_t c, Expr* x) {
    if (!is_binary(e, BinaryOp::Mul)) return false;
    if (is_const(e->args[1], c)) return *x = e->args[0], true;
    if (is_const(e->args[0], c)) return *x = e->args[1], true;
    return false;
  }

  // Matches x * c1 or c1 * x with c1 a multiple of c; *x = x * (c1 / c),
  // the quotient (x itself when c1 is c).
  static bool multiple_of(const Expr& e, int64_t c, Expr* x) {
    if (mul_by(e, c, x)) return true;
    if (!is_binary(e, BinaryOp::Mul)) return false;
    for (int side : {1, 0}) {
      int64_t c1 = 0;
      if (as_const_int(e->args[side], &c1) && c1 % c == 0)
        return *x = e->args[1 - side] * int_imm(e.dtype(), c1 / c), true;
    }
    return false;
  }

  // A sum whose addends are in part multiples of c: *rest = the others,
  // *quotient = the sum of the multiples divided by c. False when no addend
  // or every addend is a multiple (then the rules above apply).
  static bool split_multiples(const Expr& a, int64_t c, Expr* rest, Expr* quotient) {
    if (!is_binary(a, BinaryOp::Add)) return false;
    std::vector<Expr> terms;
    collect_addends(a, &terms);
    Expr r, q;
    for (const Expr& t : terms) {
      Expr x;
      if (multiple_of(t, c, &x))
        q = q.defined() ? q + x : x;
      else
        r = r.defined() ? r + t : t;
    }
    if (!q.defined() || !r.defined()) return false;
    *rest = r;
    *quotient = q;
    return true;
  }

  bool within(const Expr& x, int64_t lo, int64_t hi) const {
    Interval r;
    return const_bounds(x, bounds_, &r) && r.lo >= lo && r.hi <= hi;
  }

  std::optional<Expr> floor_div(const Expr& a, const Expr& b, DType t) {
    const auto c = int_const(b);
    // x floordiv 1 => x
    if (c == 1) return a;
    if (!c || *c <= 0 || !no_overflow(t)) return std::nullopt;
    Expr x;
    // (x * c) floordiv c => x; (x * c1) floordiv c => x * (c1 / c) when c
    // divides c1
    if (multiple_of(a, *c, &x)) return x;
    // (x + y * c) floordiv c => x floordiv c + y, and (x + y * c k)
    // floordiv c => x floordiv c + y * k, over the addends of a sum (a
    // channel block's index: (cb * 64 + v * 16 + l) floordiv 16 => cb * 4 +
    // v + l floordiv 16)
    Expr rest, quotient;
    if (split_multiples(a, *c, &rest, &quotient)) return floordiv(rest, b) + quotient;
    // x floordiv c => 0 when 0 <= x < c
    if (within(a, 0, *c - 1)) return int_imm(t, 0);
    return std::nullopt;
  }

  std::optional<Expr> floor_mod(const Expr& a, const Expr& b, DType t) {
    const auto c = int_const(b);
    // x floormod 1 => 0
    if (c == 1) return int_imm(t, 0);
    if (!c || *c <= 0 || !no_overflow(t)) return std::nullopt;
    Expr x;
    // (x * c) floormod c => 0
    if (mul_by(a, *c, &x)) return int_imm(t, 0);
    // (x + y * c) floormod c => x floormod c, and (x + y * c k) alike
    Expr rest, quotient;
    if (split_multiples(a, *c, &rest, &quotient)) return floormod(rest, b);
    // x floormod c => x when 0 <= x < c
    if (within(a, 0, *c - 1)) return a;
    return std::nullopt;
  }

  std::optional<Expr> min_max(BinaryOp op, const Expr& a, const Expr& b) {
    // min(x, x) => x ; max(x, x) => x
    if (equal(a, b)) return a;
    if (a.dtype() != DType::I64) return std::nullopt;
    // min(x, y) => x when x <= y is provable (and max alike)
    Interval ra, rb;
    if (!const_bounds(a, bounds_, &ra) || !const_bounds(b, bounds_, &rb)) return std::nullopt;
    if (ra.hi <= rb.lo) return op == BinaryOp::Min ? a : b;
    if (rb.hi <= ra.lo) return op == BinaryOp::Min ? b : a;
    return std::nullopt;
  }

  std::optional<Expr> and_or(BinaryOp op, const Expr& a, const Expr& b, DType t) {
    if (t != DType::Bool) return std::nullopt;
    const auto c = int_const(b);
    // x & true => x ; x & false => false ; x | false => x ; x | true => true
    if (c) return (*c != 0) == (op == BinaryOp::And) ? a : b;
    // x & x => x ; x | x => x
    if (equal(a, b)) return a;
    return std::nullopt;
  }

  std::optional<Expr> shift_xor(const Expr& a, const Expr& b) {
    // x ^ 0 => x ; x << 0 => x ; x >> 0 => x
    if (is_const(b, 0)) return a;
    return std::nullopt;
  }

  std::optional<Expr> compare(BinaryOp op, const Expr& a, const Expr& b, DType t) {
    if (is_float(t)) return std::nullopt;  // x == x is false for NaN
    // x == x => true ; x < x => false (and the like)
    if (equal(a, b)) return bool_imm(op == BinaryOp::Eq || op == BinaryOp::Le || op == BinaryOp::Ge);
    if (t != DType::I64) return std::nullopt;
    // Decided by ranges: x < y => true when max(x) < min(y), ...
    Interval ra, rb;
    if (!const_bounds(a, bounds_, &ra) || !const_bounds(b, bounds_, &rb)) return std::nullopt;
    const bool lt = ra.hi < rb.lo, ge = ra.lo >= rb.hi;
    const bool le = ra.hi <= rb.lo, gt = ra.lo > rb.hi;
    switch (op) {
      case BinaryOp::Lt: if (lt || ge) return bool_imm(lt); break;
      case BinaryOp::Le: if (le || gt) return bool_imm(le); break;
      case BinaryOp::Gt: if (gt || le) return bool_imm(gt); break;
      case BinaryOp::Ge: if (ge || lt) return bool_imm(ge); break;
      case BinaryOp::Eq: if (lt || gt) return bool_imm(false); break;
      case BinaryOp::Ne: if (lt || gt) return bool_imm(true); break;
      default: break;
    }
    return std::nullopt;
  }

  const Bounds& bounds_;
};

// One rule application at the root of `e` (operands already simplified).
std::optional<Expr> rewrite(const Expr& e, const Bounds& bounds) {
  if (auto f = fold(e)) return f;
  Rules r(bounds);
  switch (e->kind) {
    case ExprKind::Binary: return r.binary_rule(e);
    case ExprKind::Unary: return r.unary_rule(e);
    case ExprKind::Select: return r.select_rule(e);
    case ExprKind::IntImm: case ExprKind::FloatImm: case ExprKind::Var: case ExprKind::Cast:
    case ExprKind::Bitcast: case ExprKind::Load: case ExprKind::Call:
      return std::nullopt;
  }
  return std::nullopt;
}

bool add_overflows(int64_t a, int64_t b, int64_t* out) { return __builtin_add_overflow(a, b, out); }
bool mul_overflows(int64_t a, int64_t b, int64_t* out) { return __builtin_mul_overflow(a, b, out); }

}  // namespace

Expr simplify(const Expr& e, const Bounds& bounds) {
  Expr cur = map_args(e, [&](const Expr& a) { return simplify(a, bounds); });
  // Each rule shrinks the tree or moves a constant right, so this ends; the
  // rebuilt root may have new simplifiable operands, hence the recursion.
  if (auto next = rewrite(cur, bounds)) return simplify(*next, bounds);
  return cur;
}

std::optional<Interval> bounds_of(const Expr& e, const Bounds& bounds) {
  Interval r;
  if (!const_bounds(e, bounds, &r)) return std::nullopt;
  return r;
}

bool fits_int32(const Expr& e, const Bounds& bounds) {
  const std::optional<Interval> r = bounds_of(e, bounds);
  if (!r || r->lo < INT32_MIN || r->hi > INT32_MAX) return false;
  if (e->kind != ExprKind::Binary) return true;  // an immediate or a variable
  return fits_int32(e->args[0], bounds) && fits_int32(e->args[1], bounds);
}

std::optional<Interval> iteration_range(std::optional<Interval> min, std::optional<Interval> extent) {
  if (!min || !extent) return std::nullopt;
  int64_t hi = 0;
  if (__builtin_add_overflow(min->hi, std::max<int64_t>(extent->hi, 1) - 1, &hi)) return std::nullopt;
  return Interval{min->lo, hi};
}

bool const_bounds(const Expr& e, const Bounds& bounds, Interval* out) {
  if (e.dtype() != DType::I64) return false;
  if (auto c = int_const(e)) return *out = {*c, *c}, true;
  if (e->kind == ExprKind::Var) {
    auto it = bounds.find(e->name);
    return it != bounds.end() && (*out = it->second, true);
  }
  if (e->kind != ExprKind::Binary) return false;
  Interval a, b;
  if (!const_bounds(e->args[0], bounds, &a) || !const_bounds(e->args[1], bounds, &b)) {
    // x floormod c lies in [0, c) whatever x is.
    auto c = int_const(e->args[1]);
    if (e->binary == BinaryOp::FloorMod && c && *c > 0) return *out = {0, *c - 1}, true;
    return false;
  }
  Interval r;
  switch (e->binary) {
    case BinaryOp::Add:
      if (add_overflows(a.lo, b.lo, &r.lo) || add_overflows(a.hi, b.hi, &r.hi)) return false;
      break;
    case BinaryOp::Sub:
      if (add_overflows(a.lo, -b.hi, &r.lo) || add_overflows(a.hi, -b.lo, &r.hi) || b.hi == INT64_MIN) return false;
      break;
    case BinaryOp::Mul: {
      int64_t p[4];
      if (mul_overflows(a.lo, b.lo, &p[0]) || mul_overflows(a.lo, b.hi, &p[1]) || mul_overflows(a.hi, b.lo, &p[2]) ||
          mul_overflows(a.hi, b.hi, &p[3]))
        return false;
      r = {*std::min_element(p, p + 4), *std::max_element(p, p + 4)};
      break;
    }
    case BinaryOp::FloorDiv:
      if (b.lo != b.hi || b.lo <= 0) return false;
      r = {apply_binary(BinaryOp::FloorDiv, Scalar::of_int(DType::I64, a.lo), Scalar::of_int(DType::I64, b.lo)).i,
           apply_binary(BinaryOp::FloorDiv, Scalar::of_int(DType::I64, a.hi), Scalar::of_int(DType::I64, b.lo)).i};
      break;
    case BinaryOp::FloorMod:
      if (b.lo != b.hi || b.lo <= 0) return false;
      r = {0, b.lo - 1};
      break;
    case BinaryOp::Min: r = {std::min(a.lo, b.lo), std::min(a.hi, b.hi)}; break;
    case BinaryOp::Max: r = {std::max(a.lo, b.lo), std::max(a.hi, b.hi)}; break;
    default: return false;
  }
  *out = r;
  return true;
}

}  // namespace tessel::loop
