// Runs a model's fused, lowered kernels through the loop-IR evaluator
// (loop/eval.h) and compares them with the reference interpreter: this checks
// fusion and lowering without the LLVM code generator.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <string>

#include "pass_test_util.h"
#include "tessel/driver/compare.h"
#include "tessel/driver/compiler.h"
#include "tessel/loop/eval.h"
#include "tessel/loop/verifier.h"
#include "tessel/loop/visit.h"
#include "tessel/lower/lower_group.h"
#include "tessel/passes/fusion.h"
#include "tessel/passes/pass_manager.h"

namespace tessel::testing {

struct EvalRun {
  std::vector<RtValue> outputs;
  size_t kernels = 0;       // groups run as lowered kernels
  size_t interpreted = 0;   // groups run by the interpreter
  size_t gemm_kernels = 0;  // kernels built by the packed GEMM schedule
  std::map<std::string, size_t> schedules;  // kernels per LoweredGroup::schedule
};

// Runs a lowered group's kernel in the evaluator on the values computed so
// far (symbols bound by `bind`) and stores its output in `vals`; an assert
// that fails throws its message.
inline void eval_group(const LoweredGroup& lg, const std::map<std::string, int64_t>& bind,
                       std::map<const Value*, RtValue>& vals) {
  std::vector<void*> bufs;
  for (size_t i = 0; i < lg.kernel.num_inputs; ++i) {
    const Value* v = lg.params[i];
    const Tensor& t = v->constant ? *v->constant : vals.at(v).tensor;
    bufs.push_back(const_cast<uint8_t*>(t.raw()));
  }
  const Value* out = lg.params.back();
  std::vector<int64_t> dims;
  for (const Dim& d : *out->type.shape) dims.push_back(*d.eval(bind));
  Tensor result(out->type.dtype, dims);
  bufs.push_back(result.mutable_raw());
  std::vector<int64_t> syms;
  for (const std::string& s : lg.kernel.syms) syms.push_back(bind.at(s));
  const int32_t rc = loop::run_kernel(lg.kernel, bufs, syms);
  if (rc != 0) throw Error(lg.kernel.assert_messages().at(static_cast<size_t>(rc - 1)));
  vals[out] = RtValue(result);
}

// The groups of `plan` run in order on the graph inputs `inputs`: compiled
// groups lowered by `lower` and evaluated, the others interpreted.
struct PlanRun {
  std::vector<RtValue> outputs;
  size_t interpreted = 0;
  std::vector<LoweredGroup> lowered;  // in plan order
};

inline PlanRun run_plan(const Graph& g, const FusionPlan& plan, const std::vector<RtValue>& inputs,
                        const std::function<LoweredGroup(const FusionGroup&)>& lower) {
  std::map<const Value*, RtValue> vals;
  std::map<std::string, int64_t> bind;
  for (size_t i = 0; i < inputs.size(); ++i) {
    check_value_matches(inputs[i], g.inputs[i]->type, g.inputs[i]->name, &bind);
    vals[g.inputs[i]] = inputs[i];
  }
  auto value_of = [&](const Value* v) -> const RtValue* {
    auto it = vals.find(v);
    return it == vals.end() ? nullptr : &it->second;
  };
  PlanRun r;
  Interpreter interp;
  for (const FusionGroup& fg : plan.groups) {
    if (!fg.compiled) {
      std::vector<RtValue> outs = interp.run_node(*fg.root, value_of);
      for (size_t o = 0; o < fg.root->outputs.size(); ++o)
        if (fg.root->outputs[o]) vals[fg.root->outputs[o]] = outs[o];
      ++r.interpreted;
      continue;
    }
    r.lowered.push_back(lower(fg));
    eval_group(r.lowered.back(), bind, vals);
  }
  for (const Value* v : g.outputs) r.outputs.push_back(v->constant ? RtValue(*v->constant) : vals.at(v));
  return r;
}

// Runs m with every compiled group lowered (as driver/compiler.h plans it) and
// evaluated, the others interpreted.
inline EvalRun run_lowered(const Model& m, const std::vector<RtValue>& inputs) {
  // The compiler's own planning: fusion, lowering, math expansion, simplification.
  const CompiledModel c = lower_for_cpu(m);
  size_t next = 0;
  const PlanRun p = run_plan(*m.graph, c.plan, inputs, [&](const FusionGroup&) {
    const LoweredGroup& lg = c.lowered.at(next++);
    loop::verify(lg.kernel);
    return lg;
  });
  EvalRun r;
  r.outputs = p.outputs;
  r.interpreted = p.interpreted;
  for (const LoweredGroup& lg : p.lowered) {
    ++r.kernels;
    if (lg.schedule == "gemm") ++r.gemm_kernels;
    ++r.schedules[lg.schedule];
  }
  return r;
}

// Infers shapes, then expects lowered kernels to agree with the interpreter
// on random inputs (symbols bound by `dims`). Returns the lowered run.
inline EvalRun expect_lowered_matches(Model& m, const std::map<std::string, int64_t>& dims = {},
                                      Tolerance tol = Tolerance{1e-5, 1e-5}) {
  PassOptions o;
  run_pipeline(m, o);
  const std::vector<RtValue> in = random_inputs(*m.graph, dims, 7);
  const std::vector<RtValue> want = Interpreter().run(*m.graph, in);
  EvalRun got = run_lowered(m, in);
  EXPECT_EQ(got.outputs.size(), want.size());
  for (size_t i = 0; i < want.size() && i < got.outputs.size(); ++i) {
    const std::string msg = compare_tensors(got.outputs[i].tensor, want[i].tensor, tol);
    EXPECT_EQ(msg, "") << "output " << i;
  }
  return got;
}

// Runs the pipeline on a model that fuses into one group and lowers it.
inline LoweredGroup lower_single_group(Model& m) {
  PassOptions o;
  run_pipeline(m, o);
  const FusionPlan p = plan_fusion(*m.graph, OpRegistry::global());
  TS_CHECK(p.groups.size() == 1, "lower_single_group: ", p.groups.size(), " groups");
  return lower_group(p.groups[0], OpRegistry::global());
}

// Calls `f` on every expression node of the stores into buffers whose name
// holds `part` ("pack": the GEMM's packed panels); returns how many stores.
inline size_t for_each_store_expr(const loop::Stmt& body, const std::string& part,
                                  const std::function<void(const loop::Expr&)>& f) {
  size_t stores = 0;
  loop::visit_stmt(
      body,
      [&](const loop::Stmt& s) {
        if (s->kind != loop::StmtKind::Store || s->buffer->name.find(part) == std::string::npos) return;
        ++stores;
        for (const loop::Expr& e : loop::stmt_exprs(s)) loop::visit_expr(e, f);
      },
      [](const loop::Expr&) {});
  return stores;
}

}  // namespace tessel::testing
