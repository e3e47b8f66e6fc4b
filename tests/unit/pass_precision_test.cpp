// lower_precision (--precision bf16|fp16): which nodes run low, what stays
// f32, the graph's interface, and the numbers (against hand-written low
// graphs through the interpreter, and against the f32 model).
#include <gtest/gtest.h>

#include <cmath>

#include "pass_test_util.h"
#include "tessel/ir/verifier.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

using testing::clone;
using testing::count_ops;

const Node* producer_of(const Graph& g, const std::string& op) {
  for (const auto& n : g.nodes())
    if (n->op == op) return n.get();
  return nullptr;
}

// The dtype op `op` (the only one in the graph) computes in: its first output's.
DType runs_in(const Graph& g, const std::string& op) {
  const Node* n = producer_of(g, op);
  EXPECT_NE(n, nullptr) << op;
  return n ? n->outputs.at(0)->type.dtype : DType::Undefined;
}

// Relative L2 error of b against a, over every element of every output.
double rel_l2(const std::vector<RtValue>& a, const std::vector<RtValue>& b) {
  double num = 0, den = 0;
  for (size_t i = 0; i < a.size(); ++i)
    for (int64_t k = 0; k < a[i].tensor.numel(); ++k) {
      const double x = a[i].tensor.get_f64(k), y = b[i].tensor.get_f64(k);
      num += (x - y) * (x - y);
      den += x * x;
    }
  return std::sqrt(num / den);
}

void lower_and_check(Model& m, DType low) {
  EXPECT_TRUE(lower_precision(m, low));
  EXPECT_NO_THROW(verify_model(m));
  PassOptions o;
  EXPECT_NO_THROW(infer_shapes(m, o));
  EXPECT_NO_THROW(verify_model(m));
}

const char* kMlp = R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[2,4]) -> (%y: f32[2,3]) {
  %w = const f32[4,3] dense<[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2]>
  %b = const f32[3] dense<[0.01, -0.02, 0.03]>
  %mm = MatMul(%x, %w) : f32[2,3]
  %a = Add(%mm, %b) : f32[2,3]
  %y = Relu(%a) : f32[2,3]
  return %y
}
}
)";

TEST(PassPrecision, ConvertsConstantsAndKeepsTheInterfaceF32) {
  TS_REQUIRE_OPS("MatMul", "Add", "Relu", "Cast");
  auto m = parse_model(kMlp);
  auto ref = clone(*m);
  lower_and_check(*m, DType::BF16);
  const Graph& g = *m->graph;
  // Same names and types at the interface.
  ASSERT_EQ(g.inputs.size(), 1u);
  EXPECT_EQ(g.inputs[0]->name, "x");
  EXPECT_EQ(print_type(g.inputs[0]->type), "f32[2,4]");
  ASSERT_EQ(g.outputs.size(), 1u);
  EXPECT_EQ(g.outputs[0]->name, "y");
  EXPECT_EQ(print_type(g.outputs[0]->type), "f32[2,3]");
  EXPECT_EQ(g.outputs[0]->producer->op, "Cast");
  // Compute in bf16 on bf16 constants.
  for (const char* op : {"MatMul", "Add", "Relu"}) EXPECT_EQ(runs_in(g, op), DType::BF16) << op;
  const Node* mm = producer_of(g, "MatMul");
  EXPECT_EQ(mm->inputs[0]->producer->op, "Cast");
  ASSERT_TRUE(mm->inputs[1]->is_constant());
  EXPECT_EQ(mm->inputs[1]->constant->dtype(), DType::BF16);
  EXPECT_EQ(mm->inputs[1]->constant->get_f64(1), static_cast<double>(bf16_bits_to_f32(f32_to_bf16_bits(0.2f))));

  // The numbers: exactly what the same model written in bf16 gives.
  auto want = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[2,4]) -> (%y: f32[2,3]) {
  %w = const f32[4,3] dense<[0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2]>
  %b = const f32[3] dense<[0.01, -0.02, 0.03]>
  %xl = Cast(%x) {to = 16} : bf16[2,4]
  %wl = Cast(%w) {to = 16} : bf16[4,3]
  %bl = Cast(%b) {to = 16} : bf16[3]
  %mm = MatMul(%xl, %wl) : bf16[2,3]
  %a = Add(%mm, %bl) : bf16[2,3]
  %r = Relu(%a) : bf16[2,3]
  %y = Cast(%r) {to = 1} : f32[2,3]
  return %y
}
}
)");
  testing::expect_same_results(*want, *m, {}, 0);
  // ... which is not the f32 result, but close to it.
  const auto in = testing::random_inputs(*ref->graph, {}, 5);
  const double err = rel_l2(Interpreter().run(*ref->graph, in), Interpreter().run(*m->graph, in));
  EXPECT_GT(err, 0);
  EXPECT_LT(err, 1e-2);
}

