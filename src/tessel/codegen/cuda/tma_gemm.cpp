// The warp-specialised Hopper GEMM (MmaPlan::tma): TMA copies into a ring of
// shared stages completing on mbarriers, wgmma from the stages, a persistent
// grid. One block per multiprocessor, 384 threads in three warpgroups:
//
//   warpgroup 0, the producer (one thread issues; registers given back with
//   setmaxnreg.dec): for each tile of this block, for each K step,
//     wait empty[s]; expect the stage's bytes on full[s]; TMA A and B -> stage s
//   warpgroups 1 and 2, the consumers (setmaxnreg.inc), rows 0-63 / 64-127
//   of the tile: for each tile, for each K step,
//     wait full[s]; 4 wgmma (k16 each) into the accumulators; commit;
//     wait until one group is pending (the previous step's wgmmas are done)
//     and release that step's stage on empty[]
//   then the epilogue, 32 columns at a time through a shared staging tile
//   per consumer (its own named barrier), while the producer already fills
//   the stages of the next tile.
//
// Tiles are visited in bands of 8 M tiles (the tiles running at once share
// rows of A and columns of B in L2). The TMA reads zeros outside the
// operands' dims, so edges in M, N and K need no code; the epilogue skips
// outputs outside [0, M) x [0, N).
#include <algorithm>

#include "tessel/codegen/cuda/emitter.h"
#include "tessel/loop/affine.h"
#include "tessel/support/error.h"

namespace tessel::cuda::detail {

using loop::Expr;
using loop::ExprKind;

namespace {

constexpr int kBm = 128, kBk = 64;
constexpr int kStageLd = 40;             // staging tile row: 32 floats + 8 (float2 stores conflict-free)
constexpr int kStagingBytes = 2 * 64 * kStageLd * 4;
constexpr int64_t kMaxShared = 227 * 1024;  // an H100/H200 block's dynamic shared memory
constexpr int kBandTiles = 8;               // M tiles per band of the tile order

}  // namespace

std::optional<TmaOperand> tma_operand(const Expr& operand, DType t, const std::string& inner,
                                      const std::string& outer, const std::string& batch) {
  if (operand->kind != ExprKind::Cast || operand->dtype != DType::F32) return std::nullopt;
  const Expr& x = operand->args[0];
  if (x->kind != ExprKind::Load || x->buffer->dtype != t || x->buffer->shape.empty()) return std::nullopt;
  int64_t leading = 0;
  if (!loop::as_const_int(loop::simplify(x->buffer->shape[0]), &leading)) return std::nullopt;
  const std::optional<Expr> flat = loop::constant_flat_index(*x->buffer, x->args);
  if (!flat) return std::nullopt;
  const std::optional<loop::Affine> f = loop::affine_form(loop::simplify(*flat));
  if (!f) return std::nullopt;
  TmaOperand op;
  op.buffer = x->buffer.get();
  op.offset = f->constant;
  for (const auto& [var, c] : f->coef) {
    if (var == inner) {
      if (c != 1) return std::nullopt;
    } else if (var == outer) {
      op.outer_stride = c;
    } else if (var == batch) {
      op.batch_stride = c;
    } else {
      return std::nullopt;
    }
  }
  // TMA: the start 16-byte aligned, strides multiples of 16 bytes (2-byte elements).
  const auto aligned = [](int64_t elems) { return elems >= 0 && elems % 8 == 0 && elems < (int64_t{1} << 39); };
  if (!f->coef.count(inner) || op.offset % 8 != 0 || op.offset < 0 || !aligned(op.outer_stride) ||
      !aligned(op.batch_stride) || op.outer_stride == 0)
    return std::nullopt;
  return op;
}

int tma_stages(int bn) {
  const int64_t stage = int64_t{kBm + bn} * kBk * 2;
  return static_cast<int>(std::min<int64_t>(6, (kMaxShared - kStagingBytes - 1024 - 128) / stage));
}

// The stages, their full and empty mbarriers, the staging tiles, 1024 bytes
// of alignment.
int64_t tma_shared_bytes(int bn, int stages) {
  return int64_t{stages} * (kBm + bn) * kBk * 2 + 2 * stages * 8 + kStagingBytes + 1024;
}

namespace {

class TmaGemmWriter {
 public:
  TmaGemmWriter(const loop::StmtNode& s, const MmaPlan& p, CodeSink& out)
      : c_(loop::contract_parts(s)), p_(p), bn_(p.tiles.bn), out_(out) {
    TS_CHECK(p.tma && (bn_ == 128 || bn_ == 256) && p.tiles.bm == kBm && p.tiles.bk == kBk,
             "cuda tma gemm: bad tiles");
    const DType t = p.precision == MmaPrecision::Bf16 ? DType::BF16 : DType::F16;
    n_major_ = p.b_load == OperandLoad::VectorRows;
    a_ = tma_operand(c_.a, t, c_.k, c_.i, c_.batch);
    b_ = n_major_ ? tma_operand(c_.b, t, c_.j, c_.k, c_.batch) : tma_operand(c_.b, t, c_.k, c_.j, c_.batch);
    TS_CHECK(a_ && b_, "cuda tma gemm: an operand is not a TMA copy");
    int64_t batches = 0;
    if (loop::as_const_int(loop::simplify(c_.batch_extent), &batches) && batches == 1)
      a_->batch_stride = b_->batch_stride = 0;  // 2-d maps: no batch coordinate
    a_stage_ = kBm * kBk * 2;
    b_stage_ = bn_ * kBk * 2;
    b_start_ = int64_t{p.stages} * a_stage_;
    bar_start_ = b_start_ + int64_t{p.stages} * b_stage_;
    staging_start_ = bar_start_ + 2 * p.stages * 8;
  }

