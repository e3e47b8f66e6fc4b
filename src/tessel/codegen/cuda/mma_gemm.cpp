// Contract statements as tensor-core GEMM kernels (mma_gemm.h). The
// fragment layouts are those of the PTX ISA ("Matrix Fragments for
// mma.m16n8k16 with floating point type" and "... for mma.m16n8k8"), with
// groupID g = lane >> 2 and threadID_in_group t = lane % 4:
//
//   m16n8k16 .bf16/.f16 (registers hold two k-consecutive halves, the lower
//   k in the low 16 bits):
//     A: reg0 (row g, k 2t..2t+1)  reg1 (g + 8, 2t..)  reg2 (g, 2t + 8..)  reg3 (g + 8, 2t + 8..)
//     B: reg0 (k 2t..2t+1, col g)  reg1 (k 2t + 8.., col g)
//   m16n8k8 .tf32:
//     A: a0 (row g, k t)  a1 (g + 8, t)  a2 (g, t + 4)  a3 (g + 8, t + 4)
//     B: b0 (k t, col g)  b1 (k t + 4, col g)
//   both, f32 accumulators:
//     c0 (row g, col 2t)  c1 (g, 2t + 1)  c2 (g + 8, 2t)  c3 (g + 8, 2t + 1)
//
// Shared memory keeps A as [BM][BK] and B as [BN][BK] (k contiguous; B may
// instead be [BK][BN + 8] halves, OperandLoad::VectorRows). For halves the
// word (kk / 2 + t) of a row holds k = kk + 2t and kk + 2t + 1, and the
// fragments come from ldmatrix (half_fragments); for f32 every fragment
// register is one 32-bit shared load. A row is BK / 2 + 4 words (halves) or
// BK + 4 floats: 20 (or 36) words, and 20 g mod 32 (36 g mod 32) takes 8
// distinct multiples of 4 for g = 0..7, so the 32 lanes' loads (word 20 g + t),
// and ldmatrix's 8 rows of 16 bytes, hit distinct banks.
#include "tessel/codegen/cuda/mma_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "tessel/codegen/cuda/emitter.h"
#include "tessel/loop/affine.h"
#include "tessel/loop/scalar.h"
#include "tessel/loop/simplify.h"
#include "tessel/loop/visit.h"
#include "tessel/support/error.h"

