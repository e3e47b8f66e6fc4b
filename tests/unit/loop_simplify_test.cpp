#include <gtest/gtest.h>

#include <cstring>
#include <random>

#include "loop_test_util.h"
#include "tessel/loop/eval.h"
#include "tessel/loop/parser.h"
#include "tessel/loop/printer.h"
#include "tessel/loop/simplify.h"
#include "tessel/loop/verifier.h"

namespace tessel::loop {
namespace {

const Expr x = var("x"), y = var("y");
const Expr f = var("f", DType::F32);
const Expr b8 = var("b8", DType::I8);

Expr f32(double v) { return float_imm(DType::F32, v); }
std::string simp(const Expr& e, const Bounds& b = {}) { return print(simplify(e, b)); }

TEST(LoopSimplify, IdentityRules) {
  EXPECT_EQ(simp(x * 1), "x");
  EXPECT_EQ(simp(1 * x), "x");
  EXPECT_EQ(simp(x + 0), "x");
  EXPECT_EQ(simp(0 + x), "x");
  EXPECT_EQ(simp(x - 0), "x");
  EXPECT_EQ(simp(x * 0), "0");
  EXPECT_EQ(simp(x - x), "0");
  EXPECT_EQ(simp((x + y) - y), "x");
  EXPECT_EQ(simp((x + 3) + 4), "x + 7");
  EXPECT_EQ(simp((x + 3) - 5), "x + -2");
  EXPECT_EQ(simp((x * 3) * 4), "x * 12");
  EXPECT_EQ(simp(-(-x)), "x");
  EXPECT_EQ(simp(binary(BinaryOp::Div, x, 1)), "x");
  EXPECT_EQ(simp(binary(BinaryOp::Mod, x, 1)), "0");
}

TEST(LoopSimplify, FloatsKeepTheirSemantics) {
  EXPECT_EQ(simp(f * f32(1)), "f");
  EXPECT_EQ(simp(f - f32(0)), "f");
  EXPECT_EQ(simp(f + f32(-0.0)), "f");
  // Not identities for floats: -0 + 0 = +0, inf * 0 = NaN, NaN - NaN = NaN.
  EXPECT_EQ(simp(f + f32(0)), "f + 0.0f32");
  EXPECT_EQ(simp(f * f32(0)), "f * 0.0f32");
  EXPECT_EQ(simp(f - f), "f - f");
  EXPECT_EQ(simp(binary(BinaryOp::Eq, f, f)), "f == f");
  // No reassociation: (f + 1) + 2 is not f + 3 in floating point.
  EXPECT_EQ(simp((f + f32(1)) + f32(2)), "f + 1.0f32 + 2.0f32");
  EXPECT_EQ(simp(f32(0.1) + f32(0.2)), "0.3f32");  // folded in f32
  EXPECT_EQ(simp(float_imm(DType::F64, 0.1) + float_imm(DType::F64, 0.2)), "0.30000000000000004f64");
}

TEST(LoopSimplify, ConstantFoldingUsesExactSemantics) {
  EXPECT_EQ(simp(floordiv(Expr(-7), 2)), "-4");
  EXPECT_EQ(simp(floormod(Expr(-7), 2)), "1");
  EXPECT_EQ(simp(binary(BinaryOp::Div, Expr(-7), Expr(2))), "-3");
  EXPECT_EQ(simp(binary(BinaryOp::Mod, Expr(-7), Expr(2))), "-1");
  EXPECT_EQ(simp(int_imm(DType::I8, 127) + int_imm(DType::I8, 1)), "-128i8");
  EXPECT_EQ(simp(min(Expr(3), Expr(-2))), "-2");
  EXPECT_EQ(simp(max(f32(1), float_imm(DType::F32, NAN))), "nanf32");
  EXPECT_EQ(simp(cast(DType::I32, f32(-2.7))), "-2i32");
  // Undefined at run time: left for run time to report.
  EXPECT_EQ(simp(binary(BinaryOp::Div, Expr(1), Expr(0))), "1 / 0");
  // Transcendental calls are not folded (math_expand decides their bits).
  EXPECT_EQ(simp(call("exp", DType::F32, {f32(1)})), "exp(1.0f32)");
  EXPECT_EQ(simp(call("sqrt", DType::F32, {f32(4)})), "2.0f32");
}

TEST(LoopSimplify, FloorDivAndModRules) {
  EXPECT_EQ(simp(floordiv(x * 8, 8)), "x");
  EXPECT_EQ(simp(floordiv(x * 16, 8)), "x * 2");
  EXPECT_EQ(simp(floormod(x * 8, 8)), "0");
  EXPECT_EQ(simp(floormod(x + y * 8, 8)), "floormod(x, 8)");
  EXPECT_EQ(simp(floordiv(x + y * 8, 8)), "floordiv(x, 8) + y");
  EXPECT_EQ(simp(floordiv(x, 1)), "x");
  EXPECT_EQ(simp(floormod(x, 1)), "0");
  // With ranges: 0 <= x < 8.
  Bounds b{{"x", {0, 7}}};
  EXPECT_EQ(simp(floormod(x, 8), b), "x");
  EXPECT_EQ(simp(floordiv(x, 8), b), "0");
  EXPECT_EQ(simp(floormod(x + y * 8, 8), b), "x");
  EXPECT_EQ(simp(floormod(x, 4), b), "floormod(x, 4)");
  // Multiples of the divisor anywhere in a sum, multiples of it too (a
  // channel-blocked index: (z * 64 + y * 16 + x) over blocks of 16).
  const Expr z = var("z");
  EXPECT_EQ(simp(floordiv(z * 64 + (y * 16 + x), 16), {{"x", {0, 15}}}), "z * 4 + y");
  EXPECT_EQ(simp(floormod(z * 64 + (y * 16 + x), 16), {{"x", {0, 15}}}), "x");
  EXPECT_EQ(simp(floordiv((z * 24 + x) + y * 8, 8)), "floordiv(x, 8) + (z * 3 + y)");
  EXPECT_EQ(simp(floormod(z * 24 + x + y * 12, 8)), "floormod(x + y * 12, 8)");
  // Narrow integers wrap: no cancellation.
  Expr c8 = int_imm(DType::I8, 8);
  EXPECT_EQ(simp(floordiv(b8 * c8, c8)), "floordiv(b8 * 8i8, 8i8)");
}

TEST(LoopSimplify, MinMaxSelectAndLogic) {
  Bounds b{{"x", {0, 7}}};
  EXPECT_EQ(simp(min(x, 8), b), "x");
  EXPECT_EQ(simp(max(x, 8), b), "8");
  EXPECT_EQ(simp(min(x, 4), b), "min(x, 4)");
  EXPECT_EQ(simp(min(x, x)), "x");
  EXPECT_EQ(simp(binary(BinaryOp::Lt, x, 8), b), "true");
  EXPECT_EQ(simp(binary(BinaryOp::Ge, x, 8), b), "false");
  EXPECT_EQ(simp(binary(BinaryOp::Lt, x, 4), b), "x < 4");
  EXPECT_EQ(simp(select(bool_imm(true), x, y)), "x");
  EXPECT_EQ(simp(select(binary(BinaryOp::Lt, x, y), y, y)), "y");
  Expr c = binary(BinaryOp::Lt, x, y);
  EXPECT_EQ(simp(binary(BinaryOp::And, c, bool_imm(true))), "x < y");
  EXPECT_EQ(simp(binary(BinaryOp::Or, c, bool_imm(true))), "true");
  EXPECT_EQ(simp(unary(UnaryOp::Not, unary(UnaryOp::Not, c))), "x < y");
}

Kernel kernel(const std::string& text) { return testing::verified_kernel(text); }

TEST(LoopSimplify, StatementRules) {
  Kernel k = kernel(
      "kernel s(in %a: f32[16], out %o: f32[16]) {\n"
      "  let one = 1\n"
      "  for i in [0, 1) {\n"
      "    for j in [0, 16) {\n"
      "      let unused = j * 2\n"
      "      if j < 16 {\n"
      "        o[j * one + i] = a[floormod(j, 16)] * 1.0f32\n"
      "      } else {\n"
      "        o[j] = 0.0f32\n"
      "      }\n"
      "      assert j >= 0, \"negative\"\n"
      "    }\n"
      "  }\n"
      "  for e in [0, 0) {\n"
      "    o[e] = 1.0f32\n"
      "  }\n"
      "  if false {\n"
      "    o[0] = 2.0f32\n"
      "  }\n"
      "}\n");
  EXPECT_EQ(print(simplify(k)),
            "kernel s(in %a: f32[16], out %o: f32[16]) {\n"
            "  for j in [0, 16) {\n"
            "    o[j] = a[j]\n"
            "  }\n"
            "}\n");
}

// Runs a kernel before and after simplification on the same random inputs
// and expects bitwise-equal outputs.
void expect_same_results(const std::string& text, int64_t n, int trials = 5) {
  Kernel k = kernel(text);
  Kernel s = simplify(k);
  verify(s);
  std::mt19937 rng(7);
  for (int t = 0; t < trials; ++t) {
    std::vector<std::vector<uint8_t>> ref, got;
    std::vector<void*> pr, pg;
    for (const BufferRef& b : k.params) {
      int64_t numel = 1;
      for (const Expr& d : b->shape) numel *= eval_index(d, {{"n", n}});
      std::vector<uint8_t> bytes(static_cast<size_t>(numel * dtype_storage_size(b->dtype)));
      if (b->dtype == DType::F32) {
        std::normal_distribution<float> d(0, 4);
        for (int64_t i = 0; i < numel; ++i) {
          float v = d(rng);
          std::memcpy(bytes.data() + i * 4, &v, 4);
        }
      } else {
        for (uint8_t& v : bytes) v = static_cast<uint8_t>(rng());
      }
      ref.push_back(bytes);
      got.push_back(bytes);
    }
    for (size_t i = 0; i < ref.size(); ++i) {
      pr.push_back(ref[i].data());
      pg.push_back(got[i].data());
    }
    ASSERT_EQ(run_kernel(k, pr, {n}), run_kernel(s, pg, {n}));
    EXPECT_EQ(ref, got) << print(k) << "\nsimplified:\n" << print(s);
  }
}

TEST(LoopSimplify, NumericallyIdenticalOnRandomInputs) {
  expect_same_results(
      "kernel tile(in %a: f32[n, 32], out %o: f32[n, 32]) syms(n) {\n"
      "  parallel for i in [0, n) {\n"
      "    for jo in [0, 4) {\n"
      "      vectorized for ji in [0, 8) {\n"
      "        let j = jo * 8 + ji\n"
      "        o[floordiv(j, 32) + i, floormod(j, 32)] = a[i, floormod(jo * 8 + ji, 8) + floordiv(jo * 8 + ji, 8) * 8] * 1.0f32 + -0.0f32\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "}\n",
      3);
  expect_same_results(
      "kernel ints(in %a: i8[n], in %b: i32[n], out %o: i32[n], out %p: i8[n]) syms(n) {\n"
      "  for i in [0, n) {\n"
      "    let k = 1\n"
      "    o[i * k] = (b[i] + 3i32 + 4i32) * 2i32 * 3i32 - b[i] * 0i32 + max(b[i], b[i]) - b[i] + floordiv(b[i] * 4i32, 4i32)\n"
      "    p[i] = a[i] * 1i8 + 0i8 - -(-a[i]) + floormod(a[i] * 8i8, 8i8) + select(i < n, a[i], 0i8)\n"
      "  }\n"
      "}\n",
      17);
  expect_same_results(
      "kernel floats(in %a: f32[n], out %o: f32[n]) syms(n) {\n"
      "  for i in [0, n) {\n"
      "    for u in [0, 1) {\n"
      "      o[i + u] = (a[i] + 0.5f32 + 0.25f32) * 1.0f32 / 1.0f32 - 0.0f32 + min(a[i], a[i]) + (0.1f32 + 0.2f32) * a[i]\n"
      "    }\n"
      "  }\n"
      "}\n",
      33);
}

}  // namespace
}  // namespace tessel::loop
