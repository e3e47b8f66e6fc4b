// Fusion + lowering, checked numerically: each model's lowered kernels run
// through the loop-IR evaluator and must agree with the reference interpreter.
#include <gtest/gtest.h>

#include "lower_test_util.h"
#include "tessel/ir/builder.h"
#include "tessel/loop/printer.h"

namespace tessel {
namespace {

using testing::expect_lowered_matches;

TEST(LowerGroup, BroadcastAddReluIsOneKernel) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {2, 3, 21});
  Value* y = b.input("y", DType::F32, {21});
  b.output(b.op("Relu", {b.op("Add", {x, y})}));
  auto r = expect_lowered_matches(m);
  EXPECT_EQ(r.kernels, 1u);
  EXPECT_EQ(r.interpreted, 0u);
}

TEST(LowerGroup, SymbolicDimsBecomeKernelSyms) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {Dim::sym("n"), 37});
  Value* y = b.input("y", DType::F32, {Dim::sym("n"), 1});
  b.output(b.op("Mul", {b.op("Sub", {x, y}), x}));
  for (int64_t n : {1, 5}) {
    Model copy;
    auto c = testing::clone(m);
    auto r = expect_lowered_matches(*c, {{"n", n}});
    EXPECT_EQ(r.kernels, 1u);
  }
  PassOptions o;
  run_pipeline(m, o);
  FusionPlan p = plan_fusion(*m.graph, OpRegistry::global());
  ASSERT_EQ(p.groups.size(), 1u);
  LoweredGroup lg = lower_group(p.groups[0], OpRegistry::global());
  EXPECT_EQ(lg.kernel.syms, std::vector<std::string>{"n"});
  EXPECT_NE(loop::print(lg.kernel).find("vectorized for"), std::string::npos) << loop::print(lg.kernel);
}

TEST(LowerGroup, Rank1OutputIsChunkedWithTail) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {9000});
  b.output(b.op("Neg", {b.op("Abs", {x})}));
  expect_lowered_matches(m);
}

TEST(LowerGroup, IntegerDivisionAndModulo) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::I32, {4, 6});
  Value* y = b.constant(Tensor::from_i64({3, -2, 5, -1, 7, 2}).cast(DType::I32), "y");
  Value* d = b.op("Div", {x, y});
  b.output(b.op("Add", {d, b.op("Mod", {x, y})}));
  expect_lowered_matches(m);
}

TEST(LowerGroup, WhereCastAndComparisons) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {3, 17});
  Value* y = b.input("y", DType::F32, {3, 1});
  Value* c = b.op("Greater", {x, y});
  Value* w = b.op("Where", {c, x, y});
  Value* i = b.op("Cast", {w}, {{"to", Attribute::of_int(static_cast<int64_t>(DType::I32))}});
  b.output(b.op("Cast", {i}, {{"to", Attribute::of_int(static_cast<int64_t>(DType::F16))}}));
  expect_lowered_matches(m);
}

TEST(LowerGroup, IntegerDivisionByZeroIsAnError) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::I64, {3});
  Value* y = b.constant(Tensor::from_i64({1, 0, 2}), "y");
  b.output(b.op("Div", {x, y}));
  PassOptions o;
  run_pipeline(m, o);
  const auto in = testing::random_inputs(*m.graph, {}, 1);
  EXPECT_THROW(testing::run_lowered(m, in), Error);
}

}  // namespace
}  // namespace tessel

namespace tessel {
namespace {

Attrs axis_attr(int64_t a) { return {{"axis", Attribute::of_int(a)}}; }

TEST(LowerGroup, SoftmaxIsOneKernelWithRowStatistics) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {3, 4, 19});
  b.output(b.op("Softmax", {x}, axis_attr(-1)));
  auto r = testing::expect_lowered_matches(m);
  EXPECT_EQ(r.kernels, 1u);
}

TEST(LowerGroup, SoftmaxOverAMiddleAxis) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {2, 5, 3});
  b.output(b.op("LogSoftmax", {x}, axis_attr(1)));
  testing::expect_lowered_matches(m);
}

TEST(LowerGroup, LayerNormPatternFusesMeanAndVariance) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {Dim::sym("seq"), 24});
  Value* axes = b.const_i64({-1});
  Value* mean = b.op("ReduceMean", {x, axes});
  Value* d = b.op("Sub", {x, mean});
  Value* var = b.op("ReduceMean", {b.op("Mul", {d, d}), axes});
  Value* y = b.op("Div", {d, b.op("Sqrt", {b.op("Add", {var, b.scalar_f32(1e-5f)})})});
  b.output(y);
  auto r = testing::expect_lowered_matches(m, {{"seq", 3}});
  EXPECT_EQ(r.kernels, 1u);
}