namespace tessel::cuda {

using loop::Expr;
using loop::ExprKind;

const char* mma_precision_name(MmaPrecision p) {
  switch (p) {
    case MmaPrecision::Bf16: return "bf16";
    case MmaPrecision::F16: return "f16";
    case MmaPrecision::Tf32x3: return "3xtf32";
  }
  return "?";
}

bool exact_in(const Expr& e, DType t) {
  switch (e->kind) {
    case ExprKind::Cast: return e->dtype == DType::F32 && e->args[0].dtype() == t;
    case ExprKind::FloatImm: {
      const double v = e->float_value;
      return e->dtype == DType::F32 && !std::isnan(v) && loop::Scalar::of_float(t, v).f == v;
    }
    case ExprKind::Select: return exact_in(e->args[1], t) && exact_in(e->args[2], t);
    default: return false;
  }
}

namespace {

// (e with v := v + 1) - e, when it is a constant.
bool unit_step(const Expr& e, const std::string& v) {
  const Expr next = loop::substitute(e, {{v, loop::var(v) + Expr(1)}});
  return loop::is_const(loop::simplify(next - e), 1);
}

// Whether consecutive values of k (rather than of `other`) read consecutive
// elements of the operand's first load that depends on either.
bool k_contiguous(const Expr& operand, const std::string& k, const std::string& other, bool fallback) {
  const loop::ExprNode* load = nullptr;
  loop::visit_expr(operand, [&](const Expr& x) {
    if (load || x->kind != ExprKind::Load || x->args.empty()) return;
    if (loop::mentions_var(x->args.back(), k) || loop::mentions_var(x->args.back(), other)) load = x.node.get();
  });
  if (!load) return fallback;
  const Expr& last = load->args.back();
  if (unit_step(last, k)) return true;
  if (unit_step(last, other)) return false;
  const bool has_k = loop::mentions_var(last, k), has_other = loop::mentions_var(last, other);
  if (has_k != has_other) return has_k;
  return fallback;
}


MmaTiles make_tiles(int bm, int bn, int warps_m, int warps_n, int bk) {
  MmaTiles t;
  t.bm = bm, t.bn = bn, t.warps_m = warps_m, t.warps_n = warps_n, t.bk = bk;
  return t;
}

// Block tiles, largest first, for M (-1: unknown): rows no more than M needs.
// 128 x 128 only with the cp.async pipeline: filled through registers (an
// operand read per element, with its index arithmetic) its 64 accumulators
// a thread pushed ptxas to 255 registers and up to 288 bytes of spills
// (ResNet-50's implicit-GEMM convolutions, sm_90a).
// Columns likewise: no 128-wide tile for N <= 64 (attention's P V at head
// size 64 would leave half of each tile empty).
std::vector<MmaTiles> tile_candidates(int64_t m, int64_t n, int bk, bool async) {
  std::vector<MmaTiles> all;
  if (async && (m < 0 || m > 64)) all.push_back(make_tiles(128, 128, 2, 4, bk));  // warps 64 x 32
  if (m < 0 || m > 32) {
    all.push_back(make_tiles(64, 128, 2, 4, bk));                           // warps 32 x 32
    if (async && (m < 0 || m > 64)) all.push_back(make_tiles(128, 64, 2, 2, bk));  // 4 warps, 64 x 32
    all.push_back(make_tiles(64, 64, 2, 2, bk));   // 4 warps, 32 x 32
  }
  if (m < 0 || m > 16) {
    all.push_back(make_tiles(32, 128, 2, 4, bk));  // warps 16 x 32
    all.push_back(make_tiles(32, 64, 2, 2, bk));   // 4 warps, 16 x 32
    all.push_back(make_tiles(32, 32, 2, 2, bk));   // 4 warps, 16 x 16
  } else {
    all.push_back(make_tiles(16, 128, 1, 4, bk));  // 4 warps, 16 x 32
    all.push_back(make_tiles(16, 64, 1, 4, bk));   // 4 warps, 16 x 16
    all.push_back(make_tiles(16, 32, 1, 4, bk));   // 4 warps, 16 x 8
  }
  if (n > 0 && n <= 64) std::erase_if(all, [](const MmaTiles& t) { return t.bn > 64; });
  return all;
}

// A row of a [rows][BK] shared tile: BK halves or floats, padded by 8 halves
// or 4 floats.
int64_t tile_row_bytes(const MmaTiles& t, MmaPrecision p) {
  return p == MmaPrecision::Tf32x3 ? (t.bk + 4) * 4 : (t.bk / 2 + 4) * 4;
}

// One stage: A as [BM][BK] and B as [BN][BK], or B as [BK][BN + 8] halves
// (OperandLoad::VectorRows).
int64_t stage_bytes(const MmaTiles& t, MmaPrecision p, OperandLoad b_load) {
  const int64_t b_bytes =
      b_load == OperandLoad::VectorRows ? int64_t{t.bk} * (t.bn + 8) * 2 : t.bn * tile_row_bytes(t, p);
  return t.bm * tile_row_bytes(t, p) + b_bytes;
}

// Dynamic shared memory the cp.async pipeline may take: half of the 227 KiB
// an H100/H200 multiprocessor has, so two blocks can share one.
constexpr int64_t kMaxPipelineShared = 112 * 1024;

// The first candidate tile that still gives `fill` blocks (the smallest
// when none does; the largest when a size is unknown). Halves take 64-wide K
// steps when K is long and the stages fit (two in 48 KiB of static shared
// memory, or the pipeline's in kMaxPipelineShared): half as many round trips
// to memory per output tile.
MmaTiles tiles_for(int64_t batch, int64_t m, int64_t n, int64_t k, MmaPrecision p, OperandLoad b_load, bool async,
                   int64_t fill) {
  const bool halves = p != MmaPrecision::Tf32x3;
  const std::vector<MmaTiles> all = tile_candidates(m, n, halves ? 32 : 16, async);
  MmaTiles t = all.front();
  if (batch > 0 && m > 0 && n > 0) {
    t = all.back();
    for (const MmaTiles& c : all) {
      const int64_t blocks = batch * ((m + c.bm - 1) / c.bm) * ((n + c.bn - 1) / c.bn);
      if (blocks >= fill) {
        t = c;
        break;
      }
    }
  }
  if (halves && k >= 256) {
    MmaTiles wide = t;
    wide.bk = 64;
    if (async ? 3 * stage_bytes(wide, p, b_load) <= kMaxPipelineShared : 2 * stage_bytes(wide, p, b_load) <= 48 * 1024)
      t = wide;
  }
  return t;
}

// The flat (row-major) element index of `load`, simplified; nullopt when
// the buffer's shape is not constant (a symbolic leading dim too: the
// vector operand loads were written and measured for constant shapes).
std::optional<Expr> flat_index_of(const loop::ExprNode& load) {
  int64_t leading = 0;
  if (!load.buffer->shape.empty() && !loop::as_const_int(loop::simplify(load.buffer->shape[0]), &leading))
    return std::nullopt;
  const std::optional<Expr> flat = loop::constant_flat_index(*load.buffer, load.args);
  return flat ? std::optional<Expr>(loop::simplify(*flat)) : std::nullopt;
}

// The flat index as an affine form of the loop variables (loop/affine.h,
// where reshape/transpose views pair up); nullopt when it is not one.
std::optional<loop::Affine> flat_affine(const loop::ExprNode& load) {
  const std::optional<Expr> flat = flat_index_of(load);
  return flat ? loop::affine_form(*flat) : std::nullopt;
}

}  // namespace

namespace detail {

// The load of `operand` when it is just cast<f32>(load) of a `t` buffer.
const loop::ExprNode* plain_load(const Expr& operand, DType t) {
  if (operand->kind != ExprKind::Cast || operand->dtype != DType::F32) return nullptr;
  const Expr& x = operand->args[0];
  return x->kind == ExprKind::Load && x->buffer->dtype == t ? x.node.get() : nullptr;
}

// Whether 16-byte loads of 8 elements consecutive in `vec` read `load`
// exactly: its flat index maps every 8 consecutive values of vec from a
// multiple of 8 to 8 consecutive elements from a multiple of 8
// (loop::contiguous_runs: views that split the heads out of vec qualify),
// it uses no variable beyond vec and `others`, and vec's extent is a
// multiple of 8.
bool vectorizable(const loop::ExprNode& load, const std::string& vec, const Expr& vec_extent,
                  const std::vector<std::string>& others) {
  int64_t extent = 0;
  if (!loop::as_const_int(loop::simplify(vec_extent), &extent) || extent % 8 != 0) return false;
  const std::optional<Expr> flat = flat_index_of(load);
  if (!flat || !loop::contiguous_runs(*flat, vec, 8)) return false;
  bool known_vars = true;
  loop::visit_expr(*flat, [&](const Expr& x) {
    if (x->kind == ExprKind::Var && x->name != vec && std::find(others.begin(), others.end(), x->name) == others.end())
      known_vars = false;
  });
  return known_vars;
}

}  // namespace detail

using detail::plain_load;
using detail::vectorizable;

// The accumulator tile as floats, rows padded by 8 (float2 stores of a
// warp's 8 rows at strides of 8 mod 32 words: distinct banks per half warp).
static int64_t epilogue_tile_bytes(const MmaTiles& t) { return int64_t{t.bm} * (t.bn + 8) * 4; }

// A wgmma stage: A and B as unpadded 128-byte rows (the swizzle spreads them
// over the banks).
static int64_t wgmma_stage_bytes(const MmaTiles& t) { return int64_t{t.bm + t.bn} * t.bk * 2; }

int64_t MmaPlan::shared_bytes() const {
  if (tma) return detail::tma_shared_bytes(tiles.bn, stages);
  if (wgmma) {
    // + 1 KiB so that the kernel can start its tiles at a 1024-byte boundary
    // (the swizzle atoms' alignment), wherever the dynamic memory starts.
    return std::max(stages * wgmma_stage_bytes(tiles), epilogue_tile_bytes(tiles)) + 1024;
  }
  const int64_t pipeline = stages * stage_bytes(tiles, precision, b_load);
  return async_copy ? std::max(pipeline, epilogue_tile_bytes(tiles)) : pipeline;
}

bool arch_has_wgmma(const std::string& arch) { return arch == "sm_90a"; }

GemmTarget gemm_target_for(const std::string& arch, const std::vector<Primitive>& knobs) {
  GemmTarget t;
  const auto flag = [&](const char* name, const char* key, bool def) { return knob_int(knobs, name, key, def) != 0; };
  t.wgmma = arch_has_wgmma(arch) && flag("gpu.gemm", "wgmma", true);
  t.tma = flag("gpu.gemm", "tma", t.tma);
  t.tma_min_k = knob_int(knobs, "gpu.gemm", "tma_min_k", t.tma_min_k);
  t.tma_min_k_cheap = knob_int(knobs, "gpu.gemm", "tma_min_k_cheap", t.tma_min_k_cheap);
  t.wgmma_overlap = flag("gpu.gemm", "overlap", t.wgmma_overlap);
  t.fill_blocks = knob_int(knobs, "gpu.gemm", "fill_blocks", t.fill_blocks);
  t.flash_wgmma = t.wgmma && flag("gpu.flash", "wgmma", true);
  t.flash_wgmma_min_keys = knob_int(knobs, "gpu.flash", "min_keys", t.flash_wgmma_min_keys);
  return t;
}

// The pipeline's tile on wgmma: BM 64 or 128 rows (one or two warpgroups),
// BN 64 or 128, BK 64; stages as many as fit kMaxPipelineShared.
static bool use_wgmma(MmaPlan& p, const GemmTarget& target) {
  const MmaTiles& t = p.tiles;
  if (!p.async_copy || p.precision == MmaPrecision::Tf32x3 || p.a_load != OperandLoad::VectorK ||
      (t.bm != 64 && t.bm != 128) || (t.bn != 64 && t.bn != 128))
    return false;
  p.wgmma = true;
  p.tiles = make_tiles(t.bm, t.bn, t.bm / 16, 1, 64);
  for (p.stages = 4; p.stages > 2 && p.shared_bytes() > kMaxPipelineShared + 1024;) --p.stages;
  p.wgmma_overlap = target.wgmma_overlap && p.stages >= 4;
  return true;
}

// Floating-point operations of the epilogue per output (its float-typed
// expression nodes): what the TMA kernel's unoverlapped epilogue costs.
static int64_t epilogue_float_ops(const loop::Stmt& s) {
  int64_t n = 0;
  loop::visit_stmt(s, [](const loop::Stmt&) {}, [&](const Expr& root) {
    loop::visit_expr(root, [&](const Expr& e) { n += is_float(e->dtype) ? 1 : 0; });
  });
  return n;
}

// The warp-specialised TMA kernel (tma_gemm.cpp) for a wgmma plan whose
// operands the TMA can copy and whose known sizes fill target.fill_blocks
// blocks with 128 x 256 or 128 x 128 tiles: the width whose whole waves
// over the multiprocessors cost least (tiles of a partial last wave run
// alone). Its consumers run the epilogue between their tiles, not
// overlapped with any multiply (one block per multiprocessor), which on the
// H200 (2026-12-04) made BERT's FFN GEMM with GELU (K = 768) 1.5x slower than
// the cp.async pipeline's two blocks: short K takes it only with a cheap
// epilogue. N <= 64 would leave half of each 128-column tile empty.
static bool use_tma(MmaPlan& p, const loop::ContractView& c, int64_t batch, int64_t m, int64_t n, int64_t k,
                    const GemmTarget& target) {
  if (!p.wgmma || !target.tma || batch < 0 || m < 0 || n <= 64 || k < 0) return false;
  if (k < target.tma_min_k && (k < target.tma_min_k_cheap || epilogue_float_ops(c.epilogue) > 8)) return false;
  const DType t = p.precision == MmaPrecision::Bf16 ? DType::BF16 : DType::F16;
  const bool n_major = p.b_load == OperandLoad::VectorRows;
  if (!detail::tma_operand(c.a, t, c.k, c.i, c.batch) ||
      !(n_major ? detail::tma_operand(c.b, t, c.j, c.k, c.batch) : detail::tma_operand(c.b, t, c.k, c.j, c.batch)))
    return false;
  const auto blocks = [&](int64_t bn) { return batch * ((m + 127) / 128) * ((n + bn - 1) / bn); };
  const auto cost = [&](int64_t bn) { return (blocks(bn) + target.sm_count - 1) / target.sm_count * bn; };
  int bn = 0;
  for (int w : {256, 128}) {
    if ((w == 256 && n <= 128) || blocks(w) < target.fill_blocks) continue;
    if (bn == 0 || cost(w) < cost(bn)) bn = w;
  }
  if (bn == 0) return false;
  p.tma = true;
  p.tiles = make_tiles(128, bn, 8, 1, 64);
  p.stages = detail::tma_stages(bn);
  p.sm_count = target.sm_count;
  p.min_blocks = 1;
  return true;
}

MmaPlan plan_mma_gemm(const loop::StmtNode& s, const GemmTarget& target) {
  const loop::ContractView c = loop::contract_parts(s);
  MmaPlan p;
  if (exact_in(c.a, DType::BF16) && exact_in(c.b, DType::BF16)) {
    p.precision = MmaPrecision::Bf16;
  } else if (exact_in(c.a, DType::F16) && exact_in(c.b, DType::F16)) {
    p.precision = MmaPrecision::F16;
  }
  p.a_k_contiguous = k_contiguous(c.a, c.k, c.i, true);
  p.b_k_contiguous = k_contiguous(c.b, c.k, c.j, false);
  if (p.precision != MmaPrecision::Tf32x3) {
    const DType t = p.precision == MmaPrecision::Bf16 ? DType::BF16 : DType::F16;
    if (const loop::ExprNode* a = plain_load(c.a, t); a && vectorizable(*a, c.k, c.k_extent, {c.batch, c.i}))
      p.a_load = OperandLoad::VectorK;
    if (const loop::ExprNode* b = plain_load(c.b, t)) {
      if (vectorizable(*b, c.k, c.k_extent, {c.batch, c.j})) {
        p.b_load = OperandLoad::VectorK;
      } else if (vectorizable(*b, c.j, c.n, {c.batch, c.k})) {
        p.b_load = OperandLoad::VectorRows;
      }
    }
  }
  const auto known = [](const Expr& e) {
    int64_t v = -1;
    return loop::as_const_int(loop::simplify(e), &v) ? v : -1;
  };
  p.async_copy = p.a_load != OperandLoad::Elements && p.b_load != OperandLoad::Elements;
  p.tiles = tiles_for(known(c.batch_extent), known(c.m), known(c.n), known(c.k_extent), p.precision, p.b_load,
                      p.async_copy, target.fill_blocks);
  if (p.async_copy) {
    p.min_blocks = 2;
    if (target.wgmma && use_wgmma(p, target)) {
      use_tma(p, c, known(c.batch_extent), known(c.m), known(c.n), known(c.k_extent), target);
      return p;
    }
    for (p.stages = 4; p.stages > 2 && p.shared_bytes() > kMaxPipelineShared;) --p.stages;
  }
  return p;
}

namespace detail {

const char* mma_prelude() {
  return R"(
// ---- tensor-core GEMM helpers (codegen/cuda/mma_gemm.h) ----
// d += a * b on one 16x8 tile; fragments as the PTX ISA lays them out.
TS_D void ts_mma_bf16(float* d, const unsigned* a, const unsigned* b) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
TS_D void ts_mma_f16(float* d, const unsigned* a, const unsigned* b) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
TS_D void ts_mma_tf32(float* d, const unsigned* a, const unsigned* b) {
  asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
// x rounded to tf32 (nearest, ties away), as a 32-bit pattern.
TS_D unsigned ts_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(r) : "f"(x));
  return r;
}
// The tf32 rounding of x - big (exact in f32), the second part of 3xTF32;
// 0 when big is infinite or NaN (x - big would be NaN: inf * finite stays inf).
TS_D unsigned ts_tf32_small(float x, unsigned big) {
  const float hi = __uint_as_float(big);
  return fabsf(hi) < __uint_as_float(0x7f800000u) ? ts_tf32(x - hi) : 0u;
}
// Two values exactly representable in bf16 / f16, packed low k first.
TS_D unsigned ts_pack_bf16(float lo, float hi) {
  return (__float_as_uint(lo) >> 16) | (__float_as_uint(hi) & 0xffff0000u);
}
TS_D unsigned ts_pack_f16(float lo, float hi) {
  return (unsigned)ts_f2h(lo) | ((unsigned)ts_f2h(hi) << 16);
}
// ldmatrix: lane l gives row l % 8 of matrix l / 8 (x2: lanes 0-15).
TS_D unsigned ts_smem_addr(const void* p) {
  unsigned a;
  asm("{ .reg .u64 t; cvta.to.shared.u64 t, %1; cvt.u32.u64 %0, t; }" : "=r"(a) : "l"(p));
  return a;
}
TS_D void ts_ldsm_x4(unsigned* d, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]) : "r"(ts_smem_addr(row)));
}
TS_D void ts_ldsm_x2(unsigned* d, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];" : "=r"(d[0]), "=r"(d[1]) : "r"(ts_smem_addr(row)));
}
TS_D void ts_ldsm_x2_trans(unsigned* d, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(d[0]), "=r"(d[1]) : "r"(ts_smem_addr(row)));
}
TS_D void ts_ldsm_x4_trans(unsigned* d, const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3]) : "r"(ts_smem_addr(row)));
}
// Eight halves, for 16-byte loads and stores.
struct __align__(16) ts_u4 { unsigned x, y, z, w; };
// Two accumulators, for 8-byte shared stores.
struct __align__(8) ts_f2 { float x, y; };
// 16 bytes global -> byte `off` of the shared array `base`, without
// registers (zeros when !full; the source must still be a valid address);
// completes by commit group.
TS_D void ts_cp16_at(unsigned char* base, unsigned off, const void* gmem, bool full) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(ts_smem_addr(base) + off), "l"(gmem),
               "r"(full ? 16 : 0) : "memory");
}
TS_D void ts_cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N> TS_D void ts_cp_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
)";
}

