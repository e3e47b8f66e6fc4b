#include "tessel/driver/cuda_compiler.h"

#include "tessel/codegen/cuda/cuda_source.h"
#include "tessel/codegen/cuda/driver_api.h"
#include "tessel/codegen/cuda/nvrtc.h"
#include "tessel/lower/lower_gpu.h"
#include "tessel/ops/registry.h"
#include "tessel/schedule/gpu_schedule.h"
#include "tessel/support/error.h"

namespace tessel {

std::vector<loop::Kernel> gpu_kernels(const CompiledModel& c) {
  std::vector<loop::Kernel> ks;
  size_t next = 0;
  for (const FusionGroup& g : c.plan.groups) {
    if (!g.compiled) continue;
    const loop::Kernel& cpu_kernel = c.lowered.at(next++).kernel;
    try {
      ks.push_back(lower_group_for_gpu(g, OpRegistry::global()).kernel);
    } catch (const Error&) {
      // The GPU nest can refuse what the CPU schedules took (the plan was
      // made for them); the CPU kernel still runs, one row per thread.
      ks.push_back(schedule_for_gpu(cpu_kernel));
    }
  }
  return ks;
}

std::string default_cuda_arch() { return cuda::cuda_available() ? cuda::device_arch() : "sm_90a"; }

std::string emit_cuda(const CompiledModel& c) { return cuda::emit_cuda_source(gpu_kernels(c)).code; }

std::string emit_ptx(const CompiledModel& c, const std::string& arch) {
  cuda::NvrtcOptions o;
  o.arch = arch.empty() ? default_cuda_arch() : arch;
  return cuda::compile_to_ptx(emit_cuda(c), o);
}

void fail_target_cuda() {
  std::string why;
  TS_CHECK(cuda::cuda_available(&why), "--target cuda: no usable NVIDIA GPU: ", why);
  const cuda::DeviceInfo& d = cuda::device_info();
  fail("CUDA target not available yet for whole models (found ", d.name, ", ", cuda::device_arch(),
       "); tessel inspect --emit cuda|ptx shows the kernels");
}

}  // namespace tessel
