// Differential tests of the op lowerings beyond the core families: windows
// (Conv, ConvTranspose, pools), losses, attention, layout remaps, scans and
// normalisations. Each model's lowered kernels run through the loop-IR
// evaluator and must agree with the reference interpreter, with no node left
// on the interpreter.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "lower_test_util.h"
#include "tessel/ir/builder.h"
#include "tessel/loop/printer.h"
#include "tessel/runtime/executable.h"

namespace tessel {
namespace {

using testing::expect_lowered_matches;

Attribute ints(std::vector<int64_t> v) { return Attribute::of_ints(std::move(v)); }
Attribute i(int64_t v) { return Attribute::of_int(v); }
Attribute s(const char* v) { return Attribute::of_string(v); }

// Builds y = op(inputs...) over fresh f32 inputs of the given shapes and
// expects every node to be compiled and to match the interpreter.
void expect_compiled(const std::string& op, const std::vector<Shape>& shapes, Attrs attrs = {},
                     std::vector<Value*> extra = {}, Tolerance tol = Tolerance{1e-5, 1e-5}) {
  Model m;
  GraphBuilder b(m);
  std::vector<Value*> in;
  for (size_t k = 0; k < shapes.size(); ++k) in.push_back(b.input(str_cat("x", k), DType::F32, shapes[k]));
  for (Value* v : extra) in.push_back(v);
  b.output(b.op(op, in, std::move(attrs)));
  auto r = expect_lowered_matches(m, {}, tol);
  EXPECT_EQ(r.interpreted, 0u) << op;
}

// ---- convolutions -------------------------------------------------------------------

TEST(LowerOps, ConvPaddedStridedDilated) {
  expect_compiled("Conv", {{2, 3, 9, 7}, {4, 3, 3, 2}, {4}},
                  {{"pads", ints({1, 0, 2, 1})}, {"strides", ints({2, 1})}, {"dilations", ints({1, 2})}});
}

TEST(LowerOps, ConvGroupedAndDepthwise) {
  expect_compiled("Conv", {{1, 4, 6, 5}, {6, 2, 3, 3}}, {{"group", i(2)}, {"pads", ints({1, 1, 1, 1})}});
  expect_compiled("Conv", {{1, 3, 17}, {3, 1, 4}}, {{"group", i(3)}, {"auto_pad", s("SAME_UPPER")}});
}

TEST(LowerOps, Conv3dAndPointwise) {
  expect_compiled("Conv", {{1, 2, 4, 3, 5}, {2, 2, 2, 2, 2}}, {{"strides", ints({1, 2, 2})}});
  expect_compiled("Conv", {{2, 5, 1, 1}, {3, 5, 1, 1}, {3}});
}

TEST(LowerOps, ConvTranspose) {
  expect_compiled("ConvTranspose", {{1, 2, 4, 3}, {2, 3, 3, 3}, {3}},
                  {{"strides", ints({2, 3})}, {"pads", ints({1, 0, 0, 1})}, {"output_padding", ints({1, 0})}});
  expect_compiled("ConvTranspose", {{2, 4, 5}, {4, 1, 3}}, {{"group", i(2)}, {"dilations", ints({2})}});
  expect_compiled("ConvTranspose", {{1, 1, 3, 3}, {1, 2, 3, 3}},
                  {{"strides", ints({3, 2})}, {"output_shape", ints({10, 8})}});
  expect_compiled("ConvTranspose", {{1, 1, 3, 4}, {1, 1, 2, 2}},
                  {{"strides", ints({2, 2})}, {"auto_pad", s("SAME_LOWER")}});
}

// ---- pools ---------------------------------------------------------------------------

TEST(LowerOps, MaxPoolPadsCeilDilation) {
  expect_compiled("MaxPool", {{1, 2, 7, 6}},
                  {{"kernel_shape", ints({3, 2})}, {"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 0})},
                   {"ceil_mode", i(1)}, {"dilations", ints({1, 2})}});
  expect_compiled("MaxPool", {{2, 3, 17}}, {{"kernel_shape", ints({4})}, {"auto_pad", s("SAME_LOWER")}});
}

TEST(LowerOps, MaxPoolPropagatesNaNAndInt8) {
  Model m;
  GraphBuilder b(m);
  Tensor t = Tensor::from_f32({1, 1, 2, 3}, {1, NAN, -2, 3, -INFINITY, 0});
  // The edge values reach the kernel at run time (a constant operand would
  // be folded away before lowering): y < y is always false.
  Value* y = b.input("y", DType::F32, {1, 1, 2, 3});
  Value* x = b.op("Where", {b.op("Less", {y, y}), y, b.constant(t, "t")});
  b.output(b.op("Neg", {b.op("MaxPool", {x}, {{"kernel_shape", ints({2, 2})}})}));
  const auto r = expect_lowered_matches(m);
  EXPECT_EQ(r.interpreted, 0u);
  EXPECT_GE(r.kernels, 1u);
  Model q;
  GraphBuilder c(q);
  c.output(c.op("MaxPool", {c.input("x", DType::I8, {1, 2, 5, 5})}, {{"kernel_shape", ints({2, 3})}}));
  EXPECT_EQ(expect_lowered_matches(q).interpreted, 0u);
}

TEST(LowerOps, AveragePoolCountsPadding) {
  for (int64_t include : {0, 1})
    expect_compiled("AveragePool", {{1, 2, 6, 5}},
                    {{"kernel_shape", ints({3, 3})}, {"strides", ints({2, 2})}, {"pads", ints({1, 2, 1, 0})},
                     {"ceil_mode", i(1)}, {"count_include_pad", i(include)}});
}

TEST(LowerOps, LpPoolAndGlobalPools) {
  for (int64_t p : {1, 2, 3})
    expect_compiled("LpPool", {{1, 2, 5, 4}}, {{"kernel_shape", ints({2, 2})}, {"p", i(p)}, {"pads", ints({1, 0, 0, 1})}});
  for (const char* op : {"GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"})
    expect_compiled(op, {{2, 3, 5, 19}});
}

// A window's reduction per output element (pooling, a reduction over a
// non-innermost axis) runs inside the vectorized loop over the output's
// last dim, each lane with its own accumulator (an Allocate of one element
// per lane around the loop), instead of leaving that loop serial (which LLVM
// then vectorized with a gather per tap). Evaluated and compiled, against
// the interpreter: max exactly, the average within rounding. The widths
// leave tails (19 columns: 2 lanes and one scalar element; 40: 8 lanes) that
// run as narrower vectors, not as a masked one (whose loads gather).
TEST(LowerOps, WindowReductionsRunInTheVectorizedLoop) {
  struct Case {
    const char* op;
    Shape x;
    Attrs attrs;
  };
  const std::vector<Case> cases{
      {"MaxPool", {1, 3, 20, 37}, {{"kernel_shape", ints({3, 3})}, {"strides", ints({2, 2})}, {"pads", ints({1, 1, 1, 1})}}},
      {"AveragePool", {1, 2, 9, 40}, {{"kernel_shape", ints({3, 2})}, {"pads", ints({1, 0, 1, 1})}}},
      {"ReduceMax", {1, 6, 5, 40}, {{"keepdims", i(1)}}},  // over axis 1 (an input)
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.op);
    Model m;
    GraphBuilder b(m);
    std::vector<Value*> args{b.op("Relu", {b.input("x", DType::F32, c.x)})};
    if (std::string(c.op) == "ReduceMax") args.push_back(b.const_i64({1}));
    b.output(b.op(c.op, args, c.attrs));
    auto probe = testing::clone(m);
    const LoweredGroup lg = testing::lower_single_group(*probe);
    size_t taps_in_lanes = 0, lane_accs = 0, masked = 0;
    std::function<void(const loop::Stmt&, bool)> walk = [&](const loop::Stmt& st, bool in_lanes) {
      if (st->kind == loop::StmtKind::For && in_lanes && st->for_kind == loop::ForKind::Serial) ++taps_in_lanes;
      if (st->kind == loop::StmtKind::If && in_lanes) ++masked;
      if (st->kind == loop::StmtKind::Allocate && st->buffer->shape.size() == 1 &&
          !loop::is_const(st->buffer->shape[0], 1))
        ++lane_accs;
      const bool lanes = in_lanes || (st->kind == loop::StmtKind::For && st->for_kind == loop::ForKind::Vectorized);
      for (const loop::Stmt& child : st->body) walk(child, lanes);
    };
    walk(lg.kernel.body, false);
    EXPECT_GT(taps_in_lanes, 0u) << loop::print(lg.kernel);
    EXPECT_GT(lane_accs, 0u);
    EXPECT_EQ(masked, 0u) << loop::print(lg.kernel);
    const std::vector<RtValue> in = testing::random_inputs(*m.graph, {}, 3);
    const std::vector<RtValue> want = Interpreter().run(*m.graph, in);
    EXPECT_EQ(expect_lowered_matches(m, {}).interpreted, 0u);
#ifdef TESSEL_HAVE_CODEGEN_CPU
    DriverOptions o;
    o.threads = 2;
    const std::vector<RtValue> got = compile_for_cpu(m, o)->exe->run(in);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(compare_tensors(got[0].tensor, want[0].tensor, Tolerance{1e-6, 1e-6}), "");
#endif
  }
}

// ---- losses --------------------------------------------------------------------------

// Targets are random integers in [0, 5); C = 5 classes.
void expect_loss(const char* op, const char* reduction, bool weighted, bool ignore) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {3, 5, 2, 4});
  Value* t = b.input("t", DType::I64, {3, 2, 4});
  std::vector<Value*> in{x, t};
  if (weighted) in.push_back(b.input("w", DType::F32, {5}));
  Attrs a{{"reduction", s(reduction)}};
  if (ignore) a["ignore_index"] = i(2);
  b.output(b.op(op, in, a));
  EXPECT_EQ(expect_lowered_matches(m, {}, Tolerance{1e-5, 1e-5}).interpreted, 0u) << op << " " << reduction;
}

