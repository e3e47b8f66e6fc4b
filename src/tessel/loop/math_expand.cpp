#include "tessel/loop/math_expand.h"

#include <cmath>
#include <functional>
#include <set>

#include "tessel/loop/intrinsics.h"
#include "tessel/loop/visit.h"
#include "tessel/support/error.h"

namespace tessel::loop {

namespace {

using Coeffs = std::vector<long double>;

// ---- Taylor coefficients, computed rather than typed in ----
long double factorial(int n) { return n <= 1 ? 1.0L : n * factorial(n - 1); }

Coeffs series(int n, const std::function<long double(int)>& term) {
  Coeffs c;
  for (int k = 0; k < n; ++k) c.push_back(term(k));
  return c;
}
long double alt(int k) { return k % 2 ? -1.0L : 1.0L; }
Coeffs exp_coeffs(int n) { return series(n, [](int k) { return 1.0L / factorial(k); }); }
Coeffs sin_coeffs(int n) { return series(n, [](int k) { return alt(k) / factorial(2 * k + 1); }); }
Coeffs cos_coeffs(int n) { return series(n, [](int k) { return alt(k) / factorial(2 * k); }); }
Coeffs atan_coeffs(int n) { return series(n, [](int k) { return alt(k) / (2 * k + 1); }); }
// log(1+f) = f - hfsq + s (hfsq + R), R = sum_{k>=1} 2 s^2k / (2k + 1); these are R / s^2 by powers of s^2.
Coeffs log_coeffs(int n) { return series(n, [](int k) { return 2.0L / (2 * k + 3); }); }
// asin x = sum (2k)! / (4^k (k!)^2 (2k + 1)) x^(2k+1)
Coeffs asin_coeffs(int n) {
  return series(n, [](int k) {
    return factorial(2 * k) / (std::pow(4.0L, k) * factorial(k) * factorial(k) * (2 * k + 1));
  });
}
// erf x = 2/sqrt(pi) sum (-1)^k x^(2k+1) / (k! (2k + 1))
Coeffs erf_coeffs(int n) {
  const long double two_over_sqrt_pi = 1.12837916709551257389615890312154517L;
  return series(n, [&](int k) { return two_over_sqrt_pi * alt(k) / (factorial(k) * (2 * k + 1)); });
}
// exp(x^2) erfc(x) on [1, 3.92] as a polynomial in t = x - 2.46: a Chebyshev
// fit (mpmath.chebyfit, degree 11, 2.7e-8 relative error), low degree first.
const Coeffs kErfcTail = {
    0x1.b5e79ccfd6513p-3L,  -0x1.38dbbd0db8a88p-4L, 0x1.a8b6ec5bcaeefp-6L,  -0x1.1386588da7877p-7L,
    0x1.57263b183b0dcp-9L,  -0x1.9c1dc361737ccp-11L, 0x1.e280a5c0d3fe2p-13L, -0x1.0f3b44359e4acp-14L,
    0x1.0bb58b2a4a39fp-16L, -0x1.1fdb7be1ad237p-18L, 0x1.ec53688e59e67p-20L, -0x1.ea27e57a20962p-22L};

// Constants split into a rounded head and the rounding error (mpmath).
struct Split {
  double hi, lo;
};
const Split kLn2F32{0x1.62e43p-1, -0x1.05c61p-29};
const Split kLn2F64{0x1.62e42fefa39efp-1, 0x1.abc9e3b39803fp-56};
const Split kPio2F32{0x1.921fb6p+0, -0x1.777a5cp-25};
const Split kPio2F64{0x1.921fb54442d18p+0, 0x1.1a62633145c07p-54};
const double kPio2F64Lo2 = -0x1.f1976b7ed8fbcp-110;

class Names {
 public:
  explicit Names(std::set<std::string> taken) : taken_(std::move(taken)) {}
  std::string fresh() {
    for (;;) {
      std::string n = "_m" + std::to_string(next_++);
      if (taken_.insert(n).second) return n;
    }
  }

 private:
  std::set<std::string> taken_;
  int next_ = 0;
};

// Collects let bindings while expanding the calls of one statement.
class Builder {
 public:
  Builder(Names& names, const std::set<std::string>& native) : names_(names), native_(native) {}

