// A packed, register-blocked GEMM schedule built directly in loop IR
// (BLIS's loop structure; Goto & van de Geijn, "Anatomy of high-performance
// matrix multiplication").
//
//   [parallel] for mb in M blocks of MC rows          scratch allocated here (per thread)
//     for jc in N blocks of NC columns                (or both in one parallel loop over tiles;
//                                                      a batch of products adds an outer factor)
//       for pc in K blocks of KC                      (at least one block, so K = 0 works)
//         pack B[pc block, jc block] into NR-wide panels Bp[NC/NR][KC][NR] (zero past N)
//         pack A[mb block, pc block] into MR-tall panels Ap[MC/MR][KC][MR] (zero past M;
//           skipped when pack_a is off: the micro-kernel then reads A itself)
//         for jr in NR panels, for ir in MR panels:   the micro-kernel
//           acc[MR][NR] = first K block ? 0 : Cp[ir, jr tile]
//           for k in KC: acc[i][j] = fma(Ap[ir][k][i], Bp[jr][k][j], acc[i][j])
//                         (i unrolled, j = NR/L unrolled vectors of L lanes)
//           last K block ? epilogue(i, j, acc[i][j]) for valid i < M, j < N
//                        : Cp[ir, jr tile] = acc
//
// Why this shape:
//   - acc is a Local buffer accessed only at constant offsets (i and the
//     vector index are unrolled), so LLVM's SROA keeps it in MR*NR/L vector
//     registers for the whole K loop: the K loop body is MR*NR/L FMAs, NR/L
//     vector loads of the B panel and MR broadcasts of the A panel. MR and NR
//     come from the register count (accumulators + B vectors + 1 broadcast).
//   - Packing zero-pads partial panels, so the micro-kernel has no edge
//     cases; only the epilogue tests i < M and j < N, and only on edge tiles.
//     acc is read into a let outside those tests, so it is never read under
//     a lane mask (a masked load would keep it in memory).
//   - KC keeps one B micro-panel (KC x NR) in L1, MC keeps the packed A block
//     (MC x KC) in L2; NC bounds the packed B block and the partial C block
//     Cp (MC x NC, only allocated when K may exceed KC).
//   - M blocks are independent (each packs its own B), so the parallel loop
//     over them gives results that do not depend on how it is split. B is
//     packed once per M block: that is why MC is as large as L2 allows and
//     why, for a small M, the parallel loop can run over (M block, N block)
//     tiles instead (parallel_over_n_blocks), each packing only its N block.
//     Tiles pack no more than M blocks do (A is repacked per N block either
//     way), so the lowering always uses them. A batch of products (attention
//     heads) shares the one parallel loop: units are (product, tile) pairs.
//   - B stored [N, K] (transposed weights, attention's K) is packed by the
//     same k-row loop, as a gather: measured on AVX2 faster than a scalar
//     copy along the contiguous k (see pack_b).
//   - Every output element is one chain of fmas over k ascending, from 0,
//     whatever the blocking (a partial sum kept in Cp between K blocks is
//     the f32 register value, stored exactly), so results are bitwise the
//     same for every block size, tile shape and thread count.
//
// Measured on the development machine (AVX2, docs/performance.md): 75-85%
// of the single-core FMA peak for square sizes from 256 to 2048.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "tessel/ir/graph.h"
#include "tessel/loop/ir.h"
#include "tessel/schedule/cpu_info.h"
#include "tessel/schedule/schedule.h"

