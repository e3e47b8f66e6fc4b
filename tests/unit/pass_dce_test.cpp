// Dead-code elimination: removes unused nodes and constants, keeps what
// subgraphs use, numerically checked.
#include <gtest/gtest.h>

#include "pass_test_util.h"
#include "tessel/ir/verifier.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

using testing::clone;
using testing::count_ops;

TEST(PassDce, RemovesDeadChainsAndUnusedConstants) {
  TS_REQUIRE_OPS("Add", "Neg", "Relu");
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[3]) -> (%y: f32[3]) {
  %unused = const f32[3] dense<[1, 2, 3]>
  %k = const f32[3] dense<[4, 5, 6]>
  %d1 = Neg(%x) : f32[3]
  %d2 = Add(%d1, %k) : f32[3]
  %d3 = Relu(%d2) : f32[3]
  %y = Relu(%x) : f32[3]
  return %y
}
}
)");
  auto ref = clone(*m);
  EXPECT_TRUE(eliminate_dead_code(*m));
  EXPECT_EQ(m->graph->nodes().size(), 1u);
  EXPECT_TRUE(m->graph->initializers.empty());
  EXPECT_EQ(m->graph->find_value("d2"), nullptr);
  EXPECT_EQ(m->graph->find_value("unused"), nullptr);
  EXPECT_EQ(m->graph->inputs.size(), 1u);
  EXPECT_NO_THROW(verify_model(*m));
  testing::expect_same_results(*ref, *m, {}, 0);
  EXPECT_FALSE(eliminate_dead_code(*m));
}

TEST(PassDce, KeepsValuesUsedOnlyInsideSubgraphsAndUnusedInputs) {
  TS_REQUIRE_OPS("If", "Neg", "Relu");
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%c: bool[], %x: f32[2], %unused_input: f32[7]) -> (%y: f32[2]) {
  %k = const f32[2] dense<[1, 2]>
  %a = Neg(%x) : f32[2]
  %y = If(%c) {else_branch = graph @else() -> (%k: f32[2]) {
      %dead = Relu(%a) : f32[2]
      return %k
    }, then_branch = graph @then() -> (%a: f32[2]) {
      return %a
    }} : f32[2]
  return %y
}
}
)");
  EXPECT_TRUE(eliminate_dead_code(*m));  // only %dead inside else
  EXPECT_EQ(count_ops(*m->graph, "Neg"), 1u);
  EXPECT_EQ(m->graph->initializers.size(), 1u);
  EXPECT_EQ(m->graph->inputs.size(), 3u);
  const Graph& else_g = m->graph->nodes().back()->attr_graph("else_branch");
  EXPECT_TRUE(else_g.nodes().empty());
  EXPECT_NO_THROW(verify_structure(*m));
}

TEST(PassDce, DoesNotFireOnALiveGraph) {
  TS_REQUIRE_OPS("Split");
  // A multi-output node stays when any one of its outputs is used.
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[4]) -> (%b: f32[2]) {
  %a, %b = Split(%x) {axis = 0, num_outputs = 2} : f32[2], f32[2]
  return %b
}
}
)");
  EXPECT_FALSE(eliminate_dead_code(*m));
  EXPECT_EQ(m->graph->nodes().size(), 1u);
}

}  // namespace
}  // namespace tessel
