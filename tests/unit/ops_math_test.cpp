// Hand-checked cases for the math op families (reductions, softmax, scans,
// TopK, matrix products, normalisation, dropout, losses) and their handling
// of bad input. Expected values are worked out by hand (or are well-known
// constants), never produced by the code under test.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <tuple>

#include "tessel/interp/interpreter.h"
#include "tessel/ops/registry.h"
#include "tessel/support/error.h"

namespace tessel {
namespace {

using Attrs = std::map<std::string, Attribute>;

Tensor f32(std::vector<int64_t> shape, std::vector<float> v) { return Tensor::from_f32(std::move(shape), v); }

Tensor i64s(std::vector<int64_t> shape, std::vector<int64_t> v) { return Tensor::from_i64(v).reshaped(std::move(shape)); }

template <class T>
Tensor typed(DType dt, std::vector<int64_t> shape, std::vector<T> v) {
  Tensor t(dt, std::move(shape));
  for (size_t i = 0; i < v.size(); ++i) t.set_f64(static_cast<int64_t>(i), static_cast<double>(v[i]));
  return t;
}

// Runs one node through the interpreter. An undefined Tensor is an omitted input.
std::vector<Tensor> run_op(const std::string& op, const std::vector<Tensor>& in, size_t n_out = 1,
                           Attrs attrs = {}) {
  Graph g;
  std::vector<Value*> ins;
  std::vector<RtValue> vals;
  for (size_t i = 0; i < in.size(); ++i) {
    if (!in[i].defined()) {
      ins.push_back(nullptr);
      continue;
    }
    ins.push_back(g.add_input("in" + std::to_string(i), Type::tensor_unknown_shape(in[i].dtype())));
    vals.emplace_back(in[i]);
  }
  Node* n = g.add_node(op, ins, n_out, std::move(attrs));
  for (Value* v : n->outputs) g.outputs.push_back(v);
  std::vector<Tensor> out;
  for (const RtValue& v : Interpreter().run(g, vals)) out.push_back(v.tensor);
  return out;
}

Tensor run1(const std::string& op, const std::vector<Tensor>& in, Attrs attrs = {}) {
  return run_op(op, in, 1, std::move(attrs))[0];
}

void expect_values(const Tensor& t, std::vector<int64_t> shape, std::vector<double> want, double tol = 1e-6) {
  ASSERT_EQ(t.shape(), shape);
  ASSERT_EQ(t.numel(), static_cast<int64_t>(want.size()));
  for (size_t i = 0; i < want.size(); ++i) {
    const double got = t.get_f64(static_cast<int64_t>(i));
    if (std::isnan(want[i])) EXPECT_TRUE(std::isnan(got)) << "element " << i;
    else if (std::isinf(want[i])) EXPECT_EQ(got, want[i]) << "element " << i;
    else EXPECT_NEAR(got, want[i], tol) << "element " << i;
  }
}

Attribute ai(int64_t v) { return Attribute::of_int(v); }
Attribute af(float v) { return Attribute::of_float(v); }

// ---- reductions -------------------------------------------------------------------

TEST(MathOpsReduce, SumOverAxisWithoutKeepdims) {
  Tensor y = run1("ReduceSum", {f32({2, 3}, {1, 2, 3, 4, 5, 6}), i64s({1}, {1})}, {{"keepdims", ai(0)}});
  expect_values(y, {2}, {6, 15});
}

TEST(MathOpsReduce, DefaultAxesReduceEverythingKeepingDims) {
  Tensor y = run1("ReduceMean", {f32({2, 2}, {1, 2, 3, 6})});
  expect_values(y, {1, 1}, {3});
}

TEST(MathOpsReduce, NoopWithEmptyAxesIsPerElement) {
  // Reducing over no axes applies the per-element part: |x| for L1, x^2 for SumSquare.
  Tensor x = f32({3}, {-1, 2, -3});
  expect_values(run1("ReduceL1", {x}, {{"noop_with_empty_axes", ai(1)}}), {3}, {1, 2, 3});
  expect_values(run1("ReduceSumSquare", {x, i64s({0}, {})}, {{"noop_with_empty_axes", ai(1)}}), {3}, {1, 4, 9});
}

TEST(MathOpsReduce, EmptySetGivesIdentity) {
  Tensor x(DType::F32, {2, 0, 3});
  Tensor axes = i64s({1}, {1});
  const double inf = std::numeric_limits<double>::infinity();
  expect_values(run1("ReduceSum", {x, axes}), {2, 1, 3}, std::vector<double>(6, 0.0));
  expect_values(run1("ReduceProd", {x, axes}), {2, 1, 3}, std::vector<double>(6, 1.0));
  expect_values(run1("ReduceMax", {x, axes}), {2, 1, 3}, std::vector<double>(6, -inf));
  expect_values(run1("ReduceMin", {x, axes}), {2, 1, 3}, std::vector<double>(6, inf));
  expect_values(run1("ReduceLogSumExp", {x, axes}), {2, 1, 3}, std::vector<double>(6, -inf));
  // Integer max over nothing is the dtype's lowest value.
  Tensor xi(DType::I32, {0});
  Tensor yi = run1("ReduceMax", {xi}, {{"keepdims", ai(0)}});
  EXPECT_EQ(yi.get_i64(0), std::numeric_limits<int32_t>::min());
}

TEST(MathOpsReduce, LogSumExpIsStableForLargeValues) {
  Tensor y = run1("ReduceLogSumExp", {f32({2}, {1000, 1000})}, {{"keepdims", ai(0)}});
  expect_values(y, {}, {1000 + std::log(2.0)}, 1e-3);
}

TEST(MathOpsReduce, MaxPropagatesNaNAndHandlesNegativeAxes) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  Tensor y = run1("ReduceMax", {f32({2, 2}, {1, nan, 3, 2}), i64s({1}, {-1})}, {{"keepdims", ai(0)}});
  expect_values(y, {2}, {std::nan(""), 3});
}

TEST(MathOpsReduce, IntegerSumWrapsAndMeanTruncates) {
  Tensor x = typed<int64_t>(DType::I32, {2}, {2147483647, 1});
  EXPECT_EQ(run1("ReduceSum", {x}, {{"keepdims", ai(0)}}).get_i64(0), -2147483648LL);
  Tensor m = typed<int64_t>(DType::I32, {2}, {-3, 0});
  EXPECT_EQ(run1("ReduceMean", {m}, {{"keepdims", ai(0)}}).get_i64(0), -1);  // -1.5 truncates toward 0
}

TEST(MathOpsReduce, BoolMaxMin) {
  Tensor b = typed<int>(DType::Bool, {2, 2}, {0, 1, 0, 0});
  Tensor mx = run1("ReduceMax", {b, i64s({1}, {1})}, {{"keepdims", ai(0)}});
  EXPECT_EQ(mx.dtype(), DType::Bool);
  EXPECT_EQ(mx.get_i64(0), 1);
  EXPECT_EQ(mx.get_i64(1), 0);
}

TEST(MathOpsReduce, BadInputIsAnError) {
  Tensor x = f32({2, 3}, {1, 2, 3, 4, 5, 6});
  EXPECT_THROW(run1("ReduceSum", {x, i64s({1}, {2})}), Error);        // axis out of range
  EXPECT_THROW(run1("ReduceSum", {x, i64s({2}, {1, -1})}), Error);    // duplicate axis
  EXPECT_THROW(run1("ReduceSum", {typed<int>(DType::I8, {2}, {1, 2})}), Error);  // int8 not allowed
  EXPECT_THROW(run1("ReduceLogSum", {typed<int>(DType::I32, {2}, {1, 2})}), Error);
}

TEST(MathOpsReduce, ArgMaxSelectLastIndexAndNaN) {
  Tensor x = f32({3}, {1, 3, 3});
  EXPECT_EQ(run1("ArgMax", {x}).get_i64(0), 1);
  EXPECT_EQ(run1("ArgMax", {x}, {{"select_last_index", ai(1)}}).get_i64(0), 2);
  Tensor y = run1("ArgMin", {f32({2, 2}, {4, 2, 1, 5})}, {{"axis", ai(-1)}, {"keepdims", ai(0)}});
  EXPECT_EQ(y.shape(), std::vector<int64_t>{2});
  EXPECT_EQ(y.get_i64(0), 1);
  EXPECT_EQ(y.get_i64(1), 0);
  EXPECT_THROW(run1("ArgMax", {x}, {{"axis", ai(1)}}), Error);
  EXPECT_THROW(run1("ArgMax", {Tensor(DType::F32, {2, 0})}, {{"axis", ai(1)}}), Error);
}

// ---- softmax family -----------------------------------------------------------------

TEST(MathOpsSoftmax, SoftmaxLogSoftmaxHardmax) {
  Tensor x = f32({3}, {1, 2, 3});
  // e^1, e^2, e^3 = 2.718281828, 7.389056099, 20.08553692; sum 30.19287485.
  expect_values(run1("Softmax", {x}), {3}, {0.0900305732, 0.2447284711, 0.6652409558});
  expect_values(run1("LogSoftmax", {x}), {3}, {-2.4076059644, -1.4076059644, -0.4076059644});
  expect_values(run1("Hardmax", {f32({4}, {1, 5, 5, 2})}), {4}, {0, 1, 0, 0});  // first max wins
}

TEST(MathOpsSoftmax, AxisZeroOf2D) {
  expect_values(run1("Softmax", {f32({2, 2}, {0, 5, 0, 5})}, {{"axis", ai(0)}}), {2, 2}, {0.5, 0.5, 0.5, 0.5});
  EXPECT_THROW(run1("Softmax", {f32({2}, {0, 0})}, {{"axis", ai(1)}}), Error);
}

TEST(MathOpsSoftmax, Opset11UpgradeCoercesTo2D) {
  // Softmax-11 with axis=1 on [1,2,2] normalises over the 4 trailing elements
  // (0.25 each); opset-13 semantics on axis 1 alone would give 0.5.
  Graph g;
  Value* x = g.add_input("x", Type::tensor(DType::F32, {Dim(1), Dim(2), Dim(2)}));
  Node* n = g.add_node("Softmax", {x}, 1, {{"axis", ai(1)}});
  Value* y = n->outputs[0];
  g.outputs.push_back(y);
  // Rank known but the axis is not the last one: the upgrade must rewrite.
  OpRegistry::global().find("", "Softmax")->upgrade(*n, 11);
  EXPECT_EQ(g.outputs[0], y);
  auto out = Interpreter().run(g, {RtValue(f32({1, 2, 2}, {0, 0, 0, 0}))});
  expect_values(out[0].tensor, {1, 2, 2}, {0.25, 0.25, 0.25, 0.25});
}

// ---- scans and TopK -----------------------------------------------------------------

TEST(MathOpsScan, CumSumExclusiveReverse) {
  Tensor x = f32({3}, {1, 2, 3});
  Tensor axis = Tensor::scalar_i64(0);
  expect_values(run1("CumSum", {x, axis}), {3}, {1, 3, 6});
  expect_values(run1("CumSum", {x, axis}, {{"exclusive", ai(1)}, {"reverse", ai(1)}}), {3}, {5, 3, 0});
  expect_values(run1("CumProd", {x, axis}, {{"exclusive", ai(1)}}), {3}, {1, 1, 2});
  EXPECT_THROW(run1("CumSum", {x, Tensor::scalar_i64(1)}), Error);
}

TEST(MathOpsScan, TopKTiesPreferLowerIndex) {
  Tensor x = f32({4}, {3, 1, 3, 2});
  auto big = run_op("TopK", {x, i64s({1}, {2})}, 2);
  expect_values(big[0], {2}, {3, 3});
  EXPECT_EQ(big[1].get_i64(0), 0);
  EXPECT_EQ(big[1].get_i64(1), 2);
  auto small = run_op("TopK", {x, i64s({1}, {2})}, 2, {{"largest", ai(0)}});
  expect_values(small[0], {2}, {1, 2});
  EXPECT_EQ(small[1].get_i64(0), 1);
  EXPECT_EQ(small[1].get_i64(1), 3);
  EXPECT_THROW(run_op("TopK", {x, i64s({1}, {5})}, 2), Error);   // k > axis size
  EXPECT_THROW(run_op("TopK", {x, i64s({1}, {-1})}, 2), Error);  // negative k
}

// ---- matrix products --------------------------------------------------------------------

TEST(MathOpsMatMul, VectorsAndBroadcasting) {
  Tensor dot = run1("MatMul", {f32({3}, {1, 2, 3}), f32({3}, {4, 5, 6})});
  expect_values(dot, {}, {32});
  // [2,2,3] x [3] -> [2,2]
  Tensor y = run1("MatMul", {f32({2, 2, 3}, {1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}), f32({3}, {1, 2, 3})});
  expect_values(y, {2, 2}, {1, 2, 3, 6});
  // [2,1,2] x [3,2,1] broadcasts to [2,3,1,1]... batch [2] vs [3] is an error.
  EXPECT_THROW(run1("MatMul", {f32({2, 1, 2}, {1, 2, 3, 4}), f32({3, 2, 1}, {1, 1, 1, 1, 1, 1})}), Error);
  // Batch [2,1] with [3]: broadcast to [2,3].
  Tensor z = run1("MatMul", {f32({2, 1, 1, 1}, {1, 2}), f32({3, 1, 1}, {1, 10, 100})});
  expect_values(z, {2, 3, 1, 1}, {1, 10, 100, 2, 20, 200});
  EXPECT_THROW(run1("MatMul", {f32({2, 3}, {1, 2, 3, 4, 5, 6}), f32({2, 3}, {1, 2, 3, 4, 5, 6})}), Error);
}

TEST(MathOpsMatMul, IntegerWraps) {
  Tensor a = typed<int64_t>(DType::I32, {1, 1}, {1 << 30});
  Tensor b = typed<int64_t>(DType::I32, {1, 1}, {4});
  EXPECT_EQ(run1("MatMul", {a, b}).get_i64(0), 0);
}

TEST(MathOpsMatMul, GemmAttributesAndBias) {
  Tensor a = f32({2, 2}, {1, 2, 3, 4});
  Tensor eye = f32({2, 2}, {1, 0, 0, 1});
  Tensor y = run1("Gemm", {a, eye, f32({2}, {10, 20})}, {{"transA", ai(1)}, {"alpha", af(2)}});
  expect_values(y, {2, 2}, {12, 26, 14, 28});
  Tensor z = run1("Gemm", {a, f32({3, 2}, {1, 0, 0, 1, 1, 1})}, {{"transB", ai(1)}});
  expect_values(z, {2, 3}, {1, 2, 3, 3, 4, 7});
  EXPECT_THROW(run1("Gemm", {a, eye, f32({3}, {1, 2, 3})}), Error);  // C does not broadcast
}

TEST(MathOpsMatMul, QuantizedProducts) {
  Tensor a = typed<int>(DType::U8, {1, 2}, {3, 4});
  Tensor b = typed<int>(DType::U8, {2, 1}, {1, 2});
  // (3-1)*1 + (4-1)*2 = 8
  Tensor y = run1("MatMulInteger", {a, b, typed<int>(DType::U8, {}, {1})});
  EXPECT_EQ(y.dtype(), DType::I32);
  EXPECT_EQ(y.get_i64(0), 8);
  // 3*1 + 4*2 = 11, times 1*1/2 = 5.5, + zero point 10 = 15.5 -> half to even = 16.
  Tensor q = run1("QLinearMatMul", {a, Tensor::scalar_f32(1), typed<int>(DType::U8, {}, {0}), b,
                                    Tensor::scalar_f32(1), typed<int>(DType::U8, {}, {0}), Tensor::scalar_f32(2),
                                    typed<int>(DType::U8, {}, {10})});
  EXPECT_EQ(q.dtype(), DType::U8);
  EXPECT_EQ(q.get_i64(0), 16);
}

TEST(MathOpsMatMul, EinsumForms) {
  Tensor m = f32({2, 2}, {1, 2, 3, 4});
  Attrs diag{{"equation", Attribute::of_string("ii->i")}};
  expect_values(run1("Einsum", {m}, diag), {2}, {1, 4});
  expect_values(run1("Einsum", {m}, {{"equation", Attribute::of_string("ii")}}), {}, {5});
  expect_values(run1("Einsum", {m}, {{"equation", Attribute::of_string("ij->ji")}}), {2, 2}, {1, 3, 2, 4});
  // Implicit output of "ij,jk" is "ik".
  expect_values(run1("Einsum", {m, m}, {{"equation", Attribute::of_string("ij, jk")}}), {2, 2}, {7, 10, 15, 22});
  // Ellipsis broadcasting: [2,1,2] "...i" times [2] "i" summed -> [2,1].
  Tensor b = f32({2, 1, 2}, {1, 1, 2, 3});
  expect_values(run1("Einsum", {b, f32({2}, {10, 1})}, {{"equation", Attribute::of_string("...i,i->...")}}), {2, 1},
                {11, 23});
  EXPECT_THROW(run1("Einsum", {m}, {{"equation", Attribute::of_string("ijk->i")}}), Error);
  EXPECT_THROW(run1("Einsum", {m, f32({3}, {1, 2, 3})}, {{"equation", Attribute::of_string("ij,j->i")}}), Error);
}

TEST(MathOpsMatMul, Det) {
  expect_values(run1("Det", {f32({2, 2}, {1, 2, 3, 4})}), {}, {-2});
  expect_values(run1("Det", {f32({2, 2, 2}, {2, 0, 0, 3, 0, 1, 1, 0})}), {2}, {6, -1});
  EXPECT_THROW(run1("Det", {f32({2, 3}, {1, 2, 3, 4, 5, 6})}), Error);
}

// ---- normalisation ---------------------------------------------------------------------

TEST(MathOpsNorm, LayerNormWithStats) {
  // mean 2, variance 2/3: y = (x - 2) / sqrt(2/3).
  auto out = run_op("LayerNormalization", {f32({1, 3}, {1, 2, 3}), f32({3}, {1, 1, 1}), f32({3}, {0, 0, 1})}, 3,
                    {{"epsilon", af(0)}});
  expect_values(out[0], {1, 3}, {-1.2247448714, 0, 2.2247448714});
  expect_values(out[1], {1, 1}, {2});
  expect_values(out[2], {1, 1}, {1.2247448714});
}

TEST(MathOpsNorm, BatchNormInference) {
  // y = scale * (x - mean) / sqrt(var + eps) + B with var 4, eps 0.
  Tensor x = f32({1, 2, 1, 2}, {1, 3, 5, 7});
  Tensor y = run1("BatchNormalization", {x, f32({2}, {1, 2}), f32({2}, {0, 1}), f32({2}, {1, 5}), f32({2}, {4, 4})},
                  {{"epsilon", af(0)}});
  expect_values(y, {1, 2, 1, 2}, {0, 1, 1, 3});
  EXPECT_THROW(run1("BatchNormalization", {x, f32({3}, {1, 1, 1}), f32({2}, {0, 0}), f32({2}, {0, 0}),
                                           f32({2}, {1, 1})}),
               Error);
}

TEST(MathOpsNorm, GroupInstanceRmsLp) {
  Tensor x = f32({1, 4, 1}, {1, 3, 5, 7});
  Tensor ones = f32({4}, {1, 1, 1, 1}), zeros = f32({4}, {0, 0, 0, 0});
  expect_values(run1("GroupNormalization", {x, ones, zeros}, {{"num_groups", ai(2)}, {"epsilon", af(0)}}), {1, 4, 1},
                {-1, 1, -1, 1});
  EXPECT_THROW(run1("GroupNormalization", {x, ones, zeros}, {{"num_groups", ai(3)}}), Error);
  expect_values(run1("InstanceNormalization", {f32({1, 1, 2}, {1, 3}), f32({1}, {2}), f32({1}, {1})},
                     {{"epsilon", af(0)}}),
                {1, 1, 2}, {-1, 3});
  // RMS of [3, 4] is sqrt(12.5).
  expect_values(run1("RMSNormalization", {f32({2}, {3, 4}), f32({2}, {1, 2})}, {{"epsilon", af(0)}}), {2},
                {3 / std::sqrt(12.5), 8 / std::sqrt(12.5)});
  expect_values(run1("LpNormalization", {f32({2, 2}, {3, -1, 0, 0})}, {{"p", ai(1)}}), {2, 2}, {0.75, -0.25, 0, 0});
}

TEST(MathOpsNorm, LRNWindow) {
  // size 2: channel c sums squares of c..c+1. y0 = 1/(1 + 2/2*5), y1 = 2/(1 + 2/2*4).
  Tensor y = run1("LRN", {f32({1, 2, 1, 1}, {1, 2})},
                  {{"size", ai(2)}, {"alpha", af(2)}, {"beta", af(1)}, {"bias", af(1)}});
  expect_values(y, {1, 2, 1, 1}, {1.0 / 6, 0.4});
}

TEST(MathOpsNorm, DropoutInferenceAndTraining) {
  Tensor x = f32({5}, {1, 2, 3, 4, 5});
  auto inf = run_op("Dropout", {x}, 2);
  expect_values(inf[0], {5}, {1, 2, 3, 4, 5});
  EXPECT_EQ(inf[1].dtype(), DType::Bool);
  // numpy's RandomState(0) draws 0.5488, 0.7152, 0.6028, 0.5449, 0.4237: with
  // ratio 0.5 the last element is dropped and the rest scaled by 2.
  Tensor t(DType::Bool, {});
  t.set_i64(0, 1);
  auto tr = run_op("Dropout", {x, Tensor::scalar_f32(0.5f), t}, 2, {{"seed", ai(0)}});
  expect_values(tr[0], {5}, {2, 4, 6, 8, 0});
  EXPECT_EQ(tr[1].get_i64(4), 0);
  EXPECT_EQ(tr[1].get_i64(0), 1);
}

// ---- losses -------------------------------------------------------------------------------

TEST(MathOpsLoss, NllMeanWithIgnoreIndex) {
  Tensor logp = f32({2, 2}, {-1, -2, -3, -4});
  Tensor target = i64s({2}, {1, 0});
  expect_values(run1("NegativeLogLikelihoodLoss", {logp, target}), {}, {2.5});
  expect_values(run1("NegativeLogLikelihoodLoss", {logp, target}, {{"ignore_index", ai(0)}}), {}, {2});
  expect_values(run1("NegativeLogLikelihoodLoss", {logp, target, f32({2}, {1, 3})},
                     {{"reduction", Attribute::of_string("none")}}),
                {2}, {6, 3});
  EXPECT_THROW(run1("NegativeLogLikelihoodLoss", {logp, i64s({2}, {2, 0})}), Error);  // target out of range
  EXPECT_THROW(run1("NegativeLogLikelihoodLoss", {logp, target}, {{"reduction", Attribute::of_string("avg")}}),
               Error);
}

TEST(MathOpsLoss, SoftmaxCrossEntropyUniform) {
  // Equal scores: log_prob = -ln 2 everywhere, loss ln 2.
  auto out = run_op("SoftmaxCrossEntropyLoss", {f32({1, 2}, {7, 7}), i64s({1}, {1})}, 2);
  expect_values(out[0], {}, {std::log(2.0)});
  expect_values(out[1], {1, 2}, {-std::log(2.0), -std::log(2.0)});
}

// ---- inference ---------------------------------------------------------------------------

TEST(MathOpsInfer, SymbolicMatMulAndReduceProdOfShape) {
  Graph g;
  const Dim b = Dim::sym("batch"), s = Dim::sym("seq");
  Value* x = g.add_input("x", Type::tensor(DType::F32, {b, s, Dim(768)}));
  Value* w = g.add_input("w", Type::tensor(DType::F32, {Dim(768), Dim(3072)}));
  Node* mm = g.add_node("MatMul", {x, w}, 1);
  InferContext c(*mm);
  c.in_types = {&x->type, &w->type};
  c.in_consts = {nullptr, nullptr};
  c.in_syms = {nullptr, nullptr};
  OpRegistry::global().find("", "MatMul")->infer(c);
  EXPECT_EQ(c.out_types[0].str(), Type::tensor(DType::F32, {b, s, Dim(3072)}).str());

  // ReduceProd over the value of Shape(x) is batch*seq*768.
  Value* shp = g.add_input("shp", Type::tensor(DType::I64, {Dim(3)}));
  Node* rp = g.add_node("ReduceProd", {shp}, 1, {{"keepdims", ai(0)}});
  InferContext r(*rp);
  const SymValue sv{b, s, Dim(768)};
  r.in_types = {&shp->type};
  r.in_consts = {nullptr};
  r.in_syms = {&sv};
  OpRegistry::global().find("", "ReduceProd")->infer(r);
  ASSERT_TRUE(r.out_syms[0].has_value());
  ASSERT_EQ(r.out_syms[0]->size(), 1u);
  EXPECT_EQ((*r.out_syms[0])[0], b * s * Dim(768));
  EXPECT_TRUE(r.out_types[0].shape->empty());
}

TEST(MathOpsInfer, RejectsBadTypesAndShapes) {
  Graph g;
  Value* x = g.add_input("x", Type::tensor(DType::I32, {Dim(2), Dim(3)}));
  Node* sm = g.add_node("Softmax", {x}, 1);
  InferContext c(*sm);
  c.in_types = {&x->type};
  c.in_consts = {nullptr};
  c.in_syms = {nullptr};
  EXPECT_THROW(OpRegistry::global().find("", "Softmax")->infer(c), Error);

  Value* a = g.add_input("a", Type::tensor(DType::F32, {Dim(2), Dim(3)}));
  Node* gm = g.add_node("Gemm", {a, a}, 1);
  InferContext d(*gm);
  d.in_types = {&a->type, &a->type};
  d.in_consts = {nullptr, nullptr};
  d.in_syms = {nullptr, nullptr};
  EXPECT_THROW(OpRegistry::global().find("", "Gemm")->infer(d), Error);
}

}  // namespace
}  // namespace tessel

