// Convolution, pooling, image and attention operators: small hand-computed
// cases for the tricky semantics (padding rules, ceil mode, transposed
// geometry, resize coordinate modes, masks) and bad input that must raise
// tessel::Error.
#include <gtest/gtest.h>

#include <cmath>

#include "tessel/interp/interpreter.h"
#include "tessel/ops/registry.h"
#include "tessel/support/error.h"

namespace tessel {
namespace {

Tensor f32(std::vector<int64_t> shape, std::vector<float> v) { return Tensor::from_f32(shape, v); }
Tensor i64(std::vector<int64_t> shape, std::vector<int64_t> v) { return Tensor::from_i64(v).reshaped(shape); }

std::vector<double> vals(const Tensor& t) {
  std::vector<double> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get_f64(i));
  return v;
}
std::vector<int64_t> ints(const Tensor& t) {
  std::vector<int64_t> v;
  for (int64_t i = 0; i < t.numel(); ++i) v.push_back(t.get_i64(i));
  return v;
}

Attribute ints_attr(std::vector<int64_t> v) { return Attribute::of_ints(std::move(v)); }

// Runs one node on concrete inputs with the reference interpreter; an
// undefined Tensor stands for an omitted optional input.
std::vector<Tensor> run_op(const std::string& op, const std::vector<Tensor>& inputs, size_t num_outputs = 1,
                           std::map<std::string, Attribute> attrs = {}) {
  Graph g;
  std::vector<Value*> ins;
  std::vector<RtValue> rv;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].defined()) {
      ins.push_back(nullptr);
      continue;
    }
    ins.push_back(g.add_input("in" + std::to_string(i), Type::tensor_unknown_shape(inputs[i].dtype())));
    rv.emplace_back(inputs[i]);
  }
  Node* n = g.add_node(op, ins, num_outputs, std::move(attrs));
  for (Value* v : n->outputs) g.outputs.push_back(v);
  std::vector<Tensor> out;
  for (const RtValue& v : Interpreter().run(g, rv)) out.push_back(v.tensor);
  return out;
}
Tensor run1(const std::string& op, const std::vector<Tensor>& inputs, std::map<std::string, Attribute> attrs = {}) {
  return run_op(op, inputs, 1, std::move(attrs)).at(0);
}

using V = std::vector<double>;
using S = std::vector<int64_t>;

// ---- Conv ---------------------------------------------------------------------------

TEST(ConvKernels, ValidWindowSums) {
  Tensor x = f32({1, 1, 3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8});
  Tensor w = f32({1, 1, 2, 2}, {1, 1, 1, 1});
  Tensor y = run1("Conv", {x, w});
  EXPECT_EQ(y.shape(), (S{1, 1, 2, 2}));
  EXPECT_EQ(vals(y), (V{8, 12, 20, 24}));
}

TEST(ConvKernels, PaddedStridedWindowSums) {
  Tensor x = f32({1, 1, 3, 3}, {0, 1, 2, 3, 4, 5, 6, 7, 8});
  Tensor w = f32({1, 1, 3, 3}, {1, 1, 1, 1, 1, 1, 1, 1, 1});
  Tensor y = run1("Conv", {x, w}, {{"pads", ints_attr({1, 1, 1, 1})}, {"strides", ints_attr({2, 2})}});
  EXPECT_EQ(y.shape(), (S{1, 1, 2, 2}));
  EXPECT_EQ(vals(y), (V{8, 12, 20, 24}));
}

TEST(ConvKernels, DepthwiseGroupsWithBias) {
  Tensor x = f32({1, 2, 1, 3}, {1, 2, 3, 4, 5, 6});
  Tensor w = f32({2, 1, 1, 2}, {1, 1, 1, -1});
  Tensor b = f32({2}, {10, 20});
  Tensor y = run1("Conv", {x, w, b}, {{"group", Attribute::of_int(2)}});
  EXPECT_EQ(y.shape(), (S{1, 2, 1, 2}));
  EXPECT_EQ(vals(y), (V{13, 15, 19, 19}));
}