TEST(LowerGroup, EveryReduceKindOverSeveralAxes) {
  for (const char* op : {"ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                         "ReduceSumSquare"}) {
    for (int64_t keep : {0, 1}) {
      Model m;
      GraphBuilder b(m);
      Value* x = b.input("x", DType::F32, {3, 4, 5});
      b.output(b.op(op, {x, b.const_i64({0, 2})}, {{"keepdims", Attribute::of_int(keep)}}));
      SCOPED_TRACE(std::string(op) + " keepdims " + std::to_string(keep));
      testing::expect_lowered_matches(m);
    }
  }
}

TEST(LowerGroup, MatMulWithBroadcastBatchAndEpilogue) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {2, 3, 5, 7});
  Value* w = b.input("w", DType::F32, {7, 6});
  Value* bias = b.input("bias", DType::F32, {6});
  b.output(b.op("Relu", {b.op("Add", {b.op("MatMul", {x, w}), bias})}));
  auto r = testing::expect_lowered_matches(m);
  EXPECT_EQ(r.kernels, 1u);
  EXPECT_EQ(r.gemm_kernels, 1u);
}

// torch's Linear on [batch, seq, features]: Reshape -> Gemm -> Reshape, with
// an activation after it, is one packed GEMM with its epilogue.
TEST(LowerGroup, GemmBetweenReshapesIsPackedGemm) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {2, 3, 6});
  Value* w = b.input("w", DType::F32, {6, 5});
  Value* bias = b.input("bias", DType::F32, {5});
  Value* flat = b.op("Reshape", {x, b.constant(Tensor::from_i64({6, 6}))});
  Value* y = b.op("Gemm", {flat, w, bias});
  Value* back = b.op("Reshape", {y, b.constant(Tensor::from_i64({2, 3, 5}))});
  b.output(b.op("Mul", {b.op("Tanh", {back}), back}));
  auto r = testing::expect_lowered_matches(m);
  EXPECT_EQ(r.kernels, 1u);
  EXPECT_EQ(r.gemm_kernels, 1u);
}

// SwiGLU: silu(x W1) * (x W3) holds two contractions; each becomes a packed
// GEMM (the first stored, the second with the product as its epilogue).
TEST(LowerGroup, TwoContractionsAreTwoGemms) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {5, 8});
  Value* w1 = b.input("w1", DType::F32, {8, 12});
  Value* w3 = b.input("w3", DType::F32, {8, 12});
  Value* g = b.op("MatMul", {x, w1});
  Value* silu = b.op("Mul", {g, b.op("Sigmoid", {g})});
  b.output(b.op("Mul", {silu, b.op("MatMul", {x, w3})}));
  auto r = testing::expect_lowered_matches(m);
  EXPECT_EQ(r.gemm_kernels, 2u);
}

// A consumer that mixes rows and columns (attention's head transpose) does
// not fit the epilogue: the product is stored by a packed GEMM and the
// transpose is a kernel of its own.
TEST(LowerGroup, TransposeAfterMatMulIsItsOwnKernel) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {2, 4, 6});
  Value* w = b.input("w", DType::F32, {2, 6, 5});
  Value* y = b.op("MatMul", {x, w});
  b.output(b.op("Transpose", {y}, {{"perm", Attribute::of_ints({0, 2, 1})}}));
  auto r = testing::expect_lowered_matches(m);
  EXPECT_EQ(r.kernels, 2u);
  EXPECT_EQ(r.gemm_kernels, 1u);
}

// torch.roll after a MatMul (Swin's shifted windows): the group reads the
// product at two row offsets, which one GEMM epilogue cannot give; the
// product is stored and the roll reads it.
TEST(LowerGroup, RollAfterMatMulReadsTheStoredProduct) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {7, 6});
  Value* w = b.input("w", DType::F32, {6, 5});
  Value* y = b.op("MatMul", {x, w});
  const auto slice = [&](int64_t from, int64_t to) {
    return b.op("Slice", {y, b.constant(Tensor::from_i64({from})), b.constant(Tensor::from_i64({to})),
                          b.constant(Tensor::from_i64({0}))});
  };
  b.output(b.op("Concat", {slice(3, 7), slice(0, 3)}, {{"axis", Attribute::of_int(0)}}));
  auto r = testing::expect_lowered_matches(m);
  EXPECT_EQ(r.gemm_kernels, 1u);
}

TEST(LowerGroup, MatMulVectorOperandsAndGemm) {
  {
    Model m;
    GraphBuilder b(m);
    Value* v = b.input("v", DType::F32, {7});
    Value* w = b.input("w", DType::F32, {4, 7, 3});
    b.output(b.op("MatMul", {v, w}));
    testing::expect_lowered_matches(m);
  }
  Model m;
  GraphBuilder b(m);
  Value* a = b.input("a", DType::F32, {5, 4});
  Value* w = b.input("w", DType::F32, {6, 5});
  Value* c = b.input("c", DType::F32, {1, 6});
  b.output(b.op("Gemm", {a, w, c}, {{"transA", Attribute::of_int(1)}, {"transB", Attribute::of_int(1)},
                                     {"alpha", Attribute::of_float(0.5f)}, {"beta", Attribute::of_float(2.0f)}}));
  testing::expect_lowered_matches(m);
}

