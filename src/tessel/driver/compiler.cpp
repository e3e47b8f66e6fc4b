#include "tessel/driver/compiler.h"
#include "tessel/driver/session.h"
#include "tessel/driver/tuning.h"

#include <chrono>
#include <cstdio>
#include <iostream>
#include <set>
#include <unordered_map>

#include "tessel/loop/hash.h"
#include "tessel/loop/math_expand.h"
#include "tessel/loop/split_borders.h"
#include "tessel/loop/simplify.h"
#include "tessel/loop/verifier.h"
#include "tessel/loop/visit.h"
#include "tessel/lower/lower_group.h"
#include "tessel/ops/registry.h"
#include "tessel/schedule/gemm.h"
#include "tessel/support/error.h"
#include "tessel/support/phase_timer.h"
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
      auto e = c.entry.find(lg.kernel.name);
      const std::string& entry = e == c.entry.end() ? lg.kernel.name : e->second;
      s.kernel = kernel_step(lg, g, lookup ? lookup(entry) : nullptr);
    }
    steps.push_back(std::move(s));
  }
  return steps;
}

namespace {

// Everything lower_group reads of a group but its name: the root, which of
// its outputs is stored, the members and the inputs (whose order numbers the
// params). Two rounds' groups with the same key lower to the same kernel.
using GroupKey = std::vector<const void*>;

GroupKey group_key(const FusionGroup& g) {
  GroupKey k{g.root, reinterpret_cast<const void*>(g.root_output), reinterpret_cast<const void*>(g.nodes.size())};
  k.insert(k.end(), g.nodes.begin(), g.nodes.end());
  k.insert(k.end(), g.inputs.begin(), g.inputs.end());
  return k;
}

// Whether a convolution-like node is wide enough for the host's vectors
// (see host_schedule): a GEMM convolution over at least 8 vectors of output
// positions an image, a depthwise one always (its kernel takes vectors no
// wider than its rows), another grouped one whose output rows hold a whole
// vector (its nest vectorizes along a row). False when not static.
[[maybe_unused]] bool wide_enough_for(const Node& n, int lanes) {
  const Value* y = n.outputs.empty() ? nullptr : n.outputs[0];
  if (!y || !y->type.has_shape() || y->type.shape->size() < 3) return false;
  int64_t positions = 1;
  for (size_t d = 2; d < y->type.shape->size(); ++d) {
    const Dim& dim = (*y->type.shape)[d];
    if (!dim.is_const()) return false;
    positions *= dim.value();
  }
  if (n.op == "Conv" && n.attr_int("group", 1) != 1) {
    // A depthwise kernel fits its vectors to its rows (lower/conv_depthwise.cpp).
    const Value* w = n.inputs.size() > 1 ? n.inputs[1] : nullptr;
    if (w && w->type.has_shape() && w->type.shape->size() == 4 && (*w->type.shape)[1].is_const() &&
        (*w->type.shape)[1].value() == 1)
      return true;
    return y->type.shape->back().value() >= lanes;
  }
  if (conv_rows_are_positions(n)) return true;  // its vectors run over the output channels
  return positions >= 8 * int64_t{lanes};
}

// The default schedule, with this machine's vector width, registers and
// caches for the GEMM blocking of MatMul and Gemm groups (the kernels are
// compiled for the host CPU): on an AVX-512 machine an 8 x 32 micro-kernel
// over zmm registers instead of AVX2's 6 x 16. Paired runs on the
// development machine (Zen 5, 2026-12-05, separate kernel caches): BERT
// 151.8 -> 138.7-143.2 ms, Llama 47.5 -> 45.4 ms. Results are the same bit
// for bit either way (every output is one chain of fmas over k ascending,
// whatever the blocking).
//
// Convolutions take it only where they are wide enough (wide_enough_for).
// Measured per kernel on a Zen 4 (2026-12-07, best of three `bench
// --profile` runs of each blocking, 2 threads), once B's packing copied
// rows (pad_conv_inputs, subsample_conv_inputs) instead of gathering:
// ResNet-50's 3x3 convs at 56x56, 28x28 and 14x14 1.66-2.08 -> 1.45-1.81 ms
// and its stem 2.71 -> 2.27 ms with zmm tiles, but its 7x7 layer-4 3x3
// convs 2.00-2.42 -> 3.13-3.31 ms and its residual 1x1s there 0.97 ->
// 1.42-1.46 ms (a 32-wide tile over 49 positions); MobileNet-V2's
// depthwise convs with 14-wide rows 3-4x slower with 16 lanes (no whole
// vector in a row), those with 28- to 112-wide rows faster. The tuner
// searches both widths either way.
// (Without LLVM there is no CPU code generator, and so no host features.)
// `target`: the CPU of compile --cpu, else the host's.
NestSchedule host_schedule(const FusionGroup& g, const std::optional<CpuInfo>& target) {
  NestSchedule s = default_schedule(g);
#ifdef TESSEL_HAVE_LLVM
  static const CpuInfo host = host_cpu_info(cpu::host_cpu_features());
  const CpuInfo& cpu = target ? *target : host;
  for (const Node* n : g.nodes)
    if ((n->op == "Conv" || n->op == "ConvTranspose" || n->op == "Im2Col") && !wide_enough_for(*n, cpu.vector_lanes_f32))
      return s;
  s.cpu = cpu;
#else
  (void)target;
#endif
  return s;
}

// Expanded, simplified and verified: a kernel codegen can take. Nest
// kernels (elementwise, movement, pooling) get their window borders split
// off, so that LLVM vectorizes their interiors.
void make_ready(const FusionGroup& g, LoweredGroup& lg) {
  lg.kernel = loop::simplify(loop::expand_math(lg.kernel));
  if (lg.schedule == "nest") lg.kernel = loop::split_borders(lg.kernel);
  std::string why;
  if (!codegen_ready(lg.kernel, &why)) throw LoweringUnsupported(str_cat(g.root->describe(), ": ", why));
  loop::verify(lg.kernel);
}

}  // namespace