TEST(ConvKernels, SameUpperPadsAtTheEndSameLowerAtTheStart) {
  Tensor x = f32({1, 1, 4}, {1, 2, 3, 4});
  Tensor w = f32({1, 1, 2}, {1, 1});
  EXPECT_EQ(vals(run1("Conv", {x, w}, {{"auto_pad", Attribute::of_string("SAME_UPPER")}})), (V{3, 5, 7, 4}));
  EXPECT_EQ(vals(run1("Conv", {x, w}, {{"auto_pad", Attribute::of_string("SAME_LOWER")}})), (V{1, 3, 5, 7}));
}

TEST(ConvKernels, Dilation) {
  Tensor x = f32({1, 1, 5}, {1, 2, 3, 4, 5});
  Tensor w = f32({1, 1, 2}, {1, 1});
  EXPECT_EQ(vals(run1("Conv", {x, w}, {{"dilations", ints_attr({2})}})), (V{4, 6, 8}));
}

TEST(ConvKernels, AccumulatesExactlyInDouble) {
  // In float arithmetic 1e8 + 1 - 1e8 is 0; the reference must give 1.
  Tensor x = f32({1, 1, 3}, {1e8f, 1, -1e8f});
  Tensor w = f32({1, 1, 3}, {1, 1, 1});
  EXPECT_EQ(vals(run1("Conv", {x, w})), (V{1}));
}

TEST(ConvKernels, ThreeDimensionalPointwiseMatchesChannelMix) {
  Tensor x = f32({1, 2, 1, 1, 2}, {1, 2, 3, 4});
  Tensor w = f32({1, 2, 1, 1, 1}, {10, 1});
  EXPECT_EQ(vals(run1("Conv", {x, w})), (V{13, 24}));
}

TEST(ConvKernels, TransposeStrideOutputPaddingAndPads) {
  Tensor x = f32({1, 1, 2}, {1, 2});
  Tensor w = f32({1, 1, 3}, {1, 1, 1});
  EXPECT_EQ(vals(run1("ConvTranspose", {x, w}, {{"strides", ints_attr({2})}})), (V{1, 1, 3, 2, 2}));
  EXPECT_EQ(vals(run1("ConvTranspose", {x, w}, {{"strides", ints_attr({2})}, {"pads", ints_attr({1, 1})}})),
            (V{1, 3, 2}));
  EXPECT_EQ(vals(run1("ConvTranspose", {x, w}, {{"strides", ints_attr({2})}, {"output_padding", ints_attr({1})}})),
            (V{1, 1, 3, 2, 2, 0}));
}

TEST(ConvKernels, TransposeOutputShapeGeneratesPads) {
  // Full output would be 5 long; output_shape 3 removes total padding 2,
  // split evenly.
  Tensor x = f32({1, 1, 2}, {1, 2});
  Tensor w = f32({1, 1, 3}, {1, 1, 1});
  Tensor y = run1("ConvTranspose", {x, w}, {{"strides", ints_attr({2})}, {"output_shape", ints_attr({3})}});
  EXPECT_EQ(vals(y), (V{1, 3, 2}));
}

TEST(ConvKernels, ConvIntegerSubtractsZeroPoints) {
  Tensor x(DType::U8, {1, 1, 3});
  for (int i = 0; i < 3; ++i) x.set_i64(i, 10 + i);  // 10 11 12
  Tensor w(DType::U8, {1, 1, 2});
  w.set_i64(0, 2);
  w.set_i64(1, 3);
  Tensor xz(DType::U8, {});
  xz.set_i64(0, 10);
  Tensor wz(DType::U8, {});
  wz.set_i64(0, 1);
  // (x - 10) = 0 1 2, (w - 1) = 1 2 -> [0*1+1*2, 1*1+2*2] = [2, 5]
  Tensor y = run1("ConvInteger", {x, w, xz, wz});
  EXPECT_EQ(y.dtype(), DType::I32);
  EXPECT_EQ(ints(y), (S{2, 5}));
}