// One wgmma.mma_async.m64nNk16 with f32 accumulators d[0 .. N / 2), added
// to d (scale-d = 1; the shared-A form's optional last argument 0 makes the
// product overwrite d, which then needs no zeroing); B from shared memory,
// K-major (trans_b = 0) or N-major (1). A from shared memory, K-major
// (imm-trans-a = 0): ts_wgmma_<type>_n<N>_t<trans_b>(d, a descriptor, b
// descriptor[, scale_d]); or,
// `a_regs`, from registers (a[0..3]: the warp's 16 rows of the 64 x 16 tile
// in mma.sync's A fragment layout; no imm-trans-a then):
// ts_wgmma_rs_<type>_n<N>_t<trans_b>(d, a, b descriptor).
static std::string wgmma_helper(int n, const char* type, int trans_b, bool a_regs) {
  const int regs = n / 2;  // the accumulators are operands %0 .. %(regs - 1)
  std::string accs, outs;
  for (int i = 0; i < regs; ++i) {
    accs += str_cat(i ? ", " : "", "%", i);
    outs += str_cat(i ? ", " : "", "\"+f\"(d[", i, "])");
  }
  const int b_at = a_regs ? regs + 4 : regs + 1;  // then the scale-d flag
  const std::string a_operand =
      a_regs ? str_cat("{%", regs, ", %", regs + 1, ", %", regs + 2, ", %", regs + 3, "}") : str_cat("%", regs);
  return str_cat("TS_D void ts_wgmma_", a_regs ? "rs_" : "", type, "_n", n, "_t", trans_b, "(float* d, ",
                 a_regs ? "const unsigned* a" : "unsigned long long a", ", unsigned long long b",
                 a_regs ? "" : ", int scale_d = 1", ") {\n",
                 "  asm volatile(\"{ .reg .pred p; setp.ne.b32 p, %", b_at + 1,
                 ", 0; wgmma.mma_async.sync.aligned.m64n", n, "k16.f32.", type, ".", type, " {", accs, "}, ",
                 a_operand, ", %", b_at, ", p, 1, 1, ", a_regs ? "" : "0, ", trans_b, "; }\"\n      : ", outs,
                 "\n      : ", a_regs ? "\"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3])" : "\"l\"(a)",
                 ", \"l\"(b), \"r\"(", a_regs ? "1" : "scale_d", ") : \"memory\");\n}\n");
}

const std::string& wgmma_prelude() {
  static const std::string text = [] {
    std::string t = R"(
// ---- Hopper warpgroup GEMM helpers (codegen/cuda/mma_gemm.h, sm_90a) ----
// Shared memory written by the generic proxy (cp.async included) must be
// fenced before the async proxy (wgmma) reads it.
TS_D void ts_fence_async_smem() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
TS_D void ts_wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
TS_D void ts_wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
TS_D void ts_wgmma_wait0() { asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory"); }
TS_D void ts_wgmma_wait1() { asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory"); }
// Matrix descriptors (PTX ISA, "Matrix Descriptor Format") of 128-byte
// swizzled tiles at shared address a: start address >> 4 (bits 0-13),
// leading byte offset >> 4 (bits 16-29), stride byte offset >> 4 (bits
// 32-45), swizzle mode 1 = 128 bytes (bits 62-63). K-major: the stride is
// 1024 bytes between 8-row groups; the leading offset is unused (1 by
// convention). N-major (B stored [K, N]): 64-column blocks of 64 k rows,
// the leading offset between blocks (64 * 128 bytes), the stride between
// groups of 8 k.
TS_D unsigned long long ts_wdesc(unsigned a) {
  return (unsigned long long)((a & 0x3FFFFu) >> 4) | (1ull << 16) | (64ull << 32) | (1ull << 62);
}
TS_D unsigned long long ts_wdesc_n(unsigned a) {
  return (unsigned long long)((a & 0x3FFFFu) >> 4) | (512ull << 16) | (64ull << 32) | (1ull << 62);
}

// ---- TMA, mbarriers, warp specialisation (tma_gemm.cpp) ----
struct __align__(64) ts_tmap { unsigned long long v[16]; };  // a CUtensorMap
TS_D void ts_mbar_init(unsigned bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
// The barriers' initialisation visible to the async proxy (the TMA).
TS_D void ts_mbar_fence_init() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }
TS_D void ts_mbar_expect_tx(unsigned bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
TS_D void ts_mbar_arrive(unsigned bar) { asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory"); }
// An arrival on `bar` once every cp.async this thread issued so far has
// landed (counted among the barrier's expected arrivals: .noinc).
TS_D void ts_cp_mbar_arrive(unsigned bar) {
  asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}
// Spins until the phase of parity `parity` has completed (a fresh barrier
// counts its phase before the first as completed with parity 1).
TS_D void ts_mbar_wait(unsigned bar, unsigned parity) {
  asm volatile(
      "{ .reg .pred p;\n"
      "ts_mbar_wait_loop:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%0], %1;\n"
      "@!p bra ts_mbar_wait_loop;\n"
      "}" ::"r"(bar), "r"(parity) : "memory");
}
TS_D void ts_tma_2d(unsigned dst, const ts_tmap* map, unsigned bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];"
      ::"r"(dst), "l"(map), "r"(bar), "r"(c0), "r"(c1) : "memory");
}
TS_D void ts_tma_3d(unsigned dst, const ts_tmap* map, unsigned bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];"
      ::"r"(dst), "l"(map), "r"(bar), "r"(c0), "r"(c1), "r"(c2) : "memory");
}
// A barrier of `n` threads (a multiple of 32) with id 1-15 (0 is __syncthreads).
TS_D void ts_bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
template <int N> TS_D void ts_setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N)); }
template <int N> TS_D void ts_setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N)); }
)";
    for (const char* type : {"bf16", "f16"})
      for (int n : {64, 128, 256})
        for (int trans_b : {0, 1}) t += wgmma_helper(n, type, trans_b, false);
    // Flash attention's P V: P from registers, V N-major.
    for (const char* type : {"bf16", "f16"})
      for (int n : {64, 128, 256}) t += wgmma_helper(n, type, 1, true);
    return t;
  }();
  return text;
}

