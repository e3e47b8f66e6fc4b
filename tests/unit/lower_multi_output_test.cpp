// Differential tests of the lowerings of multi-output ops: every used output
// of Attention (present key/value, qk_matmul_output), LayerNormalization
// (Mean, InvStdDev), Dropout (mask), MaxPool (Indices),
// SoftmaxCrossEntropyLoss (log_prob) and TopK (values, indices) is a kernel
// of its own. Each model's lowered kernels run through the loop-IR evaluator
// and must agree with the reference interpreter, with no node left on the
// interpreter (unless the test says otherwise).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "lower_test_util.h"
#include "tessel/ir/builder.h"

namespace tessel {
namespace {

using testing::expect_lowered_matches;

Attribute ints(std::vector<int64_t> v) { return Attribute::of_ints(std::move(v)); }
Attribute i(int64_t v) { return Attribute::of_int(v); }
Attribute s(const char* v) { return Attribute::of_string(v); }

constexpr float kInf = std::numeric_limits<float>::infinity();

Tensor bool_scalar(bool v) {
  Tensor t(DType::Bool, {});
  t.set_i64(0, v);
  return t;
}

// `t` as a value computed at run time (a constant input would be folded
// away before lowering): Where(c, t, t) with a boolean graph input c.
Value* runtime_value(GraphBuilder& b, const Tensor& t) {
  Value* k = b.constant(t);
  Value* c = b.input("select", DType::Bool, {});
  return b.op("Where", {c, k, k});
}

// Marks every output of a multi-output node as a graph output and expects
// all of them compiled (one kernel each) and equal to the interpreter's.
void expect_all_outputs_compiled(Model& m, const std::vector<Value*>& outs, Tolerance tol = Tolerance{1e-5, 1e-5}) {
  GraphBuilder b(m);
  for (Value* v : outs) b.output(v);
  const testing::EvalRun r = expect_lowered_matches(m, {}, tol);
  EXPECT_EQ(r.interpreted, 0u);
  EXPECT_GE(r.kernels, outs.size());
}

// ---- Attention -------------------------------------------------------------------------

// An Attention node over fresh inputs (opset 24); an empty shape omits the
// operand (the mask, or the past key and value together).
struct AttnCase {
  Shape q, k, v, mask, past_k, past_v;
  DType dt = DType::F32, mask_dt = DType::F32;
  Attrs attrs;
};

std::vector<Value*> attention_outputs(Model& m, const AttnCase& c) {
  m.opsets[""] = 24;
  GraphBuilder b(m);
  std::vector<Value*> in{b.input("q", c.dt, c.q), b.input("k", c.dt, c.k), b.input("v", c.dt, c.v)};
  in.push_back(c.mask.empty() ? nullptr : b.input("mask", c.mask_dt, c.mask));
  if (!c.past_k.empty()) {
    in.push_back(b.input("pk", c.dt, c.past_k));
    in.push_back(b.input("pv", c.dt, c.past_v));
  }
  return b.ops("Attention", in, 4, c.attrs);
}

// Y, present_key, present_value and qk_matmul_output of a 4-D GQA attention
// with a past, a causal bias and a boolean mask, for every qk output mode.
TEST(LowerMultiOutput, Attention4dPastPresentEveryQkMode) {
  for (int64_t mode : {0, 1, 2, 3}) {
    Model m;
    const AttnCase c{{2, 4, 3, 8}, {2, 2, 3, 8}, {2, 2, 3, 5}, {3, 5}, {2, 2, 2, 8}, {2, 2, 2, 5}, DType::F32, DType::Bool,
                     {{"is_causal", i(1)}, {"qk_matmul_output_mode", i(mode)}, {"softcap", Attribute::of_float(3.0f)}}};
    SCOPED_TRACE(mode);
    expect_all_outputs_compiled(m, attention_outputs(m, c));
  }
}

// 3-D inputs (heads packed in the last dim) still give 4-D present and qk
// outputs; f16 rounds like the reference.
TEST(LowerMultiOutput, Attention3dAndFp16) {
  Model m;
  const AttnCase c{{1, 3, 12}, {1, 4, 6}, {1, 4, 4}, {1, 3, 6}, {1, 2, 2, 3}, {1, 2, 2, 2}, DType::F32, DType::F32,
                   {{"q_num_heads", i(4)}, {"kv_num_heads", i(2)}, {"qk_matmul_output_mode", i(2)}}};
  expect_all_outputs_compiled(m, attention_outputs(m, c));
  Model h;
  const AttnCase c16{{1, 2, 3, 4}, {1, 1, 3, 4}, {1, 1, 3, 4}, {}, {1, 1, 1, 4}, {1, 1, 1, 4}, DType::F16};
  expect_all_outputs_compiled(h, attention_outputs(h, c16), Tolerance{1e-3, 1e-3});
}

// A row the mask hides entirely: its probabilities (qk mode 3) and Y are 0.
TEST(LowerMultiOutput, AttentionFullyMaskedRowIsZero) {
  Model m;
  m.opsets[""] = 24;
  GraphBuilder b(m);
  Tensor mt(DType::Bool, {2, 3});
  for (int64_t j = 0; j < 6; ++j) mt.set_i64(j, j >= 3 && j != 4);  // row 0: every key hidden
  Value* q = b.input("q", DType::F32, {1, 1, 2, 4});
  Value* kv = b.input("kv", DType::F32, {1, 1, 3, 4});
  auto outs = b.ops("Attention", {q, kv, kv, runtime_value(b, mt)}, 4, {{"qk_matmul_output_mode", i(3)}});
  expect_all_outputs_compiled(m, {outs[0], outs[3]});
}

// ---- LayerNormalization ----------------------------------------------------------------

TEST(LowerMultiOutput, LayerNormMeanAndInvStdDev) {
  for (int64_t axis : {0, 1, -1}) {
    Model m;
    GraphBuilder b(m);
    Value* x = b.input("x", DType::F32, {3, 1, 7});
    Value* scale = b.input("scale", DType::F32, {7});
    Value* bias = b.input("bias", DType::F32, {7});
    if (axis != -1) {  // scale and bias cover the normalised dims
      const Shape sh = axis == 0 ? Shape{3, 1, 7} : Shape{1, 7};
      scale = b.input("scale_full", DType::F32, sh);
      bias = b.input("bias_full", DType::F32, sh);
    }
    auto outs = b.ops("LayerNormalization", {x, scale, bias}, 3, {{"axis", i(axis)}});
    SCOPED_TRACE(axis);
    expect_all_outputs_compiled(m, outs);
  }
}

// Edge values: -0, a constant row (variance 0), infinities (NaN statistics);
// f16 input with the statistics in f32 and in f64 (stash_type).
TEST(LowerMultiOutput, LayerNormEdgeValuesAndStashTypes) {
  for (int64_t stash : {1, 11}) {
    Model m;
    GraphBuilder b(m);
    Value* x = runtime_value(b, Tensor::from_f32({3, 4}, {-0.0f, 0.0f, -0.0f, 0.0f, 2, 2, 2, 2, 1, kInf, -3, 0.5f}));
    Value* h = b.op("Cast", {x}, {{"to", i(10)}});  // f16
    Value* scale = b.op("Cast", {b.input("scale", DType::F32, {4})}, {{"to", i(10)}});
    auto outs = b.ops("LayerNormalization", {h, scale}, 3, {{"stash_type", i(stash)}, {"epsilon", Attribute::of_float(0.25f)}});
    SCOPED_TRACE(stash);
    expect_all_outputs_compiled(m, outs, Tolerance{1e-3, 1e-3});
  }
}

// The statistics feed other kernels (a consumer of each output).
TEST(LowerMultiOutput, LayerNormOutputsWithConsumers) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {2, 5, 3});
  auto outs = b.ops("LayerNormalization", {b.op("Exp", {x}), b.input("scale", DType::F32, {5, 3})}, 3,
                    {{"axis", i(1)}});
  b.output(b.op("Add", {b.op("Neg", {outs[0]}), b.op("Mul", {outs[1], outs[2]})}));
  EXPECT_EQ(expect_lowered_matches(m).interpreted, 0u);
}

