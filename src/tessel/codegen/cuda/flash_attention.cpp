// The attention statement (loop/ir.h) as one flash-attention kernel
// (docs/flash_attention.md). Two forms:
//
// mma.sync (FlashAttention-2's structure; any sm_80+):
//   grid (ceil(M / 64), min(batch, 65535)), 128 threads (warps of 16 query rows)
//   for each batch entry of this block (a grid-stride loop over gridDim.y):
//     shared Q <- the block's 64 query rows (0 past M); registers <- Q's mma fragments (ldmatrix)
//     O = 0, m = -inf, l = 0 per row
//     for each tile of 64 keys:
//       shared K, V <- the tile (0 past N); where both are plain loads, the
//         next tile's copies are in flight (cp.async, two buffers) meanwhile
//       S = Q K^T, s = (scale S + bias(batch, i, j)) log2(e); -inf past N
//       m' = max(m, row max of s); P = 2^(s - m'); l = l 2^(m - m') + row sum of P
//       O = O 2^(m - m') + P V (P rounded to bf16/f16 as the A fragment)
//     epilogue(batch, i, e, O / l) for each i < M (0 where l = 0: a row masked entirely)
//
// warp-specialised wgmma (GemmTarget::flash_wgmma, sm_90a; head sizes 64
// or 128, K and V plain loads), FlashAttention-3's structure:
//   384 threads: warpgroups 0 and 1 consume (64 query rows each, 128 a
//   block), warpgroup 2 produces: it copies 128-key tiles of K and V with
//   cp.async into two stages each, completing on mbarriers (full_k/full_v),
//   and waits for the consumers to free a stage (empty_k/empty_v) before
//   refilling it. A consumer warpgroup, for key tile t:
//     S_t = Q K_t^T (wgmma, Q and K from 128-byte swizzled shared tiles)
//     O += P_{t-1} V_{t-1} (wgmma, P from registers) in flight with it
//     wait for S_t (K_t's stage is free), softmax of S_t into P_t while the
//     tensor cores do P_{t-1} V_{t-1}; wait for that (V_{t-1}'s stage is
//     free), O *= 2^(m_{t-1} - m_t)
//   so each warpgroup's exponentials overlap its own matrix products, and
//   the producer's copies overlap both. setmaxnreg moves registers from the
//   producer (56) to the consumers (224).
//
// Rows live in mma.sync's accumulator layout (wgmma's m64 accumulators are
// four such warps stacked): thread (g, t) of a warp holds rows g and g + 8
// and, per 8 columns, columns 2t and 2t + 1; a row's statistics are reduced
// over the 4 threads of its quad (xor shuffles 1, 2). The score tile's
// accumulators are P's A fragments once packed in pairs. Unlike the
// evaluator, which rounds the normalised p to p_type, the kernel rounds the
// unnormalised exp(s - m') and divides at the end (both within the half
// type's rounding of each probability).
#include <functional>

#include "tessel/codegen/cuda/emitter.h"
#include "tessel/loop/affine.h"
#include "tessel/support/error.h"

namespace tessel::cuda::detail {

using loop::Expr;

namespace {

// The warp-specialised form's registers a thread (setmaxnreg): the producer
// gives back what the consumers take (56 x 128 + 224 x 256 = 168 x 384).
constexpr int kProducerRegs = 56, kConsumerRegs = 224;

class FlashWriter {
 public:
  FlashWriter(const loop::StmtNode& s, CodeSink& out, const GemmTarget& target)
      : a_(loop::attention_parts(s)), out_(out) {
    int64_t d = 0, e = 0;
    TS_CHECK(loop::as_const_int(loop::simplify(a_.d_extent), &d) &&
                 loop::as_const_int(loop::simplify(a_.e_extent), &e) && d > 0 && e > 0 && d % 16 == 0 &&
                 e % 16 == 0 && d <= 256 && e <= 256,
             "cuda codegen: the attention kernel takes constant head sizes that are multiples of 16 up to 256");
    d_ = static_cast<int>(d);
    e_ = static_cast<int>(e);
    if (exact_in(a_.q, DType::BF16) && exact_in(a_.k, DType::BF16) && exact_in(a_.v, DType::BF16)) {
      half_ = "bf16";
    } else if (exact_in(a_.q, DType::F16) && exact_in(a_.k, DType::F16) && exact_in(a_.v, DType::F16)) {
      half_ = "f16";
    } else {
      fail("cuda codegen: the attention kernel takes q, k and v that are bf16 or f16 values");
    }
    async_ = copyable(a_.k, a_.j, a_.d, d_) && copyable(a_.v, a_.j, a_.e, e_);
    // The warp-specialised form's two stages of K and V and the Q tile fit
    // in shared memory for head sizes up to 128 (160 KB at 128 / 128). It
    // pays for long key sequences (seq 4096: 322 against 184 TFLOP/s); with
    // one or two tiles of keys it has nothing to overlap and half the blocks
    // (BERT at seq 128: 5% slower, ViT at 197 even), so a known N under 512
    // keeps mma.sync (GemmTarget::flash_wgmma_min_keys).
    const auto head = [](int x) { return x == 64 || x == 128; };
    int64_t n = 0;
    const bool short_keys = loop::as_const_int(loop::simplify(a_.n), &n) && n < target.flash_wgmma_min_keys;
    ws_ = target.flash_wgmma && async_ && head(d_) && head(e_) && !short_keys;
    rows_ = ws_ ? 128 : 64;
    keys_ = ws_ ? 128 : 64;
    threads_ = ws_ ? 384 : 128;
    bias_zero_ = is_zero(loop::simplify(a_.bias));
    const Expr scale = loop::simplify(a_.scale);
    scale_positive_ = scale->kind == loop::ExprKind::FloatImm && scale->float_value > 0;
  }