namespace tessel {
namespace {

// The blocked, vectorised MatMul must round exactly like the plain triple
// loop (sum over k in order, no fused multiply-add), on shapes that leave
// partial tiles in every direction.
TEST(MathOpsMatMul, BitIdenticalToPlainTripleLoop) {
  for (auto [M, K, N] : {std::tuple<int64_t, int64_t, int64_t>{7, 13, 9}, {4, 300, 260}, {1, 5, 3}, {9, 1, 4}}) {
    Tensor a(DType::F64, {M, K}), b(DType::F64, {K, N});
    uint64_t s = 12345;
    auto next = [&s] {
      s = s * 6364136223846793005ULL + 1442695040888963407ULL;
      return static_cast<double>(static_cast<int64_t>(s >> 11)) / 9007199254740992.0 - 0.5;
    };
    for (int64_t i = 0; i < a.numel(); ++i) a.set_f64(i, next());
    for (int64_t i = 0; i < b.numel(); ++i) b.set_f64(i, next());
    Tensor y = run1("MatMul", {a, b});
    ASSERT_EQ(y.shape(), (std::vector<int64_t>{M, N}));
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double c = 0;
        for (int64_t k = 0; k < K; ++k) {
          volatile double p = a.get_f64(i * K + k) * b.get_f64(k * N + j);  // no contraction
          c += p;
        }
        ASSERT_EQ(y.get_f64(i * N + j), c) << M << "x" << K << "x" << N << " at " << i << "," << j;
      }
  }
}

}  // namespace
}  // namespace tessel

