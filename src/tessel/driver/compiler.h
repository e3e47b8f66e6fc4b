// The compiled CPU path, end to end: fusion plan -> one loop-IR kernel per
// group -> math expansion, simplification, verification -> LLVM (one module,
// cached on disk) -> an Executable. Groups whose nodes have no compiled form
// are re-planned around them; those nodes run on the interpreter.
//
// Compile time: a re-plan round lowers only the groups it has not lowered
// before (same root, members and inputs), and kernels whose loop IR is the
// same but for the name (the repeated layers of a transformer) are compiled
// once and share one entry point.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <ostream>
#include <memory>
#include <string>
#include <vector>

#include "tessel/driver/options.h"
#include "tessel/ir/graph.h"
#include "tessel/loop/ir.h"
#include "tessel/lower/lower_group.h"
#include "tessel/passes/fusion.h"
#include "tessel/runtime/executable.h"

namespace tessel {

struct CompiledModel {
  FusionPlan plan;
  std::vector<LoweredGroup> lowered;  // one per compiled group, in plan order
  std::vector<loop::Kernel> kernels() const;
  // One kernel per distinct body, named after its first use (what codegen
  // compiles), and for every kernel name the name of the compiled function
  // it runs.
  std::vector<loop::Kernel> unique_kernels;
  std::map<std::string, std::string> entry;
  std::unique_ptr<Executable> exe;
  double compile_s = 0;
  bool from_cache = false;
  // What an artifact records (compile_for_cpu only): the kernels' object
  // file and the CPU it was compiled for.
  std::string object;
  std::string cpu_name;
  std::string cpu_features;
  // Why each interpreter-run node has no compiled form (for inspect).
  std::vector<std::string> fallback_reasons;
};

// A tuned schedule for a kernel, by the hash of the kernel its group lowers
// to with the default schedule (kernel_hash) and its kind; nullopt keeps the
// default. A tuning database answers it (tune/database.h).
using ScheduleLookup = std::function<std::optional<Schedule>(const std::string& kernel_hash, const std::string& kind)>;

// Switches for the compile-time shortcuts, so that tests can compare them with
// the plain way. Results are the same either way.
struct LowerOptions {
  bool reuse_lowered_groups = true;  // re-plan rounds keep groups lowered before
  bool share_kernels = true;         // identical kernel bodies compile once
  ScheduleLookup schedules;          // tuned schedules (CPU), when set
  std::vector<Primitive> knobs;      // --knob: over the defaults and the tuned schedules
  std::ostream* log = nullptr;       // warnings of schedules that do not apply (stderr when null)
  // The CPU the kernels are for (compile --cpu); the host's when unset.
  std::optional<CpuInfo> cpu;
  // The compile's progress, when set: lowering counts the groups on it.
  Progress* progress = nullptr;
};

// The schedules `o` asks for: its --tuning-db's records for this machine
// (CPU) and its --knob values.
LowerOptions lower_options(const DriverOptions& o);

// The canonical hash of a kernel: loop::structural_hash(k).hex(), which
// ignores the kernel's, buffers' and variables' names (loop/hash.h).
std::string kernel_hash(const loop::Kernel& k);

// One group lowered for this CPU, expanded, simplified and verified, with
// `tuned` (its template knobs and loop primitives) or the default schedule.
// LoweredGroup::default_hash is set either way. Throws FusionRejected or
// LoweringUnsupported like lower_group, tessel::Error when `tuned` does not
// apply.
LoweredGroup lower_cpu_group(const FusionGroup& g, const OpRegistry& reg, const std::optional<Schedule>& tuned = {},
                             const std::optional<CpuInfo>& cpu = {});

// Compiles `m` (after the graph pass pipeline) for this CPU. `m` must outlive
// the result. Throws tessel::Error when tessel was built without LLVM.
std::unique_ptr<CompiledModel> compile_for_cpu(const Model& m, const DriverOptions& o, const LowerOptions& lo = {});

// A model compiled for this CPU that the executable owns: the pass pipeline
// (with o.dims) and compile_for_cpu. `compiled` is what an artifact of it
// needs (driver/artifact.h make_artifact, with `model`); its exe is moved out.
struct OwnedCpuCompile {
  std::shared_ptr<const Model> model;
  std::unique_ptr<CompiledModel> compiled;
  std::unique_ptr<Executable> exe;
};
OwnedCpuCompile compile_owned_for_cpu(std::unique_ptr<Model> m, const DriverOptions& o);

// How a target lowers one group into a kernel its code generator takes;
// throws FusionRejected or LoweringUnsupported (lower_group.h) to make the
// plan change around the group.
using GroupLowering = std::function<LoweredGroup(const FusionGroup&, const OpRegistry&)>;

// Plans and lowers with `lower`, re-planning until every compiled group
// lowers (the nodes it refuses run on the interpreter), then shares
// identical kernels.
CompiledModel lower_model(const Model& m, const GroupLowering& lower, const LowerOptions& lo = {});

// For tests of tessel bisect only: `fault`, when set, may rewrite the loop IR
// of every group lower_model lowers (CPU and CUDA, after the schedule and the
// default hash), so that a test can plant a wrong kernel and check that
// bisect names its group. Nothing outside tests sets it; unset, lowering a
// group pays one check.
using TestKernelFault = std::function<void(const FusionGroup&, loop::Kernel&)>;
void set_test_kernel_fault(TestKernelFault fault);

// Plans and lowers for the CPU without generating code (inspect --emit fused|loop|schedule).
CompiledModel lower_for_cpu(const Model& m, const LowerOptions& lo = {});

// The executable's steps in plan order: interpreter nodes, and kernels whose
// entry points `lookup` gives by kernel name (null lookup: no entry points,
// for planning and printing only).
std::vector<Step> build_steps(const CompiledModel& c, const std::function<KernelEntry(const std::string&)>& lookup);

// Text forms for `tessel inspect --emit llvm|asm`.
std::string emit_cpu_llvm_ir(const CompiledModel& c);
// The LLVM IR of these kernels alone (tessel report: c.unique_kernels, so
// that the repeated layers of a model are optimised once).
std::string emit_cpu_llvm_ir(const std::vector<loop::Kernel>& kernels);
std::string emit_cpu_asm(const CompiledModel& c);

}  // namespace tessel
