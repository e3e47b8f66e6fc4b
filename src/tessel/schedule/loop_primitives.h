// The loop primitives of a Schedule (schedule.h), applied to a lowered
// kernel's loop IR by loop variable name (unique in a kernel):
//
//   split L factor=F outer=O inner=I tail=guard|none|peel
//       for L in [m, m+E) S  =>  for O { for I in [0, F) { S[L := m + O*F + I] } }
//       guard: O in [0, ceildiv(E, F)), S under `if O*F + I < E` (dropped when it always holds);
//       none:  only when E is provably a multiple of F;
//       peel:  O in [0, E floordiv F), then a remainder loop `L_tail` over the last E floormod F
//              iterations (its inner loops and lets renamed `<name>_tail`).
//       O and the remainder keep L's kind, I is serial. Defaults: O = L_o, I = L_i, tail=guard.
//   reorder L1 L2 ...     permutes a nest of directly nested loops (outermost first). Between them
//                         only the next loop, or an `if` without else whose condition is index
//                         arithmetic (a split's guard), which moves to the innermost position.
//   fuse O I into=N       two directly nested loops (I's bounds free of O, I serial) become one
//                         loop N over E_O * E_I iterations; O and I come back by floordiv/floormod.
//   tile L1 L2 f1= f2=    split both (tail=guard) and reorder to L1_o L2_o L1_i L2_i.
//   vectorize L           kind vectorized: constant extent in [1, max_vector_lanes].
//   unroll L              kind unrolled: constant extent up to max_unroll.
//   parallel L            kind parallel, CPU only: a top-level loop (only Seq, Let and Allocate
//                         around it, as the calling convention of loop/ir.h needs), bounds over the
//                         syms, at most one per kernel.
//   bind L axis=gpu.block.x|y|z|gpu.thread.x|y|z   GPU only.
//
// Legality beyond the verifier's rules, conservative where a precise answer
// needs dependence analysis (each rejection says which rule):
//   - parallel/bind run iterations concurrently, so the loop body may store
//     only to buffers allocated inside it (private to an iteration; shared
//     memory is not private to a thread) and to params (or, for thread axes,
//     shared buffers) at an index that depends on the loop variable, and may
//     load such a buffer only at an index it stores to; nothing outside the
//     loop may store to a param, which every task or thread would repeat.
//     Distinctness of the stored elements (that the index is injective) is
//     not proven.
//   - vectorize runs lanes in lockstep: no store of a lane-varying value to
//     a lane-invariant element (a reduction across lanes), no load of a
//     stored buffer at another index than a store's, no loop bounds varying
//     by lane, no vectorized loop inside another.
//   - reorder changes the order of iterations: every buffer stored in the nest
//     (and allocated outside it) is loaded there only at the index of a store,
//     and each store either is a reduction update `b[c] = b[c] op e` (op one of
//     + * min max & | ^, e not reading b; float sums may round differently,
//     as in any schedule that reorders a reduction) or has an index that
//     depends on every loop of the nest.
//   - GPU: GPU-axis loops only inside other GPU-axis loops (lets, ifs and
//     allocations between are fine), one loop per axis, launch extents over
//     the syms; thread extents constant, each within its dimension's limit and
//     their product within max_threads_per_block; constant grid extents within
//     the grid limits. Shared allocations (all of them, summed) within
//     max_shared_bytes.
//
// The caller owns what lives outside the kernel: a runtime step that records
// its parallel loop's extent must take it again from the result.
#pragma once

#include <cstdint>
#include <string>

#include "tessel/loop/ir.h"
#include "tessel/schedule/schedule.h"

namespace tessel {

// What a bind / vectorize / unroll / shared allocation may use.
struct ScheduleLimits {
  bool gpu = false;  // bind allowed only when true; parallel only when false
  int64_t max_threads_per_block = 1024;
  int64_t max_block_dim_z = 64;  // y/x thread dims 1024, z 64; grid y/z 65535, grid x 2^31-1
  int64_t max_grid_yz = 65535;
  int64_t max_shared_bytes = 227 * 1024;  // per block (H100/H200 opt-in limit)
  int64_t max_vector_lanes = 64;
  int64_t max_unroll = 64;
};

// split, reorder, fuse, tile, vectorize, unroll, parallel, bind.
bool is_loop_primitive(const std::string& name);

// Applies the loop primitives of `s` in order to `k` (template knobs, names
// with a dot, are skipped); throws tessel::Error naming the primitive and the
// reason when one is illegal. The input must verify for the target
// (limits.gpu: CUDA, else CPU); so does the result, checked after every
// primitive.
loop::Kernel apply_loop_primitives(const loop::Kernel& k, const Schedule& s, const ScheduleLimits& limits = {});

}  // namespace tessel