  void write() {
    ExprEmitter& ex = out_.expr();
    line("{");
    out_.indent(1);
    line(str_cat("// flash attention (", half_, ws_ ? " wgmma, warp-specialised" : " mma.sync", "): ", rows_,
                 " query rows a block, ", threads_ / 32, " warps, tiles of ", keys_, " keys, head sizes ", d_, " / ",
                 e_));
    line(str_cat("const long long ts_B = ", ex.emit(a_.batch_extent), ", ts_M = ", ex.emit(a_.m), ", ts_N = ",
                 ex.emit(a_.n), ";"));
    // Scores in base 2: exp2f is one MUFU.EX2 and a little range handling.
    line(str_cat("const float ts_scale = ", ex.emit(a_.scale), " * 0x1.715476p+0f;  // log2(e)"));
    line("const float ts_ninf = __int_as_float(0xff800000);  // -inf");
    line(str_cat("extern __shared__ __align__(", ws_ ? 1024 : 16, ") unsigned char ts_dsmem[];"));
    if (ws_) {
      declare_swizzled_tiles();
    } else {
      const int qd = d_ + 8, vd = e_ + 8;  // padded rows (halves): ldmatrix rows on distinct banks
      line(str_cat("unsigned short (*ts_Qs)[", qd, "] = reinterpret_cast<unsigned short (*)[", qd, "]>(ts_dsmem);"));
      line(str_cat("unsigned short (*ts_Ks)[", qd, "] = reinterpret_cast<unsigned short (*)[", qd, "]>(ts_dsmem + ",
                   rows_ * qd * 2, ");"));
      line(str_cat("unsigned short (*ts_Vs)[", vd, "] = reinterpret_cast<unsigned short (*)[", vd, "]>(ts_dsmem + ",
                   (rows_ + buffers() * keys_) * qd * 2, ");"));
    }
    line("const int ts_tid = (int)threadIdx.x, ts_warp = ts_tid >> 5, ts_lane = ts_tid & 31;");
    line("const int ts_g = ts_lane >> 2, ts_t = ts_lane & 3;");
    line(str_cat("const long long ts_m0 = (long long)blockIdx.x * ", rows_, "ll;"));
    lambdas();
    if (ws_) {
      write_warp_specialised();
    } else {
      write_sync();
    }
    out_.indent(-1);
    line("}");
  }

  int threads() const { return threads_; }

  // Its grid, block and dynamic shared memory (the tiles; the
  // warp-specialised form's barriers and alignment slack too).
  LaunchGeometry launch() const {
    LaunchGeometry g;
    g.grid[0] = loop::simplify(loop::floordiv(a_.m + Expr(rows_ - 1), Expr(rows_)));
    g.grid[1] = loop::simplify(loop::min(a_.batch_extent, Expr(65535)));
    g.block[0] = Expr(threads_);
    g.shared_bytes = static_cast<unsigned>(
        ws_ ? 1024 + barriers_at() + 64
            : int64_t{rows_ + buffers() * keys_} * (d_ + 8) * 2 + int64_t{buffers() * keys_} * (e_ + 8) * 2);
    return g;
  }

 private:
  void line(const std::string& s) { out_.line(s); }

  void loop(const char* v, int n, const std::function<void()>& body) { unrolled_loops(out_, {{v, n}}, body); }

  static bool is_zero(const Expr& e) {
    return e->kind == loop::ExprKind::FloatImm && e->float_value == 0.0;
  }

  // ---- the mma.sync form ----

  void write_sync() {
    line("for (long long ts_bh = blockIdx.y; ts_bh < ts_B; ts_bh += gridDim.y) {");
    out_.indent(1);
    load_tile("ts_Qs", a_.q, a_.i, "ts_m0", "ts_M", a_.d, d_, rows_);
    line("__syncthreads();");
    line(str_cat("unsigned ts_qf[", d_ / 16, "][4];"));
    loop("ts_kk", d_ / 16, [&] {
      line("ts_ldsm_x4(ts_qf[ts_kk], &ts_Qs[ts_warp * 16 + (ts_lane & 15)][ts_kk * 16 + (ts_lane >> 4) * 8]);");
    });
    init_rows();
    if (async_) {
      // Tile t in buffer t % 2; tile t + 1's copies are issued before tile
      // t is waited for, into the buffer tile t - 1 was read from (the
      // barrier at the end of each tile frees it).
      line("int ts_buf = 0;");
      copy_k_tile("0ll", "ts_tid", threads_, "(unsigned char*)ts_Ks", "0u");
      copy_v_tile("0ll", "ts_tid", threads_, "(unsigned char*)ts_Vs", "0u");
      line("ts_cp_commit();");
    }
    line(str_cat("for (long long ts_n0 = 0; ts_n0 < ts_N; ts_n0 += ", keys_, "ll) {"));
    out_.indent(1);
    if (async_) {
      line(str_cat("if (ts_n0 + ", keys_, "ll < ts_N) {"));
      out_.indent(1);
      copy_k_tile(str_cat("ts_n0 + ", keys_, "ll").c_str(), "ts_tid", threads_, "(unsigned char*)ts_Ks",
                  str_cat("(unsigned)(ts_buf ^ 1) * ", k_pad_bytes(), "u").c_str());
      copy_v_tile(str_cat("ts_n0 + ", keys_, "ll").c_str(), "ts_tid", threads_, "(unsigned char*)ts_Vs",
                  str_cat("(unsigned)(ts_buf ^ 1) * ", v_pad_bytes(), "u").c_str());
      out_.indent(-1);
      line("}");
      line("ts_cp_commit();");
      line("ts_cp_wait<1>();  // tile t has landed (the newest group is t + 1's, or empty)");
      line("__syncthreads();");
      line(str_cat("unsigned short (*ts_Kb)[", d_ + 8, "] = ts_Ks + ts_buf * ", keys_, ";"));
      line(str_cat("unsigned short (*ts_Vb)[", e_ + 8, "] = ts_Vs + ts_buf * ", keys_, ";"));
    } else {
      line("__syncthreads();  // the previous tile is consumed");
      load_tile("ts_Ks", a_.k, a_.j, "ts_n0", "ts_N", a_.d, d_, keys_);
      load_tile("ts_Vs", a_.v, a_.j, "ts_n0", "ts_N", a_.e, e_, keys_);
      line("__syncthreads();");
      line(str_cat("unsigned short (*ts_Kb)[", d_ + 8, "] = ts_Ks;"));
      line(str_cat("unsigned short (*ts_Vb)[", e_ + 8, "] = ts_Vs;"));
    }
    zero_scores();
    key_fragments();
    scale_and_bias();
    softmax_stats();
    rescale();
    pv_sync();
    if (async_) {
      line("__syncthreads();  // buffer ts_buf is read: the copies two tiles on may go into it");
      line("ts_buf ^= 1;");
    }
    out_.indent(-1);
    line("}");
    epilogue();
    line("__syncthreads();  // the next batch entry reuses the tiles");
    out_.indent(-1);
    line("}");
  }