namespace {

// Writes one GEMM kernel body (see mma_gemm.h for the structure).
class MmaWriter {
  // One operand's way from memory to its shared tile.
  struct Side {
    const char* smem = "";    // the shared tile
    const char* reg = "";     // the registers between global and shared
    OperandLoad how = OperandLoad::Elements;
    int rows = 0;             // BM or BN
    bool k_major = true;      // Elements: consecutive threads along k
    std::string row_var;      // i or j
    const char* row0 = "";    // the tile's first row
    const char* extent = "";  // M or N
    const Expr* value = nullptr;
    int units = 0;            // per thread: elements (pairs of halves) or vectors
    int vectors = 0;          // vectors per tile
    // Vectors: the element offset a step of k moves the flat index by (1
    // for VectorK, the row stride for VectorRows) when that index is affine;
    // nullopt for views whose runs are contiguous but jump between them
    // (heads split out of k), whose index is evaluated per K step.
    std::optional<int64_t> k_stride;
  };
 public:
  MmaWriter(const loop::StmtNode& s, const MmaPlan& p, CodeSink& out)
      : c_(loop::contract_parts(s)), p_(p), t_(p.tiles), out_(out) {
    halves_ = p.precision != MmaPrecision::Tf32x3;
    sm_ = p.wgmma ? "ts_sm" : "ts_dsmem";
    kpack_ = halves_ ? 2 : 1;
    units_per_row_ = t_.bk / kpack_;
    row_units_ = halves_ ? t_.bk / 2 + 4 : t_.bk + 4;
    wm_ = t_.bm / t_.warps_m;
    wn_ = t_.bn / t_.warps_n;
    mt_ = wm_ / 16;
    nt_ = wn_ / 8;
    TS_CHECK(wm_ % 16 == 0 && wn_ % 8 == 0 && t_.bk % 16 == 0, "cuda mma: bad tiles");
    TS_CHECK(t_.bm * units_per_row_ % t_.threads() == 0 && t_.bn * units_per_row_ % t_.threads() == 0,
             "cuda mma: tiles do not divide among the threads");
    const int a_units = t_.bm * units_per_row_ / t_.threads(), b_units = t_.bn * units_per_row_ / t_.threads();
    a_ = Side{"ts_As", "ts_ra", p.a_load, t_.bm, p.a_k_contiguous, c_.i, "ts_m0", "ts_M", &c_.a, a_units, 0, {}};
    b_ = Side{p.b_load == OperandLoad::VectorRows ? "ts_Bh" : "ts_Bs", "ts_rb", p.b_load, t_.bn, p.b_k_contiguous,
              c_.j, "ts_n0", "ts_N", &c_.b, b_units, 0, {}};
    for (Side* x : {&a_, &b_}) {
      if (x->how == OperandLoad::Elements) continue;
      x->vectors = x->rows * t_.bk / 8;
      x->units = (x->vectors + t_.threads() - 1) / t_.threads();
      if (const std::optional<loop::Affine> f = flat_affine(*x->value->node->args[0].node)) {
        const auto it = f->coef.find(c_.k);
        x->k_stride = it == f->coef.end() ? 0 : it->second;
      }
    }
  }

  void write() {
    ExprEmitter& ex = out_.expr();
    line("{");
    out_.indent(1);
    line(str_cat("// ", mma_precision_name(p_.precision), " tensor-core GEMM: block tile ", t_.bm, "x", t_.bn, "x",
                 t_.bk, ", ", t_.warps_m, "x", t_.warps_n, " warps",
                 p_.async_copy ? str_cat(", ", p_.stages, "-stage cp.async pipeline") : "",
                 p_.wgmma ? ", wgmma on 128-byte swizzled tiles" : "",
                 p_.wgmma_overlap ? ", one k-step in flight" : ""));
    line(str_cat("const long long ts_B = ", ex.emit(c_.batch_extent), ", ts_M = ", ex.emit(c_.m),
                 ", ts_N = ", ex.emit(c_.n), ", ts_K = ", ex.emit(c_.k_extent), ";"));
    line(str_cat("const long long ts_tiles_m = (ts_M + ", t_.bm - 1, "ll) / ", t_.bm, "ll;"));
    line(str_cat("const long long ts_ktiles = (ts_K + ", t_.bk - 1, "ll) / ", t_.bk, "ll;"));
    declare_shared();
    line("const int ts_tid = (int)threadIdx.x, ts_warp = ts_tid >> 5, ts_lane = ts_tid & 31;");
    line(str_cat("const int ts_wm = ts_warp / ", t_.warps_n, ", ts_wn = ts_warp % ", t_.warps_n,
                 ", ts_g = ts_lane >> 2, ts_t = ts_lane & 3;"));
    line(str_cat("const long long ts_n0 = (long long)blockIdx.x * ", t_.bn, "ll;"));
    if (p_.async_copy) split_ = split_epilogue(contract_epilogue_vars(c_), c_.epilogue, out_);
    if (!split_) epilogue_lambda(contract_epilogue_vars(c_), c_.epilogue, out_);
    line("for (long long ts_my = blockIdx.y; ts_my < ts_tiles_m * ts_B; ts_my += gridDim.y) {");
    out_.indent(1);
    line(str_cat("const long long ", var_name(c_.batch), " = ts_my / ts_tiles_m;"));
    line(str_cat("const long long ts_m0 = (ts_my % ts_tiles_m) * ", t_.bm, "ll;"));
    line(str_cat("float ts_acc[", mt_, "][", nt_, "][4];"));
    loop_nest({{"ts_mt", mt_}, {"ts_nt", nt_}, {"ts_r", 4}}, [&] { line("ts_acc[ts_mt][ts_nt][ts_r] = 0.0f;"); });
    if (p_.async_copy) {
      async_main_loop();
      shared_epilogue();
    } else {
      registers_main_loop();
      epilogue_calls();
    }
    out_.indent(-1);
    line("}");
    out_.indent(-1);
    line("}");
  }

 private:
  // The shared tiles: two static stages, or `stages` in dynamic shared
  // memory (A's stages, then B's) seen through pointers of the same shape.
  void declare_shared() {
    const char* elem = halves_ ? "unsigned" : "float";
    const std::string b_dims = b_.how == OperandLoad::VectorRows ? str_cat("[", t_.bk, "][", t_.bn + 8, "]")
                                                                 : str_cat("[", t_.bn, "][", row_units_, "]");
    const char* b_elem = b_.how == OperandLoad::VectorRows ? "unsigned short" : elem;
    const std::string a_dims = str_cat("[", t_.bm, "][", row_units_, "]");
    if (p_.wgmma) {
      // The tiles start at a 1024-byte boundary of the shared window: the
      // swizzle is a function of the address bits (4-6 xor 7-9), so every
      // 8-row atom must start at such a boundary.
      line("extern __shared__ __align__(1024) unsigned char ts_dsmem[];");
      line("unsigned char* const ts_sm = ts_dsmem + ((1024u - (ts_smem_addr(ts_dsmem) & 1023u)) & 1023u);");
      line("const unsigned ts_sm_addr = ts_smem_addr(ts_sm);");
      // Descriptors: ts_wdesc / ts_wdesc_n (wgmma_prelude).
      return;
    }
    if (!p_.async_copy) {
      line(str_cat("__shared__ __align__(16) ", elem, " ts_As[2]", a_dims, ";"));
      line(str_cat("__shared__ __align__(16) ", b_elem, " ", b_.smem, "[2]", b_dims, ";"));
      return;
    }
    line("extern __shared__ __align__(16) unsigned char ts_dsmem[];");
    line(str_cat(elem, " (*ts_As)", a_dims, " = reinterpret_cast<", elem, " (*)", a_dims, ">(ts_dsmem);"));
    line(str_cat(b_elem, " (*", b_.smem, ")", b_dims, " = reinterpret_cast<", b_elem, " (*)", b_dims, ">(ts_dsmem + ",
                 shared_layout(b_).start, ");"));
  }

  // Two stages filled through registers: the loads of tile t + 1 are in
  // flight during tile t's mmas, then stored.
  void registers_main_loop() {
    for (const Side* x : {&a_, &b_}) {
      line(x->how == OperandLoad::Elements ? str_cat("float ", x->reg, "[", x->units, "][", kpack_, "];")
                                           : str_cat("ts_u4 ", x->reg, "[", x->units, "];"));
    }
    line("if (ts_ktiles > 0) {");
    out_.indent(1);
    line("const long long ts_k0 = 0;");
    load_tiles();
    store_tiles("0");
    out_.indent(-1);
    line("}");
    line("__syncthreads();");
    line("for (long long ts_kt = 0; ts_kt < ts_ktiles; ++ts_kt) {");
    out_.indent(1);
    line("const int ts_s = (int)(ts_kt & 1);");
    line("const bool ts_more = ts_kt + 1 < ts_ktiles;");
    line("if (ts_more) {");
    out_.indent(1);
    line(str_cat("const long long ts_k0 = (ts_kt + 1) * ", t_.bk, "ll;"));
    load_tiles();
    out_.indent(-1);
    line("}");
    compute();
    line("if (ts_more) {");
    out_.indent(1);
    store_tiles("ts_s ^ 1");
    out_.indent(-1);
    line("}");
    line("__syncthreads();");
    out_.indent(-1);
    line("}");
  }

