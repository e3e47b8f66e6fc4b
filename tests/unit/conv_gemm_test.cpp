// Convolutions on the compiled path: group-1 convs as implicit GEMMs
// (lower/conv_gemm.cpp) and depthwise convs as direct kernels, checked
// against the reference interpreter through the loop-IR evaluator (exact
// semantics of the lowered kernels) and through LLVM (the compiled code,
// for every thread count bitwise the same).
#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <set>

#include "lower_test_util.h"
#include "tessel/ir/builder.h"
#include "tessel/loop/printer.h"
#include "tessel/loop/visit.h"
#include "tessel/runtime/executable.h"

namespace tessel {
namespace {

using testing::expect_lowered_matches;

Attribute ints(std::vector<int64_t> v) { return Attribute::of_ints(std::move(v)); }

// x -> Conv(x, w[, bias]) with f32 inputs of the given shapes, then `tail`
// (the epilogue ops, given the conv's output; identity when empty).
struct ConvModel {
  Shape x, w;
  Attrs attrs;
  bool bias = true;
  std::function<Value*(GraphBuilder&, Value*)> tail;
  // The weights (and bias) as constants, as in a model: the CPU pipeline's
  // prepack_weights may then pack them.
  bool constant_weights = false;
};

std::vector<int64_t> static_shape(const Shape& s) {
  std::vector<int64_t> out;
  for (const Dim& d : s) out.push_back(d.value());
  return out;
}

std::unique_ptr<Model> build(const ConvModel& c) {
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  std::mt19937 rng(11);
  std::vector<Value*> in{b.input("x", DType::F32, c.x)};
  if (c.constant_weights) {
    in.push_back(b.constant(testing::random_tensor(DType::F32, static_shape(c.w), &rng), "w"));
    if (c.bias) in.push_back(b.constant(testing::random_tensor(DType::F32, {c.w[0].value()}, &rng), "b"));
  } else {
    in.push_back(b.input("w", DType::F32, c.w));
    if (c.bias) in.push_back(b.input("b", DType::F32, {c.w[0]}));
  }
  Value* y = b.op("Conv", in, c.attrs);
  b.output(c.tail ? c.tail(b, y) : y);
  return m;
}

size_t count(const testing::EvalRun& r, const std::string& schedule) {
  auto it = r.schedules.find(schedule);
  return it == r.schedules.end() ? 0 : it->second;
}

// Lowers, evaluates and compares; expects `kernels` kernels of which
// `conv` are implicit GEMMs.
void expect_conv_gemm(const ConvModel& c, size_t conv = 1, size_t kernels = 1,
                      const std::map<std::string, int64_t>& dims = {}) {
  auto m = build(c);
  testing::EvalRun r = expect_lowered_matches(*m, dims);
  EXPECT_EQ(r.interpreted, 0u);
  EXPECT_EQ(r.kernels, kernels);
  EXPECT_EQ(count(r, "conv_gemm"), conv);
}

TEST(ConvGemm, Pointwise) { expect_conv_gemm({{1, 5, 6, 7}, {9, 5, 1, 1}, {}}); }

TEST(ConvGemm, ThreeByThreePaddedWithoutBias) {
  expect_conv_gemm({{1, 3, 9, 7}, {5, 3, 3, 3}, {{"pads", ints({1, 1, 1, 1})}}, false});
}

TEST(ConvGemm, StridedAsymmetricPadsDilated) {
  expect_conv_gemm({{1, 3, 11, 9},
                    {4, 3, 3, 2},
                    {{"pads", ints({0, 1, 2, 1})}, {"strides", ints({2, 1})}, {"dilations", ints({2, 3})}}});
}

TEST(ConvGemm, SevenBySevenStemStride2) {
  expect_conv_gemm({{1, 3, 13, 12}, {6, 3, 7, 7}, {{"pads", ints({3, 3, 3, 3})}, {"strides", ints({2, 2})}}});
}

TEST(ConvGemm, PointwiseStride2Downsample) {
  expect_conv_gemm({{1, 6, 9, 8}, {7, 6, 1, 1}, {{"strides", ints({2, 2})}}});
}

TEST(ConvGemm, OneAndThreeSpatialDims) {
  expect_conv_gemm({{2, 3, 17}, {5, 3, 3}, {{"pads", ints({1, 2})}, {"dilations", ints({2})}}});
  expect_conv_gemm({{1, 2, 4, 5, 6}, {3, 2, 3, 3, 3}, {{"pads", ints({1, 1, 1, 1, 1, 1})}, {"strides", ints({1, 2, 1})}}});
}

// Sizes that fill neither the register tile (13 rows, 45 positions) nor the
// vector width, and K = 4 * 3 * 3 = 36 that is not a multiple of anything.
TEST(ConvGemm, OddSizesAndBatch) {
  expect_conv_gemm({{3, 4, 5, 9}, {13, 4, 3, 3}, {{"pads", ints({1, 1, 1, 1})}}});
}

TEST(ConvGemm, SymbolicBatch) {
  for (int64_t n : {1, 3}) {
    SCOPED_TRACE(n);
    expect_conv_gemm({{Dim::sym("N"), 3, 6, 5}, {4, 3, 3, 3}, {{"pads", ints({1, 0, 1, 2})}}}, 1, 1, {{"N", n}});
  }
}

TEST(ConvGemm, EpiloguesRelu) {
  expect_conv_gemm({{1, 4, 6, 6}, {8, 4, 3, 3}, {{"pads", ints({1, 1, 1, 1})}}, true,
                    [](GraphBuilder& b, Value* y) { return b.op("Relu", {y}); }});
}

TEST(ConvGemm, EpilogueClip) {
  expect_conv_gemm({{1, 4, 6, 6}, {8, 4, 1, 1}, {}, true, [](GraphBuilder& b, Value* y) {
                      return b.op("Clip", {y, b.constant(Tensor::scalar_f32(-0.25f)),
                                           b.constant(Tensor::scalar_f32(0.5f))});
                    }});
}

// ResNet's block: relu(conv(x) + residual) with the residual an input of
// the same shape, and a broadcast per-channel scale.
TEST(ConvGemm, EpilogueResidualAddAndScale) {
  expect_conv_gemm({{2, 4, 7, 5}, {4, 4, 3, 3}, {{"pads", ints({1, 1, 1, 1})}}, true, [](GraphBuilder& b, Value* y) {
                      Value* res = b.input("res", DType::F32, {2, 4, 7, 5});
                      Value* scale = b.input("scale", DType::F32, {4, 1, 1});
                      return b.op("Relu", {b.op("Add", {b.op("Mul", {y, scale}), res})});
                    }});
}

// ResNet's downsample block: two convs added; each is an implicit GEMM (the
// first one stored, the second with the sum as its epilogue).
TEST(ConvGemm, TwoConvsAdded) {
  expect_conv_gemm({{1, 4, 8, 8}, {6, 4, 3, 3}, {{"pads", ints({1, 1, 1, 1})}, {"strides", ints({2, 2})}}, true,
                    [](GraphBuilder& b, Value* y) {
                      Value* w = b.input("w2", DType::F32, {6, 4, 1, 1});
                      Value* down = b.op("Conv", {b.graph().inputs[0], w}, {{"strides", ints({2, 2})}});
                      return b.op("Relu", {b.op("Add", {y, down})});
                    }},
                   2, 2);
}

// A consumer that mixes channels and positions does not fit the epilogue:
// the conv is stored by its own kernel.
TEST(ConvGemm, TransposeAfterConvIsItsOwnKernel) {
  expect_conv_gemm({{1, 3, 5, 6}, {4, 3, 3, 3}, {}, false,
                    [](GraphBuilder& b, Value* y) {
                      return b.op("Transpose", {y}, {{"perm", ints({0, 2, 3, 1})}});
                    }},
                   1, 2);
}

// A roll of the conv's output (Concat of two Slices) reads it at two
// places, which one GEMM epilogue cannot give: the conv is stored first.
TEST(ConvGemm, RollAfterConvReadsTheStoredOutput) {
  expect_conv_gemm({{1, 3, 5, 6}, {4, 3, 3, 3}, {{"pads", ints({1, 1, 1, 1})}}, false,
                    [](GraphBuilder& b, Value* y) {
                      const auto slice = [&](int64_t from, int64_t to) {
                        return b.op("Slice", {y, b.constant(Tensor::from_i64({from})),
                                              b.constant(Tensor::from_i64({to})), b.constant(Tensor::from_i64({3}))});
                      };
                      return b.op("Concat", {slice(2, 6), slice(0, 2)}, {{"axis", Attribute::of_int(3)}});
                    }},
                   1, 2);
}

// The packing of a 1x1 stride-1 conv reads B[c, p] = X[n, c, p] directly:
// no division or remainder per element.
TEST(ConvGemm, PointwisePackingHasNoIndexArithmetic) {
  auto m = build({{1, 16, 10, 10}, {32, 16, 1, 1}, {}});
  const LoweredGroup lg = testing::lower_single_group(*m);
  ASSERT_EQ(lg.schedule, "conv_gemm");
  const size_t packs = testing::for_each_store_expr(lg.kernel.body, "pack", [](const loop::Expr& x) {
    const bool divmod = x->kind == loop::ExprKind::Binary &&
                        (x->binary == loop::BinaryOp::FloorDiv || x->binary == loop::BinaryOp::FloorMod);
    EXPECT_FALSE(divmod);
  });
  EXPECT_GT(packs, 0u);
}

// ---- depthwise and grouped ---------------------------------------------------------

void expect_depthwise(const ConvModel& c, const char* schedule = "depthwise") {
  auto m = build(c);
  testing::EvalRun r = expect_lowered_matches(*m);
  EXPECT_EQ(r.interpreted, 0u);
  EXPECT_EQ(r.kernels, 1u);
  EXPECT_EQ(count(r, schedule), 1u);
}

Value* relu6(GraphBuilder& b, Value* y) {
  return b.op("Clip", {y, b.constant(Tensor::scalar_f32(0.0f)), b.constant(Tensor::scalar_f32(6.0f))});
}

// MobileNet's 3x3 with relu6; 21 columns: 19 interior ones (two vectors and
// a tail of 3) between one border column each side.
TEST(ConvDepthwise, ThreeByThreeRelu6) {
  expect_depthwise({{2, 8, 9, 21}, {8, 1, 3, 3}, {{"group", Attribute::of_int(8)}, {"pads", ints({1, 1, 1, 1})}},
                    true, relu6});
}

TEST(ConvDepthwise, MultiplierTwoStridedAsymmetricPads) {
  expect_depthwise({{1, 3, 11, 19},
                    {6, 1, 3, 5},
                    {{"group", Attribute::of_int(3)}, {"pads", ints({0, 2, 1, 1})}, {"strides", ints({2, 2})},
                     {"dilations", ints({1, 2})}},
                    false});
}

// Rows are whole vectors, borders included: no serial column loop; the
// vectors are the smallest power of two that holds a row, at most the
// target's (7 -> 8 lanes, 14 -> 16, 21 -> two 16-lane vectors, the second
// overlapping the first), and a row narrower than its vector stores under
// a lane mask (a lane-varying If).
TEST(ConvDepthwise, RowsAreWholeVectors) {
  const int lanes = NestSchedule{}.cpu.vector_lanes_f32;  // what lower_single_group lowers for
  for (int64_t width : {3, 7, 9, 14, 21, 35}) {
    auto m = build({{1, 4, 5, width}, {4, 1, 3, 3}, {{"group", Attribute::of_int(4)}, {"pads", ints({1, 1, 1, 1})}}});
    const LoweredGroup lg = testing::lower_single_group(*m);
    ASSERT_EQ(lg.schedule, "depthwise");
    int64_t serial_columns = 0, widest = 0, masked = 0;
    loop::visit_stmt(lg.kernel.body, [&](const loop::Stmt& s) {
      int64_t n = 0;
      // A run of whole vectors is a serial loop over a vectorized one.
      if (s->kind == loop::StmtKind::For && s->var.rfind("dvo", 0) == 0 && s->for_kind == loop::ForKind::Serial &&
          loop::as_const_int(s->extent, &n) &&
          !(s->body[0]->kind == loop::StmtKind::For && s->body[0]->for_kind == loop::ForKind::Vectorized))
        serial_columns += n;
      if (s->kind == loop::StmtKind::For && s->for_kind == loop::ForKind::Vectorized && loop::as_const_int(s->extent, &n))
        widest = std::max(widest, n);
      if (s->kind == loop::StmtKind::If) ++masked;
    }, [](const loop::Expr&) {});
    int64_t want = 2;
    while (want < width && want < lanes) want *= 2;
    EXPECT_EQ(serial_columns, 0) << "width " << width;
    EXPECT_EQ(widest, want) << "width " << width;
    EXPECT_EQ(masked > 0, width < want) << "width " << width;
    expect_depthwise({{1, 4, 5, width}, {4, 1, 3, 3}, {{"group", Attribute::of_int(4)}, {"pads", ints({1, 1, 1, 1})}}});
  }
}

// Edge shapes through the loop IR (the evaluator loads only the lanes a
// lane-varying select takes, as the compiled code does): widths that are
// no multiple of the vector, stride 2 with odd sizes, no padding, wide
// and asymmetric padding, a 5x5 kernel, dilation, channel multipliers,
// one-row and one-column outputs.
std::vector<ConvModel> depthwise_edge_cases() {
  const auto g = [](int64_t n) { return Attribute::of_int(n); };
  return {
      {{1, 3, 9, 13}, {3, 1, 3, 3}, {{"group", g(3)}, {"pads", ints({1, 1, 1, 1})}, {"strides", ints({2, 2})}}, true, relu6},
      {{1, 2, 8, 17}, {2, 1, 3, 3}, {{"group", g(2)}}},
      {{1, 2, 11, 23}, {4, 1, 5, 5}, {{"group", g(2)}, {"pads", ints({2, 2, 2, 2})}}, false},
      {{1, 2, 10, 19}, {2, 1, 3, 3}, {{"group", g(2)}, {"pads", ints({0, 2, 1, 0})}, {"strides", ints({2, 1})}}},
      {{1, 3, 12, 33}, {6, 1, 3, 3}, {{"group", g(3)}, {"pads", ints({1, 1, 1, 1})}, {"strides", ints({2, 2})}}},
      {{1, 2, 9, 20}, {2, 1, 3, 3}, {{"group", g(2)}, {"pads", ints({2, 2, 2, 2})}, {"dilations", ints({2, 2})}}},
      {{2, 2, 1, 16}, {2, 1, 1, 3}, {{"group", g(2)}, {"pads", ints({0, 1, 0, 1})}}},
      {{1, 2, 6, 1}, {2, 1, 3, 1}, {{"group", g(2)}, {"pads", ints({1, 0, 1, 0})}}},
      {{1, 4, 7, 7}, {4, 1, 3, 3}, {{"group", g(4)}, {"pads", ints({1, 1, 1, 1})}}, true, relu6},
      {{1, 2, 14, 14}, {2, 1, 3, 3}, {{"group", g(2)}, {"pads", ints({1, 1, 1, 1})}, {"strides", ints({2, 2})}}, true, relu6},
  };
}

TEST(ConvDepthwise, EdgeShapesMatchTheInterpreter) {
  for (const ConvModel& c : depthwise_edge_cases()) {
    SCOPED_TRACE(str_cat("x ", c.x.size() > 3 ? c.x[3].value() : 0, " w ", c.w[2].value(), "x", c.w[3].value()));
    expect_depthwise(c);
  }
}

// A kernel wider than the input: no interior column at all.
TEST(ConvDepthwise, NoInteriorColumns) {
  expect_depthwise({{1, 2, 5, 3}, {2, 1, 5, 5}, {{"group", Attribute::of_int(2)}, {"pads", ints({2, 2, 2, 2})}}});
}

// Groups of several channels stay on the generic nest.
TEST(ConvDepthwise, GroupedConvIsGenericNest) {
  expect_depthwise({{1, 4, 6, 5}, {6, 2, 3, 3}, {{"group", Attribute::of_int(2)}, {"pads", ints({1, 1, 1, 1})}}},
                   "nest");
}

// ---- compiled (LLVM) ---------------------------------------------------------------

std::vector<RtValue> run_compiled(const Model& m, const std::vector<RtValue>& in, int threads,
                                  const std::vector<Primitive>& knobs = {}) {
  DriverOptions o;
  o.threads = threads;
  o.knobs = knobs;
  std::unique_ptr<CompiledModel> c = compile_for_cpu(m, o);
  EXPECT_TRUE(c->exe->interpreter_ops().empty());
  return c->exe->run(in);
}

bool bitwise_equal(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.nbytes() == b.nbytes() && std::memcmp(a.raw(), b.raw(), a.nbytes()) == 0;
}

// Compiled with 1 and 2 threads: both agree with the interpreter and with
// each other bit for bit. The tolerance grows with K: the kernel sums in
// f32, the interpreter in double.
void expect_compiled_conv(const ConvModel& c, const std::map<std::string, int64_t>& dims = {},
                          Tolerance tol = Tolerance{1e-5, 1e-5}, const std::vector<Primitive>& knobs = {}) {
  auto m = build(c);
  PassOptions o;
  o.cpu = true;  // as compile_for_cpu's callers run it: constant weights get prepacked
  run_pipeline(*m, o);
  const std::vector<RtValue> in = testing::random_inputs(*m->graph, dims, 5);
  const std::vector<RtValue> want = Interpreter().run(*m->graph, in);
  const std::vector<RtValue> one = run_compiled(*m, in, 1, knobs), two = run_compiled(*m, in, 2, knobs);
  ASSERT_EQ(one.size(), want.size());
  ASSERT_EQ(two.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(compare_tensors(two[i].tensor, want[i].tensor, tol), "") << "output " << i;
    EXPECT_TRUE(bitwise_equal(one[i].tensor, two[i].tensor)) << "output " << i;
  }
}

// Several K blocks (K = 40 * 9 = 360), several M blocks and N tiles.
TEST(ConvGemmCompiled, ResNetLikeBlock) {
  expect_compiled_conv({{2, 40, 15, 13}, {100, 40, 3, 3}, {{"pads", ints({1, 1, 1, 1})}}, true,
                        [](GraphBuilder& b, Value* y) { return b.op("Relu", {y}); }},
                       {}, Tolerance{1e-4, 1e-4});
}

TEST(ConvGemmCompiled, PointwiseAndStridedWithSymbolicBatch) {
  expect_compiled_conv({{Dim::sym("N"), 24, 9, 11}, {20, 24, 1, 1}, {}}, {{"N", 3}});
  expect_compiled_conv({{1, 5, 23, 21}, {9, 5, 3, 3}, {{"pads", ints({1, 0, 1, 2})}, {"strides", ints({2, 2})}}});
}

// A strided conv whose output rows are whole vectors (OW = 32, a multiple
// of the 16 lanes): B's packing splits each position into its row and
// column by floordiv/floormod, which gemm_nest folds over the lanes' range,
// so that no division varies across the lanes (their reads are a stride-2
// span, not a gather). Compiled, it matches the interpreter.
TEST(ConvGemm, StridedPackingHasNoDivisionAcrossTheLanes) {
  const ConvModel c{{1, 3, 65, 65}, {16, 3, 3, 3}, {{"strides", ints({2, 2})}}};
  auto m = build(c);
  const LoweredGroup lg = testing::lower_single_group(*m);
  ASSERT_EQ(lg.schedule, "conv_gemm");
  ASSERT_EQ(lg.sched.find("conv.gemm")->attr("rows"), "channels");
  std::set<std::string> lanes;
  loop::visit_stmt(lg.kernel.body, [&](const loop::Stmt& s) {
    if (s->kind == loop::StmtKind::For && s->for_kind == loop::ForKind::Vectorized) lanes.insert(s->var);
  }, [](const loop::Expr&) {});
  size_t divisions = 0;
  const size_t stores = testing::for_each_store_expr(lg.kernel.body, "bpack", [&](const loop::Expr& e) {
    if (e->kind != loop::ExprKind::Binary ||
        (e->binary != loop::BinaryOp::FloorDiv && e->binary != loop::BinaryOp::FloorMod))
      return;
    for (const std::string& l : lanes) divisions += loop::mentions_var(e, l);
  });
  EXPECT_GT(stores, 0u);
  EXPECT_EQ(divisions, 0u) << loop::print(lg.kernel);
  expect_compiled_conv(c);
}

// ---- output positions as the GEMM's rows -----------------------------------------

// Convolutions with few output positions against their output channels
// (conv_rows_are_positions): the GEMM's rows are the positions and its
// vectors the channels, the constant weights are prepacked into panels
// whose k runs over the kernel offsets first, and the micro-kernels read
// them in place. Channel counts that are no multiple of the panel width,
// several K blocks, strides, dilations, asymmetric pads, two images, one
// spatial dim and a residual epilogue all match the interpreter.
std::vector<ConvModel> positions_as_rows_cases() {
  const auto relu = [](GraphBuilder& b, Value* y) { return b.op("Relu", {y}); };
  const auto residual = [](GraphBuilder& b, Value* y) {
    return b.op("Relu", {b.op("Add", {y, b.input("r", DType::F32, {1, 144, 5, 5})})});
  };
  std::vector<ConvModel> cases{
      {{1, 40, 7, 9}, {136, 40, 3, 3}, {{"pads", ints({1, 1, 1, 1})}}, true, relu},
      {{1, 256, 5, 5}, {144, 256, 1, 1}, {}, true, residual},
      {{1, 32, 12, 11},
       {128, 32, 3, 3},
       {{"pads", ints({1, 0, 2, 1})}, {"strides", ints({2, 2})}, {"dilations", ints({2, 1})}},
       false},
      {{2, 30, 6, 6}, {128, 30, 3, 3}, {{"pads", ints({1, 1, 1, 1})}}},
      {{1, 64, 20}, {128, 64, 5}, {{"pads", ints({2, 2})}}},
  };
  for (ConvModel& c : cases) c.constant_weights = true;
  return cases;
}

// The one conv group's schedule of `c` after the CPU pipeline.
Schedule conv_schedule(const ConvModel& c, const LowerOptions& lo = {}) {
  auto m = build(c);
  PassOptions o;
  o.cpu = true;
  run_pipeline(*m, o);
  const CompiledModel cm = lower_for_cpu(*m, lo);
  for (const LoweredGroup& lg : cm.lowered)
    if (lg.schedule == "conv_gemm") return lg.sched;
  ADD_FAILURE() << "no conv_gemm kernel";
  return {};
}

TEST(ConvGemmCompiled, FewPositionsTakePositionsAsRows) {
  for (const ConvModel& c : positions_as_rows_cases()) {
    SCOPED_TRACE(c.x.size() == 3 ? "1-D" : str_cat(c.x[1].value(), " channels in, ", c.w[0].value(), " out"));
    const Schedule s = conv_schedule(c);
    ASSERT_NE(s.find("conv.gemm"), nullptr);
    EXPECT_EQ(s.find("conv.gemm")->attr("rows"), "positions");
    EXPECT_EQ(s.find("gemm.pack")->int_attr("b", 1), 0);  // the prepacked panels, in place
    expect_compiled_conv(c, {}, Tolerance{1e-4, 1e-4});
  }
}

// With K one block, the micro-kernel walks k as a nest over its digits
// (kernel offsets, then channel), and the taps' in-place loads index by
// the digits with no division: the only divisions left are the row's
// (output row and column of a position), outside the nest.
TEST(ConvGemmCompiled, PositionRowsWalkKAsItsDigits) {
  ConvModel c{{1, 64, 9, 9}, {64, 64, 3, 3}, {{"pads", ints({1, 1, 1, 1})}}};  // K = 576
  c.constant_weights = true;
  auto m = build(c);
  PassOptions o;
  o.cpu = true;
  run_pipeline(*m, o);
  const CompiledModel cm = lower_for_cpu(*m, {});
  const LoweredGroup* conv = nullptr;
  for (const LoweredGroup& lg : cm.lowered)
    if (lg.schedule == "conv_gemm") conv = &lg;
  ASSERT_TRUE(conv);
  EXPECT_EQ(conv->sched.find("conv.gemm")->attr("rows"), "positions");
  std::vector<int64_t> digit_loops;
  size_t divided = 0;
  loop::visit_stmt(
      conv->kernel.body,
      [&](const loop::Stmt& s) {
        int64_t n = 0;
        if (s->kind == loop::StmtKind::For && s->var.find("_kd") != std::string::npos && loop::as_const_int(s->extent, &n))
          digit_loops.push_back(n);
      },
      [&](const loop::Expr& e) {
        if (e->kind == loop::ExprKind::Binary &&
            (e->binary == loop::BinaryOp::FloorDiv || e->binary == loop::BinaryOp::FloorMod))
          loop::visit_expr(e, [&](const loop::Expr& x) {
            divided += x->kind == loop::ExprKind::Var && x->name.find("_kd") != std::string::npos;
          });
      });
  EXPECT_EQ(digit_loops, (std::vector<int64_t>{3, 3, 64}));
  EXPECT_EQ(divided, 0u);
  expect_compiled_conv(c, {}, Tolerance{1e-4, 1e-4});
}

// Few output channels (under 64), or a short K (under 256, where the
// strided stores of positions as rows would cost more than the sums), keep
// the channels as rows, and the weights as they are.
TEST(ConvGemmCompiled, FewChannelsOrAShortKKeepChannelsAsRows) {
  for (const ConvModel& base : {ConvModel{{1, 32, 40, 40}, {48, 32, 3, 3}, {{"pads", ints({1, 1, 1, 1})}}},
                                ConvModel{{1, 64, 20, 20}, {256, 64, 1, 1}, {}}}) {
    ConvModel c = base;
    c.constant_weights = true;
    const Schedule s = conv_schedule(c);
    ASSERT_NE(s.find("conv.gemm"), nullptr);
    EXPECT_EQ(s.find("conv.gemm")->attr("rows"), "channels");
  }
}

// The orientation is a knob (conv.gemm rows=...): each orientation over
// weights packed for the other (or not packed) still computes the conv.
TEST(ConvGemmCompiled, EitherOrientationByKnob) {
  ConvModel few = positions_as_rows_cases()[0];
  ConvModel many{{1, 12, 17, 15}, {20, 12, 3, 3}, {{"pads", ints({1, 1, 1, 1})}}};
  many.constant_weights = true;
  for (const char* rows : {"channels", "positions"}) {
    SCOPED_TRACE(rows);
    LowerOptions lo;
    lo.knobs = {parse_knob(str_cat("conv.gemm.rows=", rows))};
    for (const ConvModel& c : {few, many}) {
      EXPECT_EQ(conv_schedule(c, lo).find("conv.gemm")->attr("rows"), rows);
      auto m = build(c);
      PassOptions po;
      po.cpu = true;
      run_pipeline(*m, po);
      const std::vector<RtValue> in = testing::random_inputs(*m->graph, {}, 5);
      const std::vector<RtValue> want = Interpreter().run(*m->graph, in);
      DriverOptions o;
      o.threads = 2;
      o.knobs = lo.knobs;
      const std::vector<RtValue> got = compile_for_cpu(*m, o)->exe->run(in);
      ASSERT_EQ(got.size(), 1u);
      EXPECT_EQ(compare_tensors(got[0].tensor, want[0].tensor, Tolerance{1e-4, 1e-4}), "");
    }
  }
}

// The edge shapes compiled, under every row blocking and both vector
// widths of the tuner's space (depthwise.tile): the masked border loads
// (contiguous and stride 2) and the masked stores of narrow rows.
TEST(ConvDepthwiseCompiled, EdgeShapesUnderEveryTile) {
  for (const auto& [rows, lanes] : std::vector<std::pair<int, int>>{{1, 16}, {2, 8}, {3, 16}, {4, 16}}) {
    SCOPED_TRACE(str_cat("rows ", rows, " lanes ", lanes));
    const std::vector<Primitive> knobs{parse_knob(str_cat("depthwise.tile.rows=", rows)),
                                       parse_knob(str_cat("depthwise.tile.lanes=", lanes))};
    for (const ConvModel& c : depthwise_edge_cases()) expect_compiled_conv(c, {}, Tolerance{1e-5, 1e-5}, knobs);
  }
}

TEST(ConvDepthwiseCompiled, MobileNetBlock) {
  expect_compiled_conv({{2, 16, 13, 27}, {16, 1, 3, 3}, {{"group", Attribute::of_int(16)}, {"pads", ints({1, 1, 1, 1})}},
                        true, relu6});
  expect_compiled_conv({{1, 4, 14, 14}, {8, 1, 3, 3}, {{"group", Attribute::of_int(4)}, {"pads", ints({0, 0, 1, 1})},
                        {"strides", ints({2, 2})}}});
}

}  // namespace
}  // namespace tessel