// The tuning database's key (loop/hash.h): name-independent, so a kernel
// keeps its tuned schedule whatever its group is called.
std::string kernel_hash(const loop::Kernel& k) { return loop::structural_hash(k).hex(); }

LoweredGroup lower_cpu_group(const FusionGroup& g, const OpRegistry& reg, const std::optional<Schedule>& tuned,
                             const std::optional<CpuInfo>& cpu) {
  NestSchedule s = host_schedule(g, cpu);
  LoweredGroup def = lower_group(g, reg, s);
  make_ready(g, def);
  def.default_hash = kernel_hash(def.kernel);
  if (!tuned) return def;
  s.tuned = tuned;
  LoweredGroup lg = lower_group(g, reg, s);
  make_ready(g, lg);
  lg.default_hash = def.default_hash;
  return lg;
}

namespace {

// The default schedules for `cpu` (the host's when unset). Throws
// FusionRejected or LoweringUnsupported like lower_group.
GroupLowering lower_ready(const std::optional<CpuInfo>& cpu) {
  return [cpu](const FusionGroup& g, const OpRegistry& reg) { return lower_cpu_group(g, reg, {}, cpu); };
}

// A conv_gemm schedule's orientation ("" for other kinds).
std::string conv_rows(const Schedule& s) {
  const Primitive* p = s.find("conv.gemm");
  return p ? p->attr("rows").value_or("") : "";
}

// lower_ready, with the tuned schedule `lookup` (when set) has for the
// group's default kernel and the --knob values over it; a schedule that
// fails to apply is a warning and the default stays.
GroupLowering lower_tuned(const ScheduleLookup& lookup, const std::vector<Primitive>& knobs, std::ostream* log,
                          const std::optional<CpuInfo>& cpu) {
  return [lookup, knobs, log, cpu](const FusionGroup& g, const OpRegistry& reg) {
    LoweredGroup def = lower_cpu_group(g, reg, {}, cpu);
    std::optional<Schedule> tuned = lookup ? lookup(def.default_hash, def.schedule) : std::nullopt;
    Schedule s = tuned ? *tuned : def.sched;
    const bool knobbed = apply_knobs(knobs, &s);
    // A knob that turns a conv's GEMM around (conv.gemm rows=...) makes the
    // default's tile, blocks and packing the other orientation's: the
    // lowering picks them again, under the knobs alone.
    if (!tuned && knobbed && conv_rows(s) != conv_rows(def.sched)) {
      s = Schedule{def.sched.kind, {}};
      apply_knobs(knobs, &s);
    }
    if (!tuned && !knobbed) return def;
    try {
      return lower_cpu_group(g, reg, s, cpu);
    } catch (const Error& e) {
      (log ? *log : std::cerr) << "warning: " << (tuned ? "tuned schedule" : "--knob") << " for " << g.name
                               << " not applied: " << e.what() << "\n";
      return def;
    }
  };
}

TestKernelFault& test_kernel_fault() {
  static TestKernelFault fault;
  return fault;
}

// A failed lowering decides what the next round plans differently.
struct Replan {
  std::set<const Node*> opaque, roots;
  std::vector<std::string>* reasons;

