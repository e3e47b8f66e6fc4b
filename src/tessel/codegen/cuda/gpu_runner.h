// The smallest CUDA runtime: kernels compiled into one module for device 0,
// run one at a time on host buffers (copied in, launched, copied back), with
// the loop IR evaluator's calling convention. Tests compare it with
// loop::run_kernel; the real runtime (one arena, CUDA graphs) comes later.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "tessel/codegen/cuda/cuda_source.h"
#include "tessel/codegen/cuda/driver_api.h"
#include "tessel/loop/ir.h"

namespace tessel::cuda {

class GpuKernels {
 public:
  // Emits, compiles (NVRTC, for device 0's architecture; cached under
  // cache_dir when set) and loads. Kernels must have their GPU schedule.
  // GEMMs are planned for the device (gemm_target_for), or for `gemm`.
  explicit GpuKernels(std::vector<loop::Kernel> kernels, const std::string& cache_dir = "");
  GpuKernels(std::vector<loop::Kernel> kernels, const GemmTarget& gemm, const std::string& cache_dir = "");

  // Runs kernel `name` as loop::run_kernel would: `buffers` are host memory
  // (every param is copied to the device, outputs are copied back), `syms`
  // the values of Kernel::syms. Returns 0, or 1 + the index of a failed
  // Assert (the first to fail on the device).
  int32_t run(const std::string& name, const std::vector<void*>& buffers, const std::vector<int64_t>& syms);

  bool from_cache() const { return from_cache_; }
  const CudaSource& source() const { return source_; }

 private:
  std::vector<loop::Kernel> kernels_;
  CudaSource source_;
  std::unique_ptr<Module> module_;
  bool from_cache_ = false;
};

}  // namespace tessel::cuda
