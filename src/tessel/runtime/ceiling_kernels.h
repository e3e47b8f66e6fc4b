// The calibrated kernels behind the machine's ceilings (runtime/ceilings.h):
// independent FMA chains, and streaming reads, on the widest vectors the CPU
// reports.
//
// They are hand-written with compiler intrinsics, one version per
// instruction set compiled with a target attribute, and picked at run time
// from the CPUID features (runtime/cpu_features.h), never from the CPU's
// name. Written by hand rather than generated through tessel's LLVM code
// generator so that a ceiling does not depend on the code generator it
// judges (a codegen regression must show as a lower % of bound, not as a
// lower ceiling), so that the deployable runtime (no LLVM) and the no-LLVM
// build can measure them, and so that measuring costs no JIT compile.
#pragma once

#include <cstdint>
#include <string_view>

namespace tessel {

// Floats per round of the read kernels: a buffer's length must be a multiple.
constexpr int64_t kReadBlockFloats = 128;

struct CeilingKernels {
  const char* isa = "";  // "avx512f", "avx2+fma", "sse2" or "scalar"
  int lanes = 1;         // f32 lanes of one vector
  int chains = 1;        // independent vector FMA chains (accumulators in registers)
  // `iters` rounds of `chains` vector FMAs (acc = acc * x + y); the result
  // depends on every chain, so none can be dropped.
  float (*fma)(int64_t iters) = nullptr;
  // Sums the `n` floats at `p` (n a multiple of kReadBlockFloats), `reps`
  // times over, into independent vector accumulators.
  float (*read)(const float* p, int64_t n, int64_t reps) = nullptr;

  // Two flops (a multiply and an add) per lane of every FMA of a round.
  double flops_per_iter() const { return 2.0 * lanes * chains; }
};

// The widest kernels that `cpu_features` (detected_cpu_features()'s form:
// "+avx,+avx2,-avx512f,...") allow. Only call them on such a CPU.
const CeilingKernels& ceiling_kernels_for(std::string_view cpu_features);

// ceiling_kernels_for(detected_cpu_features()), detected once.
const CeilingKernels& host_ceiling_kernels();

}  // namespace tessel
