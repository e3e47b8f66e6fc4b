// What a CPU schedule needs to know about the machine it generates code for:
// the SIMD width, the number of vector registers (which bounds a register
// tile) and the cache sizes (which bound packing blocks).
//
// This stage does not link the code generator: callers pass the LLVM feature
// string of their target (cpu::host_cpu_features() for the host, or the
// features a CodegenOptions names), so that a schedule for another machine
// can be built and tested anywhere.
#pragma once

#include <cstdint>
#include <string>

namespace tessel {

struct CpuInfo {
  int vector_lanes_f32 = 4;   // f32 lanes of the widest vector register: 4 (SSE), 8 (AVX), 16 (AVX-512F)
  int vector_registers = 16;  // architectural vector registers: 16 (xmm/ymm) or 32 (zmm)
  bool has_fma = false;       // fused multiply-add in hardware (else llvm.fma is a libm call)
  int64_t l1d_bytes = 32 * 1024;   // per core
  int64_t l2_bytes = 512 * 1024;   // per core
  int cores = 1;              // hardware threads the runtime may use
};

// From an LLVM feature string ("+avx,+avx2,-avx512f,+fma,..."); cache sizes
// and cores keep their defaults.
CpuInfo cpu_info_from_features(const std::string& llvm_features);

// cpu_info_from_features plus this machine's cache sizes and core count
// (sysconf). Pass cpu::host_cpu_features().
CpuInfo host_cpu_info(const std::string& host_llvm_features);

}  // namespace tessel