TEST(LowerOps, NegativeLogLikelihoodLoss) {
  for (const char* r : {"none", "sum", "mean"})
    for (bool w : {false, true})
      for (bool ig : {false, true}) expect_loss("NegativeLogLikelihoodLoss", r, w, ig);
}

TEST(LowerOps, SoftmaxCrossEntropyLoss) {
  for (const char* r : {"none", "sum", "mean"})
    for (bool w : {false, true}) expect_loss("SoftmaxCrossEntropyLoss", r, w, r[0] == 'm');
}

TEST(LowerOps, LossTargetOutOfRangeIsAnError) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {2, 3});
  b.output(b.op("NegativeLogLikelihoodLoss", {x, b.const_i64({1, 7})}, {{"reduction", s("none")}}));
  PassOptions o;
  run_pipeline(m, o);
  EXPECT_THROW(testing::run_lowered(m, testing::random_inputs(*m.graph, {}, 1)), Error);
}

// ---- attention -----------------------------------------------------------------------

TEST(LowerOps, Attention4dGqaCausalMask) {
  Model m;
  m.opsets[""] = 23;
  GraphBuilder b(m);
  Value* q = b.input("q", DType::F32, {2, 4, 3, 8});
  Value* k = b.input("k", DType::F32, {2, 2, 5, 8});
  Value* v = b.input("v", DType::F32, {2, 2, 5, 6});
  Value* mask = b.input("mask", DType::Bool, {3, 4});  // shorter than the 5 keys
  b.output(b.op("Attention", {q, k, v, mask}, {{"is_causal", i(1)}, {"softcap", Attribute::of_float(2.5f)}}));
  EXPECT_EQ(expect_lowered_matches(m).interpreted, 0u);
}

