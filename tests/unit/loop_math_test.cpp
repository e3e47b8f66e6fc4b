// Measures the error of math_expand's polynomials, run through the loop IR
// evaluator, against long double references over dense sweeps, and checks
// the bounds stated in math_expand.h.
#include <gtest/gtest.h>

#include <bit>
#include <cstdlib>
#include <cmath>
#include <functional>
#include <limits>
#include <random>

#include "tessel/loop/eval.h"
#include "tessel/loop/math_expand.h"
#include "tessel/loop/parser.h"
#include "tessel/loop/printer.h"
#include "tessel/loop/verifier.h"

namespace tessel::loop {
namespace {

using Ref = std::function<long double(long double)>;

// The expanded kernel o[i] = fn(a[i]) (pow: fn(a[i], b[i])).
Kernel expanded(const std::string& fn, const std::string& type, bool binary) {
  const std::string args = binary ? "a[i], b[i]" : "a[i]";
  Kernel k = parse_kernel("kernel m(in %a: " + type + "[n], in %b: " + type + "[n], out %o: " + type +
                          "[n]) syms(n) {\n  for i in [0, n) {\n    o[i] = " + fn + "(" + args +
                          ")\n  }\n}\n");
  Kernel e = expand_math(k);
  verify(e);
  const std::string text = print(e);
  EXPECT_EQ(text.find(fn + "("), std::string::npos) << "not expanded:\n" << text;
  return e;
}

template <class T>
std::vector<T> run(const Kernel& k, std::vector<T> a, std::vector<T> b) {
  std::vector<T> o(a.size());
  b.resize(a.size());
  EXPECT_EQ(run_kernel(k, {a.data(), b.data(), o.data()}, {static_cast<int64_t>(a.size())}), 0);
  return o;
}

// Error of `got` in units of the last place of the reference (the spacing
// of T at |ref|, subnormal spacing below the normal range). NaN/inf must match.
template <class T>
double ulp_error(T got, long double ref) {
  if (std::isnan(ref)) return std::isnan(got) ? 0 : INFINITY;
  const T rounded = static_cast<T>(ref);
  if (std::isinf(rounded)) return got == rounded ? 0 : INFINITY;
  if (std::isnan(got) || std::isinf(got)) return INFINITY;
  const int min_exp = std::numeric_limits<T>::min_exponent - 1;
  const int digits = std::numeric_limits<T>::digits;
  int e = ref == 0 ? min_exp : std::ilogb(static_cast<double>(ref));
  e = std::max(e, min_exp);
  const long double ulp = std::ldexp(1.0L, e - digits + 1);
  return static_cast<double>(std::fabs(static_cast<long double>(got) - ref) / ulp);
}

std::vector<float> f32_sweep(float lo, float hi, int n) {
  std::vector<float> v = {INFINITY, -INFINITY, NAN};
  for (float f : {0.0f, -0.0f, 1e-45f, -1e-45f, 1e-38f, 1e-30f, -1e-20f, 1.0f, -1.0f, 0.5f, -0.5f, 3.4e38f, -3.4e38f})
    if (f >= lo && f <= hi) v.push_back(f);
  // Uniform in value plus uniform in bit pattern (log scale) within [lo, hi].
  for (int i = 0; i < n; ++i) v.push_back(lo + (hi - lo) * (static_cast<float>(i) / static_cast<float>(n)));
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits;
  while (static_cast<int>(v.size()) < 2 * n) {
    float f = std::bit_cast<float>(bits(rng));
    if (f >= lo && f <= hi) v.push_back(f);
  }
  return v;
}

template <class T>
double max_ulp(const std::string& fn, const std::vector<T>& xs, const Ref& ref, std::vector<T> ys = {},
               const std::function<long double(long double, long double)>& ref2 = nullptr) {
  const std::string type = sizeof(T) == 4 ? "f32" : "f64";
  Kernel k = expanded(fn, type, ref2 != nullptr);
  std::vector<T> got = run<T>(k, xs, ys);
  double worst = 0;
  for (size_t i = 0; i < xs.size(); ++i) {
    const long double r = ref2 ? ref2(xs[i], ys[i]) : ref(xs[i]);
    const double e = ulp_error<T>(got[i], r);
    if (e > worst) {
      worst = e;
      if (e == INFINITY) ADD_FAILURE() << fn << "(" << xs[i] << (ref2 ? ", " + std::to_string(ys[i]) : "")
                                       << ") = " << got[i] << ", want " << static_cast<double>(r);
    }
  }
  return worst;
}

struct Case {
  const char* fn;
  Ref ref;
  float lo, hi;
  double bound;
};

long double sigmoid_ref(long double x) { return 1.0L / (1.0L + std::exp(-x)); }

const std::vector<Case>& f32_cases() {
  static const std::vector<Case> cases = {
      {"exp", [](long double x) { return std::exp(x); }, -110, 95, 1},
      {"expm1", [](long double x) { return std::expm1(x); }, -20, 90, 3},
      {"log", [](long double x) { return std::log(x); }, -1, 3.4e38f, 1},
      {"log1p", [](long double x) { return std::log1p(x); }, -1, 1e30f, 3},
      {"sigmoid", sigmoid_ref, -110, 110, 3},
      {"tanh", [](long double x) { return std::tanh(x); }, -12, 12, 4},
      {"erf", [](long double x) { return std::erf(x); }, -5, 5, 3},
      {"sin", [](long double x) { return std::sin(x); }, -1e6f, 1e6f, 2},
      {"cos", [](long double x) { return std::cos(x); }, -1e6f, 1e6f, 2},
      {"tan", [](long double x) { return std::tan(x); }, -1e4f, 1e4f, 3},
      {"atan", [](long double x) { return std::atan(x); }, -1e3f, 1e3f, 2.5},
      {"asin", [](long double x) { return std::asin(x); }, -1.5f, 1.5f, 2},
      {"acos", [](long double x) { return std::acos(x); }, -1.5f, 1.5f, 2},
      {"sinh", [](long double x) { return std::sinh(x); }, -95, 95, 3},
      {"cosh", [](long double x) { return std::cosh(x); }, -95, 95, 3},
      {"asinh", [](long double x) { return std::asinh(x); }, -1e5f, 1e5f, 3},
      {"acosh", [](long double x) { return std::acosh(x); }, 0, 1e5f, 3},
      {"atanh", [](long double x) { return std::atanh(x); }, -1.5f, 1.5f, 3},
  };
  return cases;
}

// Points per sweep (f32: twice this; f64: half). TESSEL_MATH_POINTS raises
// it for a dense run (a million points take about a minute per type).
const int kPoints = [] {
  const char* env = std::getenv("TESSEL_MATH_POINTS");
  return env ? std::atoi(env) : 60000;
}();

// exp's integral exponent k becomes an integer by the mantissa trick, not by
// a float -> int cast (a saturating conversion that LLVM lowers lane by
// lane): the expansion has no such cast, for f32 and f64.
TEST(LoopMath, ExpTakesItsExponentWithoutAFloatToIntCast) {
  for (const char* type : {"f32", "f64"}) {
    SCOPED_TRACE(type);
    const std::string text = print(expanded("exp", type, false));
    for (const std::string to : {"i32>", "i64>"}) {  // cast<i..> that is not a bitcast<i..>
      for (size_t at = text.find("cast<" + to); at != std::string::npos; at = text.find("cast<" + to, at + 1))
        EXPECT_TRUE(at >= 3 && text.compare(at - 3, 3, "bit") == 0) << text;
    }
  }
}

TEST(LoopMath, F32ErrorBounds) {
  for (const Case& c : f32_cases()) {
    double e = max_ulp<float>(c.fn, f32_sweep(c.lo, c.hi, kPoints), c.ref);
    std::printf("f32 %-8s max error %.3f ulp\n", c.fn, e);
    EXPECT_LE(e, c.bound) << c.fn;
  }
}

TEST(LoopMath, F64ErrorBounds) {
  struct Case64 {
    const char* fn;
    Ref ref;
    double lo, hi, bound;
  };
  const std::vector<Case64> cases = {
      {"exp", [](long double x) { return std::exp(x); }, -750, 712, 1},
      {"log", [](long double x) { return std::log(x); }, 0, 1e300, 1},
      {"expm1", [](long double x) { return std::expm1(x); }, -40, 700, 3},
      {"log1p", [](long double x) { return std::log1p(x); }, -1, 1e10, 3},
      {"tanh", [](long double x) { return std::tanh(x); }, -25, 25, 4},
      {"sigmoid", sigmoid_ref, -40, 40, 3},
      {"sin", [](long double x) { return std::sin(x); }, -1e4, 1e4, 2},
      {"cos", [](long double x) { return std::cos(x); }, -1e4, 1e4, 2},
      {"atan", [](long double x) { return std::atan(x); }, -1e3, 1e3, 3},
      {"asin", [](long double x) { return std::asin(x); }, -1, 1, 2.5},
      {"acos", [](long double x) { return std::acos(x); }, -1, 1, 2},
      {"sinh", [](long double x) { return std::sinh(x); }, -20, 20, 3},
      {"cosh", [](long double x) { return std::cosh(x); }, -20, 20, 2},
      {"asinh", [](long double x) { return std::asinh(x); }, -1e5, 1e5, 3},
      {"acosh", [](long double x) { return std::acosh(x); }, 1, 1e5, 3},
      {"atanh", [](long double x) { return std::atanh(x); }, -1, 1, 3.5},
  };
  for (const Case64& c : cases) {
    std::vector<double> xs = {0.0, -0.0, INFINITY, -INFINITY, NAN, 5e-324, 1e-300, -1e-300, 1.0, -1.0};
    std::mt19937_64 rng(5);
    std::uniform_real_distribution<double> u(c.lo, c.hi);
    std::uniform_real_distribution<double> lg(-30, std::log2(std::max(std::fabs(c.lo), std::fabs(c.hi))));
    for (int i = 0; i < kPoints / 4; ++i) {
      xs.push_back(u(rng));
      double v = std::exp2(lg(rng)) * (rng() % 2 ? -1 : 1);
      if (v >= c.lo && v <= c.hi) xs.push_back(v);
    }
    double e = max_ulp<double>(c.fn, xs, c.ref);
    std::printf("f64 %-8s max error %.3f ulp\n", c.fn, e);
    EXPECT_LE(e, c.bound) << c.fn;
  }
}

TEST(LoopMath, F32Pow) {
  std::vector<float> xs, ys;
  const std::vector<float> special = {0.0f, -0.0f, 1.0f, -1.0f, 2.0f, -2.0f, 0.5f, -0.5f, 3.0f, -3.0f,
                                      INFINITY, -INFINITY, NAN, 1e-40f, 1e30f, -7.0f, 2.5f, -2.5f};
  for (float x : special)
    for (float y : special) {
      xs.push_back(x);
      ys.push_back(y);
    }
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> ux(0, 20), uy(-30, 30);
  for (int i = 0; i < kPoints; ++i) {
    float x = ux(rng), y = uy(rng);
    xs.push_back(i % 3 ? x : -x);
    ys.push_back(i % 3 ? y : std::round(y));
  }
  auto ref = [](long double x, long double y) { return std::pow(x, y); };
  double e = max_ulp<float>("pow", xs, nullptr, ys, ref);
  std::printf("f32 pow      max error %.3f ulp\n", e);
  EXPECT_LE(e, 1);
}

// pow(x, 2|3|4) with a constant exponent takes the product path.
TEST(LoopMath, F32PowSmallIntegerConstantExponent) {
  std::vector<float> xs = f32_sweep(-1e13f, 1e13f, 20000);
  for (float f : {1e-20f, -1e-15f, 3e12f, -2e9f, 5e10f}) xs.push_back(f);
  for (int n = 2; n <= 4; ++n) {
    const std::string e = std::to_string(n) + ".0f32";
    Kernel k = expand_math(parse_kernel("kernel m(in %a: f32[n], out %o: f32[n]) syms(n) {\n  for i in [0, n) {\n"
                                        "    o[i] = pow(a[i], " + e + ")\n  }\n}\n"));
    verify(k);
    EXPECT_EQ(print(k).find("exp"), std::string::npos) << "not the product path:\n" << print(k);
    std::vector<float> o(xs.size());
    ASSERT_EQ(run_kernel(k, {xs.data(), o.data()}, {static_cast<int64_t>(xs.size())}), 0);
    double worst = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      const long double ref = std::pow(static_cast<long double>(xs[i]), n);
      worst = std::max(worst, ulp_error<float>(o[i], ref));
      if (xs[i] == 0) EXPECT_EQ(std::signbit(o[i]), std::signbit(std::pow(xs[i], static_cast<float>(n)))) << n;
    }
    std::printf("f32 pow(x, %d) max error %.3f ulp\n", n, worst);
    EXPECT_LE(worst, 0.5 + 1e-6) << n;
  }
}

TEST(LoopMath, SpecialValues) {
  Kernel ex = expanded("exp", "f32", false);
  auto o = run<float>(ex, {-INFINITY, 100.0f, NAN, 0.0f}, {});
  EXPECT_EQ(o[0], 0.0f);
  EXPECT_EQ(o[1], INFINITY);
  EXPECT_TRUE(std::isnan(o[2]));
  EXPECT_EQ(o[3], 1.0f);
  o = run<float>(expanded("log", "f32", false), {0.0f, -1.0f, INFINITY, NAN, -0.0f}, {});
  EXPECT_EQ(o[0], -INFINITY);
  EXPECT_TRUE(std::isnan(o[1]));
  EXPECT_EQ(o[2], INFINITY);
  EXPECT_TRUE(std::isnan(o[3]));
  EXPECT_EQ(o[4], -INFINITY);
  o = run<float>(expanded("tanh", "f32", false), {INFINITY, -INFINITY, -0.0f, NAN}, {});
  EXPECT_EQ(o[0], 1.0f);
  EXPECT_EQ(o[1], -1.0f);
  EXPECT_TRUE(std::signbit(o[2]) && o[2] == 0);
  EXPECT_TRUE(std::isnan(o[3]));
  o = run<float>(expanded("sin", "f32", false), {INFINITY, -0.0f, NAN, 3.4e38f, -1e30f}, {});
  EXPECT_TRUE(std::isnan(o[0]));
  EXPECT_TRUE(std::signbit(o[1]) && o[1] == 0);
  EXPECT_TRUE(std::isnan(o[2]));
  // Beyond the accurate range the result is still a sine's value.
  EXPECT_LE(std::fabs(o[3]), 1.0f);
  EXPECT_LE(std::fabs(o[4]), 1.0f);
}

TEST(LoopMath, HalfPrecisionGoesThroughF32) {
  Kernel k = expanded("exp", "f16", false);
  std::vector<uint16_t> a = {f32_to_f16_bits(1.0f), f32_to_f16_bits(-2.0f)}, b(2);
  auto o = run<uint16_t>(k, a, b);
  EXPECT_EQ(o[0], f32_to_f16_bits(std::exp(1.0f)));
  EXPECT_EQ(o[1], f32_to_f16_bits(std::exp(-2.0f)));
}

TEST(LoopMath, ExpansionIsBranchFreeAndKeepsPrimitives) {
  Kernel k = expanded("sin", "f32", false);
  const std::string text = print(k);
  EXPECT_EQ(text.find("for _"), std::string::npos);
  EXPECT_EQ(text.find("if "), std::string::npos);
  EXPECT_NE(text.find("fma("), std::string::npos);
  // One loop only: the vectorized one we wrote.
  size_t loops = 0;
  for (size_t p = text.find(" for "); p != std::string::npos; p = text.find(" for ", p + 1)) ++loops;
  EXPECT_EQ(loops, 1u);
}

}  // namespace
}  // namespace tessel::loop
