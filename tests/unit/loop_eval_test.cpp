#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "loop_test_util.h"
#include "tessel/ir/tensor.h"
#include "tessel/loop/eval.h"
#include "tessel/loop/parser.h"
#include "tessel/loop/verifier.h"
#include "tessel/support/error.h"

namespace tessel::loop {
namespace {

const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

Kernel kernel(const std::string& text) { return testing::verified_kernel(text); }

TEST(LoopEval, AddReluMatchesADirectComputation) {
  Kernel k = kernel(
      "kernel add_relu(in %x: f32[n, 8], in %y: f32[8], out %z: f32[n, 8]) syms(n) {\n"
      "  parallel for i0 in [0, n) {\n"
      "    vectorized for i1 in [0, 8) {\n"
      "      z[i0, i1] = max(x[i0, i1] + y[i1], 0.0f32)\n"
      "    }\n"
      "  }\n"
      "}\n");
  const int n = 5;
  std::mt19937 rng(1);
  std::normal_distribution<float> d;
  std::vector<float> x(n * 8), y(8), z(n * 8, -1);
  for (float& v : x) v = d(rng);
  for (float& v : y) v = d(rng);
  ASSERT_EQ(run_kernel(k, {x.data(), y.data(), z.data()}, {n}), 0);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < 8; ++j) EXPECT_EQ(z[i * 8 + j], std::max(x[i * 8 + j] + y[j], 0.0f));
}

// Runs `o[] = <expr over a[], b[]>` with a, b, o of the given types.
template <class T, class R>
R eval_binary(const std::string& type, const std::string& rtype, const std::string& expr, T a, T b) {
  Kernel k = kernel("kernel e(in %a: " + type + "[], in %b: " + type + "[], out %o: " + rtype + "[]) {\n  o[] = " +
                    expr + "\n}\n");
  R out{};
  EXPECT_EQ(run_kernel(k, {&a, &b, &out}, {}), 0);
  return out;
}

TEST(LoopEval, IntegersWrapAtTheirWidth) {
  EXPECT_EQ((eval_binary<int8_t, int8_t>("i8", "i8", "a[] + b[]", 127, 1)), -128);
  EXPECT_EQ((eval_binary<uint8_t, uint8_t>("u8", "u8", "a[] - b[]", 0, 1)), 255);
  EXPECT_EQ((eval_binary<int32_t, int32_t>("i32", "i32", "a[] * b[]", 65536, 65536)), 0);
  EXPECT_EQ((eval_binary<int64_t, int64_t>("i64", "i64", "a[] / b[]", INT64_MIN, -1)), INT64_MIN);
  EXPECT_EQ((eval_binary<int16_t, int16_t>("i16", "i16", "~a[] ^ b[]", 0, 5)), ~0 ^ 5);
  EXPECT_EQ((eval_binary<uint32_t, uint32_t>("u32", "u32", "a[] >> b[]", 0x80000000u, 31)), 1u);
  EXPECT_EQ((eval_binary<int32_t, int32_t>("i32", "i32", "a[] >> b[]", INT32_MIN, 31)), -1);
  EXPECT_EQ((eval_binary<uint8_t, uint8_t>("u8", "u8", "a[] << b[]", 0x81, 1)), 2);
  EXPECT_EQ((eval_binary<uint64_t, uint8_t>("u64", "bool", "a[] > b[]", ~uint64_t{0}, 1)), 1);
  EXPECT_EQ((eval_binary<int64_t, int64_t>("i64", "i64", "min(a[], b[])", -3, 2)), -3);
  EXPECT_EQ((eval_binary<uint16_t, uint16_t>("u16", "u16", "max(a[], b[])", 65535, 2)), 65535);
}

TEST(LoopEval, DivisionFlavours) {
  struct Case {
    int64_t a, b, div, mod, fdiv, fmod;
  };
  for (const Case& c : {Case{7, 2, 3, 1, 3, 1}, Case{-7, 2, -3, -1, -4, 1}, Case{7, -2, -3, 1, -4, -1},
                        Case{-7, -2, 3, -1, 3, -1}, Case{-8, 2, -4, 0, -4, 0}}) {
    EXPECT_EQ((eval_binary<int64_t, int64_t>("i64", "i64", "a[] / b[]", c.a, c.b)), c.div);
    EXPECT_EQ((eval_binary<int64_t, int64_t>("i64", "i64", "a[] % b[]", c.a, c.b)), c.mod);
    EXPECT_EQ((eval_binary<int64_t, int64_t>("i64", "i64", "floordiv(a[], b[])", c.a, c.b)), c.fdiv);
    EXPECT_EQ((eval_binary<int64_t, int64_t>("i64", "i64", "floormod(a[], b[])", c.a, c.b)), c.fmod);
  }
  EXPECT_THROW((eval_binary<int32_t, int32_t>("i32", "i32", "a[] / b[]", 1, 0)), Error);
  EXPECT_THROW((eval_binary<int32_t, int32_t>("i32", "i32", "a[] << b[]", 1, 32)), Error);
  EXPECT_THROW((eval_binary<int32_t, int32_t>("i32", "i32", "a[] >> b[]", 1, -1)), Error);
}

TEST(LoopEval, FloatSemantics) {
  // f32 arithmetic rounds in f32 (in double the sum would keep the 1).
  EXPECT_EQ((eval_binary<float, float>("f32", "f32", "a[] + b[] - a[]", 1e8f, 1.0f)), 0.0f);
  EXPECT_EQ((eval_binary<double, double>("f64", "f64", "a[] + b[] - a[]", 1e8, 1.0)), 1.0);
  EXPECT_TRUE(std::isnan(eval_binary<float, float>("f32", "f32", "min(a[], b[])", 1.0f, kNaN)));
  EXPECT_TRUE(std::isnan(eval_binary<float, float>("f32", "f32", "max(a[], b[])", kNaN, 1.0f)));
  EXPECT_TRUE(std::signbit(eval_binary<float, float>("f32", "f32", "min(a[], b[])", 0.0f, -0.0f)));
  EXPECT_FALSE(std::signbit(eval_binary<float, float>("f32", "f32", "max(a[], b[])", -0.0f, 0.0f)));
  EXPECT_EQ((eval_binary<float, uint8_t>("f32", "bool", "a[] < b[]", kNaN, 1.0f)), 0);
  EXPECT_EQ((eval_binary<float, uint8_t>("f32", "bool", "a[] == b[]", kNaN, kNaN)), 0);
  EXPECT_EQ((eval_binary<float, uint8_t>("f32", "bool", "a[] != b[]", kNaN, kNaN)), 1);
  EXPECT_EQ((eval_binary<float, float>("f32", "f32", "a[] % b[]", -7.5f, 2.0f)), std::fmod(-7.5f, 2.0f));
  EXPECT_EQ((eval_binary<float, float>("f32", "f32", "fma(a[], b[], -(a[] * b[]))", 1.0f + 0x1p-23f, 1.0f - 0x1p-23f)),
            std::fma(1.0f + 0x1p-23f, 1.0f - 0x1p-23f, -((1.0f + 0x1p-23f) * (1.0f - 0x1p-23f))));
  EXPECT_EQ((eval_binary<float, float>("f32", "f32", "a[] / b[]", 1.0f, 0.0f)), kInf);
  // f16 arithmetic rounds to f16 after each operation: 2048 + 1 is 2048.
  uint16_t h2048 = f32_to_f16_bits(2048), h1 = f32_to_f16_bits(1);
  EXPECT_EQ((eval_binary<uint16_t, uint16_t>("f16", "f16", "a[] + b[]", h2048, h1)), h2048);
}

TEST(LoopEval, CastsMatchTheReferenceInterpreter) {
  const std::vector<DType> types = {DType::Bool, DType::I8,  DType::I16, DType::I32, DType::I64, DType::U8,
                                    DType::U16,  DType::U32, DType::U64, DType::F16, DType::BF16, DType::F32,
                                    DType::F64};
  const std::vector<double> values = {0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 127.5, 128.0, -129.0, 255.0, 256.0,
                                      65535.7, -32769.0, 3e9, -3e9, 1e19, -1e19, 1e30, 0.1, kInf, -kInf, kNaN};
  for (DType from : types) {
    Tensor src(from, {static_cast<int64_t>(values.size())});
    for (size_t i = 0; i < values.size(); ++i) src.set_f64(static_cast<int64_t>(i), values[i]);
    for (DType to : types) {
      const std::string f(dtype_name(from)), t(dtype_name(to));
      Kernel k = kernel("kernel c(in %a: " + f + "[m], out %o: " + t + "[m]) syms(m) {\n  for i in [0, m) {\n"
                        "    o[i] = cast<" + t + ">(a[i])\n  }\n}\n");
      Tensor want = src.cast(to);
      Tensor got(to, src.shape());
      ASSERT_EQ(run_kernel(k, {const_cast<uint8_t*>(src.raw()), got.mutable_raw()}, {src.numel()}), 0);
      EXPECT_TRUE(got.bitwise_equal(want)) << f << " -> " << t;
    }
  }
}

TEST(LoopEval, BitcastReinterprets) {
  float one = 1.0f;
  int32_t bits = 0;
  Kernel k = kernel("kernel b(in %a: f32[], out %o: i32[]) {\n  o[] = bitcast<i32>(a[])\n}\n");
  ASSERT_EQ(run_kernel(k, {&one, &bits}, {}), 0);
  EXPECT_EQ(bits, 0x3f800000);
}

TEST(LoopEval, AssertsReturnTheirPreOrderNumber) {
  Kernel k = kernel(
      "kernel a(out %o: i64[4]) syms(n) {\n"
      "  assert n >= 0, \"n is negative\"\n"
      "  for i in [0, 4) {\n"
      "    o[i] = i\n"
      "    assert i < n, \"i reached n\"\n"
      "  }\n"
      "}\n");
  std::vector<int64_t> o(4, -1);
  EXPECT_EQ(run_kernel(k, {o.data()}, {-1}), 1);
  EXPECT_EQ(o[0], -1);
  EXPECT_EQ(run_kernel(k, {o.data()}, {2}), 2);
  EXPECT_EQ(k.assert_messages()[1], "i reached n");
  EXPECT_EQ(o[2], 2);  // the store before the failing assert ran
  EXPECT_EQ(o[3], -1);
  EXPECT_EQ(run_kernel(k, {o.data()}, {9}), 0);
}

TEST(LoopEval, ParallelRangeRunsOnlyItsIterations) {
  Kernel k = kernel(
      "kernel p(out %o: i64[n]) syms(n) {\n"
      "  allocate %t: i64[1] local\n"
      "  parallel for i in [2, 2 + (n - 2)) {\n"
      "    t[0] = t[0] + 1\n"
      "    o[i] = i * 10 + t[0]\n"
      "  }\n"
      "}\n");
  std::vector<int64_t> o(8, -1);
  ASSERT_EQ(run_kernel_range(k, {o.data()}, {8}, 1, 3), 0);
  EXPECT_EQ(o, (std::vector<int64_t>{-1, -1, -1, 31, 42, -1, -1, -1}));
  ASSERT_EQ(run_kernel(k, {o.data()}, {8}), 0);
  EXPECT_EQ(o, (std::vector<int64_t>{-1, -1, 21, 32, 43, 54, 65, 76}));
}

TEST(LoopEval, OutOfBoundsAccessThrows) {
  Kernel k = kernel("kernel b(out %o: f32[n]) syms(n) {\n  for i in [0, n + 1) {\n    o[i] = 0.0f32\n  }\n}\n");
  std::vector<float> o(3);
  EXPECT_THROW(run_kernel(k, {o.data()}, {3}), Error);
  // Select evaluates both arms.
  Kernel s = kernel("kernel s(in %a: f32[n], out %o: f32[n]) syms(n) {\n  for i in [0, n) {\n"
                    "    o[i] = select(i + 1 < n, a[i + 1], 0.0f32)\n  }\n}\n");
  std::vector<float> a(3);
  EXPECT_THROW(run_kernel(s, {a.data(), o.data()}, {3}), Error);
}

// Under a condition that varies across a vectorized loop's lanes (also
// through a let) only the arm a lane takes is evaluated, as the CPU code
// generator masks its loads.
TEST(LoopEval, LaneVaryingSelectEvaluatesTheArmTaken) {
  Kernel s = kernel("kernel s(in %a: f32[3], out %o: f32[4]) {\n  vectorized for i in [0, 4) {\n"
                    "    let j = i + 1\n"
                    "    o[i] = select(j < 4, a[i], 0.0f32) + select(i >= 1, a[i + -1], 1.0f32)\n  }\n}\n");
  std::vector<float> a{1, 2, 3}, o(4);
  ASSERT_EQ(run_kernel(s, {a.data(), o.data()}, {}), 0);
  EXPECT_EQ(o, (std::vector<float>{2, 3, 5, 3}));
}

TEST(LoopEval, WrongArgumentCountsThrow) {
  Kernel k = kernel("kernel b(out %o: f32[n]) syms(n) {\n}\n");
  std::vector<float> o(3);
  EXPECT_THROW(run_kernel(k, {}, {3}), Error);
  EXPECT_THROW(run_kernel(k, {o.data()}, {}), Error);
}

TEST(LoopEval, EvalIndexOverSyms) {
  Kernel k = parse_kernel("kernel e(in %a: f32[floordiv(n + 3, 4) * 4, max(m, 2) - select(n > m, 1, 0)]) syms(n, m) {\n}\n");
  std::map<std::string, int64_t> syms{{"n", 5}, {"m", 1}};
  EXPECT_EQ(eval_index(k.params[0]->shape[0], syms), 8);
  EXPECT_EQ(eval_index(k.params[0]->shape[1], syms), 1);
  EXPECT_THROW(eval_index(var("q"), syms), Error);
}

}  // namespace
}  // namespace tessel::loop