TEST(ConvKernels, EmptyBatchGivesEmptyOutputs) {
  Tensor x(DType::F32, {0, 1, 4});
  EXPECT_EQ(run1("Conv", {x, f32({2, 1, 2}, {1, 1, 1, 1})}).shape(), (S{0, 2, 3}));
  EXPECT_EQ(run1("MaxPool", {x}, {{"kernel_shape", ints_attr({2})}}).shape(), (S{0, 1, 3}));
  EXPECT_EQ(run1("GlobalAveragePool", {x}).shape(), (S{0, 1, 1}));
  Tensor none;
  EXPECT_EQ(run1("Resize", {x, none, f32({3}, {1, 1, 2})}).shape(), (S{0, 1, 8}));
}

TEST(ConvErrors, HostileSizesThrowBeforeAllocating) {
  Tensor x = f32({1, 1, 2}, {1, 2});
  Tensor none;
  EXPECT_THROW(run1("Resize", {x, none, f32({3}, {1, 1, 1e30f})}), Error);
  EXPECT_THROW(run1("MaxUnpool", {x, i64({1, 1, 2}, {0, 1}), Tensor::from_i64({1, 1, int64_t{1} << 40})},
                    {{"kernel_shape", ints_attr({2})}}),
               Error);
  EXPECT_THROW(run1("MaxPool", {x}, {{"kernel_shape", ints_attr({int64_t{1} << 40})}}), Error);
}

TEST(ConvErrors, BadInputsThrow) {
  Tensor xi(DType::I32, {1, 1, 3});
  Tensor wi(DType::I32, {1, 1, 2});
  EXPECT_THROW(run1("Conv", {xi, wi}), Error);  // integer Conv is not defined
  Tensor x = f32({1, 2, 3}, {1, 2, 3, 4, 5, 6});
  Tensor w = f32({1, 3, 2}, {1, 1, 1, 1, 1, 1});
  EXPECT_THROW(run1("Conv", {x, w}), Error);  // channel mismatch
  Tensor w2 = f32({1, 2, 2}, {1, 1, 1, 1});
  EXPECT_THROW(run1("Conv", {x, w2}, {{"pads", ints_attr({-1, 0})}}), Error);
  EXPECT_THROW(run1("Conv", {x, w2}, {{"strides", ints_attr({0})}}), Error);
  EXPECT_THROW(run1("Conv", {x, w2}, {{"group", Attribute::of_int(0)}}), Error);
  Tensor w4 = f32({1, 2, 4}, {1, 1, 1, 1, 1, 1, 1, 1});
  EXPECT_THROW(run1("Conv", {x, w4}), Error);  // kernel larger than the input
  EXPECT_THROW(run1("Conv", {x, w2, f32({2}, {1, 2})}), Error);  // bias length
}

// ---- pools ---------------------------------------------------------------------------

TEST(PoolKernels, MaxPoolIndicesInBothStorageOrders) {
  Tensor x = f32({1, 1, 2, 2}, {1, 4, 3, 2});
  auto out = run_op("MaxPool", {x}, 2, {{"kernel_shape", ints_attr({2, 2})}});
  EXPECT_EQ(vals(out[0]), (V{4}));
  EXPECT_EQ(ints(out[1]), (S{1}));
  auto col = run_op("MaxPool", {x}, 2, {{"kernel_shape", ints_attr({2, 2})}, {"storage_order", Attribute::of_int(1)}});
  EXPECT_EQ(ints(col[1]), (S{2}));  // (h=0, w=1) in column-major order: w*H + h
}

TEST(PoolKernels, MaxPoolCeilModeKeepsLastPartialWindow) {
  Tensor x = f32({1, 1, 5}, {1, 2, 3, 4, 5});
  EXPECT_EQ(vals(run1("MaxPool", {x}, {{"kernel_shape", ints_attr({2})}, {"strides", ints_attr({2})}})), (V{2, 4}));
  EXPECT_EQ(vals(run1("MaxPool", {x}, {{"kernel_shape", ints_attr({2})}, {"strides", ints_attr({2})},
                                       {"ceil_mode", Attribute::of_int(1)}})),
            (V{2, 4, 5}));
}

