#include <gtest/gtest.h>

#include "tessel/support/strings.h"

namespace tessel {
namespace {

using V = std::vector<std::string>;

TEST(SupportSplit, KeepsEmptyFields) {
  EXPECT_EQ(split("+avx2,-avx512f,+fma", ','), (V{"+avx2", "-avx512f", "+fma"}));
  EXPECT_EQ(split("sm_90a,,sm_80", ','), (V{"sm_90a", "", "sm_80"}));
  EXPECT_EQ(split("a,", ','), (V{"a", ""}));
  EXPECT_EQ(split(",a", ','), (V{"", "a"}));
  EXPECT_EQ(split("", ','), (V{""}));
  EXPECT_EQ(split("one", ','), (V{"one"}));
}

}  // namespace
}  // namespace tessel
