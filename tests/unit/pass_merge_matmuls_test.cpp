// merge_matmuls: sibling MatMuls of one value by constant matrices become one
// MatMul and Slices, with their bias Adds when every sibling has one;
// numerically checked against the model before, with the cases it leaves.
#include <gtest/gtest.h>

#include "pass_test_util.h"
#include "tessel/ir/verifier.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

using testing::clone;
using testing::count_ops;

// Three projections of %x ([2, 3, 4] by [4, 2], [4, 3], [4, 2]), each with a
// bias (the first as [1, 1, 2], the second as the Add's first operand), each
// used by something else; distinct values everywhere so a wrong column or
// offset shows.
const char* kBiased = R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[2,3,4]) -> (%a: f32[2,3,2], %b: f32[2,3,3], %c: f32[2,3,2]) {
  %wq = const f32[4,2] dense<[1, 2, 3, 4, 5, 6, 7, 8]>
  %wk = const f32[4,3] dense<[-1, 0.5, 2, 3, -4, 1, 0, 2, -3, 1, 1, 1]>
  %wv = const f32[4,2] dense<[0.25, -1, 2, 0, -3, 5, 1, 1]>
  %bq = const f32[1,1,2] dense<[10, 20]>
  %bk = const f32[3] dense<[-1, -2, -3]>
  %bv = const f32[2] dense<[0.5, 0.75]>
  %q = MatMul(%x, %wq) : f32[2,3,2]
  %k = MatMul(%x, %wk) : f32[2,3,3]
  %v = MatMul(%x, %wv) : f32[2,3,2]
  %qb = Add(%q, %bq) : f32[2,3,2]
  %kb = Add(%bk, %k) : f32[2,3,3]
  %vb = Add(%v, %bv) : f32[2,3,2]
  %a = Relu(%qb) : f32[2,3,2]
  %b = Neg(%kb) : f32[2,3,3]
  %c = Mul(%vb, %vb) : f32[2,3,2]
  return %a, %b, %c
}
}
)";

TEST(PassMergeMatMuls, SiblingsWithBiasesBecomeOneGemm) {
  TS_REQUIRE_OPS("MatMul", "Add", "Slice");
  auto m = parse_model(kBiased);
  auto ref = clone(*m);
  EXPECT_TRUE(merge_matmuls(*m));
  EXPECT_NO_THROW(verify_model(*m));
  EXPECT_EQ(count_ops(*m->graph, "MatMul"), 1u);
  EXPECT_EQ(count_ops(*m->graph, "Add"), 1u);
  EXPECT_EQ(count_ops(*m->graph, "Slice"), 3u);
  for (const auto& n : m->graph->nodes()) {
    if (n->op == "MatMul") {
      ASSERT_TRUE(n->input(1)->is_constant());
      EXPECT_EQ(n->input(1)->constant->shape(), (std::vector<int64_t>{4, 7}));
      EXPECT_EQ(n->outputs[0]->type.shape->back(), Dim(7));
    }
  }
  testing::expect_same_results(*ref, *m, {}, 1e-6);
  // Nothing left to merge; the three weights are gone.
  EXPECT_FALSE(merge_matmuls(*m));
  for (const Value* v : m->graph->initializers) EXPECT_TRUE(v->name != "wq" && v->name != "wk" && v->name != "wv");
}

// One sibling has no bias (its result is used twice): the MatMuls merge, the
// Adds stay on their slices.
TEST(PassMergeMatMuls, WithoutABiasEachTheMatMulsAlone) {
  TS_REQUIRE_OPS("MatMul", "Add", "Slice");
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[3,4]) -> (%a: f32[3,2], %b: f32[3,3], %c: f32[3,3]) {
  %w1 = const f32[4,2] dense<[1, 2, 3, 4, 5, 6, 7, 8]>
  %w2 = const f32[4,3] dense<[-1, 0.5, 2, 3, -4, 1, 0, 2, -3, 1, 1, 1]>
  %bias = const f32[2] dense<[10, 20]>
  %p = MatMul(%x, %w1) : f32[3,2]
  %r = MatMul(%x, %w2) : f32[3,3]
  %a = Add(%p, %bias) : f32[3,2]
  %b = Relu(%r) : f32[3,3]
  %c = Neg(%r) : f32[3,3]
  return %a, %b, %c
}
}
)");
  auto ref = clone(*m);
  EXPECT_TRUE(merge_matmuls(*m));
  EXPECT_NO_THROW(verify_model(*m));
  EXPECT_EQ(count_ops(*m->graph, "MatMul"), 1u);
  EXPECT_EQ(count_ops(*m->graph, "Add"), 1u);
  EXPECT_EQ(count_ops(*m->graph, "Slice"), 2u);
  testing::expect_same_results(*ref, *m, {}, 1e-6);
}

// Left alone: a single projection, a non-constant weight, different
// left operands, a sibling whose result is a graph output.
TEST(PassMergeMatMuls, LeavesWhatIsNotASiblingConstantProjection) {
  TS_REQUIRE_OPS("MatMul");
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[3,4], %y: f32[3,4], %w: f32[4,2]) -> (%a: f32[3,2], %b: f32[3,2], %c: f32[3,2], %d: f32[3,2], %e: f32[3,2]) {
  %w1 = const f32[4,2] dense<[1, 2, 3, 4, 5, 6, 7, 8]>
  %w2 = const f32[4,2] dense<[8, 7, 6, 5, 4, 3, 2, 1]>
  %a = MatMul(%x, %w1) : f32[3,2]
  %b = MatMul(%x, %w) : f32[3,2]
  %c = MatMul(%y, %w2) : f32[3,2]
  %d0 = MatMul(%y, %w1) : f32[3,2]
  %d = Relu(%d0) : f32[3,2]
  %e = Neg(%c) : f32[3,2]
  return %a, %b, %c, %d, %e
}
}
)");
  // %x: one constant projection (%a, and it is an output); %y: %c is an output.
  EXPECT_FALSE(merge_matmuls(*m));
}

}  // namespace
}  // namespace tessel