TEST(PoolKernels, AveragePoolCountIncludePad) {
  Tensor x = f32({1, 1, 2}, {2, 4});
  std::map<std::string, Attribute> a{{"kernel_shape", ints_attr({2})}, {"pads", ints_attr({1, 1})}};
  EXPECT_EQ(vals(run1("AveragePool", {x}, a)), (V{2, 3, 4}));
  a["count_include_pad"] = Attribute::of_int(1);
  EXPECT_EQ(vals(run1("AveragePool", {x}, a)), (V{1, 3, 2}));
}

TEST(PoolKernels, LpAndGlobalPools) {
  Tensor x = f32({1, 1, 2}, {3, -4});
  EXPECT_EQ(vals(run1("LpPool", {x}, {{"kernel_shape", ints_attr({2})}})), (V{5}));
  EXPECT_EQ(vals(run1("GlobalLpPool", {x})), (V{5}));
  EXPECT_EQ(vals(run1("GlobalAveragePool", {x})), (V{-0.5}));
  EXPECT_EQ(vals(run1("GlobalMaxPool", {x})), (V{3}));
  EXPECT_EQ(run1("GlobalMaxPool", {x}).shape(), (S{1, 1, 1}));
}

TEST(PoolKernels, MaxUnpoolScattersAndRejectsBadIndices) {
  Tensor x = f32({1, 1, 2}, {7, 9});
  Tensor idx = i64({1, 1, 2}, {1, 2});
  Tensor y = run1("MaxUnpool", {x, idx}, {{"kernel_shape", ints_attr({2})}, {"strides", ints_attr({2})}});
  EXPECT_EQ(vals(y), (V{0, 7, 9, 0}));
  Tensor bad = i64({1, 1, 2}, {1, 4});
  EXPECT_THROW(run1("MaxUnpool", {x, bad}, {{"kernel_shape", ints_attr({2})}, {"strides", ints_attr({2})}}), Error);
}

TEST(PoolErrors, MissingKernelShapeAndBadRank) {
  Tensor x = f32({1, 1, 2}, {1, 2});
  EXPECT_THROW(run1("MaxPool", {x}), Error);
  EXPECT_THROW(run1("MaxPool", {f32({2}, {1, 2})}, {{"kernel_shape", ints_attr({1})}}), Error);
  EXPECT_THROW(run1("AveragePool", {x}, {{"kernel_shape", ints_attr({2, 2})}}), Error);
}

TEST(RoiErrors, BatchIndexOutOfRange) {
  Tensor x = f32({1, 1, 2, 2}, {1, 2, 3, 4});
  Tensor rois = f32({1, 4}, {0, 0, 1, 1});
  EXPECT_THROW(run1("RoiAlign", {x, rois, i64({1}, {1})}), Error);
  EXPECT_THROW(run1("RoiAlign", {x, rois, i64({1}, {-1})}), Error);
}

// ---- Resize -------------------------------------------------------------------------

TEST(ResizeKernels, NearestAsymmetricAndLinearHalfPixel) {
  Tensor x = f32({1, 2}, {1, 2});
  Tensor scales = f32({2}, {1, 2});
  Tensor none;
  Tensor y = run1("Resize", {x, none, scales}, {{"coordinate_transformation_mode", Attribute::of_string("asymmetric")},
                                                {"nearest_mode", Attribute::of_string("floor")}});
  EXPECT_EQ(vals(y), (V{1, 1, 2, 2}));
  Tensor l = run1("Resize", {x, none, scales}, {{"mode", Attribute::of_string("linear")}});
  EXPECT_EQ(vals(l), (V{1, 1.25, 1.75, 2}));
}