// ---- BatchNormalization in training mode ---------------------------------------------------

TEST(LowerMultiOutput, BatchNormTrainingRunningStatistics) {
  for (const Shape& xs : {Shape{2, 3, 4, 5}, Shape{3, 2}, Shape{1, 4, 7}}) {
    Model m;
    m.opsets[""] = 15;
    GraphBuilder b(m);
    const Dim c = xs[1];
    std::vector<Value*> in{b.input("x", DType::F32, xs)};
    for (const char* name : {"scale", "bias", "mean", "var"}) in.push_back(b.input(name, DType::F32, {c}));
    in[4] = b.op("Abs", {in[4]});  // a variance
    auto outs = b.ops("BatchNormalization", in, 3, {{"training_mode", i(1)}, {"momentum", Attribute::of_float(0.7f)}});
    SCOPED_TRACE(xs.size());
    expect_all_outputs_compiled(m, outs);
  }
}

// ---- Dropout ----------------------------------------------------------------------------

TEST(LowerMultiOutput, DropoutMaskInInference) {
  for (int variant = 0; variant < 3; ++variant) {
    Model m;
    m.opsets[""] = 13;
    GraphBuilder b(m);
    Value* x = b.input("x", DType::F32, {2, 1, 3});
    std::vector<Value*> in{x};
    if (variant == 1) in = {x, b.constant(Tensor::scalar_f32(0.3f)), b.constant(bool_scalar(false))};
    if (variant == 2) in = {x, b.constant(Tensor::scalar_f32(0.0f)), b.constant(bool_scalar(true))};
    auto outs = b.ops("Dropout", in, 2);
    SCOPED_TRACE(variant);
    expect_all_outputs_compiled(m, outs);
  }
}

