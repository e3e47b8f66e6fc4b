// loop::affine_form (loop/affine.h): index expressions as constant + sum of
// coefficient * variable, with reshape/transpose floordiv/floormod pairs folded.
#include "tessel/loop/affine.h"

#include <gtest/gtest.h>

#include "tessel/loop/eval.h"

namespace tessel::loop {
namespace {

Expr v(const char* n) { return var(n); }

TEST(Affine, SumsAndScaledVariables) {
  const auto f = affine_form(v("i") * Expr(768) + v("k") - Expr(3) * (v("j") - Expr(2)) + -v("k") + v("k"));
  ASSERT_TRUE(f);
  EXPECT_EQ(f->constant, 6);
  EXPECT_EQ(f->coef, (std::map<std::string, int64_t>{{"i", 768}, {"j", -3}, {"k", 1}}));
  // Cancelling terms drop out.
  EXPECT_TRUE(affine_form(v("i") - v("i"))->coef.empty());
}

TEST(Affine, ReshapeDivModPairsFold) {
  // A [S, B, D] view read as [S * B, D]: floordiv(i, 32) * 32 * 768 + floormod(i, 32) * 768 + k.
  const Expr view = floordiv(v("i"), Expr(32)) * Expr(24576) + floormod(v("i"), Expr(32)) * Expr(768) + v("k");
  const auto f = affine_form(view);
  ASSERT_TRUE(f);
  EXPECT_EQ(f->coef, (std::map<std::string, int64_t>{{"i", 768}, {"k", 1}}));
  // The folded form agrees with the expression for every i, negative too.
  for (int64_t i = -70; i <= 70; ++i)
    EXPECT_EQ(eval_index(view, {{"i", i}, {"k", 5}}), 768 * i + 5) << i;
  // Heads split out of a hidden dimension: (i * 12 + h) * 64 + k through / 768 and % 768.
  const Expr x = (v("i") * Expr(12) + v("h")) * Expr(64) + v("k");
  const auto g = affine_form(floordiv(x, Expr(768)) * Expr(768) + floormod(x, Expr(768)));
  ASSERT_TRUE(g);
  EXPECT_EQ(g->coef, (std::map<std::string, int64_t>{{"h", 64}, {"i", 768}, {"k", 1}}));
}

TEST(Affine, WhatIsNotAffine) {
  EXPECT_FALSE(affine_form(v("i") * v("j")));
  EXPECT_FALSE(affine_form(floordiv(v("i"), Expr(32))));                                        // unpaired
  EXPECT_FALSE(affine_form(floordiv(v("i"), Expr(32)) * Expr(31) + floormod(v("i"), Expr(32))));  // wrong ratio
  EXPECT_FALSE(affine_form(floordiv(v("i"), v("n")) * Expr(4) + floormod(v("i"), v("n"))));     // symbolic divisor
  EXPECT_FALSE(affine_form(floormod(v("i"), Expr(0))));
}

}  // namespace
}  // namespace tessel::loop
