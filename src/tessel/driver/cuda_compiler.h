// The CUDA path of the driver: a model's fusion groups lowered for the GPU
// (lower/lower_gpu.h), one CUDA C++ translation unit for the distinct
// kernels, NVRTC to a cubin (cached on disk), and the GPU runtime
// (runtime/cuda/gpu_executable.h). Compiling needs NVRTC only; loading and
// running need a GPU.
#pragma once

#include <memory>
#include <string>

#include "tessel/codegen/cuda/cuda_source.h"
#include "tessel/driver/compiler.h"
#include "tessel/runtime/cuda/gpu_executable.h"
#include "tessel/schedule/gpu_schedule.h"

namespace tessel {

// Whether the CUDA path fuses attention into flash-attention kernels
// (PassOptions::fuse_attention, GpuScheduleOptions::attention): yes unless
// --knob gpu.flash.on=0 (the composed lowering, to compare against).
bool cuda_flash_attention(const std::vector<Primitive>& knobs = {});

// The GPU row schedule's options with the --knob values gpu.rows.* (threads,
// lanes, row_cache, vector_bytes) and gpu.flash.on.
GpuScheduleOptions gpu_schedule_options(const std::vector<Primitive>& knobs = {});

// One group as a GPU kernel: GPU nest and schedule, verified for CUDA.
// Throws what lower_group throws, so that the plan changes around it. An
// attention statement the flash kernel does not take (f32 operands, head
// sizes) keeps the Attention node's composed lowering.
LoweredGroup lower_group_ready_for_gpu(const FusionGroup& g, const OpRegistry& reg,
                                       const GpuScheduleOptions& o = gpu_schedule_options());

// Plans and lowers every group for the GPU (with lo.knobs); groups the GPU
// lowering refuses run on the host interpreter.
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

// The architecture to compile for: device 0's when there is one, else sm_90a.
std::string default_cuda_arch();

// Lowers `m` (after the pass pipeline) and compiles every distinct kernel
// with NVRTC for `arch` ("" = default_cuda_arch()). Needs no GPU.
std::unique_ptr<CudaCompiledModel> compile_cuda_kernels(const Model& m, const std::string& arch,
                                                        const LowerOptions& lo = {});

// compile_cuda_kernels for device 0, the cubin loaded, with its executable.
// Throws one clear error where there is no usable GPU. `m` must outlive it.
std::unique_ptr<CudaCompiledModel> compile_for_cuda(const Model& m, const DriverOptions& o);

// Text forms for `tessel inspect --emit cuda|ptx`; arch "" = default_cuda_arch()
// (the CUDA source depends on it: wgmma GEMMs for sm_90a).
std::string emit_cuda(const Model& m, const std::string& arch, const std::vector<Primitive>& knobs = {});
std::string emit_ptx(const Model& m, const std::string& arch, const std::vector<Primitive>& knobs = {});

// Throws, saying what is missing, when --target cuda cannot run here (no
// driver, no device).
void check_cuda_usable();

}  // namespace tessel