  // S = Q K^T with mma.sync: one ldmatrix.x4 gives the B fragments of two
  // 8-key tiles: lanes 0-15 address keys 16 np + 0-7 (k low, high), lanes
  // 16-31 keys 16 np + 8-15.
  void key_fragments() {
    loop("ts_kk", d_ / 16, [&] {
      loop("ts_np", keys_ / 16, [&] {
        line("unsigned ts_kb[4];");
        line("ts_ldsm_x4(ts_kb, &ts_Kb[ts_np * 16 + (ts_lane >> 4) * 8 + (ts_lane & 7)]"
             "[ts_kk * 16 + ((ts_lane >> 3) & 1) * 8]);");
        line(str_cat("ts_mma_", half_, "(ts_s[2 * ts_np], ts_qf[ts_kk], ts_kb);"));
        line(str_cat("ts_mma_", half_, "(ts_s[2 * ts_np + 1], ts_qf[ts_kk], ts_kb + 2);"));
      });
    });
  }

  // O += P V: P's A fragments from the score accumulators, V's B fragments
  // with ldmatrix .trans (lanes 16-31 address the second 8-column tile).
  void pv_sync() {
    loop("ts_kk", keys_ / 16, [&] {
      line(str_cat("const unsigned ts_pa[4] = {", packed_p("ts_kk", 0), ", ", packed_p("ts_kk", 1), ", ",
                   packed_p("ts_kk", 2), ", ", packed_p("ts_kk", 3), "};"));
      loop("ts_np", e_ / 16, [&] {
        line("unsigned ts_vb[4];");
        line("ts_ldsm_x4_trans(ts_vb, &ts_Vb[ts_kk * 16 + (ts_lane & 15)][ts_np * 16 + (ts_lane >> 4) * 8]);");
        line(str_cat("ts_mma_", half_, "(ts_o[2 * ts_np], ts_pa, ts_vb);"));
        line(str_cat("ts_mma_", half_, "(ts_o[2 * ts_np + 1], ts_pa, ts_vb + 2);"));
      });
    });
  }

  // ---- the warp-specialised wgmma form ----

  // Q, two stages of K and of V as wgmma reads them: 128-byte swizzled
  // tiles (1024-byte aligned) whose 64-column (128-byte) regions hold all
  // of the tile's rows (Q: 128, K: 128 keys, K-major); V N-major in two
  // halves of 64 keys, each a tile of that layout. Then the mbarriers:
  // full_k, full_v, empty_k, empty_v, two stages each.
  void declare_swizzled_tiles() {
    line("unsigned char* const ts_sm = ts_dsmem + ((1024u - (ts_smem_addr(ts_dsmem) & 1023u)) & 1023u);");
    line("unsigned char* const ts_Qw = ts_sm;");
    line(str_cat("unsigned char* const ts_Kw = ts_sm + ", q_bytes(), ";"));
    line(str_cat("unsigned char* const ts_Vw = ts_sm + ", q_bytes() + 2 * k_bytes(), ";"));
    line(str_cat("const unsigned ts_full_k = ts_smem_addr(ts_sm + ", barriers_at(),
                 "), ts_full_v = ts_full_k + 16u, ts_empty_k = ts_full_k + 32u, ts_empty_v = ts_full_k + 48u;"));
    line("// Byte offset of halves (r, c .. c + 7), c a multiple of 8, in a swizzled tile of `rows` rows.");
    line("auto ts_swz = [](int r, int c, int rows) -> unsigned {");
    line("  return (unsigned)((c >> 6) * rows * 128 + r * 128 + ((((c >> 3) & 7) ^ (r & 7)) << 4));");
    line("};");
  }