  Expr share(const Expr& e) {
    if (e->kind == ExprKind::Var || e->kind == ExprKind::IntImm || e->kind == ExprKind::FloatImm) return e;
    std::string n = names_.fresh();
    lets_.emplace_back(n, e);
    return var(n, e.dtype());
  }

  Stmt wrap(Stmt s) const {
    for (auto it = lets_.rbegin(); it != lets_.rend(); ++it) s = let(it->first, it->second, s);
    return s;
  }

  // `e` with the shared subexpressions written out again (where no let can
  // go: a contract's or attention's operands, which use the statement's own
  // variables).
  Expr inline_lets(Expr e) const {
    for (auto it = lets_.rbegin(); it != lets_.rend(); ++it) e = substitute(e, {{it->first, it->second}});
    return e;
  }

  Expr expand(const Expr& e);

 private:
  Names& names_;
  const std::set<std::string>& native_;
  std::vector<std::pair<std::string, Expr>> lets_;
};

// The polynomial code of one floating type (f32 or f64).
class Math {
 public:
  Math(Builder& b, DType t) : b_(b), t_(t), it_(t == DType::F64 ? DType::I64 : DType::I32) {}

  Expr call_named(const std::string& n, const std::vector<Expr>& a) {
    if (n == "pow") return pow(a[0], a[1]);
    const Expr x = s(a[0]);
    if (n == "exp") return exp(x);
    if (n == "expm1") return expm1(x);
    if (n == "log") return log(x);
    if (n == "log1p") return log1p(x);
    if (n == "sigmoid") return sigmoid(x);
    if (n == "tanh") return tanh(x);
    if (n == "erf") return erf(x);
    if (n == "sin") return trig(x, Trig::Sin);
    if (n == "cos") return trig(x, Trig::Cos);
    if (n == "tan") return trig(x, Trig::Tan);
    if (n == "atan") return atan(x);
    if (n == "asin") return asin(x);
    if (n == "acos") return acos(x);
    if (n == "sinh") return sinh(x);
    if (n == "cosh") return cosh(x);
    if (n == "asinh") return asinh(x);
    if (n == "acosh") return acosh(x);
    if (n == "atanh") return atanh(x);
    fail("math_expand: no expansion for '", n, "'");
  }

 private:
  enum class Trig { Sin, Cos, Tan };
  bool f64() const { return t_ == DType::F64; }
  Expr s(const Expr& e) { return b_.share(e); }
  Expr c(long double v) const {
    return float_imm(t_, f64() ? static_cast<double>(v) : static_cast<double>(static_cast<float>(v)));
  }
  Expr ci(int64_t v) const { return int_imm(it_, v); }
  Expr fn(const char* n, std::vector<Expr> a) const { return call(n, t_, std::move(a)); }
  Expr fma(Expr a, Expr b, Expr c) const { return fn("fma", {std::move(a), std::move(b), std::move(c)}); }
  Expr abs(Expr a) const { return fn("fabs", {std::move(a)}); }
  Expr copysign(Expr a, Expr b) const { return fn("copysign", {std::move(a), std::move(b)}); }
  static Expr is_nan(Expr a) { return call("isnan", DType::Bool, {std::move(a)}); }
  static Expr is_inf(Expr a) { return call("isinf", DType::Bool, {std::move(a)}); }
  static Expr lt(Expr a, Expr b) { return binary(BinaryOp::Lt, std::move(a), std::move(b)); }
  static Expr gt(Expr a, Expr b) { return binary(BinaryOp::Gt, std::move(a), std::move(b)); }
  static Expr eq(Expr a, Expr b) { return binary(BinaryOp::Eq, std::move(a), std::move(b)); }
  static Expr ne(Expr a, Expr b) { return binary(BinaryOp::Ne, std::move(a), std::move(b)); }
  static Expr both(Expr a, Expr b) { return binary(BinaryOp::And, std::move(a), std::move(b)); }
  static Expr either(Expr a, Expr b) { return binary(BinaryOp::Or, std::move(a), std::move(b)); }
  static Expr div(Expr a, Expr b) { return binary(BinaryOp::Div, std::move(a), std::move(b)); }
  Expr inf() const { return c(INFINITY); }
  Expr nan() const { return float_imm(t_, NAN); }
  Split ln2() const { return f64() ? kLn2F64 : kLn2F32; }
  Split pio2() const { return f64() ? kPio2F64 : kPio2F32; }
  Expr hi(const Split& v) const { return c(v.hi); }
  Expr lo(const Split& v) const { return c(v.lo); }

