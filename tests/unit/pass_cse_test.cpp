// Common-subexpression elimination, numerically checked, with its negative
// cases.
#include <gtest/gtest.h>

#include "pass_test_util.h"
#include "tessel/ir/verifier.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

using testing::clone;
using testing::count_ops;

TEST(PassCse, MergesIdenticalNodesAndConstantsTransitively) {
  TS_REQUIRE_OPS("Add", "Mul", "Transpose");
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[2,3]) -> (%out: f32[3,2]) {
  %k1 = const f32[3] dense<[1, 2, 3]>
  %k2 = const f32[3] dense<[1, 2, 3]>
  %a1 = Add(%x, %k1) : f32[2,3]
  %a2 = Add(%x, %k2) : f32[2,3]
  %t1 = Transpose(%a1) {perm = [1, 0]} : f32[3,2]
  %t2 = Transpose(%a2) {perm = [1, 0]} : f32[3,2]
  %out = Mul(%t1, %t2) : f32[3,2]
  return %out
}
}
)");
  auto ref = clone(*m);
  EXPECT_TRUE(eliminate_common_subexpressions(*m));
  EXPECT_EQ(count_ops(*m->graph, "Add"), 1u);
  EXPECT_EQ(count_ops(*m->graph, "Transpose"), 1u);
  EXPECT_EQ(m->graph->initializers.size(), 1u);
  const Node& mul = *m->graph->nodes().back();
  EXPECT_EQ(mul.inputs[0], mul.inputs[1]);
  EXPECT_NO_THROW(verify_model(*m));
  testing::expect_same_results(*ref, *m, {}, 0);
  EXPECT_FALSE(eliminate_common_subexpressions(*m));
}

TEST(PassCse, DoesNotMergeDifferentAttributesConstantsOrModelOutputs) {
  TS_REQUIRE_OPS("Add", "Transpose");
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[2,2]) -> (%o1: f32[2,2], %o3: f32[2,2]) {
  %k1 = const f32[2] dense<[1, 2]>
  %k2 = const f32[2] dense<[1, 2.5]>
  %k3 = const f64[2] dense<[1, 2]>
  %t1 = Transpose(%x) {perm = [1, 0]} : f32[2,2]
  %t2 = Transpose(%x) {perm = [0, 1]} : f32[2,2]
  %a1 = Add(%t1, %k1) : f32[2,2]
  %a2 = Add(%t2, %k2) : f32[2,2]
  %o1 = Add(%a1, %a2) : f32[2,2]
  %o3 = Add(%a1, %a2) : f32[2,2]
  return %o1, %o3
}
}
)");
  // %o3 equals %o1 but both are outputs of the model: merging would rename one.
  EXPECT_FALSE(eliminate_common_subexpressions(*m));
  EXPECT_EQ(m->graph->initializers.size(), 3u);
}

TEST(PassCse, DoesNotMergeRandomOps) {
  TS_REQUIRE_OPS("Add", "RandomUniformLike");
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[2,2]) -> (%o: f32[2,2]) {
  %r1 = RandomUniformLike(%x) : f32[2,2]
  %r2 = RandomUniformLike(%x) : f32[2,2]
  %o = Add(%r1, %r2) : f32[2,2]
  return %o
}
}
)");
  EXPECT_FALSE(eliminate_common_subexpressions(*m));
  EXPECT_EQ(count_ops(*m->graph, "RandomUniformLike"), 2u);
}

TEST(PassCse, SubgraphConstantsMergeWithEnclosingOnesButNodesWithSubgraphsStay) {
  TS_REQUIRE_OPS("If", "Add");
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%c: bool[], %x: f32[2]) -> (%y: f32[2], %z: f32[2]) {
  %k = const f32[2] dense<[1, 2]>
  %y = If(%c) {else_branch = graph @e1() -> (%x: f32[2]) {
      return %x
    }, then_branch = graph @t1() -> (%t: f32[2]) {
      %kk = const f32[2] dense<[1, 2]>
      %t = Add(%x, %kk) : f32[2]
      return %t
    }} : f32[2]
  %z = If(%c) {else_branch = graph @e2() -> (%x: f32[2]) {
      return %x
    }, then_branch = graph @t2() -> (%t2: f32[2]) {
      %t2 = Add(%x, %k) : f32[2]
      return %t2
    }} : f32[2]
  return %y, %z
}
}
)");
  auto ref = clone(*m);
  EXPECT_TRUE(eliminate_common_subexpressions(*m));
  EXPECT_EQ(count_ops(*m->graph, "If"), 2u);
  const Graph& t1 = m->graph->nodes().front()->attr_graph("then_branch");
  EXPECT_TRUE(t1.initializers.empty());
  EXPECT_EQ(t1.nodes().front()->inputs[1], m->graph->find_value("k"));
  EXPECT_NO_THROW(verify_structure(*m));
  Interpreter interp;
  for (bool c : {false, true}) {
    Tensor ct(DType::Bool, {});
    ct.set_i64(0, c);
    Tensor xt = Tensor::from_f32({2}, {0.25f, -3.0f});
    auto a = interp.run(*ref->graph, {ct, xt});
    auto b = interp.run(*m->graph, {ct, xt});
    EXPECT_TRUE(a[0].tensor.bitwise_equal(b[0].tensor));
    EXPECT_TRUE(a[1].tensor.bitwise_equal(b[1].tensor));
  }
}

}  // namespace
}  // namespace tessel
