// Contraction groups lowered for the GPU (lower/lower_gpu.h) become one
// Contract statement with the rest of the group as its epilogue: MatMul,
// Gemm with bias and activation, batched attention products, Linear layers
// on [batch, seq, features], group-1 convolutions (implicit GEMM), f16/bf16
// products. Checked through the loop-IR evaluator against the reference
// interpreter, and bit for bit against the generic loop nest of the same
// group (both sum over k in ascending order in f32).
#include <gtest/gtest.h>

#include <cstring>

#include "lower_test_util.h"
#include "tessel/driver/compare.h"
#include "tessel/interp/interpreter.h"
#include "tessel/ir/builder.h"
#include "tessel/loop/eval.h"
#include "tessel/loop/math_expand.h"
#include "tessel/loop/printer.h"
#include "tessel/loop/simplify.h"
#include "tessel/loop/verifier.h"
#include "tessel/loop/visit.h"
#include "tessel/lower/lower_gpu.h"
#include "tessel/ops/registry.h"
#include "tessel/passes/fusion.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

Attribute ints(std::vector<int64_t> v) { return Attribute::of_ints(std::move(v)); }

size_t contracts_in(const loop::Kernel& k) {
  size_t n = 0;
  loop::visit_stmt(k.body, [&](const loop::Stmt& s) { n += s->kind == loop::StmtKind::Contract; },
                   [](const loop::Expr&) {});
  return n;
}

// The generic nest of a group, as the GPU nest was before Contract
// statements: vector width 1, no GEMM path; math expanded and simplified
// like lower_group_gpu_nest.
LoweredGroup generic_nest(const FusionGroup& g) {
  NestSchedule s;
  s.vector_width = 1;
  s.gemm = false;
  LoweredGroup lg = lower_group(g, OpRegistry::global(), s);
  lg.kernel = loop::simplify(loop::expand_math(lg.kernel));
  return lg;
}

// Runs m (the pipeline has run) with every compiled group of its fusion
// plan lowered by `lower` and evaluated, the other groups interpreted.
testing::PlanRun run_groups(const Model& m, const std::vector<RtValue>& inputs,
                            const std::function<LoweredGroup(const FusionGroup&)>& lower) {
  return testing::run_plan(*m.graph, plan_fusion(*m.graph, OpRegistry::global()), inputs, lower);
}

std::vector<std::string> schedules_of(const testing::PlanRun& r) {
  std::vector<std::string> s;
  for (const LoweredGroup& lg : r.lowered) s.push_back(lg.schedule);
  return s;
}

// Lowers m for the GPU and expects `contracts` Contract kernels whose
// results equal the generic nest's bit for bit and the interpreter's
// within `tol`. Returns the GPU run.
testing::PlanRun expect_contract_lowering(Model& m, size_t contracts,
                                          const std::map<std::string, int64_t>& dims = {},
                                          Tolerance tol = Tolerance{1e-5, 1e-5}) {
  PassOptions po;
  run_pipeline(m, po);
  const std::vector<RtValue> in = testing::random_inputs(*m.graph, dims, 7);
  const testing::PlanRun gpu = run_groups(m, in, [](const FusionGroup& g) {
    LoweredGroup lg = lower_group_gpu_nest(g, OpRegistry::global());
    // Contract kernels need no GPU schedule: it leaves them to the
    // tensor-core emitter as they are.
    loop::verify(lg.kernel, contracts_in(lg.kernel) ? loop::Target::Cuda : loop::Target::Cpu);
    if (contracts_in(lg.kernel)) {
      EXPECT_EQ(loop::print(schedule_for_gpu(lg.kernel)), loop::print(lg.kernel));
    }
    return lg;
  });
  const testing::PlanRun nest = run_groups(m, in, generic_nest);
  size_t n = 0;
  for (const LoweredGroup& lg : gpu.lowered) {
    if (!contracts_in(lg.kernel)) continue;
    ++n;
    EXPECT_TRUE(lg.schedule == "contract" || lg.schedule == "conv_contract") << lg.schedule;
    EXPECT_EQ(contracts_in(lg.kernel), 1u);
  }
  EXPECT_EQ(n, contracts) << (gpu.lowered.empty() ? "" : loop::print(gpu.lowered[0].kernel));
  const std::vector<RtValue> want = Interpreter().run(*m.graph, in);
  EXPECT_EQ(gpu.outputs.size(), want.size());
  for (size_t i = 0; i < want.size() && i < gpu.outputs.size(); ++i) {
    EXPECT_EQ(compare_tensors(gpu.outputs[i].tensor, want[i].tensor, tol), "") << "output " << i;
    const Tensor& a = gpu.outputs[i].tensor;
    const Tensor& b = nest.outputs[i].tensor;
    EXPECT_EQ(a.shape(), b.shape());
    if (a.shape() != b.shape()) continue;
    EXPECT_EQ(std::memcmp(a.raw(), b.raw(), static_cast<size_t>(a.numel()) * dtype_storage_size(a.dtype())), 0)
        << "output " << i << " differs from the generic nest's";
  }
  return gpu;
}

TEST(LowerGpuContract, MatMul) {
  Model m;
  GraphBuilder b(m);
  b.output(b.op("MatMul", {b.input("x", DType::F32, {37, 29}), b.input("w", DType::F32, {29, 53})}));
  const testing::PlanRun r = expect_contract_lowering(m, 1);
  const std::string text = loop::print(r.lowered[0].kernel);
  EXPECT_NE(text.find("contract "), std::string::npos) << text;
  EXPECT_NE(text.find("in [0, 37), "), std::string::npos) << text;
}