TEST(LowerGroup, MovementOpsFuseIntoOneKernel) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {2, 3, 4});
  Value* y = b.input("y", DType::F32, {2, 5, 4});
  Value* t = b.op("Transpose", {b.op("Concat", {x, y}, axis_attr(1))}, {{"perm", Attribute::of_ints({2, 0, 1})}});
  Value* r = b.op("Reshape", {t, b.const_i64({8, 8})});
  Value* s = b.op("Slice", {r, b.const_i64({1, -1}), b.const_i64({7, -9}), b.const_i64({0, 1}), b.const_i64({2, -2})});
  b.output(b.op("Unsqueeze", {s, b.const_i64({0})}));
  auto run = testing::expect_lowered_matches(m);
  EXPECT_EQ(run.kernels, 1u);
}

TEST(LowerGroup, GatherChecksIndices) {
  Model m;
  GraphBuilder b(m);
  Value* table = b.input("table", DType::F32, {10, 4});
  Value* ids = b.constant(Tensor::from_i64({3, -1, 0, 9}).reshaped({2, 2}), "ids");
  b.output(b.op("Gather", {table, ids}));
  testing::expect_lowered_matches(m);

  Model bad;
  GraphBuilder bb(bad);
  Value* t2 = bb.input("table", DType::F32, {10, 4});
  bb.output(bb.op("Gather", {t2, bb.const_i64({10})}));
  PassOptions o;
  run_pipeline(bad, o);
  const auto in = testing::random_inputs(*bad.graph, {}, 1);
  EXPECT_THROW(testing::run_lowered(bad, in), Error);
}

}  // namespace
}  // namespace tessel

namespace tessel {
namespace {

// A contraction feeding a row reduction would be recomputed inside the
// reduction's loop: it is materialised as its own kernel instead.
TEST(LowerGroup, GemmFeedingSoftmaxIsMaterialised) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {3, 6});
  Value* w = b.input("w", DType::F32, {10, 6});
  Value* y = b.op("Gemm", {x, w}, {{"transB", Attribute::of_int(1)}});
  b.output(b.op("Softmax", {y}, {{"axis", Attribute::of_int(-1)}}));
  auto r = testing::expect_lowered_matches(m);
  EXPECT_EQ(r.kernels, 2u);
  EXPECT_EQ(r.interpreted, 0u);
}

}  // namespace
}  // namespace tessel

namespace tessel {
namespace {

// Inlining a non-trivial producer into a contraction would recompute it per
// output column; movement ops are still fused.
TEST(LowerGroup, ContractionTakesOnlyMovementProducers) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {4, 6});
  Value* w = b.input("w", DType::F32, {5, 6});
  Value* g = b.op("Tanh", {x});
  Value* wt = b.op("Transpose", {w});
  b.output(b.op("MatMul", {g, wt}));
  auto r = testing::expect_lowered_matches(m);
  EXPECT_EQ(r.kernels, 2u);  // Tanh, then Transpose+MatMul
}

// The same through an injective member: Tanh -> Reshape -> MatMul keeps Tanh
// out of the contraction's group (GPT-2's GELU in front of its Gemm).
TEST(LowerGroup, ContractionPrologueStaysInjectiveThroughMovement) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {2, 3, 6});
  Value* w = b.input("w", DType::F32, {6, 5});
  Value* shape = b.constant(Tensor::from_i64({6, 6}));
  Value* g = b.op("Tanh", {x});
  Value* r2 = b.op("Reshape", {g, shape});
  b.output(b.op("MatMul", {r2, w}));
  auto r = testing::expect_lowered_matches(m);
  EXPECT_EQ(r.kernels, 2u);  // Tanh, then Reshape+MatMul
}

}  // namespace
}  // namespace tessel

namespace tessel {
namespace {

// Each used output of a Split is a kernel of its own.
TEST(LowerGroup, SplitOutputsAreSeparateKernels) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {3, 10});
  auto outs = b.ops("Split", {b.op("Exp", {x}), b.const_i64({2, 5, 3})}, 3, {{"axis", Attribute::of_int(1)}});
  b.output(outs[0]);
  b.output(b.op("Neg", {outs[1]}));
  b.output(outs[2]);
  auto r = testing::expect_lowered_matches(m);
  EXPECT_EQ(r.kernels, 5u);  // Exp, Split x3, Neg
  EXPECT_EQ(r.interpreted, 0u);
}

}  // namespace
}  // namespace tessel