  // Horner with fma: c0 + x (c1 + x (c2 + ...)).
  Expr poly(const Expr& x, const Coeffs& cs) const {
    Expr acc = c(cs.back());
    for (size_t i = cs.size() - 1; i-- > 0;) acc = fma(acc, x, c(cs[i]));
    return acc;
  }
  // x (1 + z (c1 + ...)) for an odd series in x with z = x^2, c0 == 1.
  Expr odd(const Expr& x, const Expr& z, const Coeffs& cs) const {
    return fma(x * z, poly(z, Coeffs(cs.begin() + 1, cs.end())), x);
  }

  // 1 + z (c1 + ...) for an even series with c0 == 1.
  Expr even(const Expr& z, const Coeffs& cs) const { return fma(z, poly(z, Coeffs(cs.begin() + 1, cs.end())), c(1)); }

  // 2^n for an integer n of the type's exponent range.
  Expr pow2(const Expr& n) const {
    const int mant = f64() ? 52 : 23, bias = f64() ? 1023 : 127;
    return bitcast(t_, binary(BinaryOp::Shl, n + ci(bias), ci(mant)));
  }

  // An integral float k with |k| < 2^22 (2^51 for f64) as an integer of the
  // same width, exactly: k + 1.5 * 2^23 (2^52) is exact and holds k in its
  // low mantissa bits. A float -> int cast is a saturating conversion (NaN
  // to 0, clamped to the i64 range) that LLVM lowers lane by lane (a compare
  // and a scalar convert per lane: 16 of each for one AVX-512 vector); this
  // is one vector add and one integer subtract.
  Expr small_int(const Expr& k) const {
    const Expr magic = c(f64() ? 0x1.8p52L : 0x1.8p23L);
    return bitcast(it_, k + magic) - bitcast(it_, magic);
  }

  // exp: x = k ln2 + r, |r| <= ln2/2; exp(r) by Taylor; 2^k in two halves so
  // that results near overflow and in the subnormal range scale exactly.
  Expr exp(const Expr& x) {
    const Expr xc = s(min(max(x, c(f64() ? -746 : -104)), c(f64() ? 710 : 89)));
    const Expr k = s(fn("rint", {xc * c(1.44269504088896340735992468100189214L)}));
    Expr r = s(fma(-k, hi(ln2()), xc));
    r = s(fma(-k, lo(ln2()), r));
    const Expr p = poly(r, exp_coeffs(f64() ? 14 : 8));
    const Expr ki = s(small_int(k));  // |k| <= 1077: the clamp above
    const Expr k1 = s(binary(BinaryOp::Shr, ki, ci(1)));
    return p * pow2(k1) * pow2(ki - k1);
  }

  // log: x = 2^e m with m in [sqrt(1/2), sqrt(2)), f = m - 1 (exact),
  // s = f / (2 + f), log(1 + f) = f - (hfsq - s (hfsq + R(s^2))).
  Expr log(const Expr& x) {
    const int mant = f64() ? 52 : 23, bias = f64() ? 1023 : 127;
    const Expr sub = s(lt(x, c(f64() ? 0x1p-1022 : 0x1p-126)));
    const Expr xs = select(sub, x * c(f64() ? 0x1p52 : 0x1p23), x);
    const Expr bits = s(bitcast(it_, xs));
    const Expr e = binary(BinaryOp::Shr, bits, ci(mant)) - ci(bias) - select(sub, ci(mant), ci(0));
    const Expr mant_mask = ci((int64_t{1} << mant) - 1);
    const Expr m = s(bitcast(t_, binary(BinaryOp::Or, binary(BinaryOp::And, bits, mant_mask),
                                        bitcast(it_, c(1.0)))));
    const Expr big = s(gt(m, c(1.41421356237309504880168872420969808L)));
    const Expr f = s(select(big, m * c(0.5), m) - c(1));
    const Expr E = s(cast(t_, e + select(big, ci(1), ci(0))));
    const Expr sv = s(div(f, f + c(2)));
    const Expr z = s(sv * sv);
    const Expr R = z * poly(z, log_coeffs(f64() ? 10 : 4));
    const Expr hfsq = s(c(0.5) * f * f);
    const Expr r = fma(E, hi(ln2()), f - (hfsq - (sv * (hfsq + R) + E * lo(ln2()))));
    return select(eq(x, c(0)), -inf(),
                  select(either(lt(x, c(0)), is_nan(x)), nan(), select(eq(x, inf()), inf(), r)));
  }