TEST(PassPrecision, StatisticsRunInF32BetweenLowContractions) {
  TS_REQUIRE_OPS("MatMul", "Softmax", "LayerNormalization", "Cast");
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[4,8], %v: f32[8,8]) -> (%y: f32[4,8]) {
  %scale = const f32[8] dense<[1, 1, 1, 1, 1, 1, 1, 1]>
  %bias = const f32[8] dense<[0, 0, 0, 0, 0, 0, 0, 0]>
  %s = MatMul(%x, %v) : f32[4,8]
  %p = Softmax(%s) {axis = -1} : f32[4,8]
  %o = MatMul(%p, %v) : f32[4,8]
  %y = LayerNormalization(%o, %scale, %bias) {axis = -1, epsilon = 1e-5} : f32[4,8]
  return %y
}
}
)");
  auto ref = clone(*m);
  lower_and_check(*m, DType::F16);
  const Graph& g = *m->graph;
  for (const auto& n : g.nodes()) {
    if (n->op == "MatMul") {
      EXPECT_EQ(n->inputs[0]->type.dtype, DType::F16);
      EXPECT_EQ(n->outputs[0]->type.dtype, DType::F16);
    }
    if (n->op == "Softmax" || n->op == "LayerNormalization") {
      EXPECT_EQ(n->inputs[0]->type.dtype, DType::F32) << n->op;
      EXPECT_EQ(n->outputs[0]->type.dtype, DType::F32) << n->op;
      EXPECT_EQ(n->inputs[0]->producer->op, "Cast") << n->op;
    }
  }
  // The LayerNorm's result is the output itself: no round trip through f16.
  EXPECT_EQ(g.outputs[0]->producer->op, "LayerNormalization");
  EXPECT_EQ(g.outputs[0]->name, "y");
  EXPECT_EQ(producer_of(g, "LayerNormalization")->inputs[1]->type.dtype, DType::F32);  // scale untouched
  const auto in = testing::random_inputs(*ref->graph, {}, 3);
  const double err = rel_l2(Interpreter().run(*ref->graph, in), Interpreter().run(*m->graph, in));
  EXPECT_GT(err, 0);
  EXPECT_LT(err, 1e-2);
}

// Llama's RMSNorm: after the f32 statistic the chain stays f32 until it
// meets low data (the Mul by x).
TEST(PassPrecision, ChainAfterAStatisticStaysF32) {
  TS_REQUIRE_OPS("MatMul", "Pow", "ReduceMean", "Sqrt", "Reciprocal", "Cast");
  std::string w;
  for (int i = 0; i < 64; ++i) w += str_cat(i ? ", " : "", (i % 9) * 0.125 - 0.5);
  auto m = parse_model(str_cat(R"(tessel.model opset(ai.onnx=18) {
graph @main(%x: f32[2,8]) -> (%y: f32[2,8]) {
  %w = const f32[8,8] dense<[)", w, R"(]>
  %two = const f32[] dense<[2]>
  %eps = const f32[] dense<[1e-6]>
  %axes = const i64[1] dense<[-1]>
  %h = MatMul(%x, %w) : f32[2,8]
  %sq = Pow(%h, %two) : f32[2,8]
  %ms = ReduceMean(%sq, %axes) {keepdims = 1} : f32[2,1]
  %ad = Add(%ms, %eps) : f32[2,1]
  %rt = Sqrt(%ad) : f32[2,1]
  %rc = Reciprocal(%rt) : f32[2,1]
  %y = Mul(%h, %rc) : f32[2,8]
  return %y
}
}
)"));
  auto ref = clone(*m);
  lower_and_check(*m, DType::F16);
  const Graph& g = *m->graph;
  EXPECT_EQ(runs_in(g, "MatMul"), DType::F16);
  for (const char* op : {"Pow", "ReduceMean", "Add", "Sqrt", "Reciprocal"}) EXPECT_EQ(runs_in(g, op), DType::F32) << op;
  EXPECT_EQ(runs_in(g, "Mul"), DType::F16);
  EXPECT_EQ(producer_of(g, "Add")->inputs[1]->type.dtype, DType::F32);  // eps kept (1e-6 is subnormal in f16)
  const auto in = testing::random_inputs(*ref->graph, {}, 4);
  EXPECT_LT(rel_l2(Interpreter().run(*ref->graph, in), Interpreter().run(*m->graph, in)), 1e-2);
}