  void write_warp_specialised() {
    line("if (ts_tid == 0) {");
    line("  for (int ts_st = 0; ts_st < 2; ++ts_st) {");
    line("    ts_mbar_init(ts_full_k + 8u * ts_st, 128u);  // the producers' cp.async arrivals");
    line("    ts_mbar_init(ts_full_v + 8u * ts_st, 128u);");
    line("    ts_mbar_init(ts_empty_k + 8u * ts_st, 256u);  // every consumer thread");
    line("    ts_mbar_init(ts_empty_v + 8u * ts_st, 256u);");
    line("  }");
    line("  ts_mbar_fence_init();");
    line("}");
    line("__syncthreads();");
    line(str_cat("// Key tile number ts_it (counted over the batch entries too) is in stage ts_it & 1, "
                 "in that stage's phase (ts_it >> 1) & 1."));
    line("if (ts_warp >= 8) {");
    out_.indent(1);
    producer();
    out_.indent(-1);
    line("} else {");
    out_.indent(1);
    consumer();
    out_.indent(-1);
    line("}");
  }

  void producer() {
    line(str_cat("ts_setmaxnreg_dec<", kProducerRegs, ">();"));
    line("const int ts_ptid = ts_tid - 256;");
    line("long long ts_it = 0;");
    line("for (long long ts_bh = blockIdx.y; ts_bh < ts_B; ts_bh += gridDim.y) {");
    line(str_cat("  for (long long ts_n0 = 0; ts_n0 < ts_N; ts_n0 += ", keys_, "ll, ++ts_it) {"));
    out_.indent(2);
    line("const unsigned ts_st = (unsigned)(ts_it & 1), ts_free = (unsigned)((ts_it >> 1) & 1) ^ 1u;");
    line("ts_mbar_wait(ts_empty_k + 8u * ts_st, ts_free);");
    copy_k_tile("ts_n0", "ts_ptid", 128, "ts_Kw", str_cat("ts_st * ", k_bytes(), "u").c_str());
    line("ts_cp_mbar_arrive(ts_full_k + 8u * ts_st);  // when this thread's copies have landed");
    line("ts_mbar_wait(ts_empty_v + 8u * ts_st, ts_free);");
    copy_v_tile("ts_n0", "ts_ptid", 128, "ts_Vw", str_cat("ts_st * ", v_bytes(), "u").c_str());
    line("ts_cp_mbar_arrive(ts_full_v + 8u * ts_st);");
    out_.indent(-2);
    line("  }");
    line("}");
    line("ts_cp_wait<0>();");
  }

  void consumer() {
    line(str_cat("ts_setmaxnreg_inc<", kConsumerRegs, ">();"));
    line("const int ts_cw = ts_warp >> 2;  // this warpgroup's rows: 64 ts_cw ..");
    line(str_cat("const unsigned ts_qaddr = ts_smem_addr(ts_Qw) + (unsigned)ts_cw * ", 64 * 128, "u;"));
    line("long long ts_it = 0;");
    line("for (long long ts_bh = blockIdx.y; ts_bh < ts_B; ts_bh += gridDim.y) {");
    out_.indent(1);
    line("ts_bar_sync(1 + ts_cw, 128);  // the last batch entry's wgmmas are done with Q");
    load_q_rows();
    line("ts_fence_async_smem();  // Q, written by the threads, read by wgmma");
    line("ts_bar_sync(1 + ts_cw, 128);");
    init_rows();
    // The first tile on its own and the last tile's P V after the loop, so
    // that every wgmma wait is unconditional: ptxas serialises the wgmmas
    // when a path it cannot rule out reads accumulators still in flight.
    line(str_cat("unsigned ts_pk[", keys_ / 16, "][4];  // P of the previous tile, wgmma's A fragments"));
    line("if (ts_N > 0) {");
    out_.indent(1);
    line("{");
    out_.indent(1);
    line("const long long ts_n0 = 0;");
    scores_async(false);
    line("ts_wgmma_wait0();");
    line("ts_mbar_arrive(ts_empty_k + 8u * ts_st);  // K_t is read");
    scale_and_bias();
    softmax_stats();
    pack_p("ts_pk");
    rescale();
    out_.indent(-1);
    line("}");
    line("++ts_it;");
    line(str_cat("for (long long ts_n0 = ", keys_, "ll; ts_n0 < ts_N; ts_n0 += ", keys_, "ll, ++ts_it) {"));
    out_.indent(1);
    scores_async(true);
    line("ts_wgmma_wait1();  // S (the older group)");
    line("ts_mbar_arrive(ts_empty_k + 8u * ts_st);  // K_t is read");
    scale_and_bias();
    softmax_stats();
    // P's registers are written only once the previous P V is done (the
    // register allocator may give them the registers it still reads).
    line("ts_wgmma_wait0();  // P V of the previous tile");
    line("ts_mbar_arrive(ts_empty_v + 8u * (unsigned)((ts_it - 1) & 1));");
    pack_p("ts_pk");
    rescale();
    out_.indent(-1);
    line("}");
    pv_descriptors();
    line("ts_wgmma_fence();");
    pv_wgmmas();
    line("ts_wgmma_wait0();");
    line("ts_mbar_arrive(ts_empty_v + 8u * (unsigned)((ts_it - 1) & 1));");
    out_.indent(-1);
    line("}");
    epilogue();
    out_.indent(-1);
    line("}");
  }

