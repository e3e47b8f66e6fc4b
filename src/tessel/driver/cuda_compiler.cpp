#include "tessel/driver/cuda_compiler.h"

#include <chrono>
#include <functional>
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

GpuScheduleOptions gpu_schedule_options(const std::vector<Primitive>& knobs) {
  GpuScheduleOptions o;
  o.attention = cuda_flash_attention(knobs);
  o.threads_per_block = knob_int(knobs, "gpu.rows", "threads", o.threads_per_block);
  o.lanes = knob_int(knobs, "gpu.rows", "lanes", o.lanes ? 1 : 0) != 0;
  o.row_cache = knob_int(knobs, "gpu.rows", "row_cache", o.row_cache ? 1 : 0) != 0;
  o.vector_bytes = knob_int(knobs, "gpu.rows", "vector_bytes", o.vector_bytes);
  return o;
}

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

// The code generator's template knobs, as it will choose them for `arch`
// (codegen/cuda/mma_gemm.h GemmTarget), in each kernel's schedule.
void add_gpu_template_knobs(CompiledModel& c, const std::string& arch, const std::vector<Primitive>& knobs) {
  const cuda::GemmTarget t = cuda::gemm_target_for(arch, knobs);
  for (LoweredGroup& lg : c.lowered) {
    if (lg.schedule == "gpu_mma") {
      Primitive& g = lg.sched.get("gpu.gemm");
      g.set("wgmma", t.wgmma ? 1 : 0);
      g.set("tma", t.tma ? 1 : 0);
      g.set("tma_min_k", t.tma_min_k);
      g.set("tma_min_k_cheap", t.tma_min_k_cheap);
      g.set("overlap", t.wgmma_overlap ? 1 : 0);
      g.set("fill_blocks", t.fill_blocks);
    } else if (lg.schedule == "gpu_attention") {
      Primitive& f = lg.sched.get("gpu.flash");
      f.set("wgmma", t.flash_wgmma ? 1 : 0);
      f.set("min_keys", t.flash_wgmma_min_keys);
    }
  }
}

// Each distinct kernel's target: the model's (`knobs` over the defaults)
// with its own schedule's gpu.gemm and gpu.flash knobs over that (a tuned
// kernel's differ from the model's).
std::function<cuda::GemmTarget(const loop::Kernel&)> kernel_targets(const CompiledModel& c, const std::string& arch,
                                                                   const std::vector<Primitive>& knobs) {
  auto own = std::make_shared<std::map<std::string, std::vector<Primitive>>>();
  for (const LoweredGroup& lg : c.lowered) {
    std::vector<Primitive> k = knobs;
    for (const char* name : {"gpu.gemm", "gpu.flash"})
      if (const Primitive* p = lg.sched.find(name)) k.push_back(*p);
    own->emplace(lg.kernel.name, std::move(k));
  }
  return [own, arch, knobs](const loop::Kernel& k) {
    auto it = own->find(k.name);
    return cuda::gemm_target_for(arch, it == own->end() ? knobs : it->second);
  };
}

}  // namespace

CompiledModel lower_for_cuda(const Model& m, const LowerOptions& lo) {
  const GpuScheduleOptions o = gpu_schedule_options(lo.knobs);
  CompiledModel c = lower_model(
      m, [o](const FusionGroup& g, const OpRegistry& reg) { return lower_group_ready_for_gpu(g, reg, o); }, lo);
  add_gpu_template_knobs(c, default_cuda_arch(), lo.knobs);
  return c;
}

std::string default_cuda_arch() { return cuda::cuda_available() ? cuda::device_arch() : "sm_90a"; }

std::unique_ptr<CudaCompiledModel> compile_cuda_kernels(const Model& m, const std::string& arch,
                                                        const LowerOptions& lo) {
  const auto t0 = std::chrono::steady_clock::now();
  auto c = std::make_unique<CudaCompiledModel>();
  c->lowered = lower_for_cuda(m, lo);
  c->arch = arch.empty() ? default_cuda_arch() : arch;
  {
    PhaseTimer t("emit CUDA C++");
    c->source = cuda::emit_cuda_source(c->lowered.unique_kernels, kernel_targets(c->lowered, c->arch, lo.knobs));
  }
  if (!c->lowered.unique_kernels.empty()) {
    PhaseTimer t("NVRTC");
    cuda::NvrtcOptions no;
    no.arch = c->arch;
    no.cache_dir = cache_dir();
    cuda::Cubin cubin = cuda::compile_to_cubin(c->source.code, no);
    c->cubin = std::move(cubin.image);
    c->from_cache = cubin.from_cache;
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
  LowerOptions lo;
  lo.knobs = o.knobs;
  std::unique_ptr<CudaCompiledModel> c = compile_cuda_kernels(m, cuda::device_arch(), lo);
  PhaseTimer t("load the module");
  std::shared_ptr<const cuda::Module> module;  // none when every node runs on the interpreter
  if (!c->cubin.empty()) module = std::make_shared<const cuda::Module>(c->cubin);
  std::vector<Step> steps = build_steps(c->lowered, nullptr);
  std::vector<GpuLaunch> launches = step_launches(*c, steps, module.get());
  GpuExecutableOptions eo;
  eo.memory_planning = o.memory_planning;
  c->exe = std::make_unique<GpuExecutable>(m, std::move(steps), std::move(launches), std::move(module), eo);
  c->compile_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return c;
}

std::string emit_cuda(const Model& m, const std::string& arch, const std::vector<Primitive>& knobs) {
  const std::string a = arch.empty() ? default_cuda_arch() : arch;
  LowerOptions lo;
  lo.knobs = knobs;
  const CompiledModel c = lower_for_cuda(m, lo);
  return cuda::emit_cuda_source(c.unique_kernels, kernel_targets(c, a, knobs)).code;
}

std::string emit_ptx(const Model& m, const std::string& arch, const std::vector<Primitive>& knobs) {
  cuda::NvrtcOptions o;
  o.arch = arch.empty() ? default_cuda_arch() : arch;
  return cuda::compile_to_ptx(emit_cuda(m, o.arch, knobs), o);
}

void check_cuda_usable() {
  std::string why;
  TS_CHECK(cuda::cuda_available(&why), "--target cuda: no usable NVIDIA GPU: ", why);
}

}  // namespace tessel