  // The kernel body; returns the tensor maps of A and B.
  std::vector<TensorMapSpec> write() {
    ExprEmitter& ex = out_.expr();
    const int S = p_.stages;
    line("{");
    out_.indent(1);
    line(str_cat("// ", mma_precision_name(p_.precision), " tensor-core GEMM: block tile ", kBm, "x", bn_, "x", kBk,
                 ", warp-specialised (a TMA producer, two wgmma consumer warpgroups of 64 rows), ", S,
                 "-stage TMA pipeline, persistent over ", p_.sm_count, " blocks"));
    line(str_cat("const long long ts_B = ", ex.emit(c_.batch_extent), ", ts_M = ", ex.emit(c_.m),
                 ", ts_N = ", ex.emit(c_.n), ", ts_K = ", ex.emit(c_.k_extent), ";"));
    line(str_cat("const long long ts_tiles_m = (ts_M + ", kBm - 1, "ll) / ", kBm, "ll, ts_tiles_n = (ts_N + ",
                 bn_ - 1, "ll) / ", bn_, "ll;"));
    line("const long long ts_tiles = ts_B * ts_tiles_m * ts_tiles_n;");
    line(str_cat("const int ts_ktiles = (int)((ts_K + ", kBk - 1, "ll) / ", kBk, "ll);"));
    line("extern __shared__ __align__(1024) unsigned char ts_dsmem[];");
    line("unsigned char* const ts_sm = ts_dsmem + ((1024u - (ts_smem_addr(ts_dsmem) & 1023u)) & 1023u);");
    line("const unsigned ts_sm_addr = ts_smem_addr(ts_sm);");
    line(str_cat("const unsigned ts_full = ts_sm_addr + ", bar_start_, "u, ts_empty = ts_full + ", S * 8, "u;"));
    tile_order();
    line("const int ts_tid = (int)threadIdx.x;");
    split_ = split_epilogue(contract_epilogue_vars(c_), c_.epilogue, out_);
    if (!split_) epilogue_lambda(contract_epilogue_vars(c_), c_.epilogue, out_);
    line("if (ts_tid == 0) {");
    out_.indent(1);
    line(str_cat("for (int ts_s = 0; ts_s < ", S, "; ++ts_s) {"));
    line("  ts_mbar_init(ts_full + ts_s * 8u, 1u);");
    line("  ts_mbar_init(ts_empty + ts_s * 8u, 2u);  // one arrival per consumer warpgroup");
    line("}");
    line("ts_mbar_fence_init();");
    out_.indent(-1);
    line("}");
    line("__syncthreads();");
    line("if (ts_tid < 128) {");
    out_.indent(1);
    producer();
    out_.indent(-1);
    line("} else {");
    out_.indent(1);
    consumer();
    out_.indent(-1);
    line("}");
    out_.indent(-1);
    line("}");
    return {map_spec(*a_, c_.k_extent, c_.m, kBm), map_spec(*b_, n_major_ ? c_.n : c_.k_extent,
                                                             n_major_ ? c_.k_extent : c_.n, n_major_ ? kBk : bn_)};
  }

