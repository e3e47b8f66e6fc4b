// tessel inspect MODEL [--print-after PASS|all] [--emit graph|fused|loop|schedule|llvm|asm|plan|cuda|ptx|options] [--cuda-arch sm_XY]
//                      [--disable-pass NAME]... [--elide-constants]
#include <algorithm>
#include <optional>
#include <set>
#include <iostream>
#include <sstream>

#include "tessel/driver/compiler.h"
#include "tessel/driver/cuda_compiler.h"
#include "tessel/driver/json_util.h"
#include "tessel/driver/model_loader.h"
#include "tessel/driver/session.h"
#include "tessel/ir/printer.h"
#include "tessel/loop/printer.h"
#include "tessel/passes/pass_manager.h"
#include "tessel/runtime/memory_plan.h"
#include "tessel/support/error.h"
#include "tessel/tools/commands.h"

namespace tessel::cli {

namespace {

// What --emit accepts.
const std::vector<std::string>& emit_kinds() {
  static const std::vector<std::string> kinds = {"graph", "fused", "loop", "schedule", "llvm", "asm", "plan", "cuda", "ptx",
                                                  "options"};
  return kinds;
}

// Symbols still free after the pipeline (--dim has bound the others) are
// planned at 1, as `tessel run` would bind them without inputs.
std::map<std::string, int64_t> plan_bindings(const Graph& g, const std::map<std::string, int64_t>& dims) {
  std::map<std::string, int64_t> b = dims;
  for (const Value* v : g.inputs)
    if (v->type.has_shape())
      for (const Dim& d : *v->type.shape) {
        std::set<std::string> syms;
        d.collect_symbols(&syms);
        for (const std::string& s : syms) b.emplace(s, 1);
      }
  return b;
}

// The arena plan of the compiled path for these bindings.
MemoryPlan plan_for(const Model& m, const std::map<std::string, int64_t>& bindings, const DriverOptions& o) {
  const LowerOptions lo = lower_options(o);
  const CompiledModel c = o.target == Target::Cuda ? lower_for_cuda(m, lo) : lower_for_cpu(m, lo);
  return plan_memory(*m.graph, build_steps(c, nullptr), bindings);
}

// The text of a compiled stage: fusion groups (marking the ones the
// interpreter runs), loop IR, LLVM IR after optimisation, assembly, CUDA C++
// or PTX (for cuda_arch, or the device's). Groups and loop IR are those of
// the target's lowering, with the schedules `o` asks for (--tuning-db, --knob).
std::string emit_stage(const Model& m, const std::string& emit, const std::string& cuda_arch, const DriverOptions& o) {
  if (emit == "options") return print_options(o);
  if (emit == "cuda") return emit_cuda(m, cuda_arch, lower_options(o));
  if (emit == "ptx") return emit_ptx(m, cuda_arch, lower_options(o));
  const Target t = o.target;
  TS_CHECK(t != Target::Cuda || (emit != "llvm" && emit != "asm"), "--emit ", emit,
           " shows CPU code; with --target cuda use --emit cuda or ptx");
  const LowerOptions lo = lower_options(o);
  CompiledModel c = t == Target::Cuda ? lower_for_cuda(m, lo) : lower_for_cpu(m, lo);
  if (emit == "fused") {
    std::string out = print_fusion(c.plan);
    for (const std::string& why : c.fallback_reasons) out += "# interpreter: " + why + "\n";
    return out;
  }
  if (emit == "loop") {
    std::string out;
    for (const LoweredGroup& lg : c.lowered) out += loop::print(lg.kernel) + "\n";
    return out;
  }
  if (emit == "schedule") {
    std::string out;
    for (const LoweredGroup& lg : c.lowered) {
      out += "# " + lg.kernel.name + (lg.default_hash.empty() ? "" : " " + lg.default_hash) + "\n";
      out += print_schedule(lg.sched);
    }
    return out;
  }
  return emit == "llvm" ? emit_cpu_llvm_ir(c) : emit_cpu_asm(c);
}

}  // namespace

int cmd_inspect(const InspectArgs& a, const CommonArgs& c) {
  DriverOptions o = driver_options(c);
  check_options_supported(o, /*needs_device=*/false);
  const auto& kinds = emit_kinds();
  TS_CHECK(std::find(kinds.begin(), kinds.end(), a.emit) != kinds.end(), "--emit: unknown kind '", a.emit,
           "' (available: ", join(kinds), ")");
  if (!a.print_after.empty()) check_pass_name("--print-after", a.print_after, true);
  std::ostringstream dumps;
  o.print_after = a.print_after;
  o.print_stream = c.json ? static_cast<std::ostream*>(&dumps) : &std::cout;

  std::unique_ptr<Model> m = load_model(a.model);
  compile_model(*m, o.dims, o);
  PrintOptions po;
  po.elide_large_constants = a.elide_constants;
  // With --print-after the dumps are the output; otherwise the final IR.
  std::string ir;
  std::optional<MemoryPlan> plan;
  if (a.print_after.empty() && a.emit == "plan") {
    const auto bindings = plan_bindings(*m->graph, o.dims);
    plan = plan_for(*m, bindings, o);
    ir = print_memory_plan(*plan, bindings);
  } else if (a.print_after.empty()) {
    ir = a.emit == "graph" ? print_model(*m, po) : emit_stage(*m, a.emit, a.cuda_arch, o);
  }
  if (c.json) {
    Json j = Json::object();
    j["model"] = a.model;
    j["emit"] = a.emit;
    if (!a.print_after.empty()) j["print_after"] = dumps.str();
    else j["ir"] = ir;
    if (plan) j["peak_bytes"] = plan->peak_bytes;
    std::cout << json_line(j) << "\n";
  } else {
    std::cout << ir;
  }
  return 0;
}

}  // namespace tessel::cli
