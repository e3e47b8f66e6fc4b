// winograd_conv (CPU target, --knob conv.winograd.on=1) and its op,
// tessel::TileTransform: the op's reference against values worked by hand,
// the rewritten model against the direct convolution through the
// interpreter (the Winograd error bound), the lowered kernels against the
// interpreter, the fusion plan (each transform a kernel of its own), and the
// convolutions the pass leaves alone.
#include <gtest/gtest.h>

#include <random>

#include "lower_test_util.h"
#include "pass_test_util.h"
#include "tessel/interp/interpreter.h"
#include "tessel/ir/builder.h"
#include "tessel/ir/verifier.h"
#include "tessel/passes/fusion.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

using testing::clone;
using testing::count_ops;

Attribute ints(std::vector<int64_t> v) { return Attribute::of_ints(std::move(v)); }

Tensor random_weight(const std::vector<int64_t>& shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, 0.3f);
  std::vector<float> v(static_cast<size_t>(shape[0] * shape[1] * shape[2] * shape[3]));
  for (float& x : v) x = d(rng);
  return Tensor::from_f32(shape, v);
}

// x [N, C, H, W] -> Conv(x, W const[, b const], attrs) -> Relu, shapes inferred.
std::unique_ptr<Model> conv_model(std::vector<int64_t> x, std::vector<int64_t> w, Attrs attrs, bool bias = true) {
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* in = b.input("x", DType::F32, {Dim(x[0]), Dim(x[1]), Dim(x[2]), Dim(x[3])});
  std::vector<Value*> args{in, b.constant(random_weight(w, 5), "w")};
  if (bias) {
    std::vector<float> bv;
    for (int64_t k = 0; k < w[0]; ++k) bv.push_back(0.1f * static_cast<float>(k % 7) - 0.3f);
    args.push_back(b.constant(Tensor::from_f32({w[0]}, bv), "b"));
  }
  b.output(b.op("Relu", {b.op("Conv", args, attrs)}));
  PassOptions o;
  run_pipeline(*m, o);
  return m;
}

Tensor run_one(const Model& m, const Tensor& x) {
  const std::vector<RtValue> out = Interpreter().run(*m.graph, {RtValue(x)});
  return out.at(0).tensor;
}

std::unique_ptr<Model> tile_model(const std::vector<int64_t>& x, const Tensor& coef, Attrs attrs) {
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Shape s;
  for (int64_t d : x) s.push_back(Dim(d));
  Value* in = b.input("x", DType::F32, s);
  b.output(b.op("TileTransform", {in, b.constant(coef, "coef")}, attrs, "tessel"));
  PassOptions o;
  run_pipeline(*m, o);
  return m;
}

// "tile": Y[e, t] = sum_s C[e, s] X[2 t + s - 1] (zero outside X), and
// "apply": Y[.., i, ..] = sum_e C[i, e] X[e, ..]; worked by hand.
TEST(TileTransform, ReferenceTilesAndApplies) {
  TS_REQUIRE_OPS("Conv");
  // X = [1, 2, 3, 4, 5], tiles of 3 at step 2 from -1: [0 1 2], [2 3 4], [4 5 0].
  const Tensor x = Tensor::from_f32({5}, {1, 2, 3, 4, 5});
  const Tensor c = Tensor::from_f32({2, 3}, {1, 0, 0, 1, 10, 100});  // first element; 1 10 100 weights
  auto m = tile_model({5}, c, {{"mode", Attribute::of_string("tile")}, {"axis", Attribute::of_int(0)},
                               {"step", Attribute::of_int(2)}, {"pad", Attribute::of_int(1)},
                               {"tiles", Attribute::of_int(3)}});
  const Tensor y = run_one(*m, x);
  ASSERT_EQ(y.shape(), (std::vector<int64_t>{2, 3}));
  const std::vector<double> want{0, 2, 4, 210, 432, 54};
  for (int64_t i = 0; i < 6; ++i) EXPECT_DOUBLE_EQ(y.get_f64(i), want[static_cast<size_t>(i)]) << i;

  // X [2, 3]: Y [3, 2] (the new axis last) with C [2, 2] = [[1, 1], [1, -1]].
  const Tensor x2 = Tensor::from_f32({2, 3}, {1, 2, 3, 10, 20, 30});
  auto m2 = tile_model({2, 3}, Tensor::from_f32({2, 2}, {1, 1, 1, -1}),
                       {{"mode", Attribute::of_string("apply")}, {"axis", Attribute::of_int(1)}});
  const Tensor y2 = run_one(*m2, x2);
  ASSERT_EQ(y2.shape(), (std::vector<int64_t>{3, 2}));
  const std::vector<double> want2{11, -9, 22, -18, 33, -27};
  for (int64_t i = 0; i < 6; ++i) EXPECT_DOUBLE_EQ(y2.get_f64(i), want2[static_cast<size_t>(i)]) << i;
}