 private:
  void line(const std::string& s) { out_.line(s); }

  // Tile t (of ts_tiles) -> batch entry and the tile's first row and column:
  // batch-major, then bands of kBandTiles M tiles, column-major in a band.
  void tile_order() {
    line("auto ts_tile = [&](long long ts_u, long long& ts_b, long long& ts_m0, long long& ts_n0) {");
    out_.indent(1);
    line("const long long ts_per = ts_tiles_m * ts_tiles_n;");
    line("ts_b = ts_u / ts_per;");
    line("ts_u -= ts_b * ts_per;");
    line(str_cat("const long long ts_first = ts_u / (", kBandTiles, "ll * ts_tiles_n) * ", kBandTiles, "ll;"));
    line(str_cat("const long long ts_rows = ts_tiles_m - ts_first < ", kBandTiles, "ll ? ts_tiles_m - ts_first : ",
                 kBandTiles, "ll;"));
    line("ts_u -= ts_first * ts_tiles_n;");
    line(str_cat("ts_m0 = (ts_first + ts_u % ts_rows) * ", kBm, "ll;"));
    line(str_cat("ts_n0 = ts_u / ts_rows * ", bn_, "ll;"));
    out_.indent(-1);
    line("};");
  }

  // One TMA copy of `map` into shared offset `dst` at (inner, outer[, batch]).
  std::string copy(const TmaOperand& op, const char* map, const std::string& dst, const std::string& inner,
                   const std::string& outer) const {
    const bool batched = op.batch_stride != 0;
    return str_cat("ts_tma_", batched ? "3d" : "2d", "(ts_sm_addr + ", dst, ", &", map, ", ts_bar, ", inner, ", ",
                   outer, batched ? ", (int)ts_b" : "", ");");
  }

  void producer() {
    const int S = p_.stages;
    line("ts_setmaxnreg_dec<40>();");
    line("if (ts_tid == 0) {");
    out_.indent(1);
    line("int ts_s = 0;");
    line("unsigned ts_ph = 0;");
    line("for (long long ts_ti = blockIdx.x; ts_ti < ts_tiles; ts_ti += gridDim.x) {");
    out_.indent(1);
    line("long long ts_b, ts_m0, ts_n0;");
    line("ts_tile(ts_ti, ts_b, ts_m0, ts_n0);");
    line("for (int ts_kt = 0; ts_kt < ts_ktiles; ++ts_kt) {");
    out_.indent(1);
    line("const unsigned ts_bar = ts_full + ts_s * 8u;");
    line("ts_mbar_wait(ts_empty + ts_s * 8u, ts_ph ^ 1u);");
    line(str_cat("ts_mbar_expect_tx(ts_bar, ", (kBm + bn_) * kBk * 2, "u);"));
    line(copy(*a_, "ts_tma_a", str_cat("(unsigned)ts_s * ", a_stage_, "u"), str_cat("ts_kt * ", kBk), "(int)ts_m0"));
    if (n_major_) {
      // 64-column blocks of [BK][64] (the N-major layout of the descriptor).
      for (int c = 0; c < bn_ / 64; ++c) {
        line(copy(*b_, "ts_tma_b", str_cat(b_start_ + c * kBk * 128, "u + (unsigned)ts_s * ", b_stage_, "u"),
                  str_cat("(int)ts_n0 + ", c * 64), str_cat("ts_kt * ", kBk)));
      }
    } else {
      line(copy(*b_, "ts_tma_b", str_cat(b_start_, "u + (unsigned)ts_s * ", b_stage_, "u"), str_cat("ts_kt * ", kBk),
                "(int)ts_n0"));
    }
    line(str_cat("if (++ts_s == ", S, ") { ts_s = 0; ts_ph ^= 1u; }"));
    out_.indent(-1);
    line("}");
    out_.indent(-1);
    line("}");
    out_.indent(-1);
    line("}");
  }