  void rejected(const FusionRejected& r) { roots.insert(r.node); }
  void unsupported(const LoweringUnsupported& u, const FusionGroup& g) {
    if (u.node) {
      opaque.insert(u.node);
    } else {
      for (const Node* n : g.nodes) opaque.insert(n);
    }
    reasons->push_back(u.what());
  }
};

// Lowers the plan's compiled groups in order into `out`, taking groups of
// earlier rounds from `memo`. False after the first group that fails (its
// failure recorded in `replan`): the plan must be redone.
bool lower_plan(const FusionPlan& plan, const OpRegistry& reg, const GroupLowering& lower,
                std::map<GroupKey, LoweredGroup>* memo, Replan* replan, std::vector<LoweredGroup>* out,
                Progress* progress) {
  for (const FusionGroup& g : plan.groups) {
    if (!g.compiled) continue;
    const GroupKey key = memo ? group_key(g) : GroupKey{};
    if (memo) {
      if (auto it = memo->find(key); it != memo->end()) {
        out->push_back(it->second);
        out->back().kernel.name = g.name;  // names number the groups of this plan
        continue;
      }
    }
    try {
      out->push_back(lower(g, reg));
      if (test_kernel_fault()) test_kernel_fault()(g, out->back().kernel);
    } catch (const FusionRejected& r) {
      replan->rejected(r);
      return false;
    } catch (const LoweringUnsupported& u) {
      replan->unsupported(u, g);
      return false;
    }
    if (memo) memo->emplace(key, out->back());
    if (progress) progress->advance();
  }
  return true;
}

size_t compiled_groups(const FusionPlan& plan) {
  size_t n = 0;
  for (const FusionGroup& g : plan.groups) n += g.compiled;
  return n;
}

// Structurally equal kernels (loop/hash.h) compute the same function of
// their params and share the first one's code. The names the structural
// hash ignores do not reach the caller: buffers are bound by position
// (KernelStep::params are the group's own), and each step keeps its own
// syms, parallel extent and assert messages. Sym names, which the runtimes
// bind by name (a CUDA launch's grid), are part of it. Keyed by the
// canonical encoding itself, which structural_hash hashes: the table
// buckets by a hash of it and confirms by comparing it whole (so a
// collision never merges two kernels), and each kernel is encoded once.
void share_identical_kernels(CompiledModel& c, bool share) {
  std::unordered_map<std::string, std::string> first;  // canonical encoding -> name of its first kernel
  for (const LoweredGroup& lg : c.lowered) {
    const std::string& name = lg.kernel.name;
    if (share) {
      auto [it, fresh] = first.emplace(loop::canonical_encoding(lg.kernel), name);
      c.entry[name] = it->second;
      if (!fresh) continue;
    } else {
      c.entry[name] = name;
    }
    c.unique_kernels.push_back(lg.kernel);
  }
}

}  // namespace

void set_test_kernel_fault(TestKernelFault fault) { test_kernel_fault() = std::move(fault); }

CompiledModel lower_model(const Model& m, const GroupLowering& lower, const LowerOptions& lo) {
  const OpRegistry& reg = OpRegistry::global();
  CompiledModel c;
  Replan replan{{}, {}, &c.fallback_reasons};
  std::map<GroupKey, LoweredGroup> memo;
  PhaseTimer timer("plan and lower");
  int rounds = 0;
  // Re-plan until every compiled group lowers; each round removes at least
  // one node from compilation, so this ends.
  // Progress counts the groups lowered afresh against the current plan's
  // groups: a re-plan keeps the count (its earlier groups come from the
  // memo) and may change the total; the last plan's groups are all done.
  do {
    ++rounds;
    c.plan = plan_fusion(*m.graph, reg, replan.opaque, replan.roots);
    c.lowered.clear();
    const auto groups = static_cast<int64_t>(compiled_groups(c.plan));
    if (lo.progress && rounds == 1) lo.progress->start("lower", "groups", groups);
    if (lo.progress) lo.progress->set_total(groups);
  } while (!lower_plan(c.plan, reg, lower, lo.reuse_lowered_groups ? &memo : nullptr, &replan, &c.lowered,
                       lo.progress));
  if (lo.progress) lo.progress->set_done(static_cast<int64_t>(c.lowered.size()));
  timer.stop();
  PhaseTimer dedup("share identical kernels");
  share_identical_kernels(c, lo.share_kernels);
  if (phase_timings_enabled())
    std::fprintf(stderr, "[time] %d plan rounds, %zu groups lowered, %zu kernels, %zu distinct\n", rounds,
                 lo.reuse_lowered_groups ? memo.size() : c.lowered.size(), c.lowered.size(), c.unique_kernels.size());
  return c;
}

