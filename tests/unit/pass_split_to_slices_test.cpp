// split_to_slices: each used output of a Split becomes a Slice, numerically
// checked, which fusion then takes into its consumers' groups; Splits with
// a graph output or an unknown size are left alone.
#include <gtest/gtest.h>

#include "pass_test_util.h"
#include "tessel/ir/verifier.h"
#include "tessel/ops/registry.h"
#include "tessel/passes/fusion.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

using testing::clone;
using testing::count_ops;

// x [2, 9] split along axis 1 into 2, 3 and 4 columns; the middle part is
// unused.
const char* kSplit = R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[2,9]) -> (%a: f32[2,2], %c: f32[2,4]) {
  %sizes = const i64[3] dense<[2, 3, 4]>
  %p, %q, %r = Split(%x, %sizes) {axis = -1} : f32[2,2], f32[2,3], f32[2,4]
  %a = Relu(%p) : f32[2,2]
  %c = Neg(%r) : f32[2,4]
  return %a, %c
}
}
)";

TEST(PassSplitToSlices, UsedPartsBecomeSlicesThatFuseIntoTheirConsumers) {
  TS_REQUIRE_OPS("Split", "Slice", "Relu", "Neg");
  auto m = parse_model(kSplit);
  auto ref = clone(*m);
  EXPECT_TRUE(split_to_slices(*m));
  EXPECT_NO_THROW(verify_model(*m));
  EXPECT_EQ(count_ops(*m->graph, "Split"), 0u);
  EXPECT_EQ(count_ops(*m->graph, "Slice"), 2u);  // none for the unused part
  testing::expect_same_results(*ref, *m, {}, 0);
  // Two kernels, each a Slice and its consumer.
  const FusionPlan plan = plan_fusion(*m->graph, OpRegistry::global(), {}, {});
  ASSERT_EQ(plan.groups.size(), 2u);
  for (const FusionGroup& g : plan.groups) {
    EXPECT_EQ(g.nodes.size(), 2u);
    EXPECT_EQ(g.nodes.front()->op, "Slice");
  }
  EXPECT_FALSE(split_to_slices(*m));
}

TEST(PassSplitToSlices, LeavesGraphOutputsAndUnknownSizes) {
  TS_REQUIRE_OPS("Split");
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[2,4], %y: f32[n,4]) -> (%p: f32[2,2], %r: f32[1,4]) {
  %p, %q = Split(%x) {axis = 1, num_outputs = 2} : f32[2,2], f32[2,2]
  %s, %t = Split(%y) {axis = 0, num_outputs = 2} : f32[s0,4], f32[s1,4]
  %qq = Relu(%q) : f32[2,2]
  %r = ReduceSum(%s) {keepdims = 1} : f32[1,4]
  return %p, %r
}
}
)");
  // %p is a graph output; %s's rows are symbolic.
  EXPECT_FALSE(split_to_slices(*m));
}

}  // namespace
}  // namespace tessel