// Bad attributes and shapes: one clear error each.
TEST(TileTransform, RejectsBadAttributes) {
  TS_REQUIRE_OPS("Conv");
  const Tensor c = Tensor::from_f32({2, 3}, {1, 0, 0, 1, 10, 100});
  EXPECT_THROW(tile_model({5}, c, {{"mode", Attribute::of_string("spin")}, {"axis", Attribute::of_int(0)}}), Error);
  EXPECT_THROW(tile_model({5}, c, {{"mode", Attribute::of_string("tile")}, {"axis", Attribute::of_int(1)},
                                   {"step", Attribute::of_int(2)}, {"tiles", Attribute::of_int(3)}}),
               Error);
  EXPECT_THROW(tile_model({5}, c, {{"mode", Attribute::of_string("tile")}, {"axis", Attribute::of_int(0)},
                                   {"step", Attribute::of_int(0)}, {"tiles", Attribute::of_int(3)}}),
               Error);
  // apply: the coefficients' columns must match the leading axis (2 vs 5).
  EXPECT_THROW(tile_model({5, 2}, c, {{"mode", Attribute::of_string("apply")}, {"axis", Attribute::of_int(0)}}),
               Error);
}

struct Case {
  std::vector<int64_t> x, w, pads;
  bool bias;
};

// Rewritten: no Conv left, four transforms and a batched MatMul; the same
// results as the direct convolution within the Winograd error (sizes that
// fill no 4x4 tile, pads 0 to 2 on any side, no bias, a batch of 2); the
// lowered kernels match the interpreter.
TEST(PassWinogradConv, MatchesTheDirectConvolution) {
  TS_REQUIRE_OPS("Conv", "MatMul", "Relu");
  const std::vector<Case> cases{
      {{1, 16, 14, 14}, {16, 16, 3, 3}, {1, 1, 1, 1}, true},
      {{1, 17, 19, 15}, {20, 17, 3, 3}, {0, 0, 0, 0}, true},
      {{2, 16, 9, 11}, {24, 16, 3, 3}, {2, 1, 0, 2}, false},
      {{1, 32, 23, 23}, {16, 32, 3, 3}, {1, 2, 1, 0}, true},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    const Case& c = cases[i];
    auto m = conv_model(c.x, c.w, {{"pads", ints(c.pads)}}, c.bias);
    auto ref = clone(*m);
    ASSERT_TRUE(winograd_convs(*m));
    EXPECT_NO_THROW(verify_model(*m));
    EXPECT_EQ(count_ops(*m->graph, "Conv"), 0u);
    EXPECT_EQ(count_ops(*m->graph, "TileTransform"), 4u);
    EXPECT_EQ(count_ops(*m->graph, "MatMul"), 1u);
    EXPECT_FALSE(winograd_convs(*m)) << "a second run finds nothing";
    // F(4x4, 3x3) in f32: a few 1e-6 of the magnitudes (outputs ~1 here).
    testing::expect_same_results(*ref, *m, {}, 2e-5);
    // The compiled transforms accumulate in f32 (the reference op in f64):
    // up to ~1e-5 of the outputs' scale (~6 with 32 channels), so 2e-4 absolute.
    const testing::EvalRun r = testing::expect_lowered_matches(*m, {}, Tolerance{2e-5, 2e-4});
    EXPECT_EQ(r.interpreted, 0u);
  }
}

// Each transform is a kernel of its own (Isolated): it takes movement
// producers only (a Reshape, a Transpose: index expressions) and joins no
// consumer; the final interleave, bias and ReLU are one kernel.
TEST(PassWinogradConv, EachTransformIsAKernelOfItsOwn) {
  TS_REQUIRE_OPS("Conv", "Relu");
  for (bool blocked : {false, true}) {
    auto m = conv_model({1, 16, 16, 16}, {16, 16, 3, 3}, {{"pads", ints({1, 1, 1, 1})}});
    ASSERT_TRUE(winograd_convs(*m, blocked));
    const FusionPlan p = plan_fusion(*m->graph, OpRegistry::global());
    size_t transforms = 0;
    for (const FusionGroup& g : p.groups) {
      size_t in_group = 0;
      for (const Node* n : g.nodes) in_group += n->op == "TileTransform";
      if (in_group == 0) continue;
      ++transforms;
      EXPECT_EQ(in_group, 1u) << g.name;
      EXPECT_EQ(g.root->op, "TileTransform") << g.name;
      for (const Node* n : g.nodes)
        if (n != g.root) EXPECT_TRUE(n->op == "Reshape" || n->op == "Transpose") << g.name << ": " << n->op;
    }
    EXPECT_EQ(transforms, 4u) << blocked;
  }
}