  // S stages filled by cp.async, A = S - 1 tiles ahead; one commit group
  // per tile (empty past the last), so waiting until A - 1 groups are
  // pending means tile t has landed. At step t the copy of tile t + A goes
  // into the stage of tile t - 1, which every warp finished before the
  // __syncthreads above it. With wgmma_overlap A = S - 2: the copy goes into
  // tile t - 2's stage, whose wgmmas every warpgroup waited for at step
  // t - 1 (those of t - 1 may still run). Stage numbers are int counters (a
  // 64-bit `% S` per step is a dozen instructions).
  void async_main_loop() {
    const int S = p_.stages, ahead = p_.wgmma_overlap ? S - 2 : S - 1;
    for (const Side* x : {&a_, &b_}) vector_sources(*x);
    line(str_cat("for (int ts_p = 0; ts_p < ", ahead, "; ++ts_p) {"));
    out_.indent(1);
    line("if (ts_p < ts_ktiles) {");
    out_.indent(1);
    line(str_cat("const long long ts_k0 = (long long)ts_p * ", t_.bk, "ll;"));
    copy_tiles("ts_p");
    out_.indent(-1);
    line("}");
    line("ts_cp_commit();");
    out_.indent(-1);
    line("}");
    line(str_cat("int ts_s = 0, ts_ws = ", ahead, ";"));
    line("for (long long ts_kt = 0; ts_kt < ts_ktiles; ++ts_kt) {");
    out_.indent(1);
    line(str_cat("ts_cp_wait<", ahead - 1, ">();"));
    if (p_.wgmma) line("ts_fence_async_smem();");
    line("__syncthreads();");
    line(str_cat("if (ts_kt + ", ahead, " < ts_ktiles) {"));
    out_.indent(1);
    line(str_cat("const long long ts_k0 = (ts_kt + ", ahead, ") * ", t_.bk, "ll;"));
    copy_tiles("ts_ws");
    out_.indent(-1);
    line("}");
    line("ts_cp_commit();");
    compute();
    line(str_cat("ts_s = ts_s == ", S - 1, " ? 0 : ts_s + 1;"));
    line(str_cat("ts_ws = ts_ws == ", S - 1, " ? 0 : ts_ws + 1;"));
    out_.indent(-1);
    line("}");
    // The epilogue reuses the stages: every copy landed and every warp done.
    if (p_.wgmma_overlap) line("ts_wgmma_wait0();");
    line("ts_cp_wait<0>();");
    line("__syncthreads();");
  }

  void line(const std::string& s) { out_.line(s); }

  void loop_nest(const std::vector<std::pair<const char*, int>>& loops, const std::function<void()>& body) {
    unrolled_loops(out_, loops, body);
  }

  // Element (row r, unit u) of this thread's q-th unit of a tile with `rows`
  // rows, consecutive threads along k (k_major) or along the rows.
  void unit_position(int rows, bool k_major) {
    line(str_cat("const int ts_e = ts_tid + ts_q * ", t_.threads(), ";"));
    if (k_major) {
      line(str_cat("const int ts_row = ts_e / ", units_per_row_, ", ts_u = ts_e % ", units_per_row_, ";"));
    } else {
      line(str_cat("const int ts_row = ts_e % ", rows, ", ts_u = ts_e / ", rows, ";"));
    }
  }

  // Registers <- the operands at k tile ts_k0: a(b, i, k) and b(b, k, j),
  // 0 outside [0, M) x [0, K) and [0, K) x [0, N). Each element (or vector)
  // is read at its indices clamped into range (a tile exists, so M, N, K >= 1
  // there; a vector's extent is a multiple of 8) and then selected:
  // straight-line loads that are all in flight together. A guard around each
  // load (`in range ? load : 0`) compiled to a branch per element with the
  // load's first use inside it, one memory latency per element: 11 us per K
  // step of BERT's GEMMs on the H200.
  void load_tiles() {
    for (const Side* x : {&a_, &b_}) {
      switch (x->how) {
        case OperandLoad::Elements: load_elements(*x); break;
        case OperandLoad::VectorK:
        case OperandLoad::VectorRows: load_vectors(*x); break;
      }
    }
  }

  void load_elements(const Side& x) {
    ExprEmitter& ex = out_.expr();
    loop_nest({{"ts_q", x.units}}, [&] {
      unit_position(x.rows, x.k_major);
      line(str_cat("const long long ts_ri = ", x.row0, " + ts_row;"));
      line(str_cat("const long long ", var_name(x.row_var), " = ts_ri < ", x.extent, " ? ts_ri : ", x.extent, " - 1;"));
      for (int p = 0; p < kpack_; ++p) {
        line("{");
        out_.indent(1);
        line(str_cat("const long long ts_rk = ts_k0 + ts_u * ", kpack_, " + ", p, ";"));
        line(str_cat("const long long ", var_name(c_.k), " = ts_rk < ts_K ? ts_rk : ts_K - 1;"));
        line(str_cat("const float ts_v = ", ex.emit(*x.value), ";"));
        line(str_cat(x.reg, "[ts_q][", p, "] = ts_ri < ", x.extent, " && ts_rk < ts_K ? ts_v : 0.0f;"));
        out_.indent(-1);
        line("}");
      }
    });
  }

  // Vector q of this thread: `outer` (rows of the shared tile: i/j for
  // VectorK, k for VectorRows) from ts_e / per_row, 8 consecutive `inner`
  // values (k, or j) from ts_e % per_row; consecutive threads read
  // consecutive 16 bytes.
  void vector_position(const Side& x) {
    const int per_row = x.how == OperandLoad::VectorK ? t_.bk / 8 : x.rows / 8;
    line(str_cat("const int ts_e = ts_tid + ts_q * ", t_.threads(), ";"));
    line(str_cat("const int ts_row = ts_e / ", per_row, ", ts_c = ts_e % ", per_row, ";"));
  }

  // The source of this thread's vector (ts_row, ts_c) of the tile at
  // ts_k0, through the operand's full index expression at indices clamped
  // into range (an address inside the buffer); sets ts_ro/ts_rv, the
  // unclamped outer and inner indices. Returns the address expression.
  std::string vector_source(const Side& x) {
    const bool k_inner = x.how == OperandLoad::VectorK;
    const std::string& outer = k_inner ? x.row_var : c_.k;
    const std::string& inner = k_inner ? c_.k : x.row_var;
    const char* outer_extent = k_inner ? x.extent : "ts_K";
    const char* inner_extent = k_inner ? "ts_K" : x.extent;
    line(str_cat("const long long ts_ro = ", k_inner ? x.row0 : "ts_k0", " + ts_row, ts_rv = ",
                 k_inner ? "ts_k0" : x.row0, " + ts_c * 8;"));
    line(str_cat("const long long ", var_name(outer), " = ts_ro < ", outer_extent, " ? ts_ro : ", outer_extent,
                 " - 1;"));
    line(str_cat("const long long ", var_name(inner), " = ts_rv < ", inner_extent, " ? ts_rv : ", inner_extent,
                 " - 8;"));
    const loop::ExprNode& load = *x.value->node->args[0].node;
    return str_cat("&", buffer_name(load.buffer->name), "[", out_.expr().flat_index(*load.buffer, load.args), "]");
  }

  // Each vector of the tile at ts_k0 into registers, zero outside.
  void load_vectors(const Side& x) {
    const bool k_inner = x.how == OperandLoad::VectorK;
    loop_nest({{"ts_q", x.units}}, [&] {
      vector_position(x);
      const std::string src = vector_source(x);
      line(str_cat("const ts_u4 ts_v = *(const ts_u4*)", src, ";"));
      line(str_cat(x.reg, "[ts_q] = ts_ro < ", k_inner ? x.extent : "ts_K", " && ts_rv < ",
                   k_inner ? "ts_K" : x.extent, " ? ts_v : ts_u4{0u, 0u, 0u, 0u};"));
    });
  }

  // The shared address of this thread's vector in a stage.
  static std::string vector_slot(const Side& x) {
    return x.how == OperandLoad::VectorK ? "[ts_row][ts_c * 4]" : "[ts_row][ts_c * 8]";
  }

  // A vector operand's shared tile as bytes: one stage, one of its rows,
  // and where its stages start in the dynamic shared memory.
  struct SharedLayout {
    int64_t stage = 0, row = 0, start = 0;
    int per_row = 0;  // vectors per tile row
  };
  SharedLayout shared_layout(const Side& x) const {
    SharedLayout l;
    if (p_.wgmma) {
      // 128-byte rows: [rows][BK] (K-major), or [BN / 64][BK][64] (N-major).
      l.row = 128;
      l.stage = x.rows * t_.bk * 2;
      l.per_row = x.how == OperandLoad::VectorRows ? x.rows / 8 : t_.bk / 8;
      l.start = &x == &a_ ? 0 : p_.stages * t_.bm * t_.bk * 2;
      return l;
    }
    if (x.how == OperandLoad::VectorRows) {
      l.row = int64_t{t_.bn + 8} * 2;
      l.stage = t_.bk * l.row;
      l.per_row = x.rows / 8;
    } else {
      l.row = tile_row_bytes(t_, p_.precision);
      l.stage = x.rows * l.row;
      l.per_row = t_.bk / 8;
    }
    l.start = &x == &a_ ? 0 : p_.stages * t_.bm * tile_row_bytes(t_, p_.precision);
    return l;
  }