// Training with a ratio draws random numbers: it stays on the interpreter.
TEST(LowerMultiOutput, DropoutTrainingStaysOnInterpreter) {
  Model m;
  m.opsets[""] = 13;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {4, 3});
  auto outs = b.ops("Dropout", {x, b.constant(Tensor::scalar_f32(0.5f)), b.constant(bool_scalar(true))}, 2,
                    {{"seed", i(3)}});
  b.output(outs[0]);
  b.output(outs[1]);
  EXPECT_EQ(expect_lowered_matches(m).interpreted, 1u);
}

// ---- MaxPool with Indices ------------------------------------------------------------------

TEST(LowerMultiOutput, MaxPoolIndicesBothStorageOrders) {
  for (int64_t order : {0, 1}) {
    Model m;
    GraphBuilder b(m);
    Value* x = b.input("x", DType::F32, {2, 3, 7, 6});
    auto outs = b.ops("MaxPool", {x}, 2,
                      {{"kernel_shape", ints({3, 2})}, {"strides", ints({2, 1})}, {"pads", ints({1, 1, 1, 0})},
                       {"ceil_mode", i(1)}, {"dilations", ints({1, 2})}, {"storage_order", i(order)}});
    SCOPED_TRACE(order);
    expect_all_outputs_compiled(m, outs);
  }
}

// Ties keep the first tap; a NaN is the maximum (the first NaN wins); -inf
// and -0 compare as numbers.
TEST(LowerMultiOutput, MaxPoolIndicesTiesNaNAndInfinities) {
  Model m;
  GraphBuilder b(m);
  Tensor t = Tensor::from_f32({1, 2, 3, 3}, {1, 1, -2, NAN, 3, NAN, -kInf, -kInf, -kInf,  //
                                             -0.0f, 0.0f, 5, 5, -1, 5, 0.0f, -0.0f, 2});
  auto outs = b.ops("MaxPool", {runtime_value(b, t)}, 2,
                    {{"kernel_shape", ints({2, 2})}, {"pads", ints({1, 0, 0, 1})}, {"storage_order", i(1)}});
  expect_all_outputs_compiled(m, outs);
}

TEST(LowerMultiOutput, MaxPoolIndicesInt8And1dAnd3d) {
  {
    Model m;
    GraphBuilder b(m);
    auto outs = b.ops("MaxPool", {b.input("x", DType::I8, {1, 2, 5, 5})}, 2, {{"kernel_shape", ints({2, 3})}});
    expect_all_outputs_compiled(m, outs);
  }
  {
    Model m;
    GraphBuilder b(m);
    auto outs = b.ops("MaxPool", {b.input("x", DType::F32, {2, 1, 9})}, 2,
                      {{"kernel_shape", ints({3})}, {"auto_pad", s("SAME_UPPER")}, {"strides", ints({2})}});
    expect_all_outputs_compiled(m, outs);
  }
  {
    Model m;
    GraphBuilder b(m);
    auto outs = b.ops("MaxPool", {b.input("x", DType::F32, {1, 2, 3, 4, 5})}, 2,
                      {{"kernel_shape", ints({2, 2, 2})}, {"storage_order", i(1)}});
    expect_all_outputs_compiled(m, outs);
  }
}

