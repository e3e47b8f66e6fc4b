#include "tessel/driver/cuda_compiler.h"

#include <chrono>
#include <functional>
#include <iostream>
#include <map>
#include <memory>

#include "tessel/codegen/cuda/driver_api.h"
#include "tessel/codegen/cuda/mma_gemm.h"
#include "tessel/codegen/cuda/nvrtc.h"
#include "tessel/loop/verifier.h"
#include "tessel/lower/lower_gpu.h"
#include "tessel/ops/registry.h"
#include "tessel/support/error.h"
#include "tessel/support/phase_timer.h"

namespace tessel {

bool cuda_flash_attention(const std::vector<Primitive>& knobs) { return knob_int(knobs, "gpu.flash", "on", 1) != 0; }

namespace {

// Why codegen/cuda cannot take `k` (empty: it can).
std::string cuda_refusal(const loop::Kernel& k) {
  try {
    loop::verify(k, loop::Target::Cuda);
    cuda::emit_cuda_source({k});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

LoweredGroup lower_group_ready_for_gpu(const FusionGroup& g, const OpRegistry& reg, const GpuScheduleOptions& opts) {
  GpuScheduleOptions o = opts;
  LoweredGroup lg = lower_group_for_gpu(g, reg, o);
  std::string why = cuda_refusal(lg.kernel);
  if (!why.empty() && lg.schedule == "gpu_attention") {
    o.attention = false;  // the flash kernel refuses it: the composed form instead
    lg = lower_group_for_gpu(g, reg, o);
    why = cuda_refusal(lg.kernel);
  }
  // What the emitter refuses runs on the interpreter.
  if (!why.empty()) throw LoweringUnsupported(str_cat(g.root->describe(), ": no CUDA kernel: ", why));
  return lg;
}

namespace {

// The code generator's template knobs, as it chooses them for `arch`
// (codegen/cuda/mma_gemm.h GemmTarget) without --knob, in the schedule of a
// GEMM or flash-attention kernel.
void add_template_defaults(Schedule& s, const cuda::GemmTarget& t) {
  if (s.kind == "gpu_mma") {
    Primitive& g = s.get("gpu.gemm");
    g.set("wgmma", t.wgmma ? 1 : 0);
    g.set("tma", t.tma ? 1 : 0);
    g.set("tma_min_k", t.tma_min_k);
    g.set("tma_min_k_cheap", t.tma_min_k_cheap);
    g.set("overlap", t.wgmma_overlap ? 1 : 0);
    g.set("fill_blocks", t.fill_blocks);
    g.set("bk", t.bk);
    g.set("stages", t.stages);
    g.set("tma_bn", t.tma_bn);
  } else if (s.kind == "gpu_attention") {
    Primitive& f = s.get("gpu.flash");
    f.set("wgmma", t.flash_wgmma ? 1 : 0);
    f.set("min_keys", t.flash_wgmma_min_keys);
  }
}

// `tuned`'s template knobs over `s` (a record may carry fewer keys than the
// default has; loop primitives are not the GPU's).
void overlay_knobs(const Schedule& tuned, Schedule* s) {
  for (const Primitive& p : tuned.prims)
    if (p.name.find('.') != std::string::npos)
      for (const auto& [k, v] : p.attrs) s->get(p.name).set(k, v);
  check_schedule(*s);
}

// Each distinct kernel's target: the model's (`knobs` over the defaults)
// with its own schedule's gpu.gemm and gpu.flash knobs over that (a tuned
// kernel's differ from the model's).
std::function<cuda::GemmTarget(const loop::Kernel&)> kernel_targets(const CompiledModel& c, const std::string& arch,
                                                                   const std::vector<Primitive>& knobs) {
  auto own = std::make_shared<std::map<std::string, std::vector<Primitive>>>();
  for (const LoweredGroup& lg : c.lowered) own->emplace(lg.kernel.name, kernel_knobs(lg.sched, knobs));
  return [own, arch, knobs](const loop::Kernel& k) {
    auto it = own->find(k.name);
    return cuda::gemm_target_for(arch, it == own->end() ? knobs : it->second);
  };
}

}  // namespace

GpuScheduleOptions gpu_row_options(const Schedule& s, GpuScheduleOptions o) {
  if (const Primitive* rows = s.find("gpu.rows")) {
    o.threads_per_block = rows->int_attr("threads", o.threads_per_block);
    o.lanes = rows->int_attr("lanes", o.lanes ? 1 : 0) != 0;
    o.row_cache = rows->int_attr("row_cache", o.row_cache ? 1 : 0) != 0;
    o.vector_bytes = rows->int_attr("vector_bytes", o.vector_bytes);
  }
  return o;
}

std::vector<Primitive> kernel_knobs(const Schedule& s, const std::vector<Primitive>& knobs) {
  std::vector<Primitive> k = knobs;
  for (const char* name : {"gpu.gemm", "gpu.flash"})
    if (const Primitive* p = s.find(name)) k.push_back(*p);
  return k;
}

namespace {

// The group's default kernel for `arch`: the row schedule's defaults and
// every gpu.* template knob the code generator takes without --knob in its
// schedule. `attention` (gpu.flash.on, a model-wide knob) decides whether
// an Attention group becomes a flash kernel at all, and so the kinds.
LoweredGroup cuda_default(const FusionGroup& g, const OpRegistry& reg, const std::string& arch, bool attention) {
  GpuScheduleOptions base;
  base.attention = attention;
  LoweredGroup def = lower_group_ready_for_gpu(g, reg, base);
  add_template_defaults(def.sched, cuda::gemm_target_for(arch));
  def.default_hash = kernel_hash(def.kernel);
  return def;
}

}  // namespace

LoweredGroup reschedule_cuda_group(const FusionGroup& g, const OpRegistry& reg, const LoweredGroup& def,
                                   const std::optional<Schedule>& tuned, const std::vector<Primitive>& knobs) {
  Schedule s = def.sched;
  if (tuned) overlay_knobs(*tuned, &s);
  apply_knobs(knobs, &s);
  if (s == def.sched) return def;
  LoweredGroup lg = def;
  // The row schedule is the loop IR's; the GEMM and flash knobs are the code
  // generator's (kernel_knobs), so their kernels stay as they are.
  if (s.kind == "gpu") {
    GpuScheduleOptions base;
    base.attention = cuda_flash_attention(knobs);
    lg = lower_group_ready_for_gpu(g, reg, gpu_row_options(s, base));
    TS_CHECK(lg.schedule == def.schedule, "the row schedule made a ", lg.schedule, " kernel of a ", def.schedule,
             " one");
    lg.default_hash = def.default_hash;
  }
  lg.sched = std::move(s);
  return lg;
}

LoweredGroup lower_cuda_group(const FusionGroup& g, const OpRegistry& reg, const std::string& arch,
                              const std::optional<Schedule>& tuned, const std::vector<Primitive>& knobs) {
  return reschedule_cuda_group(g, reg, cuda_default(g, reg, arch, cuda_flash_attention(knobs)), tuned, knobs);
}

CompiledModel lower_for_cuda(const Model& m, const LowerOptions& lo) {
  const std::string arch = default_cuda_arch();
  const ScheduleLookup lookup = lo.schedules;
  const std::vector<Primitive> knobs = lo.knobs;
  const bool attention = cuda_flash_attention(knobs);
  std::ostream* log = lo.log;
  return lower_model(
      m,
      [arch, lookup, knobs, attention, log](const FusionGroup& g, const OpRegistry& reg) {
        LoweredGroup def = cuda_default(g, reg, arch, attention);
        const std::optional<Schedule> tuned = lookup ? lookup(def.default_hash, def.schedule) : std::nullopt;
        if (!tuned) return knobs.empty() ? def : reschedule_cuda_group(g, reg, def, std::nullopt, knobs);
        try {
          return reschedule_cuda_group(g, reg, def, tuned, knobs);
        } catch (const Error& e) {
          // A tuned record that does not apply is a warning (the file may be
          // old or edited); a --knob value that does not apply stays an
          // error, or re-plans the group, as it did before knobs could come
          // per kernel.
          (log ? *log : std::cerr) << "warning: tuned schedule for " << g.name << " not applied: " << e.what()
                                   << "\n";
          return knobs.empty() ? def : reschedule_cuda_group(g, reg, def, std::nullopt, knobs);
        }
      },
      lo);
}

std::string cuda_compile_summary(const CudaCompiledModel& c) {
  return str_cat(c.lowered.lowered.size(), " groups, ", c.lowered.unique_kernels.size(), " distinct kernels",
                 c.from_cache ? " (cubin from the cache)" : "");
}

std::string default_cuda_arch() { return cuda::cuda_available() ? cuda::device_arch() : "sm_90a"; }

std::unique_ptr<CudaCompiledModel> compile_cuda_kernels(const Model& m, const std::string& arch,
                                                        const LowerOptions& lo) {
  const auto t0 = std::chrono::steady_clock::now();
  auto c = std::make_unique<CudaCompiledModel>();
  c->lowered = lower_for_cuda(m, lo);
  c->arch = arch.empty() ? default_cuda_arch() : arch;
  // One source and one NVRTC call for all kernels: progress can only say
  // which step runs.
  const auto n = static_cast<int64_t>(c->lowered.unique_kernels.size());
  if (lo.progress) lo.progress->start("emit CUDA C++", "kernels", n);
  {
    PhaseTimer t("emit CUDA C++");
    c->source = cuda::emit_cuda_source(c->lowered.unique_kernels, kernel_targets(c->lowered, c->arch, lo.knobs));
  }
  if (!c->lowered.unique_kernels.empty()) {
    if (lo.progress) lo.progress->start("NVRTC for " + c->arch, "kernels", n);
    PhaseTimer t("NVRTC");
    cuda::NvrtcOptions no;
    no.arch = c->arch;
    no.cache_dir = cache_dir();
    cuda::Cubin cubin = cuda::compile_to_cubin(c->source.code, no);
    c->cubin = std::move(cubin.image);
    c->from_cache = cubin.from_cache;
    if (lo.progress) lo.progress->set_done(n);
  }
  c->compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return c;
}

namespace {

// Per step: the function and geometry of its kernel's distinct body.
std::vector<GpuLaunch> step_launches(const CudaCompiledModel& c, const std::vector<Step>& steps,
                                     const cuda::Module* module) {
  std::map<std::string, GpuLaunch> by_entry;
  for (const cuda::KernelSource& k : c.source.kernels) by_entry[k.kernel_name] = prepare_launch(k, *module);
  std::vector<GpuLaunch> out;
  for (const Step& s : steps) {
    if (!s.kernel) {
      out.emplace_back();
      continue;
    }
    auto e = c.lowered.entry.find(s.kernel->name);
    const std::string& entry = e == c.lowered.entry.end() ? s.kernel->name : e->second;
    out.push_back(by_entry.at(entry));
  }
  return out;
}

}  // namespace

std::unique_ptr<CudaCompiledModel> compile_for_cuda(const Model& m, const DriverOptions& o) {
  check_cuda_usable();
  const auto t0 = std::chrono::steady_clock::now();
  Progress progress(o.progress, "compile");
  LowerOptions lo = lower_options(o);
  if (progress.enabled()) lo.progress = &progress;
  std::unique_ptr<CudaCompiledModel> c = compile_cuda_kernels(m, cuda::device_arch(), lo);
  GpuExecutableOptions eo;
  eo.memory_planning = o.memory_planning;
  load_cuda_executable(m, *c, eo);
  c->compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  progress.finish(cuda_compile_summary(*c));
  return c;
}

void load_cuda_executable(const Model& m, CudaCompiledModel& c, const GpuExecutableOptions& eo) {
  PhaseTimer t("load the module");
  std::shared_ptr<const cuda::Module> module;  // none when every node runs on the interpreter
  if (!c.cubin.empty()) module = std::make_shared<const cuda::Module>(c.cubin);
  std::vector<Step> steps = build_steps(c.lowered, nullptr);
  std::vector<GpuLaunch> launches = step_launches(c, steps, module.get());
  c.exe = std::make_unique<GpuExecutable>(m, std::move(steps), std::move(launches), std::move(module), eo);
}

std::string emit_cuda(const Model& m, const std::string& arch, const LowerOptions& lo) {
  const std::string a = arch.empty() ? default_cuda_arch() : arch;
  const CompiledModel c = lower_for_cuda(m, lo);
  return cuda::emit_cuda_source(c.unique_kernels, kernel_targets(c, a, lo.knobs)).code;
}

std::string emit_ptx(const Model& m, const std::string& arch, const LowerOptions& lo) {
  cuda::NvrtcOptions o;
  o.arch = arch.empty() ? default_cuda_arch() : arch;
  return cuda::compile_to_ptx(emit_cuda(m, o.arch, lo), o);
}

void check_cuda_usable() {
  std::string why;
  TS_CHECK(cuda::cuda_available(&why), "--target cuda: no usable NVIDIA GPU: ", why);
}

}  // namespace tessel