  // Per (batch, M tile), before the K loop: each vector's source at K tile
  // 0 (ts_<x>p[q]: the full index expression, once) and its place in a
  // stage (ts_<x>s + q * step). Vector q of thread tid is vector tid + q *
  // threads of the tile: row tid / per_row + q * threads / per_row, column
  // tid % per_row. Rows are clamped into range and not zeroed: a row past
  // M (or N) only feeds outputs the epilogue drops. So a K step only adds k0
  // times the k stride to the pointers and tests k against K: no index
  // arithmetic of a view (floordiv/floormod of the row) per K step.
  void vector_sources(const Side& x) {
    const bool k_inner = x.how == OperandLoad::VectorK;
    const loop::ExprNode& load = *x.value->node->args[0].node;
    const SharedLayout l = shared_layout(x);
    TS_CHECK(t_.threads() % l.per_row == 0, "cuda mma: a tile row's vectors do not divide the threads");
    const std::string p = str_cat(x.reg, "p");
    if (p_.wgmma) {
      // 128-byte swizzle: chunk c of row r at chunk c ^ (r % 8), the row's
      // chunk cn = ts_tid % per_row in 64-column block cn / 8 (N-major B;
      // always 0 for K-major rows of 8 chunks). This thread's rows are
      // ts_tid / per_row + q * rows_per_q, all the same mod 8 (rows_per_q is
      // a multiple of 8), so its offsets differ by whole rows.
      TS_CHECK(t_.threads() / l.per_row % 8 == 0, "cuda wgmma: a thread's rows differ mod 8");
      line(str_cat("const unsigned ", x.reg, "s = ", l.start, "u + (unsigned)(ts_tid % ", l.per_row, " / 8) * ",
                   t_.bk * 128, "u + (unsigned)(ts_tid / ", l.per_row, ") * 128u + (unsigned)((ts_tid % ", l.per_row,
                   " % 8) ^ ((ts_tid / ", l.per_row, ") & 7)) * 16u;"));
    } else {
      line(str_cat("const unsigned ", x.reg, "s = ", l.start, "u + (unsigned)(ts_tid / ", l.per_row, ") * ", l.row,
                   "u + (unsigned)(ts_tid % ", l.per_row, ") * 16u;"));
    }
    if (!x.k_stride) return;  // copy_tiles evaluates the whole index per K step
    line(str_cat("const ", detail::storage_type(load.buffer->dtype), "* ", p, "[", x.units, "];"));
    loop_nest({{"ts_q", x.units}}, [&] {
      vector_position(x);
      const std::string row0 = k_inner ? str_cat(x.row0, " + ts_row") : str_cat(x.row0, " + ts_c * 8");
      line(str_cat("const long long ts_ro = ", row0, ";"));
      line(str_cat("const long long ", var_name(x.row_var), " = ts_ro < ", x.extent, " ? ts_ro : ", x.extent,
                   k_inner ? " - 1;" : " - 8;"));
      line(str_cat("const long long ", var_name(c_.k), " = ", k_inner ? "ts_c * 8" : "ts_row", ";"));
      line(str_cat(p, "[ts_q] = &", buffer_name(load.buffer->name), "[",
                   out_.expr().flat_index(*load.buffer, load.args), "];"));
    });
  }

  // The tile at ts_k0 into shared stage `stage` with cp.async, zero-filled
  // at k >= K (the source is then the buffer's start: an address cp.async
  // may be given without reading from it).
  void copy_tiles(const std::string& stage) {
    for (const Side* x : {&a_, &b_}) {
      const bool k_inner = x->how == OperandLoad::VectorK;
      const loop::ExprNode& load = *x->value->node->args[0].node;
      const SharedLayout l = shared_layout(*x);
      const int64_t rows_per_q = t_.threads() / l.per_row;
      line("{");
      out_.indent(1);
      if (x->k_stride) line(str_cat("const long long ts_ko = ts_k0 * ", *x->k_stride, "ll;"));
      line(str_cat("const unsigned ts_so = ", x->reg, "s + (unsigned)(", stage, ") * ", l.stage, "u;"));
      if (k_inner) line(str_cat("const bool ts_in = ts_k0 + (ts_tid % ", l.per_row, ") * 8 < ts_K;"));
      for (int q = 0; q < x->units; ++q) {
        const std::string in =
            k_inner ? "ts_in" : str_cat("ts_k0 + ts_tid / ", l.per_row, " + ", q * rows_per_q, " < ts_K");
        const std::string dst = str_cat("ts_so + ", q * rows_per_q * l.row, "u");
        // The last thread round may cover fewer vectors than threads.
        const int64_t first = int64_t{q} * t_.threads();
        const std::string guard =
            first + t_.threads() <= x->vectors ? "" : str_cat("if (ts_tid < ", x->vectors - first, ") ");
        if (x->k_stride) {
          line(str_cat(guard, "ts_cp16_at(", sm_, ", ", dst, ", ", in, " ? ", x->reg, "p[", q, "] + ts_ko : ",
                       buffer_name(load.buffer->name), ", ", in, ");"));
          continue;
        }
        line(str_cat(guard, "{"));
        out_.indent(1);
        line(str_cat("const int ts_q = ", q, ";"));
        vector_position(*x);
        const std::string src = vector_source(*x);
        line(str_cat("ts_cp16_at(", sm_, ", ", dst, ", ", src, ", ", in, ");"));
        out_.indent(-1);
        line("}");
      }
      out_.indent(-1);
      line("}");
    }
  }

  // Shared stage `stage` <- the registers (packed pairs of halves, floats,
  // or whole vectors).
  void store_tiles(const std::string& stage) {
    for (const Side* x : {&a_, &b_}) {
      if (x->how != OperandLoad::Elements) {
        loop_nest({{"ts_q", x->units}}, [&] {
          vector_position(*x);
          const std::string store = str_cat("*(ts_u4*)&", x->smem, "[", stage, "]", vector_slot(*x), " = ", x->reg, "[ts_q];");
          line(x->vectors % t_.threads() == 0 ? store : str_cat("if (ts_e < ", x->vectors, ") ", store));
        });
        continue;
      }
      loop_nest({{"ts_q", x->units}}, [&] {
        unit_position(x->rows, x->k_major);
        std::string value = str_cat(x->reg, "[ts_q][0]");
        if (halves_) {
          value = str_cat(p_.precision == MmaPrecision::Bf16 ? "ts_pack_bf16(" : "ts_pack_f16(", x->reg,
                          "[ts_q][0], ", x->reg, "[ts_q][1])");
        }
        line(str_cat(x->smem, "[", stage, "][ts_row][ts_u] = ", value, ";"));
      });
    }
  }

  // The warp's mmas over shared stage ts_s.
  void compute() {
    if (p_.wgmma) return wgmma_compute();
    const int ksteps = halves_ ? 16 : 8;  // k per mma
    const int step_units = ksteps / kpack_;  // shared units (words or floats) per mma step
    // Column offsets of the fragments within one step: halves: words t and
    // t + 4 (k 2t and 2t + 8); tf32: floats t and t + 4.
    line("#pragma unroll");
    line(str_cat("for (int ts_kk = 0; ts_kk < ", units_per_row_, "; ts_kk += ", step_units, ") {"));
    out_.indent(1);
    line(str_cat("unsigned ts_fa[", mt_, "][4], ts_fb[", nt_, "][2];"));
    if (!halves_) line(str_cat("unsigned ts_fa2[", mt_, "][4], ts_fb2[", nt_, "][2];"));
    if (halves_) {
      half_fragments();
    } else {
      loop_nest({{"ts_mt", mt_}}, [&] {
        line(str_cat("const int ts_r0 = ts_wm * ", wm_, " + ts_mt * 16 + ts_g;"));
        // a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4).
        const char* at[4] = {"[ts_r0][ts_kk + ts_t]", "[ts_r0 + 8][ts_kk + ts_t]", "[ts_r0][ts_kk + ts_t + 4]",
                             "[ts_r0 + 8][ts_kk + ts_t + 4]"};
        for (int q = 0; q < 4; ++q) fragment("ts_fa", "ts_fa2", "ts_mt", q, str_cat("ts_As[ts_s]", at[q]));
      });
      loop_nest({{"ts_nt", nt_}}, [&] {
        line(str_cat("const int ts_c0 = ts_wn * ", wn_, " + ts_nt * 8 + ts_g;"));
        // b0 (k t, col g), b1 (k t + 4, col g).
        const char* at[2] = {"[ts_c0][ts_kk + ts_t]", "[ts_c0][ts_kk + ts_t + 4]"};
        for (int q = 0; q < 2; ++q) fragment("ts_fb", "ts_fb2", "ts_nt", q, str_cat("ts_Bs[ts_s]", at[q]));
      });
    }
    loop_nest({{"ts_mt", mt_}, {"ts_nt", nt_}}, [&] {
      const std::string acc = "ts_acc[ts_mt][ts_nt]";
      switch (p_.precision) {
        case MmaPrecision::Bf16: line(str_cat("ts_mma_bf16(", acc, ", ts_fa[ts_mt], ts_fb[ts_nt]);")); break;
        case MmaPrecision::F16: line(str_cat("ts_mma_f16(", acc, ", ts_fa[ts_mt], ts_fb[ts_nt]);")); break;
        case MmaPrecision::Tf32x3:
          // The small cross terms first, then the big product.
          line(str_cat("ts_mma_tf32(", acc, ", ts_fa2[ts_mt], ts_fb[ts_nt]);"));
          line(str_cat("ts_mma_tf32(", acc, ", ts_fa[ts_mt], ts_fb2[ts_nt]);"));
          line(str_cat("ts_mma_tf32(", acc, ", ts_fa[ts_mt], ts_fb[ts_nt]);"));
          break;
      }
    });
    out_.indent(-1);
    line("}");
  }

