// loop::affine_form (loop/affine.h): index expressions as constant + sum of
// coefficient * variable, with reshape/transpose floordiv/floormod pairs folded.
#include "tessel/loop/affine.h"

#include <gtest/gtest.h>

#include "tessel/loop/eval.h"
#include "tessel/loop/printer.h"
#include "tessel/loop/simplify.h"

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

// Whether e really has the property contiguous_runs claims, by evaluation
// over k in [0, 256) and the other variables in [-20, 20).
bool runs_hold(const Expr& e, int64_t run) {
  for (int64_t i = -20; i < 20; ++i) {
    for (int64_t h = -3; h < 14; ++h) {
      for (int64_t k0 = 0; k0 < 256; k0 += run) {
        const int64_t base = eval_index(e, {{"i", i}, {"h", h}, {"k", k0}});
        if (base % run != 0) return false;
        for (int64_t d = 1; d < run; ++d)
          if (eval_index(e, {{"i", i}, {"h", h}, {"k", k0 + d}}) != base + d) return false;
      }
    }
  }
  return true;
}

TEST(Affine, FoldAffineResolvesReshapeIndexArithmetic) {
  // [N, OC, OH * OW] read as [N, OC, OH, OW]: ((b * 8 + i) * 7 + j / 7) * 7 + j % 7, split by 49 and 8.
  const Expr flat = (((v("b") * Expr(8) + v("i")) * Expr(7) + floordiv(v("j"), Expr(7))) * Expr(7)) + floormod(v("j"), Expr(7));
  const Bounds bounds{{"b", {0, 1}}, {"i", {0, 7}}, {"j", {0, 48}}};
  const Expr row = floormod(floordiv(flat, Expr(49)), Expr(8)), col = floormod(flat, Expr(49));
  EXPECT_EQ(print(simplify(fold_affine(row, bounds), bounds)), "i");
  EXPECT_EQ(print(simplify(fold_affine(col, bounds), bounds)), "j");
  // Without a range for j nothing is resolved, and the value is unchanged.
  const Expr kept = fold_affine(row, {});
  for (int64_t j = 0; j < 49; j += 6)
    EXPECT_EQ(eval_index(kept, {{"b", 1}, {"i", 3}, {"j", j}}), 3);
  // A remainder that may leave [0, d) stays a floordiv.
  const Expr near = floordiv(v("i") * Expr(49) + v("j"), Expr(49));
  EXPECT_NE(print(fold_affine(near, {{"i", {0, 7}}, {"j", {0, 49}}})), "i");
}

// x = m a + r with m dividing d and r in [0, m): a K block of 128 within
// runs of 512 channels, the digits of a conv's k (offsets, then channel).
TEST(Affine, FoldAffineSplitsOffAFactorOfTheDivisor) {
  const Expr k = v("pc") * Expr(128) + v("k");
  const Bounds bounds{{"k", {0, 127}}};
  EXPECT_EQ(print(simplify(fold_affine(floordiv(k, Expr(512)), bounds))), "floordiv(pc, 4)");
  EXPECT_EQ(print(simplify(fold_affine(floormod(k, Expr(512)), bounds))), "floormod(pc, 4) * 128 + k");
  // The kernel offsets' digits: nested divisions, the block's k gone.
  const Expr kh = floordiv(floordiv(k, Expr(512)), Expr(3)), kw = floormod(floordiv(k, Expr(512)), Expr(3));
  for (const Expr& e : {kh, kw}) {
    const Expr folded = fold_affine(e, bounds);
    std::string text = print(folded);
    EXPECT_EQ(text.find('k'), std::string::npos) << text;
    for (int64_t pc = 0; pc < 40; ++pc)
      for (int64_t kk = 0; kk < 128; kk += 9)
        EXPECT_EQ(eval_index(folded, {{"pc", pc}, {"k", kk}}), eval_index(e, {{"pc", pc}, {"k", kk}}));
  }
  // A remainder that may reach m keeps the division, and so does one
  // without a range; negative multiples fold by floor semantics.
  EXPECT_NE(print(fold_affine(floordiv(k, Expr(512)), {{"k", {0, 128}}})), "floordiv(pc, 4)");
  EXPECT_NE(print(fold_affine(floordiv(k, Expr(512)), {})), "floordiv(pc, 4)");
  const Expr f = fold_affine(floormod(k, Expr(512)), bounds);
  for (int64_t pc = -9; pc < 9; ++pc)
    EXPECT_EQ(eval_index(f, {{"pc", pc}, {"k", 5}}), eval_index(floormod(k, Expr(512)), {{"pc", pc}, {"k", 5}}));
}

TEST(ContiguousRuns, ViewsThatKeepRunsOfEight) {
  // Attention heads folded back into the hidden dimension (BERT's output
  // projection): k = head * 64 + d, read from [B, heads, S, 64]: not affine in k.
  const Expr flat_k = v("i") * Expr(768) + v("k");
  const Expr heads = floordiv(floordiv(flat_k, Expr(64)), Expr(12)) * Expr(98304) +
                     floormod(floordiv(flat_k, Expr(64)), Expr(12)) * Expr(8192) + v("i") * Expr(64) +
                     floormod(flat_k, Expr(64));
  // K^T of a [S, heads * 64] projection: ((s * 12 + h) * 64 + k) split by 768 then by 128.
  const Expr x = (v("i") * Expr(12) + v("h")) * Expr(64) + v("k");
  const Expr kt = floordiv(floordiv(x, Expr(768)), Expr(128)) * Expr(98304) +
                  floormod(floordiv(x, Expr(768)), Expr(128)) * Expr(768) + floormod(x, Expr(768));
  for (const Expr& e : {heads, kt, v("i") * Expr(8) + v("k"), v("k") + Expr(16) - v("h") * Expr(24),
                        floormod(v("k"), Expr(64)) + floordiv(v("k"), Expr(64)) * Expr(1000)}) {
    EXPECT_TRUE(contiguous_runs(e, "k", 8)) << print(e);
    EXPECT_TRUE(runs_hold(e, 8)) << print(e);
  }
  EXPECT_FALSE(affine_form(heads));  // which is why affine_form alone missed these
}

TEST(ContiguousRuns, WhatBreaksARun) {
  const std::vector<Expr> broken = {
      v("k") * Expr(2),                          // stride 2
      v("k") + Expr(3),                          // runs start off a multiple of 8
      v("i") + v("k"),                           // so do they for odd i
      floormod(v("k"), Expr(12)),                // a run crosses a multiple of 12
      floordiv(v("k"), Expr(4)) * Expr(100) + floormod(v("k"), Expr(4)),
      v("k") * v("i"),
      -v("k"),
  };
  for (const Expr& e : broken) {
    EXPECT_FALSE(contiguous_runs(e, "k", 8)) << print(e);
    EXPECT_FALSE(runs_hold(e, 8)) << print(e);
  }
  // Runs of 4 survive a split by 12.
  EXPECT_TRUE(contiguous_runs(floormod(v("k"), Expr(12)) + floordiv(v("k"), Expr(12)) * Expr(64), "k", 4));
}

}  // namespace
}  // namespace tessel::loop