// Float shape arithmetic on a symbolic dim (Shape -> Cast -> Div -> Floor ->
// Cast to int) only feeds a Reshape's shape: it is not data and stays f32;
// integer ops and index inputs are untouched; the Gather of a constant table
// by int64 ids runs low.
TEST(PassPrecision, ShapeArithmeticIntegersAndIndicesAreUntouched) {
  TS_REQUIRE_OPS("Shape", "Gather", "Cast", "Div", "Floor", "Concat", "Reshape", "Add");
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[n,4], %ids: i64[n]) -> (%y: f32[h,8], %cnt: i64[n]) {
  %table = const f32[5,4] dense<[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20]>
  %i0 = const i64[1] dense<[0]>
  %half = const f32[] dense<[2]>
  %eight = const i64[1] dense<[8]>
  %one = const i64[] dense<[1]>
  %s = Shape(%x) : i64[2]
  %d = Gather(%s, %i0) {axis = 0} : i64[1]
  %df = Cast(%d) {to = 1} : f32[1]
  %q = Div(%df, %half) : f32[1]
  %fl = Floor(%q) : f32[1]
  %hi = Cast(%fl) {to = 7} : i64[1]
  %shp = Concat(%hi, %eight) {axis = 0} : i64[2]
  %e = Gather(%table, %ids) {axis = 0} : f32[n,4]
  %sum = Add(%x, %e) : f32[n,4]
  %y = Reshape(%sum, %shp) : f32[h,8]
  %cnt = Add(%ids, %one) : i64[n]
  return %y, %cnt
}
}
)");
  auto ref = clone(*m);
  lower_and_check(*m, DType::BF16);
  const Graph& g = *m->graph;
  for (const auto& n : g.nodes()) {
    if (n->op == "Div" || n->op == "Floor") EXPECT_EQ(n->outputs[0]->type.dtype, DType::F32) << n->op;
    if (n->op == "Reshape") {
      EXPECT_EQ(n->inputs[0]->type.dtype, DType::BF16);
      EXPECT_EQ(n->inputs[1]->type.dtype, DType::I64);
    }
    if (n->op == "Gather" && n->inputs[0]->is_constant() && n->inputs[0]->type.dtype != DType::I64) {
      EXPECT_EQ(n->inputs[0]->type.dtype, DType::BF16);
      EXPECT_EQ(n->inputs[1]->name, "ids");
    }
    if (n->op == "Add" && n->outputs[0]->name == "cnt") EXPECT_EQ(n->inputs[0]->type.dtype, DType::I64);
  }
  EXPECT_EQ(print_type(g.outputs[0]->type), "f32[h,8]");
  EXPECT_EQ(print_type(g.outputs[1]->type), "i64[n]");
  // Same shapes and integer results; small integers and this table are exact in bf16.
  Interpreter interp;
  for (int64_t n : {2, 6}) {
    const auto in = testing::random_inputs(*ref->graph, {{"n", n}}, 9);
    std::vector<RtValue> fixed = in;
    for (int64_t i = 0; i < fixed[0].tensor.numel(); ++i) fixed[0].tensor.set_f64(i, static_cast<double>(i % 7));
    const auto a = interp.run(*ref->graph, fixed), b = interp.run(*m->graph, fixed);
    ASSERT_EQ(a[0].tensor.shape(), b[0].tensor.shape());
    EXPECT_EQ(rel_l2(a, b), 0);
  }
}