// Over the blocked layout (16 divides both channel counts): the input is
// blocked once, the transforms run along the channel blocks, the GEMM takes
// the tiles as rows against U transposed ([36, C, K]); the same results as
// the direct convolution within the Winograd error, also lowered.
TEST(PassWinogradConv, BlockedMatchesTheDirectConvolution) {
  TS_REQUIRE_OPS("Conv", "MatMul", "Relu");
  const std::vector<Case> cases{
      {{1, 16, 14, 14}, {32, 16, 3, 3}, {1, 1, 1, 1}, true},
      {{2, 32, 9, 11}, {16, 32, 3, 3}, {2, 1, 0, 2}, false},
      {{1, 48, 19, 15}, {16, 48, 3, 3}, {0, 0, 0, 0}, true},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    const Case& c = cases[i];
    auto m = conv_model(c.x, c.w, {{"pads", ints(c.pads)}}, c.bias);
    auto ref = clone(*m);
    ASSERT_TRUE(winograd_convs(*m, true));
    EXPECT_NO_THROW(verify_model(*m));
    EXPECT_EQ(count_ops(*m->graph, "Conv"), 0u);
    EXPECT_EQ(count_ops(*m->graph, "ToBlocked"), 1u);
    EXPECT_EQ(count_ops(*m->graph, "TileTransform"), 4u);
    const Node* mm = nullptr;
    for (const auto& n : m->graph->nodes())
      if (n->op == "MatMul") mm = n.get();
    ASSERT_TRUE(mm);
    ASSERT_TRUE(mm->input(1)->is_constant());
    EXPECT_EQ(mm->input(1)->constant->shape(), (std::vector<int64_t>{36, c.x[1], c.w[0]}));
    testing::expect_same_results(*ref, *m, {}, 2e-5);
    const testing::EvalRun r = testing::expect_lowered_matches(*m, {}, Tolerance{2e-5, 2e-4});
    EXPECT_EQ(r.interpreted, 0u);
  }
  // A channel count 16 does not divide: the NCHW form.
  auto m = conv_model({1, 24, 16, 16}, {16, 24, 3, 3}, {{"pads", ints({1, 1, 1, 1})}});
  ASSERT_TRUE(winograd_convs(*m, true));
  EXPECT_EQ(count_ops(*m->graph, "ToBlocked"), 0u);
}

// Left alone: strided, dilated, grouped, 5x5, too few channels, too few
// tiles, a weight that is not constant.
TEST(PassWinogradConv, LeavesOtherConvolutions) {
  TS_REQUIRE_OPS("Conv", "Relu");
  const Attrs pad1{{"pads", ints({1, 1, 1, 1})}};
  EXPECT_FALSE(winograd_convs(*conv_model({1, 16, 16, 16}, {16, 16, 3, 3},
                                          {{"pads", ints({1, 1, 1, 1})}, {"strides", ints({2, 2})}})));
  EXPECT_FALSE(winograd_convs(*conv_model({1, 16, 16, 16}, {16, 16, 3, 3},
                                          {{"pads", ints({1, 1, 1, 1})}, {"dilations", ints({2, 2})}})));
  EXPECT_FALSE(winograd_convs(*conv_model({1, 16, 16, 16}, {16, 8, 3, 3},
                                          {{"pads", ints({1, 1, 1, 1})}, {"group", Attribute::of_int(2)}})));
  EXPECT_FALSE(winograd_convs(*conv_model({1, 16, 16, 16}, {16, 16, 5, 5}, {{"pads", ints({2, 2, 2, 2})}})));
  EXPECT_FALSE(winograd_convs(*conv_model({1, 8, 16, 16}, {16, 8, 3, 3}, pad1)));
  EXPECT_FALSE(winograd_convs(*conv_model({1, 16, 8, 8}, {16, 16, 3, 3}, pad1)));
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::F32, {Dim(1), Dim(16), Dim(16), Dim(16)});
  Value* w = b.input("w", DType::F32, {Dim(16), Dim(16), Dim(3), Dim(3)});
  b.output(b.op("Conv", {x, w}, pad1));
  PassOptions o;
  run_pipeline(*m, o);
  EXPECT_FALSE(winograd_convs(*m));
}

// The pipeline runs the pass for the CPU only when asked: the blocked form
// with the blocked layout, the NCHW form only with winograd_nchw.
TEST(PassWinogradConv, RunsWhenAsked) {
  TS_REQUIRE_OPS("Conv");
  struct Run {
    bool on, blocked, nchw;
    size_t convs, blocks;
  };
  for (const Run& r : {Run{false, true, true, 1, 0}, Run{true, false, true, 0, 0}, Run{true, false, false, 1, 0},
                       Run{true, true, false, 0, 1}}) {
    auto m = conv_model({1, 16, 16, 16}, {16, 16, 3, 3}, {{"pads", ints({1, 1, 1, 1})}});
    PassOptions o;
    o.cpu = true;
    o.winograd = r.on;
    o.blocked_layout = r.blocked;
    o.winograd_nchw = r.nchw;
    run_pipeline(*m, o);
    EXPECT_EQ(count_ops(*m->graph, "Conv"), r.convs) << r.on << r.blocked << r.nchw;
    EXPECT_EQ(count_ops(*m->graph, "ToBlocked"), r.blocks) << r.on << r.blocked << r.nchw;
  }
}

}  // namespace
}  // namespace tessel