  // S = Q K_t^T issued for key tile ts_it at ts_n0 (m64nKk16 steps over d,
  // Q and K K-major) once its K stage is full; with `pv`, then O += P V of
  // the previous tile (ts_it - 1) in a second group. Every descriptor is
  // computed before the fence: ptxas serialises wgmmas whose input
  // registers are written while one is in flight.
  void scores_async(bool pv) {
    line("const unsigned ts_st = (unsigned)(ts_it & 1);");
    line("ts_mbar_wait(ts_full_k + 8u * ts_st, (unsigned)((ts_it >> 1) & 1));");
    if (pv) pv_descriptors();
    line("ts_fence_async_smem();  // K (and V), copied by cp.async, read by wgmma");
    line(str_cat("float ts_s[", keys_ / 8, "][4];  // the first k-step overwrites them"));
    line(str_cat("const unsigned ts_kaddr = ts_smem_addr(ts_Kw) + ts_st * ", k_bytes(), "u;"));
    line(str_cat("unsigned long long ts_qd[", d_ / 16, "], ts_kd[", d_ / 16, "];"));
    loop("ts_kk", d_ / 16, [&] {
      line(str_cat("ts_qd[ts_kk] = ts_wdesc(ts_qaddr + ", swizzled_step(rows_), ");"));
      line(str_cat("ts_kd[ts_kk] = ts_wdesc(ts_kaddr + ", swizzled_step(keys_), ");"));
    });
    line("ts_wgmma_fence();");
    loop("ts_kk", d_ / 16, [&] {
      line(str_cat("ts_wgmma_", half_, "_n", keys_, "_t0(&ts_s[0][0], ts_qd[ts_kk], ts_kd[ts_kk], ts_kk > 0);"));
    });
    line("ts_wgmma_commit();");
    if (pv) pv_wgmmas();
  }

  // The previous key tile's (number ts_it - 1) V stage, once full, as the
  // descriptors of P V's k-steps: 16 keys a step, 2048 bytes apart in a
  // 64-key half of the stage.
  void pv_descriptors() {
    line("const unsigned ts_pst = (unsigned)((ts_it - 1) & 1);");
    line("ts_mbar_wait(ts_full_v + 8u * ts_pst, (unsigned)(((ts_it - 1) >> 1) & 1));");
    line("ts_fence_async_smem();  // V, copied by cp.async, read by wgmma");
    line(str_cat("const unsigned ts_vaddr = ts_smem_addr(ts_Vw) + ts_pst * ", v_bytes(), "u;"));
    line(str_cat("unsigned long long ts_vd[", keys_ / 16, "];"));
    loop("ts_kk", keys_ / 16, [&] {
      line(str_cat("ts_vd[ts_kk] = ts_wdesc_n(ts_vaddr + (unsigned)(ts_kk >> 2) * ", v_bytes() / 2,
                   "u + (unsigned)(ts_kk & 3) * 2048u);"));
    });
  }

  // O += P V (m64nEk16, P from ts_pk) as one group, after pv_descriptors.
  void pv_wgmmas() {
    loop("ts_kk", keys_ / 16, [&] {
      line(str_cat("ts_wgmma_rs_", half_, "_n", e_, "_t1(&ts_o[0][0], ts_pk[ts_kk], ts_vd[ts_kk]);"));
    });
    line("ts_wgmma_commit();");
  }

  void pack_p(const char* regs) {
    loop("ts_kk", keys_ / 16, [&] {
      loop("ts_x", 4, [&] { line(str_cat(regs, "[ts_kk][ts_x] = ", packed_p("ts_kk", -1), ";")); });
    });
  }

  // The byte offset of k-step ts_kk (16 halves) in a swizzled K-major tile
  // of `rows` rows: 32 bytes a step within a 64-column region.
  static std::string swizzled_step(int rows) {
    return str_cat("(unsigned)(ts_kk >> 2) * ", rows * 128, "u + (unsigned)(ts_kk & 3) * 32u");
  }

  // The consumer warpgroup's 64 rows of Q into the swizzled Q tile.
  void load_q_rows() {
    load_tile("ts_Qw", a_.q, a_.i, "ts_m0", "ts_M", a_.d, d_, 64, "(ts_tid & 127)", 128, "ts_cw * 64");
  }

  // ---- shared by both forms ----

  int buffers() const { return async_ ? 2 : 1; }
  // Bytes of the swizzled Q tile (the block's rows of d halves), a K stage
  // (keys of d) and a V stage (keys of e); the padded tiles' K and V buffers.
  int q_bytes() const { return rows_ * d_ * 2; }
  int k_bytes() const { return keys_ * d_ * 2; }
  int v_bytes() const { return keys_ * e_ * 2; }
  int k_pad_bytes() const { return keys_ * (d_ + 8) * 2; }
  int v_pad_bytes() const { return keys_ * (e_ + 8) * 2; }
  int barriers_at() const { return q_bytes() + 2 * k_bytes() + 2 * v_bytes(); }

  // The plain load of `value` when 16-byte copies of 8 consecutive columns
  // read it exactly (else nullptr).
  const loop::ExprNode* vector_load(const Expr& value, const std::string& row_var, const std::string& col_var,
                                    int width) const {
    const DType t = half_ == std::string("bf16") ? DType::BF16 : DType::F16;
    const loop::ExprNode* load = plain_load(value, t);
    return load && vectorizable(*load, col_var, Expr(width), {a_.batch, row_var}) ? load : nullptr;
  }
  bool copyable(const Expr& value, const std::string& row_var, const std::string& col_var, int width) const {
    return vector_load(value, row_var, col_var, width) != nullptr;
  }

