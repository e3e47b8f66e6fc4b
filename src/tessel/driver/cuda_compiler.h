// The CUDA path of the driver, so far: a model's compiled groups as GPU
// kernels (lower/lower_gpu.h) and their CUDA C++ or PTX for
// `tessel inspect --emit cuda|ptx`. Whole-model runs (--target cuda) come
// with the GPU runtime.
#pragma once

#include <string>
#include <vector>

#include "tessel/driver/compiler.h"
#include "tessel/loop/ir.h"

namespace tessel {

// One GPU kernel per compiled group of `c`, in plan order: lowered with the
// GPU nest where that works, else the group's CPU kernel mapped onto GPU axes.
std::vector<loop::Kernel> gpu_kernels(const CompiledModel& c);

// The architecture to compile for: device 0's when there is one, else sm_90a.
std::string default_cuda_arch();

// Text forms for `tessel inspect --emit cuda|ptx`; arch "" = default_cuda_arch().
std::string emit_cuda(const CompiledModel& c);
std::string emit_ptx(const CompiledModel& c, const std::string& arch);

// The one error --target cuda gives for now: what is missing on this machine
// (no driver, no device), or that whole-model runs are not implemented yet.
[[noreturn]] void fail_target_cuda();

}  // namespace tessel