TEST(LowerGpuContract, GemmWithBiasAndRelu) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {21, 29});
  Value* w = b.input("w", DType::F32, {53, 29});  // [N, K]
  Value* bias = b.input("bias", DType::F32, {53});
  b.output(b.op("Relu", {b.op("Gemm", {x, w, bias}, {{"transB", Attribute::of_int(1)},
                                                   {"alpha", Attribute::of_float(0.5f)}})}));
  const testing::PlanRun r = expect_contract_lowering(m, 1);
  // The whole group is the one kernel: bias and relu are its epilogue.
  EXPECT_EQ(r.lowered.size(), 1u);
  EXPECT_NE(loop::print(r.lowered[0].kernel).find(" = select(g1_acc * 0.5f32 + in2[g1_j] < 0.0f32"), std::string::npos)
      << loop::print(r.lowered[0].kernel);
}

// Attention's Q K^T and P V: a batch of products over (batch, heads).
TEST(LowerGpuContract, BatchedAttentionProducts) {
  Model m;
  GraphBuilder b(m);
  Value* q = b.input("q", DType::F32, {2, 3, 17, 8});
  Value* k = b.input("k", DType::F32, {2, 3, 19, 8});
  Value* kt = b.op("Transpose", {k}, {{"perm", ints({0, 1, 3, 2})}});
  Value* s = b.op("Mul", {b.op("MatMul", {q, kt}), b.const_f32({}, {0.25f})});
  b.output(s);
  const testing::PlanRun r = expect_contract_lowering(m, 1);
  for (const LoweredGroup& lg : r.lowered) {
    const loop::Kernel& kern = lg.kernel;
    if (!contracts_in(kern)) continue;
    loop::visit_stmt(kern.body, [&](const loop::Stmt& st) {
      if (st->kind != loop::StmtKind::Contract) return;
      EXPECT_TRUE(loop::is_const(loop::simplify(loop::contract_parts(*st).batch_extent), 6)) << loop::print(kern);
    }, [](const loop::Expr&) {});
  }
}

// A Linear layer on [batch, seq, features] with a symbolic batch: the batch
// folds into M.
TEST(LowerGpuContract, LinearWithSymbolicBatch) {
  for (int64_t n : {1, 3}) {
    Model m;
    GraphBuilder b(m);
    Value* x = b.input("x", DType::F32, {Dim::sym("n"), 5, 16});
    Value* w = b.input("w", DType::F32, {16, 12});
    Value* bias = b.input("bias", DType::F32, {12});
    b.output(b.op("Add", {b.op("MatMul", {x, w}), bias}));
    expect_contract_lowering(m, 1, {{"n", n}});
  }
}

TEST(LowerGpuContract, ConvImplicitGemmWithBiasAndRelu) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {2, 3, 9, 7});
  Value* w = b.input("w", DType::F32, {5, 3, 3, 3});
  Value* bias = b.input("b", DType::F32, {5});
  b.output(b.op("Relu", {b.op("Conv", {x, w, bias}, {{"pads", ints({1, 1, 1, 1})}, {"strides", ints({2, 1})}})}));
  const testing::PlanRun r = expect_contract_lowering(m, 1);
  EXPECT_EQ(schedules_of(r), std::vector<std::string>{"conv_contract"});
}

// Depthwise convolutions have no Contract form: the generic nest.
TEST(LowerGpuContract, DepthwiseConvIsAGenericNest) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {1, 4, 6, 6});
  Value* w = b.input("w", DType::F32, {4, 1, 3, 3});
  b.output(b.op("Relu", {b.op("Conv", {x, w}, {{"group", Attribute::of_int(4)}, {"pads", ints({1, 1, 1, 1})}})}));
  const testing::PlanRun r = expect_contract_lowering(m, 0);
  EXPECT_EQ(schedules_of(r), std::vector<std::string>{"nest"});
}

// bf16 and f16 products sum in f32 (the lowering casts each operand to f32,
// which the tensor-core emitter recognises as exact bf16 / f16 values).
TEST(LowerGpuContract, HalfPrecisionProducts) {
  for (DType t : {DType::BF16, DType::F16}) {
    Model m;
    GraphBuilder b(m);
    Value* x = b.input("x", t, {9, 40});
    Value* w = b.input("w", t, {40, 11});
    b.output(b.op("MatMul", {x, w}));
    const testing::PlanRun r = expect_contract_lowering(m, 1, {}, Tolerance{1e-2, 1e-2});
    const std::string text = loop::print(r.lowered[0].kernel);
    EXPECT_NE(text.find(str_cat("dot(cast<f32>(")), std::string::npos) << text;
    EXPECT_NE(text.find(str_cat("cast<", dtype_name(t), ">(")), std::string::npos) << text;
  }
}

// The CPU keeps its packed GEMM: NestSchedule::gpu_gemm is off by default.
TEST(LowerGpuContract, CpuLoweringIsUnchanged) {
  Model m;
  GraphBuilder b(m);
  b.output(b.op("MatMul", {b.input("x", DType::F32, {8, 8}), b.input("w", DType::F32, {8, 8})}));
  PassOptions po;
  run_pipeline(m, po);
  const FusionPlan plan = plan_fusion(*m.graph, OpRegistry::global());
  for (const FusionGroup& g : plan.groups) {
    if (!g.compiled) continue;
    const LoweredGroup lg = lower_group(g, OpRegistry::global());
    EXPECT_EQ(lg.schedule, "gemm");
    EXPECT_EQ(contracts_in(lg.kernel), 0u);
    EXPECT_EQ(lower_group_for_gpu(g, OpRegistry::global()).schedule, "gpu_mma");
  }
}

}  // namespace
}  // namespace tessel