  // cp.async of the key tile at n0 of K (V) by threads `tid` .. of
  // `nthreads`, into the tile at byte `off` of `base`: 16 bytes a copy,
  // zero-filled past N (the clamped row keeps the address inside the
  // buffer). Swizzled (the warp-specialised form: V in halves of 64 keys)
  // or padded rows. `rows_apart`: the byte distance in the swizzled tile of
  // rows r and r + delta for delta a multiple of 8 with r % 64 + delta % 64
  // < 64 (the swizzle only moves a row's units by r % 8).
  void copy_k_tile(const char* n0, const char* tid, int nthreads, const std::string& base, const std::string& off) {
    const std::string at = ws_ ? "ts_swz(ts_r, ts_c, " + std::to_string(keys_) + ")"
                               : str_cat("(unsigned)(ts_r * ", (d_ + 8) * 2, " + ts_c * 2)");
    copy_tile(n0, tid, nthreads, a_.k, a_.d, d_, base, off + " + " + at, [](int delta) { return delta * 128; });
  }
  void copy_v_tile(const char* n0, const char* tid, int nthreads, const std::string& base, const std::string& off) {
    const std::string at = ws_ ? str_cat("(unsigned)(ts_r >> 6) * ", v_bytes() / 2, "u + ts_swz(ts_r & 63, ts_c, 64)")
                               : str_cat("(unsigned)(ts_r * ", (e_ + 8) * 2, " + ts_c * 2)");
    const int half = v_bytes() / 2;
    copy_tile(n0, tid, nthreads, a_.v, a_.e, e_, base, off + " + " + at,
              [half](int delta) { return (delta >> 6) * half + (delta & 63) * 128; });
  }
  void copy_tile(const char* n0, const char* tid, int nthreads, const Expr& value, const std::string& col_var,
                 int width, const std::string& base, const std::string& dst,
                 const std::function<int(int)>& rows_apart) {
    const loop::ExprNode* load = vector_load(value, a_.j, col_var, width);
    const int per_row = width / 8;
    const std::string src = str_cat("&", buffer_name(load->buffer->name), "[",
                                    out_.expr().flat_index(*load->buffer, load->args), "]");
    // The element distance of consecutive keys in the operand, where it is
    // one constant.
    std::optional<int64_t> key_stride;
    if (const std::optional<Expr> flat = loop::constant_flat_index(*load->buffer, load->args))
      if (const std::optional<loop::Affine> f = loop::affine_form(loop::simplify(*flat))) {
        const auto it = f->coef.find(a_.j);
        key_stride = it == f->coef.end() ? 0 : it->second;
      }
    const int step = nthreads / per_row;  // rows between a thread's copies
    const bool unrolled = ws_ && nthreads % per_row == 0 && step % 8 == 0 && key_stride;
    if (unrolled) {
      // The producer: a key tile below N is copied unclamped, each thread's
      // copies one source and one destination address plus constants.
      line(str_cat("if (", n0, " + ", keys_, "ll <= ts_N) {"));
      out_.indent(1);
      line(str_cat("const int ts_r0 = ", tid, " / ", per_row, ", ts_c = ", tid, " % ", per_row, " * 8, ts_r = ts_r0;"));
      line(str_cat("const long long ", var_name(a_.batch), " = ts_bh;"));
      line(str_cat("const long long ", var_name(a_.j), " = ", n0, " + ts_r0;"));
      line(str_cat("const long long ", var_name(col_var), " = ts_c;"));
      line(str_cat("const unsigned short* const ts_src = (const unsigned short*)", src, ";"));
      line(str_cat("const unsigned ts_dst = ", dst, ";"));
      for (int u = 0; u < keys_ * per_row / nthreads; ++u)
        line(str_cat("ts_cp16_at(", base, ", ts_dst + ", rows_apart(u * step), "u, ts_src + ",
                     *key_stride * u * step, "ll, true);"));
      out_.indent(-1);
      line("} else {");
      out_.indent(1);
    }
    line(str_cat("for (int ts_e = ", tid, "; ts_e < ", keys_ * per_row, "; ts_e += ", nthreads, ") {"));
    out_.indent(1);
    line(str_cat("const int ts_r = ts_e / ", per_row, ", ts_c = ts_e % ", per_row, " * 8;"));
    row_indices(a_.j, n0, "ts_N", col_var);
    line(str_cat("ts_cp16_at(", base, ", ", dst, ", ", src, ", ts_at < ts_N);"));
    out_.indent(-1);
    line("}");
    if (unrolled) {
      out_.indent(-1);
      line("}");
    }
  }

  // ts_bias(batch, i, j) and ts_epilogue(batch, i, e, acc): the statement's
  // bias and epilogue, each emitted once.
  void lambdas() {
    line(str_cat("auto ts_bias = [&](const long long ", var_name(a_.batch), ", const long long ", var_name(a_.i),
                 ", const long long ", var_name(a_.j), ") -> float { return ", out_.expr().emit(a_.bias), "; };"));
    epilogue_lambda({a_.batch, a_.i, a_.e, a_.acc, a_.batch_extent, a_.m, a_.e_extent}, a_.epilogue, out_);
  }

