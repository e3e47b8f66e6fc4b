// Graph editing: what replace_all_uses reaches.
#include <gtest/gtest.h>

#include "tessel/ir/parser.h"
#include "tessel/ir/verifier.h"

namespace tessel {
namespace {

TEST(IrGraph, ReplaceAllUsesReachesNodesAndOutputsOfSubgraphs) {
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%c: bool[], %x: f32[2]) -> (%y: f32[2], %n: f32[2]) {
  %n = Neg(%x) : f32[2]
  %y = If(%c) {else_branch = graph @e() -> (%n: f32[2]) {
      return %n
    }, then_branch = graph @t() -> (%t: f32[2]) {
      %t = Abs(%n) : f32[2]
      return %t
    }} : f32[2]
  return %y, %n
}
}
)");
  Graph& g = *m->graph;
  Value* n = g.find_value("n");
  Value* x = g.find_value("x");
  g.replace_all_uses(n, x);
  const Node& iff = *g.nodes().back();
  EXPECT_EQ(iff.attr_graph("else_branch").outputs[0], x);  // a subgraph returning the outer value
  EXPECT_EQ(iff.attr_graph("then_branch").nodes().front()->inputs[0], x);
  EXPECT_EQ(g.outputs[1], x);
  g.remove_node(g.nodes().front().get());
  g.remove_unused_values();
  EXPECT_NO_THROW(verify_structure(*m));
}

}  // namespace
}  // namespace tessel
