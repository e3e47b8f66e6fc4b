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

TEST(SupportJoin, InvertsSplit) {
  EXPECT_EQ(join({}, ", "), "");
  EXPECT_EQ(join({"a"}, ", "), "a");
  EXPECT_EQ(join({"a", "", "b"}, "|"), "a||b");
  for (const char* text : {"x86-64,+avx2,-sse4a", ",", ""}) EXPECT_EQ(join(split(text, ','), ","), text);
}

}  // namespace
}  // namespace tessel
