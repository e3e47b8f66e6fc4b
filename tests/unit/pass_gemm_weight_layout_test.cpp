// gemm_weight_layout: constant GEMM weights [K, N] with N not a multiple of 8
// stored transposed (k-contiguous), numerically checked, with the cases it
// leaves alone.
#include <gtest/gtest.h>

#include "pass_test_util.h"
#include "tessel/ir/verifier.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

using testing::clone;
using testing::count_ops;

// W: [K, N] = [8, 3], values k * 10 + n, so that a wrong transpose shows.
const char* kModel = R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[2,8]) -> (%mm: f32[2,3], %gm: f32[2,3], %ok: f32[2,8]) {
  %w = const f32[8,3] dense<[0, 1, 2, 10, 11, 12, 20, 21, 22, 30, 31, 32, 40, 41, 42, 50, 51, 52, 60, 61, 62, 70, 71, 72]>
  %sq = const f32[8,8] dense<[0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5, 0.5]>
  %mm = MatMul(%x, %w) : f32[2,3]
  %gm = Gemm(%x, %w) {alpha = 2.0} : f32[2,3]
  %ok = MatMul(%x, %sq) : f32[2,8]
  return %mm, %gm, %ok
}
}
)";

TEST(PassGemmWeightLayout, MisalignedWeightsGoKMajor) {
  TS_REQUIRE_OPS("MatMul", "Gemm", "Transpose");
  auto m = parse_model(kModel);
  auto ref = clone(*m);
  EXPECT_TRUE(relayout_gemm_weights(*m));
  EXPECT_NO_THROW(verify_model(*m));
  // MatMul reads a [3, 8] constant through a Transpose; Gemm takes it with transB.
  EXPECT_EQ(count_ops(*m->graph, "Transpose"), 1u);
  for (const auto& n : m->graph->nodes()) {
    if (n->op == "Gemm") {
      EXPECT_EQ(n->attr_int("transB", 0), 1);
      ASSERT_TRUE(n->input(1)->is_constant());
      EXPECT_EQ(n->input(1)->constant->shape(), (std::vector<int64_t>{3, 8}));
      EXPECT_EQ(n->input(1)->constant->get_f64(1), 10.0);  // W[1, 0]
    }
    if (n->op == "MatMul" && n->outputs[0]->name == "mm") EXPECT_EQ(n->input(1)->producer->op, "Transpose");
    if (n->op == "MatMul" && n->outputs[0]->name == "ok") EXPECT_TRUE(n->input(1)->is_constant());  // N = 8
  }
  testing::expect_same_results(*ref, *m, {}, 0);
  // Nothing left to do, and the old [8, 3] constant is gone.
  EXPECT_FALSE(relayout_gemm_weights(*m));
  for (const Value* v : m->graph->initializers) EXPECT_NE(v->name, "w");
}

TEST(PassGemmWeightLayout, LeavesAlignedAndNonConstantWeights) {
  TS_REQUIRE_OPS("MatMul");
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[2,8], %y: f32[8,3]) -> (%a: f32[2,3], %b: f32[2,5]) {
  %w = const f32[5,5] dense<[1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]>
  %x5 = const f32[2,5] dense<[2, 2, 2, 2, 2, 2, 2, 2, 2, 2]>
  %a = MatMul(%x, %y) : f32[2,3]
  %b = MatMul(%x5, %w) : f32[2,5]
  return %a, %b
}
}
)");
  // %y is not constant; %w's K = 5 is no better k-major.
  EXPECT_FALSE(relayout_gemm_weights(*m));
}

}  // namespace
}  // namespace tessel