// ---- SoftmaxCrossEntropyLoss with log_prob -------------------------------------------------

TEST(LowerMultiOutput, SoftmaxCrossEntropyLogProb) {
  for (const char* red : {"none", "sum", "mean"})
    for (bool weighted : {false, true}) {
      Model m;
      GraphBuilder b(m);
      std::vector<Value*> in{b.input("x", DType::F32, {3, 5, 2}), b.input("t", DType::I64, {3, 2})};
      if (weighted) in.push_back(b.input("w", DType::F32, {5}));
      Attrs a{{"reduction", s(red)}};
      if (red[0] != 's') a["ignore_index"] = i(1);
      auto outs = b.ops("SoftmaxCrossEntropyLoss", in, 2, a);
      SCOPED_TRACE(str_cat(red, weighted));
      expect_all_outputs_compiled(m, outs);
    }
}

// ---- TopK --------------------------------------------------------------------------------------

TEST(LowerMultiOutput, TopKLargestSmallestAxes) {
  for (int64_t largest : {0, 1})
    for (int64_t axis : {0, 1, -1}) {
      Model m;
      GraphBuilder b(m);
      Value* x = b.input("x", DType::F32, {4, 7, 3});
      const int64_t n = axis == 0 ? 4 : axis == 1 ? 7 : 3;
      auto outs = b.ops("TopK", {x, b.const_i64({n - 1})}, 2, {{"axis", i(axis)}, {"largest", i(largest)}});
      SCOPED_TRACE(str_cat(largest, " ", axis));
      expect_all_outputs_compiled(m, outs);
    }
}

// NaN sorts above every number; ties (including -0 and +0) keep index order.
TEST(LowerMultiOutput, TopKTiesNaNAndInfinities) {
  for (int64_t largest : {0, 1}) {
    Model m;
    GraphBuilder b(m);
    Tensor t = Tensor::from_f32({2, 8}, {3, NAN, -kInf, 3, kInf, NAN, -0.0f, 0.0f,  //
                                         1, 1, 1, -0.0f, 0.0f, -0.0f, 1, 1});
    auto outs = b.ops("TopK", {runtime_value(b, t), b.const_i64({8})}, 2, {{"largest", i(largest)}});
    SCOPED_TRACE(largest);
    expect_all_outputs_compiled(m, outs);
  }
}

TEST(LowerMultiOutput, TopKIntegerTypes) {
  for (DType dt : {DType::I32, DType::U64, DType::I8}) {
    Model m;
    GraphBuilder b(m);
    auto outs = b.ops("TopK", {b.input("x", dt, {3, 6}), b.const_i64({2})}, 2);
    SCOPED_TRACE(dtype_name(dt));
    expect_all_outputs_compiled(m, outs);
  }
}

// A producer of a multi-output node is a kernel of its own, not recomputed
// per output; the values feed a consumer.
TEST(LowerMultiOutput, TopKBehindAndBeforeElementwise) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {5, 6});
  auto outs = b.ops("TopK", {b.op("Exp", {x}), b.const_i64({3})}, 2);
  b.output(b.op("Neg", {outs[0]}));
  b.output(outs[1]);
  const testing::EvalRun r = expect_lowered_matches(m);
  EXPECT_EQ(r.interpreted, 0u);
  EXPECT_EQ(r.kernels, 4u);  // Exp, TopK values, TopK indices, Neg
}

// A long axis would cost K * n^2 comparisons per line: the interpreter sorts it.
TEST(LowerMultiOutput, TopKLongAxisStaysOnInterpreter) {
  Model m;
  GraphBuilder b(m);
  auto outs = b.ops("TopK", {b.input("x", DType::F32, {1, 8192}), b.const_i64({4})}, 2);
  b.output(outs[0]);
  b.output(outs[1]);
  EXPECT_EQ(expect_lowered_matches(m).interpreted, 1u);
}

}  // namespace
}  // namespace tessel