TEST(ResizeKernels, SizesWithAxesAndAlignCorners) {
  Tensor x = f32({1, 3}, {0, 10, 20});
  Tensor none;
  Tensor y = run1("Resize", {x, none, none, Tensor::from_i64({5})},
                  {{"axes", ints_attr({-1})},
                   {"mode", Attribute::of_string("linear")},
                   {"coordinate_transformation_mode", Attribute::of_string("align_corners")}});
  EXPECT_EQ(y.shape(), (S{1, 5}));
  EXPECT_EQ(vals(y), (V{0, 5, 10, 15, 20}));
}

TEST(ResizeKernels, IntegerNearestIsExact) {
  Tensor x(DType::I64, {2});
  x.set_i64(0, (int64_t{1} << 60) + 1);
  x.set_i64(1, -3);
  Tensor none;
  Tensor y = run1("Resize", {x, none, f32({1}, {2})}, {{"nearest_mode", Attribute::of_string("floor")},
                                                       {"coordinate_transformation_mode", Attribute::of_string("asymmetric")}});
  EXPECT_EQ(ints(y), (S{(int64_t{1} << 60) + 1, (int64_t{1} << 60) + 1, -3, -3}));
}

TEST(ResizeErrors, BadAxesScalesAndSizes) {
  Tensor x = f32({1, 2}, {1, 2});
  Tensor none;
  EXPECT_THROW(run1("Resize", {x, none, f32({2}, {1, 2})}, {{"axes", ints_attr({2})}}), Error);
  EXPECT_THROW(run1("Resize", {x, none, f32({2}, {1, -2})}), Error);
  EXPECT_THROW(run1("Resize", {x, none, f32({3}, {1, 2, 2})}), Error);
  EXPECT_THROW(run1("Resize", {x, none, none, Tensor::from_i64({1, -4})}), Error);
  EXPECT_THROW(run1("Resize", {x, none, f32({2}, {1, 2}), Tensor::from_i64({1, 4})}), Error);
  EXPECT_THROW(run1("Resize", {x, none, f32({2}, {1, 2})}, {{"mode", Attribute::of_string("bogus")}}), Error);
}

// ---- detection --------------------------------------------------------------------

TEST(DetectionKernels, NonMaxSuppressionSuppressesOverlaps) {
  // Box 0 and 1 overlap with IoU 0.81; box 2 is far away.
  Tensor boxes = f32({1, 3, 4}, {0, 0, 10, 10, 0, 1, 10, 10.9f, 50, 50, 60, 60});
  Tensor scores = f32({1, 1, 3}, {0.9f, 0.95f, 0.5f});
  Tensor y = run1("NonMaxSuppression", {boxes, scores, Tensor::from_i64({10}), f32({1}, {0.5f})});
  EXPECT_EQ(y.shape(), (S{2, 3}));
  EXPECT_EQ(ints(y), (S{0, 0, 1, 0, 0, 2}));
}

// ---- attention ------------------------------------------------------------------------

TEST(AttentionKernels, SoftmaxWeightsAndCausalMask) {
  // One query attending two keys with scores 1 and 0.
  Tensor q = f32({1, 1, 2, 2}, {1, 0, 1, 0});
  Tensor k = f32({1, 1, 2, 2}, {1, 0, 0, 0});
  Tensor v = f32({1, 1, 2, 1}, {1, 0});
  const double e = std::exp(1.0);
  Tensor y = run1("Attention", {q, k, v}, {{"scale", Attribute::of_float(1.0f)}});
  EXPECT_NEAR(y.get_f64(0), e / (e + 1), 1e-6);
  EXPECT_NEAR(y.get_f64(1), e / (e + 1), 1e-6);
  Tensor c = run1("Attention", {q, k, v}, {{"scale", Attribute::of_float(1.0f)}, {"is_causal", Attribute::of_int(1)}});
  EXPECT_NEAR(c.get_f64(0), 1.0, 1e-7);  // query 0 only sees key 0
  EXPECT_NEAR(c.get_f64(1), e / (e + 1), 1e-6);
}

