// sink_transposes: a scalar Mul/Div after a Transpose moves before it (so
// the Transpose can become a view of a GEMM operand), numerically checked,
// with the cases it leaves alone.
#include <gtest/gtest.h>

#include "pass_test_util.h"
#include "tessel/ir/verifier.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

using testing::clone;
using testing::count_ops;

TEST(PassSinkTransposes, ScalingMovesBeforeTheTranspose) {
  TS_REQUIRE_OPS("Transpose", "Mul", "Div", "Relu");
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[2,3,4], %y: f32[2,3,4]) -> (%out: f32[2,4,3], %o2: f32[2,4,3]) {
  %s = const f32[] dense<[0.125]>
  %t = Transpose(%x) {perm = [0, 2, 1]} : f32[2,4,3]
  %k = Mul(%s, %t) : f32[2,4,3]
  %out = Relu(%k) : f32[2,4,3]
  %u = Transpose(%y) {perm = [0, 2, 1]} : f32[2,4,3]
  %d = Div(%u, %s) : f32[2,4,3]
  %o2 = Relu(%d) : f32[2,4,3]
  return %out, %o2
}
}
)");
  auto ref = clone(*m);
  EXPECT_TRUE(sink_transposes(*m));
  EXPECT_NO_THROW(verify_model(*m));
  for (const auto& n : m->graph->nodes())
    if (n->op == "Mul" || n->op == "Div") EXPECT_EQ(n->outputs[0]->type.str(), "f32[2,3,4]") << n->op;
  EXPECT_EQ(count_ops(*m->graph, "Transpose"), 2u);
  testing::expect_same_results(*ref, *m, {}, 0);
  EXPECT_FALSE(sink_transposes(*m));
}

TEST(PassSinkTransposes, LeavesSharedTransposesAndTensorScales) {
  TS_REQUIRE_OPS("Transpose", "Mul", "Add");
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[2,3]) -> (%a: f32[3,2], %b: f32[3,2]) {
  %s = const f32[] dense<[2]>
  %v = const f32[2] dense<[1, 2]>
  %t = Transpose(%x) {perm = [1, 0]} : f32[3,2]
  %m1 = Mul(%t, %s) : f32[3,2]
  %a = Add(%m1, %t) : f32[3,2]
  %t2 = Transpose(%x) {perm = [1, 0]} : f32[3,2]
  %b = Mul(%t2, %v) : f32[3,2]
  return %a, %b
}
}
)");
  // %t has two uses; %v is not a scalar (and %b is a graph output).
  EXPECT_FALSE(sink_transposes(*m));
}

}  // namespace
}  // namespace tessel