  // expm1 (Kahan): u = exp(x); (u - 1) x / log(u) corrects u's rounding.
  Expr expm1(const Expr& x) {
    const Expr u = s(exp(x));
    const Expr um1 = s(u - c(1));
    const Expr r = select(eq(u, c(1)), x, select(eq(um1, c(-1)), c(-1), um1 * div(x, log(u))));
    return select(eq(u, inf()), u, r);
  }

  // log1p: u = 1 + x; log(u) x / (u - 1) corrects u's rounding.
  Expr log1p(const Expr& x) {
    const Expr u = s(x + c(1));
    const Expr r = select(eq(u, c(1)), x, log(u) * div(x, u - c(1)));
    return select(eq(u, inf()), u, r);
  }

  Expr sigmoid(const Expr& x) {
    const Expr e = s(exp(-abs(x)));
    const Expr sg = s(div(c(1), c(1) + e));
    return select(binary(BinaryOp::Ge, x, c(0)), sg, e * sg);
  }

  // tanh |x| = em / (em + 2), em = expm1(2|x|); 1 beyond where that rounds to 1.
  Expr tanh(const Expr& x) {
    const Expr a = s(abs(x));
    const Expr em = s(expm1(a * c(2)));
    return copysign(select(gt(a, c(f64() ? 22 : 10)), c(1), div(em, em + c(2))), x);
  }

  Expr erf(const Expr& x) {
    if (f64()) {  // through f32 for now (see the header)
      Math m32(b_, DType::F32);
      return cast(DType::F64, m32.erf(b_.share(cast(DType::F32, x))));
    }
    const Expr a = s(abs(x));
    const Expr small = a * poly(a * a, erf_coeffs(11));
    const Expr tail = c(1) - fn("exp", {-(a * a)}) * poly(a - c(2.46), kErfcTail);
    const Expr r = select(lt(a, c(1)), small, select(lt(a, c(3.92)), b_.expand(tail), c(1)));
    return select(is_nan(x), x, copysign(r, x));
  }

  // sin/cos/tan: x = k pi/2 + r, |r| <= pi/4. f32 reduces in f64 (two-part
  // pi/2), which stays exact far beyond any argument ML code produces.
  Expr trig(const Expr& x, Trig which) {
    const DType rt = DType::F64;
    Math m64(b_, rt);
    const Expr xd = s(cast(rt, x));
    const Expr k = s(m64.fn("rint", {xd * m64.c(0.636619772367581343075535053490057448L)}));
    Expr r = s(m64.fma(-k, m64.hi(kPio2F64), xd));
    r = s(m64.fma(-k, m64.lo(kPio2F64), r));
    if (f64()) r = s(m64.fma(-k, m64.c(kPio2F64Lo2), r));
    // k == 0 keeps x itself (and the sign of -0). Beyond 2^28 (f32) / 2^30
    // (f64) the reduction is inexact: r = 0 keeps the result in [-1, 1].
    const Expr huge = both(gt(m64.abs(xd), m64.c(f64() ? 0x1p30 : 0x1p28)), unary(UnaryOp::Not, is_inf(xd)));
    const Expr rr = s(select(eq(k, m64.c(0)), x, select(huge, c(0), cast(t_, r))));
    const Expr q = s(binary(BinaryOp::And, cast(DType::I64, k), Expr(3)));
    const Expr z = s(rr * rr);
    // sin(-0) is -0, which the fma below would turn into +0.
    const Expr sn = s(select(eq(rr, c(0)), rr, odd(rr, z, sin_coeffs(f64() ? 9 : 5))));
    const Expr cs = s(even(z, cos_coeffs(f64() ? 10 : 6)));
    const Expr odd_q = s(eq(binary(BinaryOp::And, q, Expr(1)), Expr(1)));
    switch (which) {
      case Trig::Sin: {
        const Expr v = s(select(odd_q, cs, sn));
        return select(eq(binary(BinaryOp::And, q, Expr(2)), Expr(2)), -v, v);
      }
      case Trig::Cos: {
        const Expr v = s(select(odd_q, sn, cs));
        return select(eq(binary(BinaryOp::And, q + 1, Expr(2)), Expr(2)), -v, v);
      }
      case Trig::Tan: return select(odd_q, -div(cs, sn), div(sn, cs));
    }
    fail("math_expand: unknown trig function");
  }

