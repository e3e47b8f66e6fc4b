#include "tessel/driver/compiler.h"

#include <chrono>
#include <set>

#include "tessel/loop/math_expand.h"
#include "tessel/loop/printer.h"
#include "tessel/loop/simplify.h"
#include "tessel/loop/verifier.h"
#include "tessel/loop/visit.h"
#include "tessel/lower/lower_group.h"
#include "tessel/ops/registry.h"
#include "tessel/support/error.h"
#ifdef TESSEL_HAVE_LLVM
#include "tessel/codegen/cpu/cpu_codegen.h"
#endif

namespace tessel {

namespace {

// A kernel the code generator can take: every intrinsic is a primitive one
// (transcendentals have been expanded).
bool codegen_ready(const loop::Kernel& k, std::string* why) {
  bool ok = true;
  loop::visit_stmt(k.body, [](const loop::Stmt&) {}, [&](const loop::Expr& root) {
    loop::visit_expr(root, [&](const loop::Expr& e) {
      if (e->kind == loop::ExprKind::Call && !loop::is_primitive_intrinsic(e->name) && ok) {
        ok = false;
        *why = str_cat("intrinsic '", e->name, "' has no expansion yet");
      }
    });
  });
  return ok;
}

// True when every node is elementwise: what the memory planner needs to let
// the kernel write its output over a dying input (runtime/memory_plan.h).
bool all_elementwise(const FusionGroup& g, const OpRegistry& reg) {
  for (const Node* n : g.nodes) {
    const OpSchema* s = reg.find(n->domain, n->op);
    if (!s || s->fusion != FusionKind::Elementwise) return false;
  }
  return true;
}

std::shared_ptr<KernelStep> kernel_step(const LoweredGroup& lg, const FusionGroup& g, KernelEntry fn) {
  auto k = std::make_shared<KernelStep>();
  k->name = lg.kernel.name;
  k->fn = fn;
  k->params = lg.params;
  k->num_inputs = lg.kernel.num_inputs;
  k->syms = lg.kernel.syms;
  k->assert_messages = lg.kernel.assert_messages();
  k->nodes = g.nodes;
  k->elementwise = all_elementwise(g, OpRegistry::global());
  k->parallel = lg.parallel_extent.has_value();
  if (k->parallel) k->parallel_extent = *lg.parallel_extent;
  return k;
}

}  // namespace

std::vector<loop::Kernel> CompiledModel::kernels() const {
  std::vector<loop::Kernel> ks;
  for (const LoweredGroup& lg : lowered) ks.push_back(lg.kernel);
  return ks;
}

std::vector<Step> build_steps(const CompiledModel& c, const std::function<KernelEntry(const std::string&)>& lookup) {
  // Kernels were lowered in plan order.
  std::vector<Step> steps;
  size_t next = 0;
  for (const FusionGroup& g : c.plan.groups) {
    Step s;
    if (!g.compiled) {
      s.interp = g.root;
    } else {
      const LoweredGroup& lg = c.lowered.at(next++);
      s.kernel = kernel_step(lg, g, lookup ? lookup(lg.kernel.name) : nullptr);
    }
    steps.push_back(std::move(s));
  }
  return steps;
}

CompiledModel lower_for_cpu(const Model& m) {
  const OpRegistry& reg = OpRegistry::global();
  CompiledModel c;
  std::set<const Node*> opaque, roots;
  std::vector<LoweredGroup>& lowered = c.lowered;
  // Re-plan until every compiled group lowers; each round removes at least
  // one node from compilation, so this ends.
  while (true) {
    c.plan = plan_fusion(*m.graph, reg, opaque, roots);
    lowered.clear();
    bool retry = false;
    for (const FusionGroup& g : c.plan.groups) {
      if (!g.compiled) continue;
      try {
        LoweredGroup lg = lower_group(g, reg, default_schedule(g));
        lg.kernel = loop::simplify(loop::expand_math(lg.kernel));
        std::string why;
        if (!codegen_ready(lg.kernel, &why)) {
          LoweringUnsupported u(str_cat(g.root->describe(), ": ", why));
          throw u;
        }
        loop::verify(lg.kernel);
        lowered.push_back(std::move(lg));
      } catch (const FusionRejected& r) {
        roots.insert(r.node);
        retry = true;
        break;
      } catch (const LoweringUnsupported& u) {
        if (u.node) {
          opaque.insert(u.node);
        } else {
          for (const Node* n : g.nodes) opaque.insert(n);
        }
        c.fallback_reasons.push_back(u.what());
        retry = true;
        break;
      }
    }
    if (!retry) break;
  }
  return c;
}

std::unique_ptr<CompiledModel> compile_for_cpu(const Model& m, const DriverOptions& o) {
#ifndef TESSEL_HAVE_LLVM
  (void)m;
  (void)o;
  fail("this tessel was built without the LLVM CPU code generator (TESSEL_WITH_LLVM=OFF); use --target reference");
#else
  const auto t0 = std::chrono::steady_clock::now();
  auto c = std::make_unique<CompiledModel>(lower_for_cpu(m));
  std::shared_ptr<cpu::KernelLibrary> lib;
  const std::vector<loop::Kernel> kernels = c->kernels();
  if (!kernels.empty()) {
    cpu::CodegenOptions co;
    co.cache_dir = cache_dir();
    for (const loop::Kernel& k : kernels) co.cache_key_text += loop::print(k);
    lib = cpu::compile_kernels(kernels, co);
    c->from_cache = lib->loaded_from_cache();
    c->object = lib->object_file_bytes();
  }
  // Kernels are compiled for the host (CodegenOptions' "host" defaults).
  c->cpu_name = cpu::host_cpu_name();
  c->cpu_features = cpu::host_cpu_features();
  std::vector<Step> steps =
      build_steps(*c, [&](const std::string& name) { return reinterpret_cast<KernelEntry>(lib->lookup(name)); });
  ExecutableOptions eo;
  eo.threads = o.threads;
  eo.memory_planning = o.memory_planning;
  c->exe = std::make_unique<Executable>(m, std::move(steps), lib, eo);
  c->compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return c;
#endif
}

std::string emit_cpu_llvm_ir(const CompiledModel& c) {
#ifdef TESSEL_HAVE_LLVM
  return cpu::emit_llvm_ir(c.kernels(), cpu::CodegenOptions{});
#else
  (void)c;
  fail("this tessel was built without the LLVM CPU code generator");
#endif
}

std::string emit_cpu_asm(const CompiledModel& c) {
#ifdef TESSEL_HAVE_LLVM
  return cpu::emit_asm(c.kernels(), cpu::CodegenOptions{});
#else
  (void)c;
  fail("this tessel was built without the LLVM CPU code generator");
#endif
}

}  // namespace tessel