  // Shared tile `tile` <- rows [row0, row0 + rows) of `value` (its row
  // variable `row_var` up to `extent`, its column variable `col_var` over
  // [0, width)), the value's bits as stored (bf16/f16), 0 past the extent,
  // by threads `tid` .. of `nthreads`, into the tile's rows from `r0`: 16
  // bytes at a time when the value is a plain load contiguous in the column
  // (loads of a buffer or a view of one), else per element. The indices are
  // clamped into range so that every load is inside the buffer (the value
  // is then discarded).
  void load_tile(const char* tile, const Expr& value, const std::string& row_var, const char* row0,
                 const char* extent, const std::string& col_var, int width, int rows, const char* tid = "ts_tid",
                 int nthreads = 0, const char* r0 = "0") {
    if (nthreads == 0) nthreads = threads_;
    const loop::ExprNode* load = vector_load(value, row_var, col_var, width);
    const int per_row = load ? width / 8 : width;
    line(str_cat("for (int ts_e = ", tid, "; ts_e < ", rows * per_row, "; ts_e += ", nthreads, ") {"));
    out_.indent(1);
    line(str_cat("const int ts_r = ", r0, " + ts_e / ", per_row, ", ts_c = ts_e % ", per_row, load ? " * 8;" : ";"));
    row_indices(row_var, row0, extent, col_var);
    if (load) {
      // 16 bytes (8 consecutive columns) a load and a store.
      line(str_cat("const ts_u4 ts_v = *(const ts_u4*)&", buffer_name(load->buffer->name), "[",
                   out_.expr().flat_index(*load->buffer, load->args), "];"));
      line(str_cat("*(ts_u4*)", at(tile, "ts_c"), " = ts_at < ", extent, " ? ts_v : ts_u4{0u, 0u, 0u, 0u};"));
    } else {
      line(str_cat("const float ts_v = ts_at < ", extent, " ? ", out_.expr().emit(value), " : 0.0f;"));
      const char* bits = half_ == std::string("bf16") ? "ts_f2bf(ts_v)" : "ts_f2h(ts_v)";
      line(str_cat("*(unsigned short*)", at(tile, "ts_c"), " = ", bits, ";"));
    }
    out_.indent(-1);
    line("}");
  }

  // The address of tile element (ts_r, col): a padded tile's, or in the
  // swizzled Q tile (ts_Qw) the 16-byte unit's plus the element's offset.
  std::string at(const char* tile, const char* col) const {
    if (std::string(tile) == "ts_Qw")
      return str_cat("(ts_Qw + ts_swz(ts_r, ", col, " & ~7, ", rows_, ") + (", col, " & 7) * 2)");
    return str_cat("&", tile, "[ts_r][", col, "]");
  }

  // The operand's variables at tile element (ts_r, ts_c): the batch entry,
  // the row clamped into range (ts_at unclamped), the column.
  void row_indices(const std::string& row_var, const char* row0, const char* extent, const std::string& col_var) {
    line(str_cat("const long long ts_at = ", row0, " + ts_r;"));
    line(str_cat("const long long ", var_name(a_.batch), " = ts_bh;"));
    line(str_cat("const long long ", var_name(row_var), " = ts_at < ", extent, " ? ts_at : ", extent, " - 1;"));
    line(str_cat("const long long ", var_name(col_var), " = ts_c;"));
  }

  // O = 0, m = -inf, l = 0 for the thread's rows.
  void init_rows() {
    line(str_cat("float ts_o[", e_ / 8, "][4];"));
    loop("ts_q", e_ / 8, [&] { line("ts_o[ts_q][0] = ts_o[ts_q][1] = ts_o[ts_q][2] = ts_o[ts_q][3] = 0.0f;"); });
    line("float ts_mx[2] = {ts_ninf, ts_ninf}, ts_l[2] = {0.0f, 0.0f}, ts_alpha[2], ts_sum[2];");
  }

  void zero_scores() {
    line(str_cat("float ts_s[", keys_ / 8, "][4];"));
    loop("ts_q", keys_ / 8, [&] { line("ts_s[ts_q][0] = ts_s[ts_q][1] = ts_s[ts_q][2] = ts_s[ts_q][3] = 0.0f;"); });
  }

  // s = (scale S + bias) log2(e), -inf past N, as ts_f s: ts_f = 1, or,
  // without a bias and with a positive constant scale, for a tile of keys
  // all below N, ts_f = the scale and S as it is: the softmax folds the
  // scale into its exponent's FFMA (one multiply an element less).
  void scale_and_bias() {
    const auto general = [&] {
      loop("ts_nt", keys_ / 8, [&] {
        loop("ts_r", 4, [&] {
          line("const long long ts_i = ts_m0 + ts_warp * 16 + ts_g + (ts_r >> 1) * 8;");
          line("const long long ts_j = ts_n0 + ts_nt * 8 + ts_t * 2 + (ts_r & 1);");
          line("ts_s[ts_nt][ts_r] = ts_j < ts_N ? ts_scale * ts_s[ts_nt][ts_r] + "
               "0x1.715476p+0f * ts_bias(ts_bh, ts_i < ts_M ? ts_i : ts_M - 1, ts_j) : ts_ninf;");
        });
      });
    };
    if (!bias_zero_) {
      line("const float ts_f = 1.0f;");
      general();
      return;
    }
    line(str_cat("const bool ts_full = ts_n0 + ", keys_, "ll <= ts_N;"));
    line(scale_positive_ ? "const float ts_f = ts_full ? ts_scale : 1.0f;" : "const float ts_f = 1.0f;");
    line("if (ts_full) {");
    out_.indent(1);
    if (!scale_positive_)
      loop("ts_nt", keys_ / 8, [&] { loop("ts_r", 4, [&] { line("ts_s[ts_nt][ts_r] *= ts_scale;"); }); });
    out_.indent(-1);
    line("} else {");
    out_.indent(1);
    general();
    out_.indent(-1);
    line("}");
  }