  // atan: |x| > 1 uses pi/2 - atan(1/|x|); beyond tan(pi/8) uses
  // pi/4 + atan((b - 1) / (b + 1)); Taylor on |c| <= tan(pi/8).
  Expr atan(const Expr& x) {
    const Expr a = s(abs(x));
    const Expr inv = s(gt(a, c(1)));
    const Expr b = s(select(inv, div(c(1), a), a));
    const Expr mid = s(gt(b, c(0.414213562373095048801688724209698079L)));
    const Expr cc = s(select(mid, div(b - c(1), b + c(1)), b));
    const Expr p = s(odd(cc, cc * cc, atan_coeffs(f64() ? 22 : 10)));
    const Expr r = s(select(mid, (p + c(pio2().lo * 0.5)) + c(pio2().hi * 0.5), p));
    return copysign(select(inv, (hi(pio2()) - r) + lo(pio2()), r), x);
  }

  // asin on [0, 1/2] by Taylor (`a` >= 0).
  Expr asin_series(const Expr& a, const Expr& z) const { return odd(a, z, asin_coeffs(f64() ? 27 : 12)); }

  // asin |x| > 1/2: pi/2 - 2 asin(sqrt((1 - |x|) / 2)). Returns 2 asin(sqrt(w)).
  Expr twice_asin_sqrt(const Expr& w) {
    const Expr sq = s(fn("sqrt", {w}));
    return c(2) * asin_series(sq, w);
  }

  Expr asin(const Expr& x) {
    const Expr a = s(abs(x));
    const Expr w = s((c(1) - a) * c(0.5));
    const Expr large = (hi(pio2()) - twice_asin_sqrt(w)) + lo(pio2());
    return copysign(select(binary(BinaryOp::Le, a, c(0.5)), asin_series(a, a * a), large), x);
  }

  Expr acos(const Expr& x) {
    const Expr a = s(abs(x));
    const Expr small = (hi(pio2()) - (copysign(asin_series(a, a * a), x) - lo(pio2())));
    const Expr pos = s(twice_asin_sqrt(s((c(1) - a) * c(0.5))));
    const Expr neg = (c(2 * pio2().hi) - pos) + c(2 * pio2().lo);
    return select(binary(BinaryOp::Le, a, c(0.5)), small, select(gt(x, c(0)), pos, neg));
  }

  // Above `big`, exp(|x|) overflows before sinh/cosh do: (exp(|x|/2) / 2) exp(|x|/2).
  Expr big_half_exp(const Expr& a) {
    const Expr h = s(exp(a * c(0.5)));
    return (h * c(0.5)) * h;
  }
  Expr overflow_edge() const { return c(f64() ? 709 : 88); }

  Expr sinh(const Expr& x) {
    const Expr a = s(abs(x));
    const Expr em = s(expm1(a));
    const Expr mid = c(0.5) * (em + div(em, em + c(1)));
    return copysign(select(gt(a, overflow_edge()), big_half_exp(a), mid), x);
  }

  Expr cosh(const Expr& x) {
    const Expr a = s(abs(x));
    const Expr e = s(exp(a));
    const Expr mid = c(0.5) * (e + div(c(1), e));
    return select(gt(a, overflow_edge()), big_half_exp(a), mid);
  }

  // Beyond 2^12 (f32) / 2^28 (f64), sqrt(x^2 +- 1) == x to the type's precision.
  Expr huge() const { return c(f64() ? 0x1p28 : 0x1p12); }
  Expr log_twice(const Expr& a) { return log(a) + c(0.693147180559945309417232121458176568L); }

  Expr asinh(const Expr& x) {
    const Expr a = s(abs(x));
    const Expr a2 = s(a * a);
    const Expr mid = log1p(a + div(a2, c(1) + fn("sqrt", {c(1) + a2})));
    return copysign(select(gt(a, huge()), log_twice(a), mid), x);
  }

