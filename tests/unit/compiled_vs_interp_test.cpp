// The whole compiled CPU path (fusion, lowering, math expansion, LLVM, the
// runtime) against the reference interpreter on random inputs, edge values
// included: NaN, ±inf, -0, empty tensors, size-1 dims, sizes that do not
// divide the vector width.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "pass_test_util.h"
#include "tessel/driver/compare.h"
#include "tessel/driver/compiler.h"
#include "tessel/ir/builder.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

// Sprinkles NaN, ±inf, -0 and large values over a float tensor. Trig
// functions reduce their argument exactly only up to |x| = 2^28 (see
// loop/math_expand.h), so they get `large` = 1e5 instead of 1e30.
void add_edge_values(Tensor* t, double large = 1e30) {
  const double edge[] = {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                         -std::numeric_limits<double>::infinity(), -0.0, large, -1e-30};
  for (int64_t i = 0; i < t->numel(); i += 7) t->set_f64(i, edge[(i / 7) % 6]);
}

struct CompiledRun {
  std::vector<RtValue> outputs;
  std::vector<std::string> interpreted;
  size_t kernels = 0;
};

CompiledRun run_compiled(const Model& m, const std::vector<RtValue>& in, int threads) {
  DriverOptions o;
  o.threads = threads;
  std::unique_ptr<CompiledModel> c = compile_for_cpu(m, o);
  CompiledRun r;
  r.outputs = c->exe->run(in);
  r.interpreted = c->exe->interpreter_ops();
  r.kernels = c->lowered.size();
  return r;
}

// Compiles m and compares with the interpreter; edge values in float inputs
// when `edges`. Returns the compiled run.
CompiledRun expect_compiled_matches(Model& m, const std::map<std::string, int64_t>& dims = {}, bool edges = false,
                            Tolerance tol = Tolerance{1e-5, 1e-5}, double large = 1e30) {
  PassOptions o;
  run_pipeline(m, o);
  std::vector<RtValue> in = testing::random_inputs(*m.graph, dims, 11);
  if (edges)
    for (RtValue& v : in)
      if (is_float(v.tensor.dtype())) add_edge_values(&v.tensor, large);
  const std::vector<RtValue> want = Interpreter().run(*m.graph, in);
  CompiledRun got = run_compiled(m, in, 2);
  EXPECT_EQ(got.outputs.size(), want.size());
  for (size_t i = 0; i < want.size() && i < got.outputs.size(); ++i)
    EXPECT_EQ(compare_tensors(got.outputs[i].tensor, want[i].tensor, tol), "") << "output " << i;
  EXPECT_TRUE(got.interpreted.empty()) << got.interpreted.front();
  return got;
}

TEST(CompiledVsInterp, ElementwiseChainWithEdgeValues) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {3, 37});
  Value* y = b.input("y", DType::F32, {37});
  Value* s = b.op("Add", {b.op("Mul", {x, y}), b.op("Neg", {x})});
  b.output(b.op("Max", {b.op("Relu", {s}), b.op("Abs", {y})}));
  expect_compiled_matches(m, {}, true);
}

TEST(CompiledVsInterp, TranscendentalsWithEdgeValues) {
  for (const char* op : {"Exp", "Log", "Tanh", "Sigmoid", "Erf", "Sin", "Cos", "Sqrt", "Softplus", "Gelu"}) {
    Model m;
    GraphBuilder b(m);
    Value* x = b.input("x", DType::F32, {5, 19});
    b.output(b.op(op, {x}));
    SCOPED_TRACE(op);
    // Polynomial expansions are within a few ulp (docs/loop_ir.md).
    const bool trig = std::string(op) == "Sin" || std::string(op) == "Cos";
    expect_compiled_matches(m, {}, true, Tolerance{1e-5, 1e-6}, trig ? 1e5 : 1e30);
  }
}

TEST(CompiledVsInterp, SoftmaxAndLayerNormRowsOfAwkwardSizes) {
  for (int64_t n : {1, 15, 16, 17, 100}) {
    Model m;
    GraphBuilder b(m);
    Value* x = b.input("x", DType::F32, {Dim::sym("rows"), n});
    Value* scale = b.input("scale", DType::F32, {n});
    Value* bias = b.input("bias", DType::F32, {n});
    Value* ln = b.op("LayerNormalization", {x, scale, bias}, {{"axis", Attribute::of_int(-1)}});
    b.output(b.op("Softmax", {ln}, {{"axis", Attribute::of_int(-1)}}));
    SCOPED_TRACE(n);
    auto r = expect_compiled_matches(m, {{"rows", 3}});
    EXPECT_EQ(r.kernels, 1u);
  }
}

TEST(CompiledVsInterp, EmptyTensorsAndSizeOneDims) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {Dim::sym("n"), 1, 5});
  Value* y = b.input("y", DType::F32, {1, 4, 1});
  b.output(b.op("Sub", {x, y}));
  expect_compiled_matches(m, {{"n", 0}});
  auto c = testing::clone(m);
  expect_compiled_matches(*c, {{"n", 3}});
}

TEST(CompiledVsInterp, MlpWithGatherAndIntegerOps) {
  Model m;
  GraphBuilder b(m);
  Value* table = b.input("table", DType::F32, {50, 24});
  Value* ids = b.constant(Tensor::from_i64({7, 0, 49, 3, 3, 12}).reshaped({2, 3}), "ids");
  Value* w = b.input("w", DType::F32, {24, 10});
  Value* bias = b.input("bias", DType::F32, {10});
  Value* h = b.op("Add", {b.op("MatMul", {b.op("Gather", {table, ids}), w}), bias});
  b.output(b.op("ReduceMean", {b.op("Relu", {h}), b.const_i64({1})}, {{"keepdims", Attribute::of_int(0)}}));
  Value* i = b.input("i", DType::I32, {6});
  b.output(b.op("Mod", {b.op("Mul", {i, i}), b.constant(Tensor::from_i64({3}).cast(DType::I32), "three")}));
  expect_compiled_matches(m);
}

TEST(CompiledVsInterp, ResultsDoNotDependOnThreadCount) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {64, 33});
  b.output(b.op("Softmax", {b.op("Tanh", {x})}, {{"axis", Attribute::of_int(-1)}}));
  PassOptions o;
  run_pipeline(m, o);
  const auto in = testing::random_inputs(*m.graph, {}, 3);
  const CompiledRun one = run_compiled(m, in, 1), two = run_compiled(m, in, 2), four = run_compiled(m, in, 4);
  EXPECT_TRUE(one.outputs[0].tensor.bitwise_equal(two.outputs[0].tensor));
  EXPECT_TRUE(one.outputs[0].tensor.bitwise_equal(four.outputs[0].tensor));
}

TEST(CompiledVsInterp, GatherOutOfRangeIsAnErrorNotARead) {
  Model m;
  GraphBuilder b(m);
  Value* table = b.input("table", DType::F32, {4, 8});
  Value* ids = b.input("ids", DType::I64, {3});
  b.output(b.op("Gather", {table, ids}));
  PassOptions o;
  run_pipeline(m, o);
  std::vector<RtValue> in = testing::random_inputs(*m.graph, {}, 5);
  in[1] = RtValue(Tensor::from_i64({0, 4, 1}));
  EXPECT_THROW(run_compiled(m, in, 2), Error);
}

}  // namespace
}  // namespace tessel
