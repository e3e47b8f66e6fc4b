// Attention nodes lowered for the GPU with NestSchedule::gpu_attention
// (lower/attention_stmt.cpp) become one loop IR attention statement: 4-D and
// 3-D inputs, grouped-query heads, causal, boolean and additive masks,
// producers inlined into the operands, bf16. Checked through the loop IR
// evaluator against the reference interpreter; what the statement does not
// take keeps the composed lowering, and a consumer fused after the node is
// split off into a kernel of its own.
#include <gtest/gtest.h>

#include "lower_test_util.h"
#include "pass_test_util.h"
#include "tessel/driver/compare.h"
#include "tessel/interp/interpreter.h"
#include "tessel/ir/builder.h"
#include "tessel/loop/printer.h"
#include "tessel/loop/verifier.h"
#include "tessel/loop/visit.h"
#include "tessel/lower/lower_gpu.h"
#include "tessel/ops/registry.h"
#include "tessel/passes/fusion.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

Attribute i64(int64_t v) { return Attribute::of_int(v); }

size_t attentions_in(const loop::Kernel& k) {
  size_t n = 0;
  loop::visit_stmt(k.body, [&](const loop::Stmt& s) { n += s->kind == loop::StmtKind::Attention; },
                   [](const loop::Expr&) {});
  return n;
}

// Lowers every compiled group of m (the pipeline has run) with the attention
// path on, evaluates them, and expects `statements` attention kernels and
// the interpreter's outputs within `tol`.
testing::PlanRun expect_attention_lowering(Model& m, size_t statements, Tolerance tol = Tolerance{1e-5, 1e-5},
                                           const PassOptions& po = {}) {
  run_pipeline(m, po);
  const std::vector<RtValue> in = testing::random_inputs(*m.graph, {}, 11);
  const auto lower = [](const FusionGroup& g) {
    NestSchedule s = gpu_nest_schedule();
    s.gpu_attention = true;
    LoweredGroup lg = lower_group(g, OpRegistry::global(), s);
    loop::verify(lg.kernel, attentions_in(lg.kernel) ? loop::Target::Cuda : loop::Target::Cpu);
    return lg;
  };
  // A rejected fusion makes its node a root, as the driver's replanning does,
  // until no group is rejected.
  std::set<const Node*> roots;
  for (bool again = true; again;) {
    again = false;
    for (const FusionGroup& g : plan_fusion(*m.graph, OpRegistry::global(), {}, roots).groups) {
      try {
        if (g.compiled) lower(g);
      } catch (const FusionRejected& r) {
        again = roots.insert(r.node).second;
        if (!again) ADD_FAILURE() << "rejected twice: " << r.what();
      }
    }
  }
  const testing::PlanRun run = testing::run_plan(*m.graph, plan_fusion(*m.graph, OpRegistry::global(), {}, roots), in, lower);
  size_t n = 0;
  for (const LoweredGroup& lg : run.lowered) {
    n += attentions_in(lg.kernel);
    if (attentions_in(lg.kernel)) EXPECT_EQ(lg.schedule, "attention");
  }
  EXPECT_EQ(n, statements) << (run.lowered.empty() ? "" : loop::print(run.lowered[0].kernel));
  const std::vector<RtValue> want = Interpreter().run(*m.graph, in);
  EXPECT_EQ(run.outputs.size(), want.size());
  for (size_t i = 0; i < want.size() && i < run.outputs.size(); ++i)
    EXPECT_EQ(compare_tensors(run.outputs[i].tensor, want[i].tensor, tol), "") << "output " << i;
  return run;
}

struct Case {
  DType t = DType::F32;
  bool is3d = false, causal = false, bool_mask = false, float_mask = false, softcap = false;
  int64_t hq = 4, hkv = 2, sq = 9, skv = 9, d = 8, dv = 6;
};