  // The warpgroup's wgmmas over shared stage ts_s: its 64 rows of A (warps
  // 4 w .. 4 w + 3 of the block are warpgroup w) times all BN rows of B, one
  // wgmma per 16 k (32 bytes into each 128-byte row: the descriptor's start
  // moves, the swizzle follows from the address bits). Committed, then
  // waited for at once (the stage is free again at the next __syncthreads),
  // or with wgmma_overlap all but this group (async_main_loop says why).
  void wgmma_compute() {
    const SharedLayout la = shared_layout(a_), lb = shared_layout(b_);
    line("{");
    out_.indent(1);
    line(str_cat("const unsigned ts_da = ts_sm_addr + (unsigned)ts_s * ", la.stage, "u + (unsigned)(ts_warp >> 2) * ",
                 64 * la.row, "u;"));
    line(str_cat("const unsigned ts_db = ts_sm_addr + ", lb.start, "u + (unsigned)ts_s * ", lb.stage, "u;"));
    line("ts_wgmma_fence();");
    line("#pragma unroll");
    line(str_cat("for (int ts_kk = 0; ts_kk < ", t_.bk / 16, "; ++ts_kk) {"));
    out_.indent(1);
    // A k16 step is 32 bytes into a K-major row, or 16 rows of 128 bytes of an N-major tile.
    const bool n_major = b_.how == OperandLoad::VectorRows;
    line(str_cat("ts_wgmma_", p_.precision == MmaPrecision::Bf16 ? "bf16" : "f16", "_n", t_.bn, "_t", n_major ? 1 : 0,
                 "(&ts_acc[0][0][0], ts_wdesc(ts_da + ts_kk * 32u), ",
                 n_major ? "ts_wdesc_n(ts_db + ts_kk * 2048u)" : "ts_wdesc(ts_db + ts_kk * 32u)", ");"));
    out_.indent(-1);
    line("}");
    line("ts_wgmma_commit();");
    line(p_.wgmma_overlap ? "ts_wgmma_wait1();" : "ts_wgmma_wait0();");
    out_.indent(-1);
    line("}");
  }

  // Halves' fragments with ldmatrix (8x8 matrices of 16-bit values; lane l
  // gives the address of row l % 8 of matrix l / 8 and receives, of matrix j,
  // row l / 4, columns 2 (l % 4) and + 1, or with .trans the transpose).
  //   A, 16 x 16 of [rows][k] words: matrices (rows 0-7, k 0-7), (8-15, 0-7),
  //     (0-7, 8-15), (8-15, 8-15): registers a0..a3 (row g / g + 8, k 2t / 2t + 8).
  //   B of [BN][BK] words: (cols 0-7, k 0-7), (0-7, 8-15): b0, b1.
  //   B of [BK][BN + 8] halves (VectorRows): rows k 0-7 and 8-15, transposed.
  // Rows are 16-byte aligned and 8 rows hit 8 distinct groups of 4 banks
  // (row strides of 20, 36 or 68 words, 4 mod 32 or 20 mod 32).
  void half_fragments() {
    loop_nest({{"ts_mt", mt_}}, [&] {
      line(str_cat("ts_ldsm_x4(ts_fa[ts_mt], &ts_As[ts_s][ts_wm * ", wm_,
                   " + ts_mt * 16 + (ts_lane & 15)][ts_kk + (ts_lane >> 4) * 4]);"));
    });
    loop_nest({{"ts_nt", nt_}}, [&] {
      if (b_.how == OperandLoad::VectorRows) {
        line(str_cat("ts_ldsm_x2_trans(ts_fb[ts_nt], &ts_Bh[ts_s][2 * ts_kk + (ts_lane & 15)][ts_wn * ", wn_,
                     " + ts_nt * 8]);"));
      } else {
        line(str_cat("ts_ldsm_x2(ts_fb[ts_nt], &ts_Bs[ts_s][ts_wn * ", wn_,
                     " + ts_nt * 8 + (ts_lane & 7)][ts_kk + ((ts_lane >> 3) & 1) * 4]);"));
      }
    });
  }

  // Register q of an f32 fragment from shared element `at`: its tf32 big
  // and small parts.
  void fragment(const char* big, const char* small, const char* tile, int q, const std::string& at) {
    const std::string b = str_cat(big, "[", tile, "][", q, "]");
    line(str_cat("{ const float ts_x = ", at, "; ", b, " = ts_tf32(ts_x); ", small, "[", tile, "][", q,
                 "] = ts_tf32_small(ts_x, ", b, "); }"));
  }

  // The pipelined kernel's epilogue: the accumulators go to shared memory
  // (the stages are free now), then the block walks its tile row by row,
  // consecutive threads on consecutive columns. The epilogue is emitted once
  // in a loop, not once per accumulator: unrolled 64 times, BERT's GELU
  // made 16k instructions a warp that stalled on instruction fetch; and the
  // stores of a warp are now 32 consecutive elements of a row.
  void shared_epilogue() {
    const int ld = t_.bn + 8;
    line(str_cat("float (*ts_Cs)[", ld, "] = reinterpret_cast<float (*)[", ld, "]>(", sm_, ");"));
    loop_nest({{"ts_mt", mt_}, {"ts_nt", nt_}, {"ts_h", 2}}, [&] {
      line(str_cat("*(ts_f2*)&ts_Cs[ts_wm * ", wm_, " + ts_mt * 16 + ts_g + ts_h * 8][ts_wn * ", wn_,
                   " + ts_nt * 8 + ts_t * 2] = ts_f2{ts_acc[ts_mt][ts_nt][2 * ts_h], ts_acc[ts_mt][ts_nt][2 * ts_h + 1]};"));
    });
    line("__syncthreads();");
    if (split_ && !split_->store8) {
      // 8 rows a thread, consecutive threads on consecutive columns; values
      // first, then stores (split_epilogue_column).
      line(str_cat("for (int ts_e = ts_tid; ts_e < ", t_.bm * t_.bn / 8, "; ts_e += ", t_.threads(), ") {"));
      out_.indent(1);
      line(str_cat("const int ts_r = ts_e / ", t_.bn, ", ts_c = ts_e % ", t_.bn, ";"));
      line("const long long ts_i = ts_m0 + ts_r, ts_j = ts_n0 + ts_c;");
      split_epilogue_column(out_, *split_, var_name(c_.batch), str_cat("ts_Cs[ts_r + ts_q * ", t_.bm / 8, "][ts_c]"),
                            t_.bm / 8);
      out_.indent(-1);
      line("}");
    } else if (split_) {
      // 8 consecutive columns a thread: their values (and the epilogue's
      // loads, a residual's) first, then their stores, so that the loads
      // overlap instead of each waiting for the store before it.
      const std::string batch = var_name(c_.batch);
      line(str_cat("for (int ts_e = ts_tid; ts_e < ", t_.bm * t_.bn / 8, "; ts_e += ", t_.threads(), ") {"));
      out_.indent(1);
      line(str_cat("const int ts_r = ts_e / ", t_.bn / 8, ", ts_c = ts_e % ", t_.bn / 8, " * 8;"));
      line("const long long ts_i = ts_m0 + ts_r, ts_j = ts_n0 + ts_c;");
      split_epilogue_chunk(out_, *split_, batch, "ts_Cs[ts_r][ts_c + ts_q]");
      out_.indent(-1);
      line("}");
    } else {
      line("#pragma unroll 2");
      line(str_cat("for (int ts_e = ts_tid; ts_e < ", t_.bm * t_.bn, "; ts_e += ", t_.threads(), ") {"));
      out_.indent(1);
      line(str_cat("const int ts_r = ts_e / ", t_.bn, ", ts_c = ts_e % ", t_.bn, ";"));
      line("const long long ts_i = ts_m0 + ts_r, ts_j = ts_n0 + ts_c;");
      line(str_cat("if (ts_i < ts_M && ts_j < ts_N) ts_epilogue(", var_name(c_.batch),
                   ", ts_i, ts_j, ts_Cs[ts_r][ts_c]);"));
      out_.indent(-1);
      line("}");
    }
    // The next (batch, M tile) copies into the same memory.
    line("__syncthreads();");
  }

  // Accumulator r of tile (mt, nt): row g + 8 (r / 2), column 2t + r % 2.
  void epilogue_calls() {
    loop_nest({{"ts_mt", mt_}, {"ts_nt", nt_}, {"ts_r", 4}}, [&] {
      line(str_cat("const long long ts_i = ts_m0 + ts_wm * ", wm_, " + ts_mt * 16 + ts_g + (ts_r >> 1) * 8;"));
      line(str_cat("const long long ts_j = ts_n0 + ts_wn * ", wn_, " + ts_nt * 8 + ts_t * 2 + (ts_r & 1);"));
      line(str_cat("if (ts_i < ts_M && ts_j < ts_N) ts_epilogue(", var_name(c_.batch),
                   ", ts_i, ts_j, ts_acc[ts_mt][ts_nt][ts_r]);"));
    });
  }

  loop::ContractView c_;
  const MmaPlan& p_;
  const MmaTiles& t_;
  CodeSink& out_;
  bool halves_ = false;
  std::optional<SplitEpilogue> split_;  // the epilogue's ts_epi_value / ts_epi_store
  const char* sm_ = "ts_dsmem";  // the byte array the pipeline's stages are offsets into
  int kpack_ = 1, units_per_row_ = 0, row_units_ = 0, wm_ = 0, wn_ = 0, mt_ = 0, nt_ = 0;
  Side a_, b_;
};

}  // namespace