  // The online softmax of the tile's rows g (h = 0) and g + 8 (h = 1): the
  // new maxima, P = 2^(s - m') in place of the scores, their row sums and
  // the factor 2^(m - m') that O and l take (rescale).
  void softmax_stats() {
    loop("ts_h", 2, [&] {
      line("float ts_tmax = ts_ninf;");
      loop("ts_nt", keys_ / 8, [&] {
        line("ts_tmax = fmaxf(ts_tmax, fmaxf(ts_s[ts_nt][2 * ts_h], ts_s[ts_nt][2 * ts_h + 1]));");
      });
      line("ts_tmax = fmaxf(ts_tmax, ts_shfl_xor(ts_tmax, 1));");
      line("ts_tmax = fmaxf(ts_tmax, ts_shfl_xor(ts_tmax, 2));");
      line("const float ts_new = fmaxf(ts_mx[ts_h], ts_tmax * ts_f);  // ts_f > 0");
      // Every score so far -inf: nothing to subtract (exp(-inf) = 0 leaves P 0).
      line("const float ts_base = ts_new == ts_ninf ? 0.0f : ts_new;");
      line("ts_alpha[ts_h] = ts_mx[ts_h] == ts_ninf ? 0.0f : exp2f(ts_mx[ts_h] - ts_base);");
      line("float ts_rs = 0.0f;");
      loop("ts_nt", keys_ / 8, [&] {
        loop("ts_c", 2, [&] {
          line("const float ts_p = exp2f(fmaf(ts_s[ts_nt][2 * ts_h + ts_c], ts_f, -ts_base));");
          line("ts_s[ts_nt][2 * ts_h + ts_c] = ts_p;");
          line("ts_rs += ts_p;");
        });
      });
      line("ts_sum[ts_h] = ts_rs;");
      line("ts_mx[ts_h] = ts_new;");
    });
  }

  // l = l alpha + the row sums, O = O alpha.
  void rescale() {
    loop("ts_h", 2, [&] {
      line("ts_l[ts_h] = ts_l[ts_h] * ts_alpha[ts_h] + ts_sum[ts_h];");
      loop("ts_q", e_ / 8, [&] {
        line("ts_o[ts_q][2 * ts_h] *= ts_alpha[ts_h];");
        line("ts_o[ts_q][2 * ts_h + 1] *= ts_alpha[ts_h];");
      });
    });
  }

  // Register x (0-3; -1: the loop variable ts_x) of P's A fragment for k16
  // block `kk` (score tiles 2 kk and 2 kk + 1), two probabilities packed.
  std::string packed_p(const char* kk, int x) const {
    const std::string pack = str_cat("ts_pack_", half_);
    if (x < 0)
      return str_cat(pack, "(ts_s[2 * ", kk, " + (ts_x >> 1)][(ts_x & 1) * 2], ts_s[2 * ", kk,
                     " + (ts_x >> 1)][(ts_x & 1) * 2 + 1])");
    return str_cat(pack, "(ts_s[2 * ", kk, " + ", x >> 1, "][", (x & 1) * 2, "], ts_s[2 * ", kk, " + ", x >> 1, "][",
                   (x & 1) * 2 + 1, "])");
  }

  // The rows' sums over their quads, then O / l through the epilogue.
  void epilogue() {
    loop("ts_h", 2, [&] {
      line("ts_l[ts_h] += ts_shfl_xor(ts_l[ts_h], 1);");
      line("ts_l[ts_h] += ts_shfl_xor(ts_l[ts_h], 2);");
    });
    line("#pragma unroll 1");
    line(str_cat("for (int ts_q = 0; ts_q < ", e_ / 8 * 4, "; ++ts_q) {"));
    out_.indent(1);
    // A runtime index into ts_o would put it in local memory: a switch of
    // constant indices keeps it in registers.
    line("float ts_acc = 0.0f;");
    line("switch (ts_q) {");
    for (int q = 0; q < e_ / 8 * 4; ++q) line(str_cat("  case ", q, ": ts_acc = ts_o[", q / 4, "][", q % 4, "]; break;"));
    line("}");
    line("const int ts_h = (ts_q & 3) >> 1;");
    line("const float ts_lh = ts_h ? ts_l[1] : ts_l[0];");
    line("const long long ts_i = ts_m0 + ts_warp * 16 + ts_g + ts_h * 8;");
    line("const long long ts_e = (ts_q >> 2) * 8 + ts_t * 2 + (ts_q & 1);");
    line("if (ts_i < ts_M) ts_epilogue(ts_bh, ts_i, ts_e, ts_lh == 0.0f ? 0.0f : ts_acc / ts_lh);");
    out_.indent(-1);
    line("}");
  }

  loop::AttentionView a_;
  CodeSink& out_;
  int d_ = 0, e_ = 0;
  const char* half_ = "bf16";
  bool async_ = false;     // K and V are plain loads: cp.async
  bool ws_ = false;        // the warp-specialised wgmma form (sm_90a)
  bool bias_zero_ = false;  // no bias (nor mask): full key tiles are only scaled
  bool scale_positive_ = false;  // ... in the softmax's exponent, for a constant scale > 0
  int rows_ = 64, keys_ = 64, threads_ = 128;  // query rows, keys a tile, threads a block
};

}  // namespace

int flash_attention_threads(const loop::StmtNode& s, CodeSink& out, const GemmTarget& target) {
  return FlashWriter(s, out, target).threads();
}

LaunchGeometry emit_flash_attention(const loop::StmtNode& s, CodeSink& out, const GemmTarget& target) {
  FlashWriter w(s, out, target);
  w.write();
  return w.launch();
}

}  // namespace tessel::cuda::detail
