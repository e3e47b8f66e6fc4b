// The tensor-core GEMM kernel (mma_gemm.h; mma_gemm_internal.h lists its
// files): the body MmaWriter::write emits, its shared tiles, the main loops
// over K, the mma.sync / wgmma steps, and its launch (emit_mma_gemm). The
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
#include <functional>
#include <utility>
#include <vector>

#include "tessel/codegen/cuda/mma_gemm_internal.h"
#include "tessel/loop/visit.h"
#include "tessel/support/error.h"

namespace tessel::cuda::detail {

using loop::Expr;
using loop::ExprKind;

MmaWriter::MmaWriter(const loop::StmtNode& s, const MmaPlan& p, CodeSink& out)
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

void MmaWriter::write() {
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

// The shared tiles: two static stages, or `stages` in dynamic shared
// memory (A's stages, then B's) seen through pointers of the same shape.
void MmaWriter::declare_shared() {
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
void MmaWriter::registers_main_loop() {
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
void MmaWriter::async_main_loop() {
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

// The warp's mmas over shared stage ts_s.
void MmaWriter::compute() {
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
void MmaWriter::wgmma_compute() {
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
void MmaWriter::half_fragments() {
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
void MmaWriter::fragment(const char* big, const char* small, const char* tile, int q, const std::string& at) {
  const std::string b = str_cat(big, "[", tile, "][", q, "]");
  line(str_cat("{ const float ts_x = ", at, "; ", b, " = ts_tf32(ts_x); ", small, "[", tile, "][", q,
               "] = ts_tf32_small(ts_x, ", b, "); }"));
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

}  // namespace tessel::cuda::detail
