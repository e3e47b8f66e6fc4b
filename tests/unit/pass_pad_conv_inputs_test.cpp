// pad_conv_inputs (CPU target: a padded stride-1 convolution reads a Pad's
// output, its pads 0) and the implicit GEMM over the input's rows that the
// unpadded convolution then gets (lower/conv_gemm.cpp, "shifted rows"):
// IR in and out, the rewritten model against the original through the
// interpreter, the lowered kernels against the interpreter, and what the
// packing of B then reads.
#include <gtest/gtest.h>

#include <set>

#include "lower_test_util.h"
#include "pass_test_util.h"
#include "tessel/ir/builder.h"
#include "tessel/ir/verifier.h"
#include "tessel/loop/visit.h"
#include "tessel/passes/fusion.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

using testing::clone;
using testing::find_op;
using testing::count_ops;

Attribute ints(std::vector<int64_t> v) { return Attribute::of_ints(std::move(v)); }

// x [N, C, H, W] -> Conv(x, w, b) -> Relu [-> Add res], shapes inferred.
std::unique_ptr<Model> conv_model(std::vector<int64_t> x, std::vector<int64_t> w, Attrs attrs, bool residual = false) {
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* in = b.input("x", DType::F32, {Dim(x[0]), Dim(x[1]), Dim(x[2]), Dim(x[3])});
  Value* wt = b.input("w", DType::F32, {Dim(w[0]), Dim(w[1]), Dim(w[2]), Dim(w[3])});
  Value* bias = b.input("b", DType::F32, {Dim(w[0])});
  Value* y = b.op("Relu", {b.op("Conv", {in, wt, bias}, attrs)});
  if (residual) {  // the output's shape: stride 1
    const std::vector<int64_t> p = attrs.at("pads").ints, d = attrs.at("dilations").ints;
    const int64_t oh = x[2] + p[0] + p[2] - (w[2] - 1) * d[0], ow = x[3] + p[1] + p[3] - (w[3] - 1) * d[1];
    y = b.op("Add", {y, b.input("res", DType::F32, {Dim(x[0]), Dim(w[0]), Dim(oh), Dim(ow)})});
  }
  b.output(y);
  PassOptions o;
  run_pipeline(*m, o);
  return m;
}

// Rewritten: a Pad by the conv's pads (any side, with dilation), the conv
// unpadded; same results; then compiled, the Pad is its own kernel and the
// conv an implicit GEMM (with the Relu, and a residual Add, as epilogue)
// that matches the interpreter, edge sizes included (13 output channels,
// widths that fill no vector, a batch of 3).
TEST(PassPadConvInputs, PaddedStrideOneConvolutionsReadAPad) {
  TS_REQUIRE_OPS("Conv", "Pad", "Relu", "Add");
  struct Case {
    std::vector<int64_t> x, w;
    std::vector<int64_t> pads, dilations;
    bool residual;
  };
  const std::vector<Case> cases{
      {{1, 3, 9, 7}, {5, 3, 3, 3}, {1, 1, 1, 1}, {1, 1}, false},
      {{3, 4, 5, 9}, {13, 4, 3, 3}, {1, 1, 1, 1}, {1, 1}, true},
      {{1, 3, 11, 9}, {4, 3, 3, 2}, {0, 1, 2, 1}, {2, 3}, false},
      {{2, 2, 7, 12}, {6, 2, 5, 5}, {2, 2, 2, 2}, {1, 1}, true},
      {{1, 8, 3, 3}, {16, 8, 3, 3}, {1, 1, 1, 1}, {1, 1}, false},  // ResNet's last stage: 3 x 3 images
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    const Case& c = cases[i];
    auto m = conv_model(c.x, c.w, {{"pads", ints(c.pads)}, {"dilations", ints(c.dilations)}}, c.residual);
    auto ref = clone(*m);
    ASSERT_TRUE(pad_conv_inputs(*m));
    EXPECT_NO_THROW(verify_model(*m));
    const Node* conv = find_op(*m->graph, "Conv");
    const Node* pad = find_op(*m->graph, "Pad");
    ASSERT_TRUE(conv && pad);
    EXPECT_EQ(conv->input(0), pad->outputs[0]);
    EXPECT_EQ(conv->attr_ints("pads"), (std::vector<int64_t>{0, 0, 0, 0}));
    ASSERT_TRUE(pad->input(1) && pad->input(1)->is_constant());
    const std::vector<int64_t> want{0, 0, c.pads[0], c.pads[1], 0, 0, c.pads[2], c.pads[3]};
    ASSERT_EQ(pad->input(1)->constant->numel(), 8);
    for (int64_t k = 0; k < 8; ++k) EXPECT_EQ(pad->input(1)->constant->get_i64(k), want[k]) << k;
    EXPECT_FALSE(pad_conv_inputs(*m)) << "a second run finds nothing";
    testing::expect_same_results(*ref, *m, {}, 1e-5);
    const testing::EvalRun r = testing::expect_lowered_matches(*m);
    EXPECT_EQ(r.interpreted, 0u);
    EXPECT_EQ(r.kernels, 2u);
    ASSERT_EQ(r.schedules.count("conv_gemm"), 1u);
    EXPECT_EQ(r.schedules.at("conv_gemm"), 1u);
  }
}