namespace tessel {

struct GemmOperands {
  loop::Expr M, N, K;  // i64 extents (may mention kernel syms)
  // A[i, k] and B[k, j] as f32 expressions (a load, a transposed load, ...).
  // They are only evaluated in bounds.
  std::function<loop::Expr(loop::Expr i, loop::Expr k)> a;
  std::function<loop::Expr(loop::Expr k, loop::Expr j)> b;
  // The statement that consumes the finished dot product of output (i, j),
  // e.g. out[i, j] = max(acc + bias[j], 0). Called for the full and the edge
  // tiles (so its statements appear twice) inside unrolled and vectorized
  // loops: j is a lane-varying index of a Vectorized loop.
  std::function<loop::Stmt(loop::Expr i, loop::Expr j, loop::Expr acc)> epilogue;
  // `batch` independent products of this shape (attention's per-head
  // matmuls): a, b and the epilogue may mention the i64 variable batch_var,
  // which gemm_nest binds. The outer loop runs over (batch, block) pairs,
  // so that a batch smaller than the core count still spreads.
  loop::Expr batch = loop::Expr(1);
  std::string batch_var;
  // B already stored as the micro-kernel's panels (a constant weight the
  // CPU's prepack_weights pass packed at compile time): the Param buffer
  // b_panels [panel_columns / panel_width, K, panel_width] holds
  // B[k, p * panel_width + x] at [p, k, x], zero past N. Set by the
  // lowering when `b` reads exactly that; GemmSchedule::pack_b = false then
  // reads it in place.
  loop::BufferRef b_panels;
  int64_t panel_width = 0, panel_columns = 0;
  // The panel that holds column 0: 0, or for a batch of prepacked B (a
  // batched MatMul by a constant, tessel::UnpackPanels' batch) the batch's
  // first, batch_var * (panel_columns / panel_width).
  loop::Expr b_panel_base = loop::Expr(0);
  // K as the row-major digits of these extents (a convolution's kernel
  // offsets and channel, product K), or empty. Where K is one block, the
  // micro-kernel's k loop is then a nest over the digits, and A read in
  // place (pack_a off) is folded over them: a convolution's taps are then
  // affine in each digit, with no division by the extents per k.
  std::vector<int64_t> k_digits;
};

// Data, so that a tuner can search it. mc % mr == 0, nc % nr == 0,
// nr % vector_lanes == 0.
struct GemmSchedule {
  int mr = 6, nr = 16;     // register tile
  int mc = 96, kc = 256, nc = 512;  // cache blocks
  int vector_lanes = 8;    // width of the vectorized j loop
  // The outermost loop is Parallel, over the ceil(M / mc) M blocks ...
  bool parallel_over_m_blocks = true;
  // ... or, when this is set too, over the ceil(M / mc) * ceil(N / nc)
  // (M block, N block) tiles, so that a small M still gives several tasks
  // without packing B once per M block (each tile packs only its N block).
  bool parallel_over_n_blocks = false;
  // Pack A into MR-tall panels; when false the micro-kernel reads A[i, k]
  // itself (rows past M clamped to M - 1; their sums are never stored),
  // which pays when few N panels reuse each packed panel.
  bool pack_a = true;
  // Pack B into NR-wide panels per call; when false the micro-kernel reads
  // the operands' prepacked b_panels (only where b_panels_fit).
  bool pack_b = true;
};

// Block sizes from the register count and caches; hints (-1 when symbolic)
// shrink the blocks for small problems and balance the parallel blocks
// across cores. With parallel_over_n_blocks (opt-in: callers must take the
// parallel extent from gemm_parallel_extent) a small M stays one M block and
// the tasks come from N blocks.
// `b_prepacked`: B is a weight stored in 16-wide panels (GemmOperands::
// b_panels), which the micro-kernel reads in place.
GemmSchedule default_gemm_schedule(const CpuInfo& cpu, int64_t M_hint, int64_t N_hint, int64_t K_hint,
                                   bool parallel_over_n_blocks = false, int64_t batch_hint = 1,
                                   bool b_prepacked = false);

// Whether a group-1 convolution's implicit GEMM takes the output positions
// (of one image) as its rows and the `channels` output channels as its
// vectorised columns, rather than the other way round (lower/conv_gemm.cpp;
// K = input channels x kernel taps): at least 64 channels (a whole 4 x 64
// tile's width) and a K of at least 256. The weights are then read from
// prepacked panels (passes/prepack_weights.cpp) and the taps in place, with
// no B packing per call; the stores go one position per lane row (strided
// in NCHW), which a long enough K pays for.
bool conv_rows_are_positions(int64_t positions, int64_t channels, int64_t K);
// The same for a Conv node (group 1, static output shape; false for any
// other node): what lowering, the host's vector width and prepack_weights
// all decide by.
bool conv_rows_are_positions(const Node& conv);
// The same from the shapes alone, whatever the input's layout.
bool conv_rows_are_positions_by_shape(const Node& conv);
// K of a convolution's implicit GEMM (input channels per group x kernel
// taps: the weight's dims after the first), or -1 when not static.
int64_t conv_reduction(const Node& conv);

// `s` as the gemm.* knobs of a schedule (schedule/schedule.h), added to
// `out` (replacing knobs it already has).
void add_gemm_knobs(const GemmSchedule& s, Schedule* out);
// The fields of `s` that `sched`'s gemm.* knobs set, overridden; the result
// is checked (check_gemm_schedule), so an inconsistent tuned schedule is an
// error rather than a miscompile.
void apply_gemm_knobs(const Schedule& sched, GemmSchedule* s);

// Whether the micro-kernels of `s` can read ops.b_panels in place: NR a
// multiple of the panel width, the width a multiple of the vector, and the
// panels stored past the last tile's columns (N rounded up to NR).
bool b_panels_fit(const GemmOperands& ops, const GemmSchedule& s);

// The extent of gemm_nest's Parallel loop (what the runtime splits).
loop::Expr gemm_parallel_extent(const GemmOperands& ops, const GemmSchedule& s);

// tessel::Error when the schedule's sizes are inconsistent.
void check_gemm_schedule(const GemmSchedule& s);

// The statement computing every output element and calling the epilogue
// once per element (see the structure above). Loop variables and scratch
// buffers are named name_prefix + "_..." (the prefix must make them unique
// in the kernel). With parallel_over_m_blocks the result is one top-level
// Parallel loop of gemm_parallel_extent iterations.
loop::Stmt gemm_nest(const GemmOperands& ops, const GemmSchedule& s, const std::string& name_prefix);

}  // namespace tessel