TEST(LowerOps, Attention3dWithPastAndFloatMask) {
  Model m;
  m.opsets[""] = 23;
  GraphBuilder b(m);
  Value* q = b.input("q", DType::F32, {1, 3, 12});
  Value* k = b.input("k", DType::F32, {1, 3, 12});
  Value* v = b.input("v", DType::F32, {1, 3, 6});
  Value* mask = b.input("mask", DType::F32, {1, 1, 3, 5});
  Value* pk = b.input("pk", DType::F32, {1, 3, 2, 4});
  Value* pv = b.input("pv", DType::F32, {1, 3, 2, 2});
  b.output(b.ops("Attention", {q, k, v, mask, pk, pv}, 1,
                 {{"q_num_heads", i(3)}, {"kv_num_heads", i(3)}, {"left_window_size", i(1)}})[0]);
  EXPECT_EQ(expect_lowered_matches(m).interpreted, 0u);
}

TEST(LowerOps, RotaryEmbedding) {
  for (int64_t interleaved : {0, 1}) {
    Model m;
    m.opsets[""] = 23;
    GraphBuilder b(m);
    Value* x = b.input("x", DType::F32, {2, 3, 4, 8});
    Value* c = b.input("c", DType::F32, {2, 4, 3});
    Value* sn = b.input("s", DType::F32, {2, 4, 3});
    b.output(b.op("RotaryEmbedding", {x, c, sn}, {{"interleaved", i(interleaved)}, {"rotary_embedding_dim", i(6)}}));
      EXPECT_EQ(expect_lowered_matches(m).interpreted, 0u);
  }
}