// Strided convolutions read a Pad too (the 7x7/2 stem, strided 3x3s), and
// compute the same.
TEST(PassPadConvInputs, StridedConvolutionsReadAPad) {
  TS_REQUIRE_OPS("Conv", "Pad");
  for (const Attrs& a : {Attrs{{"pads", ints({3, 3, 3, 3})}, {"strides", ints({2, 2})}},
                         Attrs{{"pads", ints({1, 0, 2, 1})}, {"strides", ints({2, 3})}, {"dilations", ints({1, 2})}}}) {
    auto m = conv_model({1, 3, 17, 19}, {5, 3, 7, 7}, a);
    auto ref = clone(*m);
    ASSERT_TRUE(pad_conv_inputs(*m));
    EXPECT_EQ(count_ops(*m->graph, "Pad"), 1u);
    for (const auto& n : m->graph->nodes())
      if (n->op == "Conv") {
        EXPECT_EQ(n->attr_ints("pads", {0, 0, 0, 0}), (std::vector<int64_t>{0, 0, 0, 0}));
        EXPECT_EQ(n->attr_ints("strides"), a.at("strides").ints);
      }
    testing::expect_same_results(*ref, *m, {}, 1e-5);
    const testing::EvalRun r = testing::expect_lowered_matches(*m);
    EXPECT_EQ(r.interpreted, 0u);
  }
}

// Left alone: grouped, already unpadded, a pad past the kernel's reach (1x1
// with pads: the border is bias only), auto_pad.
TEST(PassPadConvInputs, LeavesOtherConvolutions) {
  TS_REQUIRE_OPS("Conv", "Relu");
  EXPECT_FALSE(pad_conv_inputs(*conv_model({1, 4, 8, 8}, {4, 2, 3, 3}, {{"pads", ints({1, 1, 1, 1})},
                                                                        {"group", Attribute::of_int(2)}})));
  EXPECT_FALSE(pad_conv_inputs(*conv_model({1, 4, 8, 8}, {4, 4, 3, 3}, {})));
  EXPECT_FALSE(pad_conv_inputs(*conv_model({1, 4, 8, 8}, {4, 4, 1, 1}, {{"pads", ints({1, 1, 1, 1})}})));
  EXPECT_FALSE(pad_conv_inputs(*conv_model({1, 4, 8, 8}, {4, 4, 3, 3}, {{"auto_pad", Attribute::of_string("SAME_UPPER")}})));
}

// The Pad stays a kernel of its own in front of the conv, and the
// producer of its input (another conv) is not fused into it: the first
// conv keeps its Relu as epilogue.
TEST(PassPadConvInputs, ThePadIsNotFusedIntoTheConvolution) {
  TS_REQUIRE_OPS("Conv", "Pad", "Relu");
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::F32, {Dim(1), Dim(4), Dim(6), Dim(6)});
  Value* w1 = b.input("w1", DType::F32, {Dim(4), Dim(4), Dim(3), Dim(3)});
  Value* w2 = b.input("w2", DType::F32, {Dim(4), Dim(4), Dim(3), Dim(3)});
  Value* y = b.op("Relu", {b.op("Conv", {x, w1}, {{"pads", ints({1, 1, 1, 1})}})});
  b.output(b.op("Conv", {y, w2}, {{"pads", ints({1, 1, 1, 1})}}));
  PassOptions o;
  run_pipeline(*m, o);
  ASSERT_TRUE(pad_conv_inputs(*m));
  const FusionPlan p = plan_fusion(*m->graph, OpRegistry::global());
  std::vector<std::string> roots;
  for (const FusionGroup& g : p.groups) roots.push_back(g.root->op);
  // Pad(x); Conv + Relu; Pad; Conv.
  EXPECT_EQ(roots, (std::vector<std::string>{"Pad", "Relu", "Pad", "Conv"}));
  const testing::EvalRun r = testing::expect_lowered_matches(*m);
  ASSERT_EQ(r.schedules.count("conv_gemm"), 1u);
  EXPECT_EQ(r.schedules.at("conv_gemm"), 2u);
}

