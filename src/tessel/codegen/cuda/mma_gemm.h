// Contract statements (loop/ir.h) as tensor-core GEMM kernels: the schedule
// (tiles, warps, precision) and the CUDA C++ it becomes. emit_cuda_source
// (cuda_source.h) calls it for a kernel holding a Contract; the kernel keeps
// the usual parameter convention, and the launch geometry comes out through
// KernelSource::launch like any other kernel's.
//
// The kernel (one block per BM x BN output tile of one batch entry):
//
//   grid (ceil(N / BN), min(ceil(M / BM) * batch, 65535)), block (32 * warps)
//   for each (batch, M tile) of this block row (a grid-stride loop over gridDim.y):
//     acc[MT][NT][4] = 0                         per thread: its warp's WM x WN tile
//     registers <- A, B tile 0                   a(b, i, k) / b(b, k, j) per element, 0 outside
//     shared[0] <- registers; sync                 [0, M) x [0, K) / [0, K) x [0, N)
//     for each K tile t:
//       registers <- A, B tile t + 1             (global loads in flight during the mmas)
//       mma.sync over shared[t % 2]              fragments: ldmatrix (halves), 32-bit loads (f32)
//       shared[(t + 1) % 2] <- registers; sync
//     epilogue(b, i, j, acc) for each accumulator with i < M, j < N
//
// Shared memory holds A as [BM][BK] and B as [BN][BK] (k contiguous in both,
// rows padded by 8 halves or 4 floats, so that fragment loads are free of
// bank conflicts), twice (double buffer): 40 KiB, static (no more than 48 KiB,
// so the launch needs no dynamic shared memory).
//
// Precision, from the operand expressions:
//   - both exactly bf16 values (cast<f32> of a bf16 load, zero, a select of
//     such): mma.sync.m16n8k16.f32.bf16.bf16.f32 (products exact, f32 sums);
//   - both exactly f16 values: the same with .f16;
//   - otherwise f32: 3xTF32 on mma.sync.m16n8k8.f32.tf32.tf32.f32: x = big +
//     small with big = tf32(x), small = tf32(x - big), and
//     acc += a_small b_big + a_big b_small + a_big b_big, which keeps about
//     21 of f32's 24 bits per product (docs/codegen_cuda.md has the bound).
//     Never one TF32 pass: that keeps 11 bits.
//
// wgmma (Hopper, MmaPlan::wgmma), for the cp.async pipeline of halves with
// both operands k-contiguous: each warpgroup (4 warps, 128 threads) multiplies
// its 64 rows of A by the whole BN columns of B with
// wgmma.mma_async.m64n{BN}k16, both operands read from shared memory through
// matrix descriptors. The tiles are stored in the 128-byte swizzled K-major
// layout: row r of a tile is 128 bytes (64 k), its 16-byte chunk c stored at
// chunk c ^ (r % 8), so 8 consecutive rows form one 1024-byte swizzle atom;
// the descriptor gives the start address (advanced 32 bytes per k16 step),
// the stride between 8-row groups (1024 bytes) and the swizzle mode. Each
// thread's accumulators follow mma.sync's C layout per 8 columns: warp w of
// the warpgroup holds rows 16 w + g and 16 w + g + 8.
#pragma once

#include <cstdint>
#include <string>

#include "tessel/loop/ir.h"
#include "tessel/schedule/schedule.h"