// Shape reads the low value, so with symbolic dims no Cast up stays alive
// for it: only the input's and the output's Casts are left.
TEST(PassPrecision, ShapeReadsTheLowValue) {
  TS_REQUIRE_OPS("MatMul", "Shape", "Reshape", "Cast");
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[n,2]) -> (%y: f32[n,2]) {
  %w = const f32[2,2] dense<[1, 2, 3, 4]>
  %h = MatMul(%x, %w) : f32[n,2]
  %s = Shape(%h) : i64[2]
  %y = Reshape(%h, %s) : f32[n,2]
  return %y
}
}
)");
  lower_and_check(*m, DType::BF16);
  eliminate_dead_code(*m);
  EXPECT_EQ(producer_of(*m->graph, "Shape")->inputs[0]->type.dtype, DType::BF16);
  EXPECT_EQ(count_ops(*m->graph, "Cast"), 2u);
  EXPECT_NO_THROW(verify_model(*m));
}

TEST(PassPrecision, OutOfRangeConstantsSaturateSoMasksStayFinite) {
  TS_REQUIRE_OPS("Mul", "Add", "Cast");
  // A mask of float32's lowest value: (1 - m) * lowest is -0 where m = 1.
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[4], %m: f32[4]) -> (%y: f32[4]) {
  %lowest = const f32[] dense<[-3.4028234663852886e+38]>
  %one = const f32[] dense<[1]>
  %nm = Sub(%one, %m) : f32[4]
  %bias = Mul(%nm, %lowest) : f32[4]
  %y = Add(%x, %bias) : f32[4]
  return %y
}
}
)");
  lower_and_check(*m, DType::F16);
  const Node* mul = producer_of(*m->graph, "Mul");
  ASSERT_TRUE(mul->inputs[1]->is_constant());
  EXPECT_EQ(mul->inputs[1]->constant->get_f64(0), -65504.0);
  Tensor x(DType::F32, {4}), mask(DType::F32, {4});
  for (int64_t i = 0; i < 4; ++i) {
    x.set_f64(i, 0.5 * static_cast<double>(i));
    mask.set_f64(i, i < 3 ? 1.0 : 0.0);
  }
  const auto out = Interpreter().run(*m->graph, {RtValue(x), RtValue(mask)});
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(out[0].tensor.get_f64(i), 0.5 * static_cast<double>(i));
  EXPECT_EQ(out[0].tensor.get_f64(3), -65504.0);  // 1.5 - 65504 rounded to f16
}

TEST(PassPrecision, DoesNotFireOnModelsWithoutF32Data) {
  TS_REQUIRE_OPS("Add", "MatMul");
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%a: i64[2,2], %d: f64[2,2]) -> (%y: i64[2,2], %z: f64[2,2]) {
  %y = MatMul(%a, %a) : i64[2,2]
  %z = Add(%d, %d) : f64[2,2]
  return %y, %z
}
}
)");
  EXPECT_FALSE(lower_precision(*m, DType::BF16));
  EXPECT_THROW(lower_precision(*m, DType::F32), Error);
}

// In the pipeline: the Casts nobody reads are gone, the rest verifies, and
// the pass can be disabled by name.
TEST(PassPrecision, PipelineRunsItAfterFoldingAndCleansUp) {
  TS_REQUIRE_OPS("MatMul", "Add", "Relu", "Cast");
  auto m = parse_model(kMlp);
  auto ref = clone(*m);
  PassOptions o;
  o.precision = DType::BF16;
  EXPECT_TRUE(run_pipeline(*m, o));
  // One Cast in (x), one out (y); the f32 copies of MatMul and Add are dead.
  EXPECT_EQ(count_ops(*m->graph, "Cast"), 2u);
  EXPECT_EQ(runs_in(*m->graph, "Relu"), DType::BF16);
  o.disabled = {"lower_precision"};
  auto off = clone(*ref);
  run_pipeline(*off, o);
  EXPECT_EQ(count_ops(*off->graph, "Cast"), 0u);
  testing::expect_same_results(*ref, *off, {}, 0);
}

}  // namespace
}  // namespace tessel