// An unpadded conv whose input a fused producer computes (a Slice of a
// wider image) keeps the output's own grid: the grid's extra columns would
// read past the slice through the producer's indices.
TEST(PassPadConvInputs, AFusedProducerKeepsTheOutputGrid) {
  TS_REQUIRE_OPS("Conv", "Slice");
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::F32, {Dim(1), Dim(4), Dim(9), Dim(13)});
  Value* s = b.op("Slice", {x, b.constant(Tensor::from_i64({0})), b.constant(Tensor::from_i64({10})),
                            b.constant(Tensor::from_i64({3}))});
  b.output(b.op("Conv", {s, b.input("w", DType::F32, {Dim(5), Dim(4), Dim(3), Dim(3)})}));
  const testing::EvalRun r = testing::expect_lowered_matches(*m);
  EXPECT_EQ(r.kernels, 1u) << "the Slice is fused into the conv";
  ASSERT_EQ(r.schedules.count("conv_gemm"), 1u);
  const LoweredGroup lg = testing::lower_single_group(*m);
  ASSERT_EQ(lg.schedule, "conv_gemm");
  // The GEMM's N: the output's 7 x 8 positions, not a grid over the 10 columns (6 x 10 + 8).
  EXPECT_EQ(lg.gemm_shape.n, 56);
}

// The unpadded stride-1 3x3 conv packs B with one load per vector at a
// position-affine address: no division or remainder of the lane variable
// (before, each element's row and column were divided out of its position).
TEST(PassPadConvInputs, PackingReadsWholeRows) {
  TS_REQUIRE_OPS("Conv");
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::F32, {Dim(1), Dim(16), Dim(12), Dim(12)});
  b.output(b.op("Conv", {x, b.input("w", DType::F32, {Dim(32), Dim(16), Dim(3), Dim(3)})}));
  const LoweredGroup lg = testing::lower_single_group(*m);
  ASSERT_EQ(lg.schedule, "conv_gemm");
  std::set<std::string> lanes;  // the vectorized loops' variables
  loop::visit_stmt(
      lg.kernel.body,
      [&](const loop::Stmt& s) {
        if (s->kind == loop::StmtKind::For && s->for_kind == loop::ForKind::Vectorized) lanes.insert(s->var);
      },
      [](const loop::Expr&) {});
  const size_t packs = testing::for_each_store_expr(lg.kernel.body, "bpack", [&](const loop::Expr& v) {
    const bool divmod = v->kind == loop::ExprKind::Binary &&
                        (v->binary == loop::BinaryOp::FloorDiv || v->binary == loop::BinaryOp::FloorMod);
    for (const std::string& l : lanes) EXPECT_FALSE(divmod && loop::mentions_var(v, l)) << l << " divided";
    EXPECT_NE(v->kind, loop::ExprKind::Select) << "a padding test in the packing";
  });
  EXPECT_GT(packs, 0u);
}

// On the grid, the columns past the output's width would land in the next
// output row: they are not stored. Run as the runtime's tasks would, last
// task first, such a store would overwrite a finished row. (16 columns: the
// tasks' blocks of positions, multiples of the vector, start rows.)
TEST(PassPadConvInputs, ColumnsPastTheOutputAreNotStored) {
  TS_REQUIRE_OPS("Conv", "Relu");
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::F32, {Dim(1), Dim(4), Dim(66), Dim(16)});
  b.output(b.op("Relu", {b.op("Conv", {x, b.input("w", DType::F32, {Dim(6), Dim(4), Dim(3), Dim(3)})})}));
  const LoweredGroup lg = testing::lower_single_group(*m);
  ASSERT_EQ(lg.schedule, "conv_gemm");
  ASSERT_TRUE(lg.parallel_extent && lg.parallel_extent->is_const());
  const int64_t tasks = lg.parallel_extent->value();
  ASSERT_GT(tasks, 1) << "the grid must span several tasks";

  const std::vector<RtValue> in = testing::random_inputs(*m->graph, {}, 11);
  const Tensor want = Interpreter().run(*m->graph, in).at(0).tensor;
  std::map<const Value*, const Tensor*> by_value{{m->graph->inputs[0], &in[0].tensor}, {m->graph->inputs[1], &in[1].tensor}};
  std::vector<void*> bufs;
  for (size_t i = 0; i < lg.kernel.num_inputs; ++i) bufs.push_back(const_cast<uint8_t*>(by_value.at(lg.params[i])->raw()));
  Tensor got(DType::F32, want.shape());
  bufs.push_back(got.mutable_raw());
  for (int64_t t = tasks; t-- > 0;) ASSERT_EQ(loop::run_kernel_range(lg.kernel, bufs, {}, t, t + 1), 0);
  EXPECT_EQ(compare_tensors(got, want, Tolerance{1e-5, 1e-5}), "");
}

}  // namespace
}  // namespace tessel