namespace tessel {
namespace {

TEST(MathOpsMatMul, EmptyInnerDimGivesZeros) {
  Tensor y = run1("MatMul", {Tensor(DType::F32, {2, 0}), Tensor(DType::F32, {0, 3})});
  expect_values(y, {2, 3}, std::vector<double>(6, 0.0));
  Tensor g = run1("Gemm", {Tensor(DType::F32, {2, 0}), Tensor(DType::F32, {0, 2}), f32({}, {1.5f})});
  expect_values(g, {2, 2}, {1.5, 1.5, 1.5, 1.5});
}

TEST(MathOpsMatMul, EinsumBatchTraceAndBatchMatmul) {
  // Per-batch trace: [[1,2],[3,4]] -> 5, [[5,6],[7,8]] -> 13.
  Tensor x = f32({2, 2, 2}, {1, 2, 3, 4, 5, 6, 7, 8});
  expect_values(run1("Einsum", {x}, {{"equation", Attribute::of_string("bii->b")}}), {2}, {5, 13});
  // Batched product with an explicit ellipsis: x[b] . x[b].
  expect_values(run1("Einsum", {x, x}, {{"equation", Attribute::of_string("...ij,...jk->...ik")}}), {2, 2, 2},
                {7, 10, 15, 22, 67, 78, 91, 106});
}

}  // namespace
}  // namespace tessel