namespace {

// Runs body() with batch, row and col bounded by their extents (the
// ExprEmitter then writes index arithmetic that provably fits in 32 bits).
void with_epilogue_bounds(const EpilogueVars& v, CodeSink& out, const std::function<void()>& body) {
  ExprEmitter& ex = out.expr();
  const auto below = [&](const Expr& extent) -> std::optional<loop::Interval> {
    const std::optional<loop::Interval> e = ex.bounds(extent);
    if (!e || e->hi < 1) return std::nullopt;
    return loop::Interval{0, e->hi - 1};
  };
  ExprEmitter::Scope batch(ex, v.batch, below(v.batch_extent)), row(ex, v.row, below(v.rows)),
      col(ex, v.col, below(v.cols));
  body();
}

}  // namespace

// The lambda runs only for batch < B, row < M, col < N: with constant
// extents its index arithmetic can be 32-bit (the ExprEmitter's note). An
// assert's `return` leaves only that element's epilogue.
void epilogue_lambda(const EpilogueVars& v, const loop::Stmt& epilogue, CodeSink& out) {
  out.line(str_cat("auto ts_epilogue = [&](const long long ", var_name(v.batch), ", const long long ",
                   var_name(v.row), ", const long long ", var_name(v.col), ", const float ", var_name(v.acc), ") {"));
  out.indent(1);
  with_epilogue_bounds(v, out, [&] { out.stmt(epilogue); });
  out.indent(-1);
  out.line("};");
}

std::optional<SplitEpilogue> split_epilogue(const EpilogueVars& v, const loop::Stmt& epilogue, CodeSink& out) {
  std::vector<const loop::StmtNode*> lets;
  const loop::StmtNode* s = epilogue.node.get();
  while (s && s->kind == loop::StmtKind::Let) {
    lets.push_back(s);
    s = s->body[0].node.get();
  }
  if (!s || s->kind != loop::StmtKind::Store || s->buffer->scope != loop::BufferScope::Param) return std::nullopt;
  for (const loop::StmtNode* l : lets)
    for (const Expr& x : s->indices)
      if (loop::mentions_var(x, l->var)) return std::nullopt;
  const char* type = register_type(s->value.dtype());
  const std::string head = str_cat("const long long ", var_name(v.batch), ", const long long ", var_name(v.row),
                                   ", const long long ", var_name(v.col), ", ");
  out.line(str_cat("auto ts_epi_value = [&](", head, "const float ", var_name(v.acc), ") -> ", type, " {"));
  out.indent(1);
  with_epilogue_bounds(v, out, [&] {
    ExprEmitter& ex = out.expr();
    std::vector<std::unique_ptr<ExprEmitter::Scope>> scopes;
    for (const loop::StmtNode* l : lets) {
      out.line(
          str_cat("const ", register_type(l->value.dtype()), " ", var_name(l->var), " = ", ex.emit(l->value), ";"));
      scopes.push_back(std::make_unique<ExprEmitter::Scope>(ex, l->var, ex.bounds(l->value)));
    }
    out.line(str_cat("return ", ex.emit(s->value), ";"));
  });
  out.indent(-1);
  out.line("};");
  out.line(str_cat("auto ts_epi_store = [&](", head, "const ", type, " ts_value) {"));
  out.indent(1);
  with_epilogue_bounds(v, out, [&] {
    ExprEmitter& ex = out.expr();
    out.line(str_cat(buffer_name(s->buffer->name), "[", ex.flat_index(*s->buffer, s->indices),
                     "] = ", ExprEmitter::to_storage(s->buffer->dtype, "ts_value"), ";"));
  });
  out.indent(-1);
  out.line("};");
  // 8 elements whose offsets are consecutive and start at a multiple of 8
  // for col a multiple of 8: one 16-byte store of f16/bf16, two of f32, the
  // same bits.
  const DType t = s->buffer->dtype;
  const std::optional<Expr> flat = loop::constant_flat_index(*s->buffer, s->indices);
  const bool wide = (t == DType::BF16 || t == DType::F16 || t == DType::F32) && flat &&
                    loop::contiguous_runs(*flat, v.col, 8);
  if (wide) {
    out.line(str_cat("auto ts_epi_store8 = [&](", head, "const ", type, "* ts_value) {"));
    out.indent(1);
    with_epilogue_bounds(v, out, [&] {
      ExprEmitter& ex = out.expr();
      const auto word = [&](int w) {  // element w (f32) or elements 2w, 2w + 1 (halves) as 32 bits
        if (t == DType::F32) return str_cat("__float_as_uint(ts_value[", w, "])");
        const char* bits = t == DType::BF16 ? "ts_f2bf" : "ts_f2h";
        return str_cat("(unsigned)", bits, "(ts_value[", 2 * w, "]) | ((unsigned)", bits, "(ts_value[", 2 * w + 1,
                       "]) << 16)");
      };
      const std::string at = str_cat(buffer_name(s->buffer->name), "[", ex.flat_index(*s->buffer, s->indices), "]");
      for (int part = 0; part < (t == DType::F32 ? 2 : 1); ++part)
        out.line(str_cat("*((ts_u4*)&", at, " + ", part, ") = ts_u4{", word(4 * part), ", ", word(4 * part + 1), ", ",
                         word(4 * part + 2), ", ", word(4 * part + 3), "};"));
    });
    out.indent(-1);
    out.line("};");
  }
  return SplitEpilogue{type, wide};
}

void split_epilogue_chunk(CodeSink& out, const SplitEpilogue& split, const std::string& batch, const std::string& acc) {
  const bool store8 = split.store8;
  out.line("if (ts_i < ts_M) {");
  out.indent(1);
  out.line(str_cat(split.value_type, " ts_v[8];"));
  unrolled_loops(out, {{"ts_q", 8}}, [&] {
    out.line(str_cat("if (ts_j + ts_q < ts_N) ts_v[ts_q] = ts_epi_value(", batch, ", ts_i, ts_j + ts_q, ", acc, ");"));
  });
  if (store8) {
    out.line("if (ts_j + 8 <= ts_N) {");
    out.line(str_cat("  ts_epi_store8(", batch, ", ts_i, ts_j, ts_v);"));
    out.line("} else {");
    out.indent(1);
  }
  unrolled_loops(out, {{"ts_q", 8}}, [&] {
    out.line(str_cat("if (ts_j + ts_q < ts_N) ts_epi_store(", batch, ", ts_i, ts_j + ts_q, ts_v[ts_q]);"));
  });
  if (store8) {
    out.indent(-1);
    out.line("}");
  }
  out.indent(-1);
  out.line("}");
}

void split_epilogue_column(CodeSink& out, const SplitEpilogue& split, const std::string& batch, const std::string& acc,
                           int row_step) {
  out.line("if (ts_j < ts_N) {");
  out.indent(1);
  out.line(str_cat(split.value_type, " ts_v[8];"));
  unrolled_loops(out, {{"ts_q", 8}}, [&] {
    out.line(str_cat("if (ts_i + ts_q * ", row_step, " < ts_M) ts_v[ts_q] = ts_epi_value(", batch, ", ts_i + ts_q * ",
                     row_step, ", ts_j, ", acc, ");"));
  });
  unrolled_loops(out, {{"ts_q", 8}}, [&] {
    out.line(str_cat("if (ts_i + ts_q * ", row_step, " < ts_M) ts_epi_store(", batch, ", ts_i + ts_q * ", row_step,
                     ", ts_j, ts_v[ts_q]);"));
  });
  out.indent(-1);
  out.line("}");
}

EpilogueVars contract_epilogue_vars(const loop::ContractView& c) {
  return {c.batch, c.i, c.j, c.acc, c.batch_extent, c.m, c.n};
}

void unrolled_loops(CodeSink& out, const std::vector<std::pair<const char*, int>>& loops,
                    const std::function<void()>& body) {
  for (const auto& [v, n] : loops) {
    out.line("#pragma unroll");
    out.line(str_cat("for (int ", v, " = 0; ", v, " < ", n, "; ++", v, ") {"));
    out.indent(1);
  }
  body();
  for (size_t i = 0; i < loops.size(); ++i) {
    out.indent(-1);
    out.line("}");
  }
}

namespace {

void check_launch_extent(const Expr& e, const char* what, const std::set<std::string>& syms) {
  loop::visit_expr(e, [&](const Expr& x) {
    TS_CHECK(x->kind != ExprKind::Var || syms.count(x->name), "cuda codegen: the contract's ", what, " uses ",
             x->name, ", but launch extents may use only the kernel's syms");
    TS_CHECK(x->kind != ExprKind::Load, "cuda codegen: the contract's ", what, " reads memory");
  });
}

}  // namespace

LaunchGeometry emit_mma_gemm(const loop::StmtNode& s, const MmaPlan& plan, const std::set<std::string>& syms,
                             CodeSink& out) {
  const loop::ContractView c = loop::contract_parts(s);
  check_launch_extent(c.batch_extent, "batch extent", syms);
  check_launch_extent(c.m, "M", syms);
  check_launch_extent(c.n, "N", syms);
  MmaWriter(s, plan, out).write();
  const MmaTiles& t = plan.tiles;
  LaunchGeometry g;
  g.grid[0] = loop::simplify(loop::floordiv(c.n + Expr(t.bn - 1), Expr(t.bn)));
  // M tiles times batch entries, a grid-stride loop beyond gridDim.y's limit.
  g.grid[1] = loop::simplify(loop::min(loop::floordiv(c.m + Expr(t.bm - 1), Expr(t.bm)) * c.batch_extent,
                                       Expr(65535)));
  g.block[0] = Expr(t.threads());
  if (plan.async_copy) g.shared_bytes = static_cast<unsigned>(plan.shared_bytes());
  return g;
}

}  // namespace detail
}  // namespace tessel::cuda