  Expr acosh(const Expr& x) {
    const Expr t = s(x - c(1));
    const Expr mid = log1p(t + fn("sqrt", {t * (x + c(1))}));
    return select(lt(x, c(1)), nan(), select(gt(x, huge()), log_twice(x), mid));
  }

  Expr atanh(const Expr& x) {
    const Expr a = s(abs(x));
    return copysign(c(0.5) * log1p(div(c(2) * a, c(1) - a)), x);
  }

  // C pow, computed as exp(y log|x|) in f64 (f32 results are then exact to
  // rounding), with the sign and special cases of C99 Annex F.
  Expr pow(const Expr& x0, const Expr& y0) {
    // f32 x^2, x^3, x^4 with a constant exponent (GELU's x^3) as f64
    // products: x*x is exact in f64 and the one rounding of x^3 or x^4 to
    // f64 is 2^-29 f32 ulp, so the f32 result is within 0.5 ulp + 2^-29;
    // signs, zeros, infinities and NaN come out as C pow's.
    if (!f64() && y0->kind == ExprKind::FloatImm) {
      const double y = y0->float_value;
      if (y == 2 || y == 3 || y == 4) {
        const Expr x = s(cast(DType::F64, x0)), x2 = s(x * x);
        return cast(t_, y == 2 ? x2 : y == 3 ? x2 * x : x2 * x2);
      }
    }
    if (!f64()) {
      Math m64(b_, DType::F64);
      return cast(t_, m64.pow(cast(DType::F64, x0), cast(DType::F64, y0)));
    }
    const Expr x = s(x0), y = s(y0);
    const Expr m = s(exp(y * log(abs(x))));
    const Expr y_int = s(eq(fn("trunc", {y}), y));
    const Expr half = s(y * c(0.5));
    const Expr y_odd = s(both(y_int, ne(fn("trunc", {half}), half)));
    const Expr neg = s(lt(copysign(c(1), x), c(0)));
    Expr r = select(both(neg, y_odd), -m, m);
    r = select(both(both(lt(x, c(0)), unary(UnaryOp::Not, is_inf(x))), unary(UnaryOp::Not, y_int)), nan(), r);
    const Expr one = either(either(eq(x, c(1)), eq(y, c(0))), both(eq(abs(x), c(1)), is_inf(y)));
    return select(one, c(1), r);
  }

  Builder& b_;
  DType t_, it_;
};

Expr Builder::expand(const Expr& e) {
  Expr cur = map_args(e, [&](const Expr& a) { return expand(a); });
  if (cur->kind != ExprKind::Call || is_primitive_intrinsic(cur->name)) return cur;
  const DType t = cur->dtype;
  TS_CHECK(t == DType::F32 || t == DType::F64 || t == DType::F16 || t == DType::BF16,
           "math_expand: ", cur->name, " of ", dtype_name(t));
  const bool native = native_.count(cur->name) != 0;
  if (t == DType::F32 || t == DType::F64) return native ? cur : Math(*this, t).call_named(cur->name, cur->args);
  std::vector<Expr> wide;
  for (const Expr& a : cur->args) wide.push_back(share(cast(DType::F32, a)));
  return cast(t, native ? call(cur->name, DType::F32, wide) : Math(*this, DType::F32).call_named(cur->name, wide));
}

Stmt expand_stmt(const Stmt& s, Names& names, const std::set<std::string>& native) {
  if (s->kind == StmtKind::Contract || s->kind == StmtKind::Attention) {
    return map_stmt(
        s,
        [&](const Expr& e) {
          Builder b(names, native);
          return b.inline_lets(b.expand(e));
        },
        [&](const Stmt& body) { return expand_stmt(body, names, native); });
  }
  Builder b(names, native);
  Stmt r = map_stmt(s, [&](const Expr& e) { return b.expand(e); },
                    [&](const Stmt& body) { return expand_stmt(body, names, native); });
  return b.wrap(r);
}

}  // namespace

Stmt expand_math(const Stmt& s, const std::set<std::string>& taken, const std::set<std::string>& native) {
  Names names(taken);
  return expand_stmt(s, names, native);
}

Kernel expand_math(const Kernel& k, const std::set<std::string>& native) {
  std::set<std::string> taken = names_in(k.body);
  taken.insert(k.syms.begin(), k.syms.end());
  Kernel out = k;
  out.body = expand_math(k.body, taken, native);
  return out;
}

}  // namespace tessel::loop