Model attention_model(const Case& c) {
  Model m;
  m.opsets[""] = 23;
  GraphBuilder b(m);
  const int64_t B = 2;
  Value *q, *k, *v;
  if (c.is3d) {
    q = b.input("q", c.t, {Dim(B), Dim(c.sq), Dim(c.hq * c.d)});
    k = b.input("k", c.t, {Dim(B), Dim(c.skv), Dim(c.hkv * c.d)});
    v = b.input("v", c.t, {Dim(B), Dim(c.skv), Dim(c.hkv * c.dv)});
  } else {
    // Q through a producer (a scale), which becomes a kernel of its own.
    q = b.op("Mul", {b.input("q", c.t, {Dim(B), Dim(c.hq), Dim(c.sq), Dim(c.d)}),
                     b.op("Cast", {b.constant(Tensor::scalar_f32(0.5f), "half")},
                          {{"to", i64(c.t == DType::BF16 ? 16 : 1)}})});
    k = b.input("k", c.t, {Dim(B), Dim(c.hkv), Dim(c.skv), Dim(c.d)});
    v = b.input("v", c.t, {Dim(B), Dim(c.hkv), Dim(c.skv), Dim(c.dv)});
  }
  std::vector<Value*> ins = {q, k, v};
  if (c.bool_mask) ins.push_back(b.input("mask", DType::Bool, {Dim(B), Dim(1), Dim(c.sq), Dim(c.skv)}));
  if (c.float_mask) ins.push_back(b.input("mask", c.t, {Dim(c.sq), Dim(c.skv)}));
  Attrs attrs;
  if (c.causal) attrs["is_causal"] = i64(1);
  if (c.softcap) attrs["softcap"] = Attribute::of_float(10.0f);
  if (c.is3d) {
    attrs["q_num_heads"] = i64(c.hq);
    attrs["kv_num_heads"] = i64(c.hkv);
  }
  b.output(b.op("Attention", ins, attrs));
  return m;
}

TEST(LowerGpuAttention, FourDimensionalGroupedQueriesCausal) {
  Case c;
  c.causal = true;
  Model m = attention_model(c);
  const testing::PlanRun r = expect_attention_lowering(m, 1);
  // The batch runs over batch x query heads; key heads are h / 2.
  for (const LoweredGroup& lg : r.lowered) {
    if (!attentions_in(lg.kernel)) continue;
    const std::string text = loop::print(lg.kernel);
    EXPECT_NE(text.find("attention a"), std::string::npos) << text;
    EXPECT_NE(text.find("in [0, 8)"), std::string::npos) << text;
  }
}

TEST(LowerGpuAttention, Masks) {
  Case c;
  c.bool_mask = true;
  Model m = attention_model(c);
  expect_attention_lowering(m, 1);
  Case f;
  f.float_mask = true;
  f.hkv = 4;
  Model mf = attention_model(f);
  expect_attention_lowering(mf, 1);
}

TEST(LowerGpuAttention, ThreeDimensionalInputs) {
  Case c;
  c.is3d = true;
  c.sq = 5;
  c.skv = 7;
  Model m = attention_model(c);
  expect_attention_lowering(m, 1);
}

// bf16 inputs: the statement sums in f32 and rounds the probabilities to
// bf16 once; the reference rounds at every step it names.
TEST(LowerGpuAttention, Bf16) {
  Case c;
  c.t = DType::BF16;
  c.causal = true;
  Model m = attention_model(c);
  expect_attention_lowering(m, 1, Tolerance{3e-2, 3e-2});
}

// What the statement does not take keeps the composed form (softcap; causal
// with fewer queries than keys, whose limit is offset).
TEST(LowerGpuAttention, UnsupportedFormsKeepTheComposedLowering) {
  Case c;
  c.softcap = true;
  Model m = attention_model(c);
  expect_attention_lowering(m, 0);
  Case o;
  o.causal = true;
  o.sq = 3;
  Model mo = attention_model(o);
  expect_attention_lowering(mo, 0);
}

// A consumer fused after the node (BERT's Transpose back to [B, S, H, D]):
// the node becomes a group root of its own, the Transpose another kernel.
TEST(LowerGpuAttention, ConsumersAreSplitOff) {
  Model m = attention_model(Case{});
  Graph& g = *m.graph;
  Value* y = g.outputs.at(0);
  GraphBuilder b(m);
  g.outputs.clear();
  b.output(b.op("Transpose", {y}, {{"perm", Attribute::of_ints({0, 2, 1, 3})}}));
  const testing::PlanRun r = expect_attention_lowering(m, 1);
  EXPECT_GE(r.lowered.size(), 2u);
}

