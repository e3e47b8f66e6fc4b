// The CUDA path of the driver: a model's fusion groups lowered for the GPU
// (lower/lower_gpu.h), one CUDA C++ translation unit for the distinct
// kernels, NVRTC to a cubin (cached on disk), and the GPU runtime
// (runtime/cuda/gpu_executable.h). Compiling needs NVRTC only; loading and
// running need a GPU.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "tessel/codegen/cuda/cuda_source.h"
#include "tessel/driver/compiler.h"
#include "tessel/runtime/cuda/gpu_executable.h"
#include "tessel/schedule/gpu_schedule.h"

namespace tessel {

// Whether the CUDA path fuses attention into flash-attention kernels
// (PassOptions::fuse_attention, GpuScheduleOptions::attention): yes unless
// --knob gpu.flash.on=0 (the composed lowering, to compare against).
bool cuda_flash_attention(const std::vector<Primitive>& knobs = {});

// One group as a GPU kernel: GPU nest and schedule, verified for CUDA.
// Throws what lower_group throws, so that the plan changes around it. An
// attention statement the flash kernel does not take (f32 operands, head
// sizes) keeps the Attention node's composed lowering.
LoweredGroup lower_group_ready_for_gpu(const FusionGroup& g, const OpRegistry& reg, const GpuScheduleOptions& o);

// The row schedule a kernel's gpu.rows knob (threads, lanes, row_cache,
// vector_bytes) asks for, over `o`.
GpuScheduleOptions gpu_row_options(const Schedule& s, GpuScheduleOptions o = {});

// What the code generator takes for a kernel of schedule `s`: the model's
// `knobs` with the schedule's gpu.gemm and gpu.flash knobs over them
// (cuda::gemm_target_for).
std::vector<Primitive> kernel_knobs(const Schedule& s, const std::vector<Primitive>& knobs);

// One group for the GPU with its own schedule: the default (whose kernel's
// structural hash is LoweredGroup::default_hash, what the tuning database is
// keyed by; its schedule holds every gpu.* knob with the value the code
// generator takes for `arch`), then `tuned`'s knobs over it, then `knobs`
// (--knob; gpu.flash.on decides whether attention is fused at all). A
// gpu.rows knob re-lowers the group with that row schedule; gpu.gemm and
// gpu.flash reach the code generator through kernel_knobs. Throws what
// lower_group_ready_for_gpu throws, tessel::Error when `tuned` does not apply.
LoweredGroup lower_cuda_group(const FusionGroup& g, const OpRegistry& reg, const std::string& arch,
                              const std::optional<Schedule>& tuned, const std::vector<Primitive>& knobs);
// The same over `def`, that group's default as lower_cuda_group (or
// lower_for_cuda without schedules) made it: what a tuner that keeps the
// default calls per candidate instead of lowering the default again.
LoweredGroup reschedule_cuda_group(const FusionGroup& g, const OpRegistry& reg, const LoweredGroup& def,
                                   const std::optional<Schedule>& tuned, const std::vector<Primitive>& knobs);

// Plans and lowers every group for the GPU (lower_cuda_group, with the tuned
// schedule lo.schedules gives for its default kernel and lo.knobs; a tuned
// schedule that does not apply is a warning on lo.log and the default
// stays); groups the GPU lowering refuses run on the host interpreter.
CompiledModel lower_for_cuda(const Model& m, const LowerOptions& lo = {});

struct CudaCompiledModel {
  CompiledModel lowered;    // plan, kernels, the distinct ones and the entry map
  cuda::CudaSource source;  // the distinct kernels' source, one KernelSource each
  std::string arch;         // what the cubin was compiled for (sm_90a, ...)
  std::string cubin;
  bool from_cache = false;  // the cubin came from the disk cache
  double compile_s = 0;
  std::unique_ptr<GpuExecutable> exe;  // compile_for_cuda only
};

// The final progress line's summary of a compile: groups, kernels, cache.
std::string cuda_compile_summary(const CudaCompiledModel& c);

// The architecture to compile for: device 0's when there is one, else sm_90a.
std::string default_cuda_arch();

// Lowers `m` (after the pass pipeline) and compiles every distinct kernel
// with NVRTC for `arch` ("" = default_cuda_arch()). Needs no GPU.
std::unique_ptr<CudaCompiledModel> compile_cuda_kernels(const Model& m, const std::string& arch,
                                                        const LowerOptions& lo = {});

// compile_cuda_kernels for device 0, the cubin loaded, with its executable.
// Throws one clear error where there is no usable GPU. `m` must outlive it.
std::unique_ptr<CudaCompiledModel> compile_for_cuda(const Model& m, const DriverOptions& o);

// Loads c.cubin on device 0 and sets c.exe (what compile_for_cuda does after
// compile_cuda_kernels). `m` must be the model c was lowered from.
void load_cuda_executable(const Model& m, CudaCompiledModel& c, const GpuExecutableOptions& eo = {});

// Text forms for `tessel inspect --emit cuda|ptx`, with the schedules of `lo`
// (lower_options: --tuning-db, --knob); arch "" = default_cuda_arch() (the
// CUDA source depends on it: wgmma GEMMs for sm_90a).
std::string emit_cuda(const Model& m, const std::string& arch, const LowerOptions& lo = {});
std::string emit_ptx(const Model& m, const std::string& arch, const LowerOptions& lo = {});

// Throws, saying what is missing, when --target cuda cannot run here (no
// driver, no device).
void check_cuda_usable();

}  // namespace tessel
