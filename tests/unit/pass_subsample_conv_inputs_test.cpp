// subsample_conv_inputs (CPU target: a strided 1x1 convolution reads a
// strided Slice of its input at stride 1): IR in and out, the rewritten
// model against the original through the interpreter, the lowered kernels
// against the interpreter, the Slice stored in front of the conv (fusion),
// and what the packing of B then reads.
#include <gtest/gtest.h>

#include "lower_test_util.h"
#include "pass_test_util.h"
#include "tessel/ir/builder.h"
#include "tessel/ir/verifier.h"
#include "tessel/passes/fusion.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

using testing::clone;
using testing::find_op;

Attribute ints(std::vector<int64_t> v) { return Attribute::of_ints(std::move(v)); }

std::vector<Dim> dims_of(const std::vector<int64_t>& v) {
  std::vector<Dim> d;
  for (int64_t x : v) d.push_back(Dim(x));
  return d;
}

// x -> Conv(x, w, b) -> Relu [-> Add res], shapes inferred. `res` is the
// output's shape when a residual is wanted.
std::unique_ptr<Model> conv_model(const std::vector<int64_t>& x, const std::vector<int64_t>& w, Attrs attrs,
                                  const std::vector<int64_t>& res = {}) {
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* in = b.input("x", DType::F32, dims_of(x));
  Value* wt = b.input("w", DType::F32, dims_of(w));
  Value* bias = b.input("b", DType::F32, {Dim(w[0])});
  Value* y = b.op("Relu", {b.op("Conv", {in, wt, bias}, attrs)});
  if (!res.empty()) y = b.op("Add", {y, b.input("res", DType::F32, dims_of(res))});
  b.output(y);
  PassOptions o;
  run_pipeline(*m, o);
  return m;
}

std::vector<int64_t> values(const Value* v) {
  std::vector<int64_t> r;
  for (int64_t i = 0; i < v->constant->numel(); ++i) r.push_back(v->constant->get_i64(i));
  return r;
}

// Rewritten: a Slice with the conv's strides as steps over the spatial
// axes, the conv at stride 1; same results through the interpreter; then
// lowered, the Slice is a kernel of its own and the conv an implicit GEMM
// (Relu and a residual Add as epilogue) that matches the interpreter. Edge
// sizes: odd extents that the stride does not divide, unequal strides, a
// stride along one axis only, 1-D and 3-D, 13 output channels, a batch of 3.
TEST(PassSubsampleConvInputs, StridedOneByOneConvolutionsReadASlice) {
  TS_REQUIRE_OPS("Conv", "Slice", "Relu", "Add");
  struct Case {
    std::vector<int64_t> x, w, strides, res;
    int64_t group;
  };
  const std::vector<Case> cases{
      {{1, 8, 14, 14}, {16, 8, 1, 1}, {2, 2}, {1, 16, 7, 7}, 1},  // ResNet's shortcut
      {{3, 4, 9, 7}, {13, 4, 1, 1}, {2, 3}, {}, 1},
      {{1, 5, 7, 11}, {6, 5, 1, 1}, {1, 2}, {1, 6, 7, 6}, 1},
      {{2, 3, 17}, {4, 3, 1}, {4}, {}, 1},
      {{1, 2, 5, 6, 7}, {4, 2, 1, 1, 1}, {2, 2, 3}, {}, 1},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    const Case& c = cases[i];
    auto m = conv_model(c.x, c.w, {{"strides", ints(c.strides)}, {"group", Attribute::of_int(c.group)}}, c.res);
    auto ref = clone(*m);
    ASSERT_TRUE(subsample_conv_inputs(*m));
    EXPECT_NO_THROW(verify_model(*m));
    const Node* conv = find_op(*m->graph, "Conv");
    const Node* slice = find_op(*m->graph, "Slice");
    ASSERT_TRUE(conv && slice);
    EXPECT_EQ(conv->input(0), slice->outputs[0]);
    EXPECT_EQ(conv->attr_ints("strides"), std::vector<int64_t>(c.strides.size(), 1));
    ASSERT_EQ(slice->inputs.size(), 5u);
    EXPECT_EQ(values(slice->input(4)), c.strides);
    std::vector<int64_t> axes;
    for (size_t a = 0; a < c.strides.size(); ++a) axes.push_back(static_cast<int64_t>(2 + a));
    EXPECT_EQ(values(slice->input(3)), axes);
    EXPECT_FALSE(subsample_conv_inputs(*m)) << "a second run finds nothing";
    testing::expect_same_results(*ref, *m, {}, 1e-5);
    const testing::EvalRun r = testing::expect_lowered_matches(*m);
    EXPECT_EQ(r.interpreted, 0u);
    EXPECT_EQ(r.kernels, 2u) << "the Slice is stored, not fused into the conv";
  }
}

// Left alone: a kernel wider than 1, a padded 1x1, stride 1, auto_pad,
// groups.
TEST(PassSubsampleConvInputs, LeavesOtherConvolutions) {
  TS_REQUIRE_OPS("Conv", "Relu");
  EXPECT_FALSE(subsample_conv_inputs(*conv_model({1, 4, 8, 8}, {4, 4, 3, 3}, {{"strides", ints({2, 2})}})));
  EXPECT_FALSE(subsample_conv_inputs(
      *conv_model({1, 4, 8, 8}, {4, 4, 1, 1}, {{"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}})));
  EXPECT_FALSE(subsample_conv_inputs(*conv_model({1, 4, 8, 8}, {4, 4, 1, 1}, {})));
  EXPECT_FALSE(subsample_conv_inputs(*conv_model(
      {1, 4, 8, 8}, {4, 4, 1, 1}, {{"strides", ints({2, 2})}, {"auto_pad", Attribute::of_string("SAME_UPPER")}})));
  EXPECT_FALSE(subsample_conv_inputs(
      *conv_model({1, 6, 9, 9}, {4, 3, 1, 1}, {{"strides", ints({2, 2})}, {"group", Attribute::of_int(2)}})));
}

// The fusion plan keeps the Slice a kernel of its own although it is
// injective (fused, the conv's packing would divide and gather per
// element), while the Relu that produced its input stays the first conv's
// epilogue.
TEST(PassSubsampleConvInputs, TheSliceIsNotFusedIntoTheConvolution) {
  TS_REQUIRE_OPS("Conv", "Slice", "Relu");
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::F32, {Dim(1), Dim(16), Dim(24), Dim(24)});
  Value* w1 = b.input("w1", DType::F32, {Dim(16), Dim(16), Dim(1), Dim(1)});
  Value* w2 = b.input("w2", DType::F32, {Dim(32), Dim(16), Dim(1), Dim(1)});
  Value* y = b.op("Relu", {b.op("Conv", {x, w1})});
  b.output(b.op("Conv", {y, w2}, {{"strides", ints({2, 2})}}));
  PassOptions o;
  run_pipeline(*m, o);
  ASSERT_TRUE(subsample_conv_inputs(*m));
  const FusionPlan p = plan_fusion(*m->graph, OpRegistry::global());
  std::vector<std::string> roots;
  for (const FusionGroup& g : p.groups) roots.push_back(g.root->op);
  EXPECT_EQ(roots, (std::vector<std::string>{"Relu", "Slice", "Conv"}));

  const testing::EvalRun r = testing::expect_lowered_matches(*m);
  EXPECT_EQ(r.kernels, 3u);
  ASSERT_EQ(r.schedules.count("conv_gemm"), 1u);
  EXPECT_EQ(r.schedules.at("conv_gemm"), 2u);
}

}  // namespace
}  // namespace tessel