namespace tessel::cuda {

enum class MmaPrecision { Bf16, F16, Tf32x3 };
const char* mma_precision_name(MmaPrecision p);  // "bf16", "f16", "3xtf32"

// Block tile BM x BN x BK over warps_m x warps_n warps, each a
// (BM / warps_m) x (BN / warps_n) warp tile of 16 x 8 mma tiles.
struct MmaTiles {
  int bm = 128, bn = 128, bk = 32;
  int warps_m = 2, warps_n = 4;
  int threads() const { return 32 * warps_m * warps_n; }
};

// How a block fills its shared tile of one operand (halves only):
//   Elements:   one element per load, any operand expression (0 outside);
//   VectorK:    16-byte loads of 8 k-consecutive elements, for an operand that
//               is a plain bf16/f16 load, unit stride in k, 8-element aligned
//               (K and every other stride multiples of 8); stored as is into
//               the [rows][BK] tile;
//   VectorRows: the same along the rows (B stored [K, N], stride 1 in j, N a
//               multiple of 8), into a [BK][BN + 8] tile; its fragments are
//               loaded with ldmatrix .trans.
// Parameters must be 16-byte aligned (the runtime's buffers are 64).
enum class OperandLoad { Elements, VectorK, VectorRows };

struct MmaPlan {
  MmaPrecision precision = MmaPrecision::Tf32x3;
  MmaTiles tiles;
  OperandLoad a_load = OperandLoad::Elements;
  OperandLoad b_load = OperandLoad::Elements;
  // Both operands vector loads: cp.async straight into `stages` shared
  // stages (dynamic shared memory, up to 112 KiB), `stages` - 1 tiles in
  // flight. Otherwise two static stages filled through registers.
  bool async_copy = false;
  int stages = 2;
  // Blocks a multiprocessor should hold at once (__launch_bounds__'s
  // second argument): 2 for the pipeline, whose shared memory leaves room
  // for two, so that ptxas keeps to 128 registers a thread (at 256 threads
  // it took 160-170, one block of 8 warps per multiprocessor).
  int min_blocks = 1;
  // Hopper (sm_90a): the pipeline's tiles are read by warpgroup wgmma
  // straight from shared memory (wgmma_gemm below) instead of ldmatrix +
  // mma.sync. Tiles: BM = 64 per warpgroup (warps_m = BM / 16 warps, each
  // holding 16 rows of the accumulators, warps_n = 1), BN = 64 or 128 (the
  // wgmma's N), BK = 64 (one 128-byte row of halves per shared tile row).
  bool wgmma = false;
  // With wgmma and at least 4 stages: the warpgroup leaves one k-step's
  // wgmmas in flight while it waits for the next tile and issues its copies
  // (S - 2 tiles ahead instead of S - 1, as the stage of the k-step before
  // is still being read); otherwise it waits for each k-step's wgmmas.
  bool wgmma_overlap = false;
  // Which index consecutive threads take when they fill a shared tile (so
  // that their global loads coalesce): k for A stored [M, K] (true) or i for
  // A stored [K, M]; k for B stored [N, K] (true) or j for B stored [K, N].
  bool a_k_contiguous = true;
  bool b_k_contiguous = false;
  // Hopper, large GEMMs whose operands are TMA-able (tma_gemm.h): the
  // warp-specialised persistent kernel. Tiles: BM = 128 (two consumer
  // warpgroups of 64 rows), BN = 128 or 256, BK = 64; `stages` TMA stages.
  bool tma = false;
  int sm_count = 132;  // the persistent grid: one block per multiprocessor
  int threads() const { return tma ? 384 : tiles.threads(); }
  int64_t shared_bytes() const;  // shared memory of the kernel (dynamic when async_copy)
};

// What the GEMM schedule knows of the device.
struct GemmTarget {
  bool wgmma = false;         // sm_90a's warpgroup instructions (the cubin is built for sm_90a)
  // At least this many blocks, when the sizes are known, before a bigger
  // tile is worth its reuse: about one block per multiprocessor of an
  // H100/H200 (132). A 128 x 768 GEMM (BERT at batch 1) in 128 x 128 tiles
  // is 6 blocks, 5% of the machine.
  int64_t fill_blocks = 120;
  // The warp-specialised TMA kernel for GEMMs that fill the machine with
  // 128 x 128 tiles (MmaPlan::tma); off: the cp.async wgmma pipeline.
  bool tma = true;
  // ... for K at least tma_min_k, or tma_min_k_cheap with an epilogue of at
  // most 8 float operations (use_tma in mma_gemm.cpp says why).
  int64_t tma_min_k = 1024, tma_min_k_cheap = 256;
  int sm_count = 132;  // multiprocessors (H100/H200 SXM: 132)
  // MmaPlan::wgmma_overlap where the pipeline has the stages for it; off:
  // --knob gpu.gemm.overlap=0 (to compare).
  bool wgmma_overlap = true;
  // Flash attention's warp-specialised wgmma form where it pays
  // (flash_attention.cpp: long key sequences); off: --knob gpu.flash.wgmma=0.
  bool flash_wgmma = false;
  // ... for key counts from this many up, or unknown at compile time.
  int64_t flash_wgmma_min_keys = 512;
  // Tile knobs (gpu.gemm bk, stages, tma_bn), 0: the automatic choice.
  // Each is taken only where the kernel stays legal, otherwise the
  // automatic choice is kept (plan_mma_gemm):
  //   bk: 32 or 64, the K step of the halves' mma.sync kernels (wgmma and
  //       the TMA kernel always take 64; 3xTF32 keeps 16), 64 where two
  //       stages fit the shared memory;
  //   stages: 2 to 4, the cp.async / wgmma pipeline's stages, down to what
  //       fits its shared memory; the TMA kernel's, down to what fits its
  //       own (tma_gemm.cpp tma_stages); the register-filled kernel keeps 2;
  //   tma_bn: 128 or 256, the TMA kernel's BN where it is taken (256 for
  //       N > 128 only).
  int bk = 0, stages = 0, tma_bn = 0;
};

// The schedule of a Contract statement: precision from its operands, the
// largest tile that still gives target.fill_blocks blocks (a smaller BM for
// a small constant M, down to 16 rows for GEMV-like M = 1), load order from
// the operands' innermost indices.
MmaPlan plan_mma_gemm(const loop::StmtNode& contract, const GemmTarget& target = {});

// Whether a cubin for `arch` (sm_XY, sm_XYa) may use wgmma: sm_90a only
// (the arch-specific feature set; plain sm_90 and later archs lack it).
bool arch_has_wgmma(const std::string& arch);

// The target for `arch` with the template knobs (schedule.h) over its
// defaults: gpu.gemm's wgmma (only where arch_has_wgmma; 0 falls back to the
// mma.sync pipeline), tma, tma_min_k, tma_min_k_cheap, overlap, fill_blocks,
// bk, stages and tma_bn (a value outside their sets is a tessel::Error);
// gpu.flash's wgmma (with wgmma) and min_keys.
GemmTarget gemm_target_for(const std::string& arch, const std::vector<Primitive>& knobs = {});

// Whether `e` is always a value of type t (f16 or bf16) held in f32:
// cast<f32> of a t value, a float immediate exact in t, or a select of such.
bool exact_in(const loop::Expr& e, DType t);

}  // namespace tessel::cuda
