#include "tessel/ir/dim.h"

#include <gtest/gtest.h>

#include "tessel/support/error.h"

namespace tessel {
namespace {

TEST(Dim, ConstantArithmetic) {
  EXPECT_EQ((Dim(3) * Dim(4) + Dim(2)).value(), 14);
  EXPECT_EQ(Dim::floordiv(-7, 2).value(), -4);
  EXPECT_EQ(Dim::mod(-7, 2).value(), 1);
  EXPECT_EQ(Dim::ceildiv(7, 2).value(), 4);
  EXPECT_THROW(Dim::floordiv(1, 0), Error);
  EXPECT_THROW(Dim(INT64_MAX) * Dim(2), Error);
}

TEST(Dim, CanonicalFormMakesEqualExpressionsEqual) {
  Dim b = Dim::sym("batch"), s = Dim::sym("seq");
  EXPECT_EQ(b * s * 2, s * (b + b));
  EXPECT_EQ((b + 1) * (b - 1), b * b - 1);
  EXPECT_EQ((b * 768) - b * 768, Dim(0));
  EXPECT_TRUE(((b * 768) - b * 768).is_const());
  EXPECT_NE(b, s);
}

TEST(Dim, ExactDivisionSimplifies) {
  Dim b = Dim::sym("batch"), s = Dim::sym("seq");
  EXPECT_EQ(Dim::floordiv(b * s * 768, b * s), Dim(768));
  EXPECT_EQ(Dim::floordiv(b * 768, 12), b * 64);
  EXPECT_EQ(Dim::mod(b * 768, 12), Dim(0));
  // Not exact: stays an atom and prints as such.
  EXPECT_EQ(Dim::floordiv(s, 2).str(), "floordiv(seq,2)");
}

TEST(Dim, MaxMinUseSymbolLowerBound) {
  Dim b = Dim::sym("batch");
  EXPECT_EQ(Dim::max(b, 1), b);
  EXPECT_EQ(Dim::min(b, 1), Dim(1));
  EXPECT_EQ(Dim::max(b + 3, b), b + 3);
  EXPECT_FALSE(Dim::max(b, Dim::sym("seq")).is_const());
}

TEST(Dim, TextRoundTrips) {
  Dim b = Dim::sym("batch"), s = Dim::sym("seq"), q = Dim::sym("weird name:0");
  for (const Dim& d : {b * s * 2 + 1, b - 1, -b, Dim::floordiv(s + 1, 2) * 3, Dim::max(b, s), q * 2, Dim(0),
                       Dim(-5), Dim::mod(s, 7) + Dim::min(b, s)}) {
    Dim p = Dim::parse(d.str());
    EXPECT_EQ(p, d) << d.str() << " reparsed as " << p.str();
    EXPECT_EQ(p.str(), d.str());
  }
  EXPECT_THROW(Dim::parse("batch+"), Error);
  EXPECT_THROW(Dim::parse("3$"), Error);
}

TEST(Dim, Evaluates) {
  Dim d = Dim::floordiv(Dim::sym("seq") * 3 + 1, 2);
  EXPECT_EQ(d.eval({{"seq", 5}}), 8);
  EXPECT_EQ(d.eval({}), std::nullopt);
  EXPECT_EQ(d.substitute({{"seq", 5}}), Dim(8));
}

}  // namespace
}  // namespace tessel
