// The generic GPU schedule: maps a lowered kernel's top-level Parallel loop
// (the CPU nest of lower/lower_group.h) onto gpu.block.x × gpu.thread.x, one
// loop iteration per thread, so that every fused elementwise, injective or
// reduction group runs on a GPU. Reductions stay serial inside their thread.
//
//   parallel for p in [p0, p0 + N) {          gpu.block.x for b in [0, ceildiv(N*M, T)) {
//     let i0 = f(p)                              gpu.thread.x for t in [0, T) {
//     for j in [j0, j0 + M) { S }      =>          let g = b*T + t
//   }                                              if g < N*M { let p = p0 + g floordiv M
//                                                    let i0 = f(p); let j = j0 + g floormod M; S }
//
// The inner loop j is flattened into the thread index (consecutive threads
// touch consecutive elements: coalesced) when the row body is only lets and
// that loop, the loop's extent M depends on the syms only, or is
// min(C, ...) with a constant C (then N*C threads, guarded by j's extent:
// the chunked rank-1 nest), and its iterations are independent (each
// parameter it stores to is indexed by j and not read by it; other buffers it
// writes are allocated inside it). Otherwise each thread runs one iteration
// of p, inner loops serially.
//
// Statements outside the parallel loop (accumulators of reductions over the
// whole input, asserts) are repeated by every thread into its own local
// buffers. A kernel without a parallel loop, or one that stores to a
// parameter outside it, runs in a single thread.
//
// A kernel holding a Contract statement (loop/ir.h: a GEMM with its
// epilogue; at the top level, among lets, allocations and asserts only) is
// left as it is: the CUDA emitter gives it the tensor-core GEMM schedule of
// codegen/cuda/mma_gemm.h (blocks, warps, mma.sync).
//
// The result passes verify(k, Target::Cuda).
#pragma once

#include <cstdint>

#include "tessel/loop/ir.h"

namespace tessel {

struct GpuScheduleOptions {
  int64_t threads_per_block = 256;
};

loop::Kernel schedule_for_gpu(const loop::Kernel& k, const GpuScheduleOptions& o = {});

}  // namespace tessel
