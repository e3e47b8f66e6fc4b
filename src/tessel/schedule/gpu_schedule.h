// The generic GPU schedule: maps a lowered kernel's top-level Parallel loop
// (the CPU nest of lower/lower_group.h) onto gpu.block.x × gpu.thread.x, one
// loop iteration per thread, so that every fused elementwise, injective or
// reduction group runs on a GPU. Rows with reductions get a block (or a
// warp) each, with gpu.lanes loops (below); other reductions stay serial
// inside their thread.
//
//   parallel for p in [p0, p0 + N) {          gpu.block.x for b in [0, ceildiv(N*M, T)) {
//     let i0 = f(p)                              gpu.thread.x for t in [0, T) {
//     for j in [j0, j0 + M) { S }      =>          let g = b*T + t
//   }                                              if g < N*M { let p = p0 + g floordiv M
//                                                    let i0 = f(p); let j = j0 + g floormod M; S }
//
// With M a constant multiple of V (GpuScheduleOptions::vector_bytes over the
// widest output element), a thread takes V consecutive j instead, as
// `vectorized for v in [0, V) { let j = j0 + (g floormod (M / V)) * V + v; S }`
// over N * M / V threads.
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
// Rows with reductions: when the row body is lets, allocations, stores and
// asserts around loops (perfect nests collapsed into one) that are each a
// reduction into a local accumulator (loop/verifier.h's
// lanes_reduction_update) or have independent iterations, at least one a
// reduction and the longest at least 64 iterations (or symbolic), each row
// goes to a block instead: its loops become gpu.lanes loops, so the block's
// threads share the reductions (a block-wide combine) and the elementwise
// passes (consecutive threads take consecutive elements). Threads per row:
// 32 up to 256 iterations, then about four iterations per thread in whole
// warps (at most 512; 128 when the extent is symbolic); with 32, a block
// takes four rows, one per warp (gpu.thread.y). The rows are the parallel
// loop's iterations, else those of its one inner loop (a rank-1 output's
// chunk, per-element reductions over a middle axis), else, without a
// parallel loop, those of the kernel's one top-level loop. Not when a param
// load strides along the row (the lanes variable outside its last index)
// unless there are at most 4096 rows, nor when the verifier refuses the
// result (an assert that may differ between a row's threads, a loaded
// output). A kernel without a parallel loop whose top-level loops have that
// form (a reduction over everything) gets one block of at least 256
// threads.
//
//   parallel for p in [p0, p0 + N) {          gpu.block.x for b in [0, N) {
//     acc[0] = 0                                 gpu.thread.x for t in [0, T) {
//     for k in [0, M) { acc[0] += x[p, k] } =>     let p = p0 + b; acc[0] = 0
//     for j in [0, M) { o[p, j] = f(acc) }         gpu.lanes for k in [0, M) { acc[0] += x[p, k] }
//   }                                              gpu.lanes for j in [0, M) { o[p, j] = f(acc) }
//
// A value several of a row's lanes loops compute from the kernel's inputs
// (LayerNorm's row, with its fused residual Add) is computed once into a
// row cache that the CUDA emitter keeps in registers (cache_row_values below).
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
#include <set>
#include <string>

#include "tessel/loop/ir.h"

namespace tessel {

struct GpuScheduleOptions {
  int64_t threads_per_block = 256;
  // Rows whose loops are reductions (and independent loops) go a row per
  // block, or per warp, with gpu.lanes loops (see above); false keeps a
  // thread per row.
  bool lanes = true;
  // Values several of a row's lanes loops compute from the inputs are
  // computed once into a row cache (cache_row_values below); false: each
  // loop computes them again (--knob gpu.rows.row_cache=0, driver/cuda_compiler.h).
  bool row_cache = true;
  // A thread of a flattened row takes vector_bytes / (its kernel's widest
  // output element) consecutive iterations of the row's inner loop, as a
  // vectorized loop (when the row's length is a constant multiple of that),
  // so the row's index arithmetic is shared and the CUDA emitter can store
  // them with one 16-byte store (docs/codegen_cuda.md). 1: one iteration.
  int64_t vector_bytes = 16;
  // lower_group_for_gpu (lower/lower_gpu.h): Attention groups become one
  // attention statement, which codegen/cuda writes as a flash attention.
  bool attention = false;
};

loop::Kernel schedule_for_gpu(const loop::Kernel& k, const GpuScheduleOptions& o = {});

// The row cache (gpu_row_cache.cpp): in a row body whose loops are gpu.lanes
// loops over `threads` threads, values that several loops compute from
// `inputs` (buffers nothing in the kernel writes) computed once into a
// row-long local buffer. Fresh names are taken from and added to `taken`.
loop::Stmt cache_row_values(const loop::Stmt& row, int64_t threads, const std::set<const loop::Buffer*>& inputs,
                            std::set<std::string>* taken);

}  // namespace tessel