CompiledModel lower_for_cpu(const Model& m, const LowerOptions& lo) {
  const bool tuned = lo.schedules || !lo.knobs.empty();
  return lower_model(m, tuned ? lower_tuned(lo.schedules, lo.knobs, lo.log, lo.cpu) : lower_ready(lo.cpu), lo);
}

LowerOptions lower_options(const DriverOptions& o) {
  LowerOptions lo;
  // The records of the machine the kernels are for: this CPU (and thread
  // count), or device 0 for --target cuda (none without one: a warning).
  if (!o.tuning_db.empty() && o.target != Target::Reference)
    lo.schedules = tuning_db_lookup(o.tuning_db, host_fingerprint(o.target, o.threads), o.log);
  lo.knobs = o.knobs;
  lo.log = o.log;
#ifdef TESSEL_HAVE_LLVM
  if (o.cpu != "host") lo.cpu = host_cpu_info(cpu::cpu_features_for(o.cpu));  // this machine's caches: a guess
#endif
  return lo;
}

std::unique_ptr<CompiledModel> compile_for_cpu(const Model& m, const DriverOptions& o, const LowerOptions& lo) {
#ifndef TESSEL_HAVE_LLVM
  (void)m;
  (void)o;
  (void)lo;
  fail("this tessel was built without the LLVM CPU code generator (TESSEL_WITH_LLVM=OFF); use --target reference");
#else
  const auto t0 = std::chrono::steady_clock::now();
  Progress progress(o.progress, "compile");
  LowerOptions tuned = lo;
  const LowerOptions asked = lower_options(o);
  if (!tuned.schedules) tuned.schedules = asked.schedules;
  if (tuned.knobs.empty()) tuned.knobs = asked.knobs;
  if (!tuned.cpu) tuned.cpu = asked.cpu;
  if (progress.enabled()) tuned.progress = &progress;
  // The host, or the CPU of --cpu (whose code this host may not be able to
  // run: such an executable is for an artifact).
  const std::string features = cpu::cpu_features_for(o.cpu);
  auto c = std::make_unique<CompiledModel>(lower_for_cpu(m, tuned));
  std::shared_ptr<cpu::KernelLibrary> lib;
  const std::vector<loop::Kernel>& kernels = c->unique_kernels;
  if (!kernels.empty()) {
    cpu::CodegenOptions co;
    co.cpu = o.cpu;
    co.features = features;
    co.cache_dir = cache_dir();
    if (progress.enabled()) {
      co.on_step = [&](const char* step, size_t n) { progress.start(step, "kernels", static_cast<int64_t>(n)); };
      co.on_kernel = [&] { progress.advance(); };
    }
    PhaseTimer t("codegen");
    lib = cpu::compile_kernels(kernels, co);
    c->from_cache = lib->loaded_from_cache();
    c->object = lib->object_file_bytes();
  }
  c->cpu_name = o.cpu == "host" ? cpu::host_cpu_name() : o.cpu;
  c->cpu_features = features;
  std::vector<Step> steps =
      build_steps(*c, [&](const std::string& name) { return reinterpret_cast<KernelEntry>(lib->lookup(name)); });
  ExecutableOptions eo;
  eo.threads = o.threads;
  eo.memory_planning = o.memory_planning;
  c->exe = std::make_unique<Executable>(m, std::move(steps), lib, eo);
  c->compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  progress.finish(str_cat(c->lowered.size(), " groups, ", kernels.size(), " distinct kernels",
                          c->from_cache ? " (code from the cache)" : ""));
  return c;
#endif
}

std::string emit_cpu_llvm_ir(const CompiledModel& c) { return emit_cpu_llvm_ir(c.kernels()); }

std::string emit_cpu_llvm_ir(const std::vector<loop::Kernel>& kernels) {
#ifdef TESSEL_HAVE_LLVM
  return cpu::emit_llvm_ir(kernels, cpu::CodegenOptions{});
#else
  (void)kernels;
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

OwnedCpuCompile compile_owned_for_cpu(std::unique_ptr<Model> m, const DriverOptions& o) {
  TS_CHECK(m && m->graph, "compile: no model");
  compile_model(*m, o.dims, o);
  OwnedCpuCompile r;
  r.model = std::move(m);
  r.compiled = compile_for_cpu(*r.model, o);
  r.exe = std::move(r.compiled->exe);
  r.exe->retain(r.model);
  return r;
}

}  // namespace tessel