// ---- layout remaps --------------------------------------------------------------------

TEST(LowerOps, PadAllModes) {
  for (const char* mode : {"constant", "edge", "wrap", "reflect"}) {
    Model m;
    GraphBuilder b(m);
    Value* x = b.input("x", DType::F32, {3, 4});
    std::vector<Value*> in{x, b.const_i64({2, 0, 1, 3})};
    if (mode[0] == 'c') in.push_back(b.scalar_f32(1.5f));
    b.output(b.op("Pad", in, {{"mode", s(mode)}}));
    EXPECT_EQ(expect_lowered_matches(m).interpreted, 0u) << mode;
  }
}

TEST(LowerOps, PadNegativeAndAxes) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::I32, {1, 5, 4});
  b.output(b.op("Pad", {x, b.const_i64({-1, 2, 1, -2}), nullptr, b.const_i64({1, 2})}));
  EXPECT_EQ(expect_lowered_matches(m).interpreted, 0u);
}

TEST(LowerOps, TileDepthSpace) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {1, 8, 2, 3});
  b.output(b.op("Tile", {x, b.const_i64({2, 1, 3, 1})}));
  for (const char* mode : {"DCR", "CRD"}) {
    Value* d = b.op("DepthToSpace", {x}, {{"blocksize", i(2)}, {"mode", s(mode)}});
    b.output(d);
    b.output(b.op("SpaceToDepth", {d}, {{"blocksize", i(2)}}));
  }
  EXPECT_EQ(expect_lowered_matches(m).interpreted, 0u);
}

TEST(LowerOps, OneHotNegativeIndicesAndConstantOfShape) {
  Model m;
  GraphBuilder b(m);
  Value* ind = b.constant(Tensor::from_i64({0, -1, 4, 9, -7}), "ind");
  Value* values = b.constant(Tensor::from_f32({2}, {-1, 3}), "values");
  b.output(b.op("OneHot", {ind, b.scalar_i64(5), values}, {{"axis", i(0)}}));
  b.output(b.op("ConstantOfShape", {b.const_i64({2, 3})}, {{"value", Attribute::of_tensor(Tensor::scalar_i64(7))}}));
  EXPECT_EQ(expect_lowered_matches(m).interpreted, 0u);
}

// ---- scans, hardmax, normalisations ------------------------------------------------------

