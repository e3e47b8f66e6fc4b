// The schedule of a Contract statement as a tensor-core GEMM (mma_gemm.h):
// the precision its operands allow, how each operand reaches shared memory,
// the block tile, the stages, and on sm_90a the wgmma pipeline or the TMA
// kernel. The kernel itself: mma_kernel.cpp (mma_gemm_internal.h lists the
// files).
#include "tessel/codegen/cuda/mma_gemm.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "tessel/codegen/cuda/emitter.h"
#include "tessel/codegen/cuda/mma_gemm_internal.h"
#include "tessel/loop/affine.h"
#include "tessel/loop/scalar.h"
#include "tessel/loop/simplify.h"
#include "tessel/loop/visit.h"

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

}  // namespace

namespace detail {

// A row of a [rows][BK] shared tile: BK halves or floats, padded by 8 halves
// or 4 floats.
int64_t tile_row_bytes(const MmaTiles& t, MmaPrecision p) {
  return p == MmaPrecision::Tf32x3 ? (t.bk + 4) * 4 : (t.bk / 2 + 4) * 4;
}

}  // namespace detail

using detail::tile_row_bytes;

namespace {

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
// memory, or the pipeline's three in kMaxPipelineShared): half as many round
// trips to memory per output tile. `bk` (GemmTarget::bk) 32 keeps 32; 64
// widens whatever K is, where two stages fit.
MmaTiles tiles_for(int64_t batch, int64_t m, int64_t n, int64_t k, MmaPrecision p, OperandLoad b_load, bool async,
                   int64_t fill, int bk) {
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
  if (halves && (bk == 64 || (bk == 0 && k >= 256))) {
    MmaTiles wide = t;
    wide.bk = 64;
    const int64_t stages = async && bk == 0 ? 3 : 2;
    if (stages * stage_bytes(wide, p, b_load) <= (async ? kMaxPipelineShared : 48 * 1024)) t = wide;
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

}  // namespace

namespace detail {

// The flat index as an affine form of the loop variables (loop/affine.h,
// where reshape/transpose views pair up); nullopt when it is not one.
std::optional<loop::Affine> flat_affine(const loop::ExprNode& load) {
  const std::optional<Expr> flat = flat_index_of(load);
  return flat ? loop::affine_form(*flat) : std::nullopt;
}

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
  // The tile knobs' values are sets (schedule.cpp), checked here too: a
  // value the plan does not know must never reach it.
  for (const Primitive& k : knobs) check_knob(k);
  t.bk = static_cast<int>(knob_int(knobs, "gpu.gemm", "bk", 0));
  t.stages = static_cast<int>(knob_int(knobs, "gpu.gemm", "stages", 0));
  t.tma_bn = static_cast<int>(knob_int(knobs, "gpu.gemm", "tma_bn", 0));
  return t;
}

// The cp.async pipeline's stages: target.stages (4 when automatic), fewer
// while they overflow `limit` (never under 2).
static void fit_stages(MmaPlan& p, const GemmTarget& target, int64_t limit) {
  for (p.stages = target.stages ? target.stages : 4; p.stages > 2 && p.shared_bytes() > limit;) --p.stages;
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
  fit_stages(p, target, kMaxPipelineShared + 1024);
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
  // target.tma_bn picks the width once the kernel is taken.
  if (target.tma_bn == 128 || (target.tma_bn == 256 && n > 128)) bn = target.tma_bn;
  p.tma = true;
  p.tiles = make_tiles(128, bn, 8, 1, 64);
  p.stages = detail::tma_stages(bn);
  if (target.stages) p.stages = std::min(p.stages, target.stages);
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
                      p.async_copy, target.fill_blocks, target.bk);
  if (p.async_copy) {
    p.min_blocks = 2;
    if (target.wgmma && use_wgmma(p, target)) {
      use_tma(p, c, known(c.batch_extent), known(c.m), known(c.n), known(c.k_extent), target);
      return p;
    }
    fit_stages(p, target, kMaxPipelineShared);
  }
  return p;
}

}  // namespace tessel::cuda