  void consumer() {
    const int S = p_.stages, nt = bn_ / 8;
    const std::string batch = var_name(c_.batch);
    line("ts_setmaxnreg_inc<232>();");
    line("const int ts_wg = (ts_tid >> 7) - 1, ts_ltid = ts_tid & 127, ts_warp = ts_ltid >> 5;");
    line("const int ts_g = (ts_tid & 31) >> 2, ts_t = ts_tid & 3;");
    line(str_cat("float* const ts_cs = reinterpret_cast<float*>(ts_sm + ", staging_start_, ") + ts_wg * ",
                 64 * kStageLd, ";"));
    line("int ts_s = 0;");
    line("unsigned ts_ph = 0;");
    line("for (long long ts_ti = blockIdx.x; ts_ti < ts_tiles; ts_ti += gridDim.x) {");
    out_.indent(1);
    line(str_cat("long long ", batch, ", ts_m0, ts_n0;"));
    line(str_cat("ts_tile(ts_ti, ", batch, ", ts_m0, ts_n0);"));
    line(str_cat("float ts_acc[", nt, "][4];"));
    line("#pragma unroll");
    line(str_cat("for (int ts_q = 0; ts_q < ", nt, "; ++ts_q) ts_acc[ts_q][0] = ts_acc[ts_q][1] = ts_acc[ts_q][2] = "
                 "ts_acc[ts_q][3] = 0.0f;"));
    line("int ts_prev = 0;");
    line("for (int ts_kt = 0; ts_kt < ts_ktiles; ++ts_kt) {");
    out_.indent(1);
    line("ts_mbar_wait(ts_full + ts_s * 8u, ts_ph);");
    // A's rows: the consumer's 64 (8 KiB of the stage).
    line(str_cat("const unsigned ts_da = ts_sm_addr + (unsigned)ts_s * ", a_stage_, "u + (unsigned)ts_wg * ", 64 * 128,
                 "u;"));
    line(str_cat("const unsigned ts_db = ts_sm_addr + ", b_start_, "u + (unsigned)ts_s * ", b_stage_, "u;"));
    line("ts_wgmma_fence();");
    line("#pragma unroll");
    line(str_cat("for (int ts_kk = 0; ts_kk < ", kBk / 16, "; ++ts_kk) {"));
    line(str_cat("  ts_wgmma_", p_.precision == MmaPrecision::Bf16 ? "bf16" : "f16", "_n", bn_, "_t", n_major_ ? 1 : 0,
                 "(&ts_acc[0][0], ts_wdesc(ts_da + ts_kk * 32u), ",
                 n_major_ ? "ts_wdesc_n(ts_db + ts_kk * 2048u)" : "ts_wdesc(ts_db + ts_kk * 32u)", ");"));
    line("}");
    line("ts_wgmma_commit();");
    line("ts_wgmma_wait1();");
    line("if (ts_kt > 0 && ts_ltid == 0) ts_mbar_arrive(ts_empty + (unsigned)ts_prev * 8u);");
    line("ts_prev = ts_s;");
    line(str_cat("if (++ts_s == ", S, ") { ts_s = 0; ts_ph ^= 1u; }"));
    out_.indent(-1);
    line("}");
    line("ts_wgmma_wait0();");
    line("if (ts_ktiles > 0 && ts_ltid == 0) ts_mbar_arrive(ts_empty + (unsigned)ts_prev * 8u);");
    epilogue();
    out_.indent(-1);
    line("}");
  }