TEST(LowerOps, CumSumCumProdAllModes) {
  for (const char* op : {"CumSum", "CumProd"})
    for (int64_t excl : {0, 1})
      for (int64_t rev : {0, 1}) {
        Model m;
        GraphBuilder b(m);
        Value* x = b.input("x", DType::F32, {3, 18});
        Value* y = b.input("y", DType::I32, {4, 3});
        const Attrs a{{"exclusive", i(excl)}, {"reverse", i(rev)}};
        b.output(b.op(op, {x, b.scalar_i64(1)}, a));
        b.output(b.op(op, {y, b.scalar_i64(-2)}, a));
        EXPECT_EQ(expect_lowered_matches(m).interpreted, 0u) << op << excl << rev;
      }
}

TEST(LowerOps, HardmaxFirstMaxAndNaN) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.constant(Tensor::from_f32({2, 4}, {1, 3, 3, 0, 2, NAN, 5, NAN}), "x");
  b.output(b.op("Hardmax", {x}, {{"axis", i(1)}}));
  b.output(b.op("Hardmax", {b.input("y", DType::F32, {3, 5, 2})}, {{"axis", i(1)}}));
  EXPECT_EQ(expect_lowered_matches(m).interpreted, 0u);
}

TEST(LowerOps, Normalisations) {
  {
    Model m;
    GraphBuilder b(m);
    std::vector<Value*> in{b.input("x", DType::F32, {2, 3, 4, 5})};
    for (const char* name : {"scale", "bias", "mean"}) in.push_back(b.input(name, DType::F32, {3}));
    in.push_back(b.const_f32({3}, {0.5f, 2.0f, 1e-3f}, "var"));  // variances are positive
    b.output(b.op("BatchNormalization", in));
    EXPECT_EQ(expect_lowered_matches(m).interpreted, 0u);
  }
  expect_compiled("InstanceNormalization", {{2, 3, 4, 5}, {3}, {3}});
  expect_compiled("MeanVarianceNormalization", {{2, 3, 4, 5}});
  expect_compiled("MeanVarianceNormalization", {{2, 3, 4}}, {{"axes", ints({1})}});
  for (int64_t p : {1, 2}) expect_compiled("LpNormalization", {{3, 4, 5}}, {{"p", i(p)}, {"axis", i(1)}});
}

// ---- quantization ------------------------------------------------------------------

TEST(LowerOps, QuantizeDequantizePerAxisAndBlocked) {
  Model m;
  m.opsets[""] = 21;
  GraphBuilder b(m);
  Value* x = b.constant(Tensor::from_f32({2, 4}, {-300, 2.5, 3.5, -2.5, 1e9, NAN, 0.49, -0.5}), "x");
  Value* scale = b.const_f32({4}, {0.5f, 1, 2, 0.25f}, "scale");
  Tensor zp(DType::U8, {4});
  for (int64_t k = 0; k < 4; ++k) zp.set_i64(k, 10 * k + 3);
  Value* q = b.op("QuantizeLinear", {x, scale, b.constant(zp, "zp")}, {{"axis", i(1)}});
  b.output(q);
  b.output(b.op("DequantizeLinear", {q, scale, b.constant(zp, "zp2")}, {{"axis", i(1)}}));
  Value* y = b.input("y", DType::F32, {3, 6});
  Value* bscale = b.input("bscale", DType::F32, {3, 2});
  Value* qi = b.op("QuantizeLinear", {y, bscale, b.constant(Tensor(DType::I8, {3, 2}), "bzp")},
                   {{"axis", i(1)}, {"block_size", i(3)}});
  b.output(b.op("DequantizeLinear", {qi, bscale}, {{"axis", i(1)}, {"block_size", i(3)}}));
  EXPECT_EQ(expect_lowered_matches(m).interpreted, 0u);
}

// ---- Resize ----------------------------------------------------------------------------

