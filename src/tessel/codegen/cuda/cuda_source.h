// Loop IR kernels -> one self-contained CUDA C++ translation unit for NVRTC.
//
// Each kernel becomes `extern "C" __global__ void SYMBOL(...)` with the
// parameters, in order:
//   one pointer per Kernel::params entry (inputs `const`; dense row-major;
//   f16/bf16 as 16-bit patterns, bool as bytes, as loop/ir.h says),
//   one `long long` per Kernel::syms entry,
//   `int* error`: 0 before the launch; a failed Assert stores 1 + its
//   pre-order number there with atomicCAS (the first to fail wins) and its
//   thread returns;
//   one TMA tensor map per KernelSource::tensor_maps entry (TensorMapSpec).
// GPU-axis loops (gpu.block.x ... gpu.thread.z) take their variable from
// blockIdx/threadIdx; the launch geometry is their extents (1 where an axis
// is absent), which must depend on the syms only. Other loops, vectorized and
// unrolled ones included, are plain loops run by each thread.
//
// Semantics are loop/scalar.h's, bit for bit, as the CPU code generator
// implements them: integers wrap (computed in unsigned arithmetic, so no
// signed overflow is undefined), x / 0 and x % 0 give 0, out-of-range shifts
// give the sign fill; f16/bf16 live in float registers and are rounded after
// every inexact operation; casts go through double; Min/Max propagate NaN
// and order -0 below +0. NVRTC must compile with --fmad=false (nvrtc.h
// does) so that no a * b + c is contracted into an fma.
//
// The source needs no header: f16 conversions are inline PTX and bf16 ones
// integer code. Transcendental intrinsics must have been expanded
// (loop/math_expand.h) first; their calls are rejected.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tessel/codegen/cuda/mma_gemm.h"
#include "tessel/loop/ir.h"

namespace tessel::cuda {

// A TMA tensor map (CUtensorMap, 128 bytes) that a kernel takes by value
// (`const __grid_constant__ ts_tmap`) after its `error` parameter, one per
// entry of KernelSource::tensor_maps in order. The runtime builds it at
// launch (tensor_map.h) over parameter `param`'s buffer from element
// `offset` on: dims[d] elements along dimension d (innermost first, i64
// expressions over the syms), strides[d - 1] bytes between consecutive
// entries of dimension d >= 1, `box` elements per dimension in one copy,
// 2-byte elements, the 128-byte swizzle, zeros read outside the dims.
struct TensorMapSpec {
  int param = 0;
  int64_t offset = 0;
  std::vector<loop::Expr> dims;
  std::vector<int64_t> strides;
  std::vector<int> box;
};

// Launch geometry: extents of the gpu.block.{x,y,z} and gpu.thread.{x,y,z}
// loops, i64 expressions over the kernel's syms.
struct LaunchGeometry {
  std::array<loop::Expr, 3> grid{loop::Expr(1), loop::Expr(1), loop::Expr(1)};
  std::array<loop::Expr, 3> block{loop::Expr(1), loop::Expr(1), loop::Expr(1)};
  // Dynamic shared memory per block (`extern __shared__`); over 48 KiB the
  // loader must raise the function's limit (cuda::prepare_function).
  unsigned shared_bytes = 0;
};

struct KernelSource {
  std::string kernel_name;  // loop::Kernel::name
  std::string symbol;       // its extern "C" name in the source
  LaunchGeometry launch;
  // A kernel with syms may have a second function, compiled assuming every
  // sym in [0, narrow_limit] (as large as keeps each buffer within 2^31
  // elements), whose index arithmetic is 32-bit where that assumption
  // proves it fits (docs/codegen_cuda.md); same parameters and launch.
  // Empty when the assumption changes nothing.
  std::string narrow_symbol;
  int64_t narrow_limit = 0;
  std::vector<TensorMapSpec> tensor_maps;
};

// Whether sym values (in Kernel::syms order) satisfy a narrow variant's
// assumption: each in [0, limit].
bool within_narrow_limit(int64_t limit, const std::vector<int64_t>& syms);
// The function to launch for these sym values: the narrow one where they
// satisfy its assumption.
const std::string& launch_symbol(const KernelSource& k, const std::vector<int64_t>& syms);

struct CudaSource {
  std::string code;
  std::vector<KernelSource> kernels;  // in the order given
};

// Throws tessel::Error for kernels the backend cannot take (the verifier's
// Target::Cuda rules, GPU loops nested in other loops or repeated, launch
// extents over loop variables, unexpanded transcendental calls).
// `gemm`: what GEMM schedules know of the device (mma_gemm.h); with
// gemm.wgmma the source compiles for sm_90a only.
CudaSource emit_cuda_source(const std::vector<loop::Kernel>& kernels, const GemmTarget& gemm = {});
// The same with each kernel's own target (its schedule's gpu.gemm and
// gpu.flash knobs: a tuned kernel's). Targets may differ in wgmma: where any
// tensor-core kernel takes it, the source compiles for sm_90a only.
CudaSource emit_cuda_source(const std::vector<loop::Kernel>& kernels,
                            const std::function<GemmTarget(const loop::Kernel&)>& gemm_for);

// The extern "C" name of a kernel: its name with characters outside
// [A-Za-z0-9] escaped, so distinct names stay distinct.
std::string kernel_symbol(const std::string& kernel_name);

}  // namespace tessel::cuda