  // 32 columns at a time: the accumulators of those columns into the
  // staging tile (a switch, so that each case indexes them by constants and
  // they stay in registers), then the epilogue once, consecutive threads on
  // consecutive columns. The first barrier waits for the readers of the
  // previous chunk (or tile). Rows: the consumer's 64.
  void epilogue() {
    const std::string batch = var_name(c_.batch);
    const std::string rows = "ts_wg * 64";
    line("#pragma unroll 1");
    line(str_cat("for (int ts_c = 0; ts_c < ", bn_ / 32, "; ++ts_c) {"));
    out_.indent(1);
    line("ts_bar_sync(1 + ts_wg, 128);");
    line("switch (ts_c) {");
    for (int c = 0; c < bn_ / 32; ++c) {
      line(str_cat("case ", c, ":"));
      for (int q = 0; q < 4; ++q) {
        for (int r = 0; r < 2; ++r) {
          line(str_cat("  *(ts_f2*)&ts_cs[(ts_warp * 16 + ts_g + ", r * 8, ") * ", kStageLd, " + ", q * 8,
                       " + ts_t * 2] = ts_f2{ts_acc[", 4 * c + q, "][", 2 * r, "], ts_acc[", 4 * c + q, "][",
                       2 * r + 1, "]};"));
        }
      }
      line("  break;");
    }
    line("}");
    line("ts_bar_sync(1 + ts_wg, 128);");
    if (split_ && !split_->store8) {
      // 8 rows a thread (4 apart), a warp on the chunk's 32 columns
      // (split_epilogue_column).
      line("for (int ts_e = ts_ltid; ts_e < 256; ts_e += 128) {");
      out_.indent(1);
      line("const int ts_r = (ts_e >> 5) + (ts_e >> 7) * 28;  // rows 0-3 (+ 4 q), then 32-35");
      line(str_cat("const long long ts_i = ts_m0 + ", rows, " + ts_r, ts_j = ts_n0 + ts_c * 32 + (ts_e & 31);"));
      split_epilogue_column(out_, *split_, batch, str_cat("ts_cs[(ts_r + ts_q * 4) * ", kStageLd, " + (ts_e & 31)]"), 4);
      out_.indent(-1);
      line("}");
    } else if (split_) {
      // 8 consecutive columns a thread (split_epilogue_chunk: values, then stores).
      line("for (int ts_e = ts_ltid; ts_e < 256; ts_e += 128) {");
      out_.indent(1);
      line(str_cat("const long long ts_i = ts_m0 + ", rows, " + (ts_e >> 2), ts_j = ts_n0 + ts_c * 32 + (ts_e & 3) * 8;"));
      split_epilogue_chunk(out_, *split_, batch,
                           str_cat("ts_cs[(ts_e >> 2) * ", kStageLd, " + (ts_e & 3) * 8 + ts_q]"));
      out_.indent(-1);
      line("}");
    } else {
      line("#pragma unroll 2");
      line("for (int ts_e = ts_ltid; ts_e < 2048; ts_e += 128) {");
      line(str_cat("  const long long ts_i = ts_m0 + ", rows, " + (ts_e >> 5), ts_j = ts_n0 + ts_c * 32 + (ts_e & 31);"));
      line(str_cat("  if (ts_i < ts_M && ts_j < ts_N) ts_epilogue(", batch, ", ts_i, ts_j, ts_cs[(ts_e >> 5) * ",
                   kStageLd, " + (ts_e & 31)]);"));
      line("}");
    }
    out_.indent(-1);
    line("}");
  }

  TensorMapSpec map_spec(const TmaOperand& op, const Expr& inner, const Expr& outer, int outer_box) const {
    TensorMapSpec m;
    m.param = out_.param_index(*op.buffer);
    m.offset = op.offset;
    m.dims = {inner, outer};
    m.strides = {op.outer_stride * 2};
    m.box = {64, outer_box};
    if (op.batch_stride != 0) {
      m.dims.push_back(c_.batch_extent);
      m.strides.push_back(op.batch_stride * 2);
      m.box.push_back(1);
    }
    return m;
  }

  loop::ContractView c_;
  const MmaPlan& p_;
  int bn_;
  CodeSink& out_;
  bool n_major_ = false;
  std::optional<SplitEpilogue> split_;  // the epilogue's ts_epi_value / ts_epi_store
  std::optional<TmaOperand> a_, b_;
  int64_t a_stage_ = 0, b_stage_ = 0, b_start_ = 0, bar_start_ = 0, staging_start_ = 0;
};

}  // namespace

LaunchGeometry emit_tma_gemm(const loop::StmtNode& s, const MmaPlan& plan, CodeSink& out,
                             std::vector<TensorMapSpec>* maps) {
  *maps = TmaGemmWriter(s, plan, out).write();
  const loop::ContractView c = loop::contract_parts(s);
  const Expr tiles = loop::floordiv(c.m + Expr(kBm - 1), Expr(kBm)) *
                     loop::floordiv(c.n + Expr(plan.tiles.bn - 1), Expr(plan.tiles.bn)) * c.batch_extent;
  LaunchGeometry g;
  g.grid[0] = loop::simplify(loop::min(tiles, Expr(plan.sm_count)));
  g.block[0] = Expr(plan.threads());
  g.shared_bytes = static_cast<unsigned>(plan.shared_bytes());
  return g;
}

}  // namespace tessel::cuda::detail