// The views of an exported model around the attention (heads split out of
// [B, S, H * D] by Reshape + Transpose, the grouped-query heads repeated by
// Unsqueeze + Expand + Reshape) fold back into plain sums: the operand
// indices divide nothing but the statement's batch variable into its digits
// (batch, head), so the kernel copies operands without 64-bit divisions.
TEST(LowerGpuAttention, OperandViewsFoldToPlainIndices) {
  Model m;
  m.opsets[""] = 23;
  GraphBuilder b(m);
  const int64_t B = 2, S = 12, H = 4, Hkv = 2, D = 8;
  const auto heads = [&](const char* name, int64_t h) {  // [B, S, h * D] -> [B, h, S, D]
    Value* x = b.op("Reshape", {b.input(name, DType::F32, {Dim(B), Dim(S), Dim(h * D)}), b.const_i64({B, S, h, D})});
    return b.op("Transpose", {x}, {{"perm", Attribute::of_ints({0, 2, 1, 3})}});
  };
  const auto repeat = [&](Value* x) {  // [B, Hkv, S, D] -> [B, H, S, D]
    Value* u = b.op("Unsqueeze", {x, b.const_i64({2})});
    Value* e = b.op("Expand", {u, b.const_i64({B, Hkv, H / Hkv, S, D})});
    return b.op("Reshape", {e, b.const_i64({B, H, S, D})});
  };
  b.output(b.op("Attention", {heads("q", H), repeat(heads("k", Hkv)), repeat(heads("v", Hkv))}, {}));
  const testing::PlanRun r = expect_attention_lowering(m, 1);
  for (const LoweredGroup& lg : r.lowered) {
    loop::visit_stmt(lg.kernel.body, [&](const loop::Stmt& s) {
      if (s->kind != loop::StmtKind::Attention) return;
      const loop::AttentionView a = loop::attention_parts(*s);
      const auto batch_var = [&](const loop::Expr& x) { return x->kind == loop::ExprKind::Var && x->name == a.batch; };
      for (const loop::Expr* operand : {&a.q, &a.k, &a.v}) {
        loop::visit_expr(*operand, [&](const loop::Expr& e) {
          if (e->kind != loop::ExprKind::Binary ||
              (e->binary != loop::BinaryOp::FloorDiv && e->binary != loop::BinaryOp::FloorMod))
            return;
          // bh's digits: floordiv(bh, H), floormod(bh, H), floordiv(floormod(bh, H), H / Hkv).
          const loop::Expr& x = e->args[0];
          EXPECT_TRUE(batch_var(x) || (x->kind == loop::ExprKind::Binary && batch_var(x->args[0])))
              << loop::print(*operand);
        });
      }
    }, [](const loop::Expr&) {});
  }
}

// The exported form at --precision bf16 (the pipeline's casts around an f32
// softmax, GPT-2's own Cast after it): fuse_attention makes one node, which
// lowers to the statement.
TEST(LowerGpuAttention, FusedFromTheBf16Pipeline) {
  for (bool extra_cast : {false, true}) {
    Model m;
    GraphBuilder b(m);
    Value* q = b.input("q", DType::F32, {Dim(2), Dim(3), Dim(20), Dim(16)});
    Value* k = b.input("k", DType::F32, {Dim(2), Dim(3), Dim(24), Dim(16)});
    Value* v = b.input("v", DType::F32, {Dim(2), Dim(3), Dim(24), Dim(16)});
    Value* s = b.op("MatMul", {q, b.op("Transpose", {k}, {{"perm", Attribute::of_ints({0, 1, 3, 2})}})});
    s = b.op("Mul", {s, b.constant(Tensor::scalar_f32(0.25f), "scale")});
    s = b.op("Add", {s, b.input("mask", DType::F32, {Dim(1), Dim(1), Dim(20), Dim(24)})});
    Value* p = b.op("Softmax", {s}, {{"axis", i64(-1)}});
    if (extra_cast) p = b.op("Cast", {p}, {{"to", i64(1)}});
    b.output(b.op("MatMul", {p, v}));
    PassOptions po;
    po.precision = DType::BF16;
    po.gpu = true;
    po.fuse_attention = true;
    expect_attention_lowering(m, 1, Tolerance{3e-2, 3e-2}, po);
    EXPECT_EQ(testing::count_ops(*m.graph, "Attention"), 1u);
    EXPECT_EQ(testing::count_ops(*m.graph, "Softmax"), 0u);
  }
}

}  // namespace
}  // namespace tessel