TEST(AttentionKernels, FullyMaskedRowIsZero) {
  Tensor q = f32({1, 1, 1, 1}, {1});
  Tensor k = f32({1, 1, 2, 1}, {1, 2});
  Tensor v = f32({1, 1, 2, 1}, {3, 4});
  Tensor mask(DType::Bool, {1, 2});  // all false
  Tensor y = run1("Attention", {q, k, v, mask});
  EXPECT_EQ(vals(y), (V{0}));
}

TEST(AttentionErrors, BadHeadsAndPositions) {
  Tensor q = f32({1, 1, 4}, {1, 2, 3, 4});
  EXPECT_THROW(run1("Attention", {q, q, q}), Error);  // 3-D needs head counts
  EXPECT_THROW(run1("Attention", {q, q, q}, {{"q_num_heads", Attribute::of_int(3)}, {"kv_num_heads", Attribute::of_int(3)}}),
               Error);
  Tensor x = f32({1, 1, 1, 2}, {1, 2});
  Tensor cache = f32({2, 1}, {1, 0});
  EXPECT_THROW(run1("RotaryEmbedding", {x, cache, cache, i64({1, 1}, {2})}), Error);
  EXPECT_THROW(run1("RotaryEmbedding", {x, cache, cache, i64({1, 1}, {-1})}), Error);
}

TEST(RotaryKernels, RotatesHalves) {
  // 90 degrees: (x1, x2) -> (-x2, x1).
  Tensor x = f32({1, 1, 1, 2}, {1, 2});
  Tensor cos = f32({1, 1}, {0});
  Tensor sin = f32({1, 1}, {1});
  EXPECT_EQ(vals(run1("RotaryEmbedding", {x, cos, sin, i64({1, 1}, {0})})), (V{-2, 1}));
}

// ---- shape inference ------------------------------------------------------------------

Type infer_one(const std::string& op, const std::vector<Type>& in, std::map<std::string, Attribute> attrs,
               size_t outputs = 1) {
  Graph g;
  std::vector<Value*> ins;
  for (size_t i = 0; i < in.size(); ++i) ins.push_back(g.add_input("in" + std::to_string(i), in[i]));
  Node* n = g.add_node(op, ins, outputs, std::move(attrs));
  InferContext ctx(*n);
  for (const Type& t : in) {
    ctx.in_types.push_back(&t);
    ctx.in_consts.push_back(nullptr);
    ctx.in_syms.push_back(nullptr);
  }
  OpRegistry::global().find("", op)->infer(ctx);
  return ctx.out_types.at(0);
}

TEST(ConvInfer, SymbolicSpatialDims) {
  const Dim b = Dim::sym("batch"), h = Dim::sym("h");
  Type t = infer_one("Conv", {Type::tensor(DType::F32, {b, 3, h, 224}), Type::tensor(DType::F32, {64, 3, 3, 3})},
                     {{"strides", ints_attr({2, 2})}, {"pads", ints_attr({1, 1, 1, 1})}});
  ASSERT_TRUE(t.shape.has_value());
  EXPECT_EQ((*t.shape)[0], b);
  EXPECT_EQ((*t.shape)[1], Dim(64));
  EXPECT_EQ((*t.shape)[2], Dim::floordiv(h - 1, 2) + 1);
  EXPECT_EQ((*t.shape)[3], Dim(112));
  Type p = infer_one("MaxPool", {Type::tensor(DType::F32, {b, 3, h, 224})},
                     {{"kernel_shape", ints_attr({2, 2})}, {"auto_pad", Attribute::of_string("SAME_UPPER")},
                      {"strides", ints_attr({2, 2})}});
  EXPECT_EQ((*p.shape)[2], Dim::ceildiv(h, 2));
  EXPECT_EQ((*p.shape)[3], Dim(112));
  EXPECT_THROW(infer_one("Conv", {Type::tensor(DType::I64, {b, 3, h, 224}), Type::tensor(DType::I64, {64, 3, 3, 3})}, {}),
               Error);
}

}  // namespace
}  // namespace tessel
