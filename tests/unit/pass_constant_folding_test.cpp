// Constant folding: folds constant computations and shape code, numerically
// checked; does not fire for random ops, subgraphs, too-large outputs.
#include <gtest/gtest.h>

#include "pass_test_util.h"
#include "tessel/ir/verifier.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

using testing::clone;
using testing::count_ops;

std::unique_ptr<Model> inferred(const char* text) {
  auto m = parse_model(text);
  infer_shapes(*m, {});
  return m;
}

TEST(PassConstantFolding, FoldsConstantSubexpressionsExactly) {
  TS_REQUIRE_OPS("Add", "Mul", "Neg", "Constant", "MatMul");
  auto m = inferred(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[n,3]) -> (%y: ?) {
  %a = const f32[3] dense<[0.5, -1.25, 3]>
  %b = Constant() {value = f32[3] dense<[2, 2, 0.1]>} : ?
  %w = const f32[3,3] dense<[1, 2, 3, 4, 5, 6, 7, 8, 9]>
  %ab = Mul(%a, %b) : ?
  %nab = Neg(%ab) : ?
  %wa = MatMul(%w, %ab) : ?
  %s = Add(%nab, %wa) : ?
  %y = Add(%x, %s) : ?
  return %y
}
}
)");
  auto ref = clone(*m);
  EXPECT_TRUE(fold_constants(*m, {}));
  eliminate_dead_code(*m);
  EXPECT_EQ(m->graph->nodes().size(), 1u) << print_model(*m);
  EXPECT_TRUE(m->graph->find_value("s")->is_constant());
  EXPECT_NO_THROW(verify_model(*m));
  testing::expect_same_results(*ref, *m, {{"n", 4}}, 0);
  EXPECT_FALSE(fold_constants(*m, {}));
}

TEST(PassConstantFolding, FoldsShapeCodeOfStaticShapes) {
  TS_REQUIRE_OPS("Shape", "Gather", "Reshape");
  auto m = inferred(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[n,6], %z: f32[2,3]) -> (%y: ?) {
  %s = Shape(%z) : ?
  %y = Reshape(%x, %s) {allowzero = 0} : ?
  return %y
}
}
)");
  EXPECT_FALSE(m->graph->find_value("s")->is_constant());
  EXPECT_TRUE(fold_constants(*m, {}));
  const Value* s = m->graph->find_value("s");
  ASSERT_TRUE(s->is_constant());
  EXPECT_EQ(print_tensor_literal(*s->constant), "i64[2] dense<[2, 3]>");
}

TEST(PassConstantFolding, DoesNotFoldSymbolicShapes) {
  TS_REQUIRE_OPS("Shape");
  auto m = inferred(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[n,6]) -> (%s: ?) {
  %s = Shape(%x) : ?
  return %s
}
}
)");
  EXPECT_FALSE(fold_constants(*m, {}));
}

TEST(PassConstantFolding, DoesNotFoldRandomOps) {
  TS_REQUIRE_OPS("RandomNormal", "Add");
  auto m = inferred(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[2]) -> (%y: ?) {
  %r = RandomNormal() {dtype = 1, shape = [2]} : ?
  %y = Add(%x, %r) : ?
  return %y
}
}
)");
  EXPECT_FALSE(fold_constants(*m, {}));
  EXPECT_EQ(count_ops(*m->graph, "RandomNormal"), 1u);
}

TEST(PassConstantFolding, SkipsOutputsLargerThanTheLimit) {
  TS_REQUIRE_OPS("ConstantOfShape", "Add");
  auto m = inferred(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[1000,1000]) -> (%y: ?) {
  %shape = const i64[2] dense<[1000, 1000]>
  %big = ConstantOfShape(%shape) {value = f32[1] dense<[1]>} : ?
  %y = Add(%x, %big) : ?
  return %y
}
}
)");
  PassOptions o;
  o.fold_limit_elements = 1000;
  EXPECT_FALSE(fold_constants(*m, o));
  o.fold_limit_elements = 1 << 20;
  EXPECT_TRUE(fold_constants(*m, o));
  EXPECT_TRUE(m->graph->find_value("big")->is_constant());
}

TEST(PassConstantFolding, LeavesNodesWithSubgraphsButFoldsInsideThem) {
  TS_REQUIRE_OPS("If", "Neg", "Add");
  auto m = inferred(R"(tessel.model opset(ai.onnx=17) {
graph @main(%c: bool[], %x: f32[2]) -> (%y: ?) {
  %k = const f32[2] dense<[1, 2]>
  %kc = const bool[] dense<[true]>
  %y = If(%kc) {else_branch = graph @else() -> (%e: ?) {
      %e = Neg(%x) : ?
      return %e
    }, then_branch = graph @then() -> (%t: ?) {
      %nk = Neg(%k) : ?
      %t = Add(%x, %nk) : ?
      return %t
    }} : ?
  return %y
}
}
)");
  auto ref = clone(*m);
  EXPECT_TRUE(fold_constants(*m, {}));
  EXPECT_EQ(count_ops(*m->graph, "If"), 1u);
  EXPECT_TRUE(m->graph->find_value("y") != nullptr);
  EXPECT_NO_THROW(verify_model(*m));
  testing::expect_same_results(*ref, *m);
}

}  // namespace
}  // namespace tessel