void expect_resize(Attrs a, const std::vector<float>& scales, const std::vector<int64_t>& sizes,
                   const std::vector<float>& roi = {}) {
  Model m;
  m.opsets[""] = 19;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {1, 2, 4, 5});
  Value* r = roi.empty() ? nullptr : b.const_f32({static_cast<int64_t>(roi.size())}, roi, "roi");
  Value* sc = scales.empty() ? nullptr : b.const_f32({static_cast<int64_t>(scales.size())}, scales, "scales");
  Value* sz = sizes.empty() ? nullptr : b.const_i64(sizes, "sizes");
  b.output(b.op("Resize", {x, r, sc, sz}, std::move(a)));
  EXPECT_EQ(expect_lowered_matches(m).interpreted, 0u);
}

TEST(LowerOps, ResizeModes) {
  expect_resize({{"mode", s("linear")}}, {1, 1, 1.5f, 0.6f}, {});
  expect_resize({{"mode", s("cubic")}, {"coordinate_transformation_mode", s("align_corners")}}, {}, {1, 2, 7, 3});
  expect_resize({{"mode", s("cubic")}, {"exclude_outside", i(1)}, {"cubic_coeff_a", Attribute::of_float(-0.5f)}},
                {1, 1, 0.5f, 2}, {});
  expect_resize({{"mode", s("linear")}, {"antialias", i(1)}}, {1, 1, 0.5f, 0.4f}, {});
  for (const char* nm : {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"})
    expect_resize({{"nearest_mode", s(nm)}, {"coordinate_transformation_mode", s("asymmetric")}}, {1, 1, 2, 0.8f}, {});
  expect_resize({{"mode", s("linear")}, {"coordinate_transformation_mode", s("tf_crop_and_resize")},
                 {"extrapolation_value", Attribute::of_float(7)}},
                {}, {1, 2, 3, 3}, {0, 0, 0.4f, 0.6f, 1, 1, 1.2f, 1.7f});
  expect_resize({{"keep_aspect_ratio_policy", s("not_larger")}, {"axes", ints({2, 3})}}, {}, {7, 8});
}

// ---- Einsum, QLinearMatMul, Scatter*, Range, BitCast -------------------------------------

TEST(LowerOps, EinsumEquations) {
  const std::vector<std::pair<const char*, std::vector<Shape>>> cases = {
      {"bij,bjk->bik", {{2, 3, 4}, {2, 4, 5}}}, {"ij->ji", {{3, 17}}},  {"i,i", {{7}, {7}}},
      {"...ii->...i", {{2, 3, 3}}},             {"ij->i", {{4, 5}}},    {"...j,kj->...k", {{1, 3, 4}, {2, 4}}}};
  for (const auto& [eq, shapes] : cases) expect_compiled("Einsum", shapes, {{"equation", s(eq)}});
}

TEST(LowerOps, QLinearMatMulSaturates) {
  Model m;
  GraphBuilder b(m);
  Value* a = b.input("a", DType::U8, {2, 3, 4});
  Value* w = b.input("w", DType::U8, {4, 5});
  const auto u8 = [&](int64_t v, const char* name) {
    Tensor t(DType::U8, {});
    t.set_i64(0, v);
    return b.constant(t, name);
  };
  b.output(b.op("QLinearMatMul", {a, b.scalar_f32(0.7f), u8(1, "az"), w, b.scalar_f32(0.9f), u8(2, "wz"),
                                  b.scalar_f32(0.05f), u8(100, "yz")}));
  EXPECT_EQ(expect_lowered_matches(m).interpreted, 0u);
}

TEST(LowerOps, ScatterElementsAndNDReductions) {
  for (const char* red : {"none", "add", "mul", "max", "min"}) {
    Model m;
    m.opsets[""] = 18;
    GraphBuilder b(m);
    Value* x = b.input("x", DType::F32, {5, 3});
    Value* ind = b.constant(Tensor::from_i64({1, -1, 1, 0, 4, 4}).reshaped({2, 3}), "ind");
    b.output(b.op("ScatterElements", {x, ind, b.input("u", DType::F32, {2, 3})},
                  {{"axis", i(0)}, {"reduction", s(red)}}));
    Value* nd = b.constant(Tensor::from_i64({1, 0, 1, 3, 1}).reshaped({5, 1}), "nd");
    b.output(b.op("ScatterND", {x, nd, b.input("v", DType::F32, {5, 3})}, {{"reduction", s(red)}}));
    EXPECT_EQ(expect_lowered_matches(m).interpreted, 0u) << red;
  }
}

TEST(LowerOps, BitCastReinterprets) {
  Model m;
  m.opsets[""] = 26;
  GraphBuilder b(m);
  Value* x = b.constant(Tensor::from_f32({5}, {1.5f, -0.0f, NAN, INFINITY, 1e-40f}), "x");
  b.output(b.op("BitCast", {x}, {{"to", i(6)}}));  // INT32
  EXPECT_EQ(expect_lowered_matches(m).interpreted, 0u);
}

// ---- grids and more layout ops --------------------------------------------------------

TEST(LowerOps, GridSampleModesAndPadding) {
  for (const char* mode : {"nearest", "linear", "cubic"})
    for (const char* pad : {"zeros", "border", "reflection"})
      for (int64_t align : {0, 1}) {
        Model m;
        m.opsets[""] = 20;
        GraphBuilder b(m);
        Value* x = b.input("x", DType::F32, {1, 2, 4, 5});
        // Random grid values in [-2, 2) reach outside the input.
        Value* g = b.input("g", DType::F32, {1, 3, 6, 2});
        b.output(b.op("GridSample", {x, g}, {{"mode", s(mode)}, {"padding_mode", s(pad)}, {"align_corners", i(align)}}));
        EXPECT_EQ(expect_lowered_matches(m).interpreted, 0u) << mode << " " << pad << " " << align;
      }
}

TEST(LowerOps, AffineGrid) {
  for (int64_t align : {0, 1}) {
    Model m;
    m.opsets[""] = 20;
    GraphBuilder b(m);
    b.output(b.op("AffineGrid", {b.input("theta", DType::F32, {2, 2, 3}), b.const_i64({2, 1, 3, 4})},
                  {{"align_corners", i(align)}}));
    EXPECT_EQ(expect_lowered_matches(m).interpreted, 0u);
  }
}

TEST(LowerOps, CenterCropPadGatherNDReverseSequenceEyeLike) {
  Model m;
  m.opsets[""] = 18;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {4, 5, 3});
  b.output(b.op("CenterCropPad", {x, b.const_i64({7, 2})}, {{"axes", ints({0, 1})}}));
  Value* ind = b.constant(Tensor::from_i64({1, -1, 0, 2, 3, 0}).reshaped({3, 2}), "ind");
  b.output(b.op("GatherND", {x, ind}));
  Value* nd = b.constant(Tensor::from_i64({2, 0, 1, 4}).reshaped({4, 1}), "nd");
  b.output(b.op("GatherND", {x, nd}, {{"batch_dims", i(1)}}));
  b.output(b.op("ReverseSequence", {x, b.const_i64({5, 0, 2, 3})}, {{"batch_axis", i(0)}, {"time_axis", i(1)}}));
  b.output(b.op("EyeLike", {b.input("e", DType::I32, {3, 5})}, {{"k", i(-1)}}));
  EXPECT_EQ(expect_lowered_matches(m).interpreted, 0u);
}

// The windows' lowering needs a size known only from a declared output
// shape; the ONNX node tests (test_*window*) cover it.
TEST(LowerOps, SwiGLU) {
  Model m;
  m.opsets[""] = 28;
  GraphBuilder b(m);
  b.output(b.op("SwiGLU", {b.input("a", DType::F32, {3, 17}), b.input("b", DType::F32, {3, 17})},
                {{"alpha", Attribute::of_float(1.5f)}}));
  EXPECT_EQ(expect_lowered_matches(m).interpreted, 0u);
}

}  // namespace
}  // namespace tessel
