// The attention statement (loop/ir.h) as one flash-attention kernel
// (docs/flash_attention.md, step 3: FlashAttention-2's structure on
// mma.sync; with wgmma (GemmTarget::flash_wgmma, sm_90a, d a multiple of
// 64) the block's two warpgroups (128 query rows) compute S = Q K^T, and
// P V where e is a multiple of 64, with wgmma from 128-byte swizzled tiles
// instead; TMA and warp specialisation are the next step):
//
//   grid (ceil(M / R), min(batch, 65535)), 2 R threads (warps of 16 query rows; R = 64, wgmma 128)
//   for each batch entry of this block (a grid-stride loop over gridDim.y):
//     shared Q <- the block's R query rows (0 past M)     q(batch, i, d) per element
//     registers <- Q's mma fragments (ldmatrix; wgmma reads Q from shared)
//     O = 0, m = -inf, l = 0 per row
//     for each tile of 64 keys:
//       shared K, V <- the tile (0 past N); where both are plain loads, the
//         next tile's copies are in flight (cp.async, two buffers) meanwhile
//       S = Q K^T (mma.sync or wgmma), s = (scale S + bias(batch, i, j)) log2(e); -inf past N
//       m' = max(m, row max of s); P = 2^(s - m'); l = l 2^(m - m') + row sum of P
//       O = O 2^(m - m') + P V (P rounded to bf16/f16 as the A fragment)
//     epilogue(batch, i, e, O / l) for each i < M (0 where l = 0: a row masked entirely)
//
// Rows live in mma.sync's accumulator layout: thread (g, t) of a warp holds
// rows g and g + 8 and, per 8 columns, columns 2t and 2t + 1; a row's
// statistics are reduced over the 4 threads of its quad (xor shuffles 1, 2).
// The score tile's accumulators are P's A fragments once packed in pairs.
// Unlike the evaluator, which rounds the normalised p to p_type, the kernel
// rounds the unnormalised exp(s - m') and divides at the end (both within
// the half type's rounding of each probability).
#include <functional>

#include "tessel/codegen/cuda/emitter.h"
#include "tessel/support/error.h"

namespace tessel::cuda::detail {

using loop::Expr;

namespace {

constexpr int kKeys = 64;

class FlashWriter {
 public:
  FlashWriter(const loop::StmtNode& s, CodeSink& out, bool wgmma) : a_(loop::attention_parts(s)), out_(out) {
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
    wgmma_ = wgmma && async_ && d_ % 64 == 0;
    pv_wgmma_ = wgmma_ && e_ % 64 == 0;
    // wgmma: two warpgroups of 64 query rows share each K / V tile, half
    // the tile traffic a FLOP of one warpgroup a block.
    rows_ = wgmma_ ? 128 : 64;
    threads_ = 2 * rows_;  // warp w: rows 16 w .. 16 w + 15
  }

  void write() {
    ExprEmitter& ex = out_.expr();
    line("{");
    out_.indent(1);
    const char* form = !wgmma_ ? "mma.sync" : pv_wgmma_ ? "wgmma" : "wgmma scores, mma.sync P V";
    line(str_cat("// flash attention (", half_, " ", form, "): ", rows_, " query rows a block, ", threads_ / 32,
                 " warps, tiles of 64 keys, head sizes ", d_, " / ", e_));
    line(str_cat("const long long ts_B = ", ex.emit(a_.batch_extent), ", ts_M = ", ex.emit(a_.m), ", ts_N = ",
                 ex.emit(a_.n), ";"));
    // Scores in base 2: exp2f is one MUFU.EX2 and a little range handling.
    line(str_cat("const float ts_scale = ", ex.emit(a_.scale), " * 0x1.715476p+0f;  // log2(e)"));
    line("const float ts_ninf = __int_as_float(0xff800000);  // -inf");
    line(str_cat("extern __shared__ __align__(", wgmma_ ? 1024 : 16, ") unsigned char ts_dsmem[];"));
    const int qd = d_ + 8, vd = e_ + 8;  // padded rows (halves): ldmatrix rows on distinct banks
    if (wgmma_) {
      // Q and K as wgmma reads them: 128-byte swizzled K-major tiles (1024-
      // byte aligned), 64 columns (128 bytes) a region of the tile's rows
      // (Q: 128, K: 64); V in the K tiles' layout when wgmma reads it too
      // (N-major), else padded.
      line("unsigned char* const ts_sm = ts_dsmem + ((1024u - (ts_smem_addr(ts_dsmem) & 1023u)) & 1023u);");
      line("unsigned char* const ts_Qw = ts_sm;");
      line(str_cat("unsigned char* const ts_Kw = ts_sm + ", q_bytes(), ";"));
      if (pv_wgmma_) {
        line(str_cat("unsigned char* const ts_Vw = ts_sm + ", q_bytes() + 2 * k_bytes(),
                     ";  // swizzled, N-major for wgmma"));
      } else {
        line(str_cat("unsigned short (*ts_Vs)[", vd, "] = reinterpret_cast<unsigned short (*)[", vd, "]>(ts_sm + ",
                     q_bytes() + 2 * k_bytes(), ");"));
      }
      line("// Byte offset of halves (r, c .. c + 7), c a multiple of 8, in a swizzled tile of `rows` rows.");
      line("auto ts_swz = [](int r, int c, int rows) -> unsigned {");
      line("  return (unsigned)((c >> 6) * rows * 128 + r * 128 + ((((c >> 3) & 7) ^ (r & 7)) << 4));");
      line("};");
    } else {
      line(str_cat("unsigned short (*ts_Qs)[", qd, "] = reinterpret_cast<unsigned short (*)[", qd, "]>(ts_dsmem);"));
      line(str_cat("unsigned short (*ts_Ks)[", qd, "] = reinterpret_cast<unsigned short (*)[", qd, "]>(ts_dsmem + ",
                   rows_ * qd * 2, ");"));
      line(str_cat("unsigned short (*ts_Vs)[", vd, "] = reinterpret_cast<unsigned short (*)[", vd, "]>(ts_dsmem + ",
                   (rows_ + buffers() * kKeys) * qd * 2, ");"));
    }
    line("const int ts_tid = (int)threadIdx.x, ts_warp = ts_tid >> 5, ts_lane = ts_tid & 31;");
    line("const int ts_g = ts_lane >> 2, ts_t = ts_lane & 3;");
    line(str_cat("const long long ts_m0 = (long long)blockIdx.x * ", rows_, "ll;"));
    lambdas();
    line("for (long long ts_bh = blockIdx.y; ts_bh < ts_B; ts_bh += gridDim.y) {");
    out_.indent(1);
    load_tile(wgmma_ ? "ts_Qw" : "ts_Qs", a_.q, a_.i, "ts_m0", "ts_M", a_.d, d_, rows_);
    if (wgmma_) {
      line("ts_fence_async_smem();  // Q, written by the threads, read by wgmma");
      line("__syncthreads();");
    } else {
      line("__syncthreads();");
      line(str_cat("unsigned ts_qf[", d_ / 16, "][4];"));
      loop("ts_kk", d_ / 16, [&] {
        line("ts_ldsm_x4(ts_qf[ts_kk], &ts_Qs[ts_warp * 16 + (ts_lane & 15)][ts_kk * 16 + (ts_lane >> 4) * 8]);");
      });
    }
    line(str_cat("float ts_o[", e_ / 8, "][4];"));
    loop("ts_q", e_ / 8, [&] { line("ts_o[ts_q][0] = ts_o[ts_q][1] = ts_o[ts_q][2] = ts_o[ts_q][3] = 0.0f;"); });
    line("float ts_mx[2] = {ts_ninf, ts_ninf}, ts_l[2] = {0.0f, 0.0f};");
    if (async_) {
      // Tile t in buffer t % 2; tile t + 1's copies are issued before tile
      // t is waited for, into the buffer tile t - 1 was read from (the
      // barrier at the end of each tile frees it).
      line("int ts_buf = 0;");
      copy_tiles("0ll", "0");
      line("ts_cp_commit();");
    }
    line("for (long long ts_n0 = 0; ts_n0 < ts_N; ts_n0 += 64ll) {");
    out_.indent(1);
    if (async_) {
      line("if (ts_n0 + 64ll < ts_N) {");
      out_.indent(1);
      copy_tiles("ts_n0 + 64ll", "(ts_buf ^ 1)");
      out_.indent(-1);
      line("}");
      line("ts_cp_commit();");
      line("ts_cp_wait<1>();  // tile t has landed (the newest group is t + 1's, or empty)");
      if (wgmma_) line("ts_fence_async_smem();  // K, copied by cp.async, read by wgmma");
      line("__syncthreads();");
      if (wgmma_) {
        line(str_cat("const unsigned ts_kaddr = ts_smem_addr(ts_Kw) + (unsigned)ts_buf * ", k_bytes(), "u;"));
      } else {
        line(str_cat("unsigned short (*ts_Kb)[", qd, "] = ts_Ks + ts_buf * ", kKeys, ";"));
      }
      if (pv_wgmma_) {
        line(str_cat("const unsigned ts_vaddr = ts_smem_addr(ts_Vw) + (unsigned)ts_buf * ", v_tile_bytes(), "u;"));
      } else {
        line(str_cat("unsigned short (*ts_Vb)[", vd, "] = ts_Vs + ts_buf * ", kKeys, ";"));
      }
    } else {
      line("__syncthreads();  // the previous tile is consumed");
      load_tile("ts_Ks", a_.k, a_.j, "ts_n0", "ts_N", a_.d, d_, kKeys);
      load_tile("ts_Vs", a_.v, a_.j, "ts_n0", "ts_N", a_.e, e_, kKeys);
      line("__syncthreads();");
      line(str_cat("unsigned short (*ts_Kb)[", qd, "] = ts_Ks;"));
      line(str_cat("unsigned short (*ts_Vb)[", vd, "] = ts_Vs;"));
    }
    scores();
    softmax();
    pv();
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
    out_.indent(-1);
    line("}");
  }

  int threads() const { return threads_; }

  // Its grid, block and dynamic shared memory (the three tiles).
  LaunchGeometry launch() const {
    LaunchGeometry g;
    g.grid[0] = loop::simplify(loop::floordiv(a_.m + Expr(rows_ - 1), Expr(rows_)));
    g.grid[1] = loop::simplify(loop::min(a_.batch_extent, Expr(65535)));
    g.block[0] = Expr(threads_);
    const int64_t v_bytes = pv_wgmma_ ? 2 * v_tile_bytes() : int64_t{buffers() * kKeys} * (e_ + 8) * 2;
    g.shared_bytes = static_cast<unsigned>(wgmma_ ? 1024 + q_bytes() + 2 * k_bytes() + v_bytes
                                                  : int64_t{rows_ + buffers() * kKeys} * (d_ + 8) * 2 + v_bytes);
    return g;
  }

 private:
  void line(const std::string& s) { out_.line(s); }

  void loop(const char* v, int n, const std::function<void()>& body) { unrolled_loops(out_, {{v, n}}, body); }

  int buffers() const { return async_ ? 2 : 1; }
  // Bytes of the Q tile (the block's rows of d halves), a K tile (64 keys of
  // d) and a V tile (64 keys of e).
  int q_bytes() const { return rows_ * d_ * 2; }
  int k_bytes() const { return kKeys * d_ * 2; }
  int v_tile_bytes() const { return kKeys * e_ * 2; }

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

  // cp.async of the K and V tiles at key n0 into buffer `buf`: 16 bytes a
  // copy, zero-filled past N (the clamped row keeps the address inside the
  // buffer).
  void copy_tiles(const char* n0, const char* buf) {
    const auto copy = [&](const char* tile, const Expr& value, const std::string& col_var, int width) {
      const loop::ExprNode* load = vector_load(value, a_.j, col_var, width);
      const int per_row = width / 8;
      line(str_cat("for (int ts_e = ts_tid; ts_e < ", kKeys * per_row, "; ts_e += ", threads_, ") {"));
      out_.indent(1);
      line(str_cat("const int ts_r = ts_e / ", per_row, ", ts_c = ts_e % ", per_row, " * 8;"));
      row_indices(a_.j, n0, "ts_N", col_var);
      const bool is_k = std::string(tile) == "ts_Ks";
      const std::string dst =
          wgmma_ && is_k      ? str_cat("ts_Kw + ", buf, " * ", k_bytes(), ", ts_swz(ts_r, ts_c, ", kKeys, ")")
          : pv_wgmma_ && !is_k ? str_cat("ts_Vw + ", buf, " * ", v_tile_bytes(), ", ts_swz(ts_r, ts_c, ", kKeys, ")")
                               : str_cat("(unsigned char*)&", tile, "[", buf, " * ", kKeys, " + ts_r][ts_c], 0u");
      line(str_cat("ts_cp16_at(", dst, ", &", buffer_name(load->buffer->name), "[",
                   out_.expr().flat_index(*load->buffer, load->args), "], ts_at < ts_N);"));
      out_.indent(-1);
      line("}");
    };
    copy("ts_Ks", a_.k, a_.d, d_);
    copy("ts_Vs", a_.v, a_.e, e_);
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
  // [0, width)), the value's bits as stored (bf16/f16), 0 past the extent:
  // 16 bytes at a time when the value is a plain load contiguous in the
  // column (loads of a buffer or a view of one), else per element. The
  // indices are clamped into range so that every load is inside the buffer
  // (the value is then discarded).
  void load_tile(const char* tile, const Expr& value, const std::string& row_var, const char* row0,
                 const char* extent, const std::string& col_var, int width, int rows) {
    if (const loop::ExprNode* load = vector_load(value, row_var, col_var, width)) {
      // 16 bytes (8 consecutive columns) a load and a store.
      const int per_row = width / 8;
      line(str_cat("for (int ts_e = ts_tid; ts_e < ", rows * per_row, "; ts_e += ", threads_, ") {"));
      out_.indent(1);
      line(str_cat("const int ts_r = ts_e / ", per_row, ", ts_c = ts_e % ", per_row, " * 8;"));
      row_indices(row_var, row0, extent, col_var);
      line(str_cat("const ts_u4 ts_v = *(const ts_u4*)&", buffer_name(load->buffer->name), "[",
                   out_.expr().flat_index(*load->buffer, load->args), "];"));
      line(str_cat("*(ts_u4*)", at(tile, "ts_c"), " = ts_at < ", extent, " ? ts_v : ts_u4{0u, 0u, 0u, 0u};"));
      out_.indent(-1);
      line("}");
      return;
    }
    line(str_cat("for (int ts_e = ts_tid; ts_e < ", rows * width, "; ts_e += ", threads_, ") {"));
    out_.indent(1);
    line(str_cat("const int ts_r = ts_e / ", width, ", ts_c = ts_e % ", width, ";"));
    row_indices(row_var, row0, extent, col_var);
    line(str_cat("const float ts_v = ts_at < ", extent, " ? ", out_.expr().emit(value), " : 0.0f;"));
    const char* bits = half_ == std::string("bf16") ? "ts_f2bf(ts_v)" : "ts_f2h(ts_v)";
    line(str_cat("*(unsigned short*)", at(tile, "ts_c"), " = ", bits, ";"));
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

  // S = Q K^T for the warp's 16 rows and the tile's 64 keys, scaled, biased
  // and -inf past N.
  void scores() {
    line("float ts_s[8][4];");
    loop("ts_q", 8, [&] { line("ts_s[ts_q][0] = ts_s[ts_q][1] = ts_s[ts_q][2] = ts_s[ts_q][3] = 0.0f;"); });
    if (wgmma_) {
      // Warpgroup g's 64 x 64 scores (its rows 64 g ..): m64n64k16 steps
      // over d, 32 bytes apart in a swizzled region; a region is 16 KB of
      // Q (128 rows), 8 KB of K. The accumulators are mma.sync's m16n8
      // tiles side by side (warp w: rows 16 w ..).
      line("ts_wgmma_fence();");
      line(str_cat("const unsigned ts_qaddr = ts_smem_addr(ts_Qw) + (unsigned)(ts_warp >> 2) * ", 64 * 128, "u;"));
      loop("ts_kk", d_ / 16, [&] {
        line(str_cat("const unsigned ts_qo = (unsigned)(ts_kk >> 2) * ", rows_ * 128,
                     "u + (unsigned)(ts_kk & 3) * 32u, ts_ko = (unsigned)(ts_kk >> 2) * ", kKeys * 128,
                     "u + (unsigned)(ts_kk & 3) * 32u;"));
        line(str_cat("ts_wgmma_", half_, "_n64_t0(&ts_s[0][0], ts_wdesc(ts_qaddr + ts_qo), ts_wdesc(ts_kaddr + ts_ko));"));
      });
      line("ts_wgmma_commit();");
      line("ts_wgmma_wait0();");
    } else {
      key_fragments();
    }
    scale_and_bias();
  }

  // S = Q K^T with mma.sync: one ldmatrix.x4 gives the B fragments of two
  // 8-key tiles: lanes 0-15 address keys 16 np + 0-7 (k low, high), lanes
  // 16-31 keys 16 np + 8-15.
  void key_fragments() {
    loop("ts_kk", d_ / 16, [&] {
      loop("ts_np", 4, [&] {
        line("unsigned ts_kb[4];");
        line("ts_ldsm_x4(ts_kb, &ts_Kb[ts_np * 16 + (ts_lane >> 4) * 8 + (ts_lane & 7)]"
             "[ts_kk * 16 + ((ts_lane >> 3) & 1) * 8]);");
        line(str_cat("ts_mma_", half_, "(ts_s[2 * ts_np], ts_qf[ts_kk], ts_kb);"));
        line(str_cat("ts_mma_", half_, "(ts_s[2 * ts_np + 1], ts_qf[ts_kk], ts_kb + 2);"));
      });
    });
  }

  void scale_and_bias() {
    loop("ts_nt", 8, [&] {
      loop("ts_r", 4, [&] {
        line("const long long ts_i = ts_m0 + ts_warp * 16 + ts_g + (ts_r >> 1) * 8;");
        line("const long long ts_j = ts_n0 + ts_nt * 8 + ts_t * 2 + (ts_r & 1);");
        line("ts_s[ts_nt][ts_r] = ts_j < ts_N ? ts_scale * ts_s[ts_nt][ts_r] + "
             "0x1.715476p+0f * ts_bias(ts_bh, ts_i < ts_M ? ts_i : ts_M - 1, ts_j) : ts_ninf;");
      });
    });
  }

  // The online softmax of the tile's rows g (h = 0) and g + 8 (h = 1).
  void softmax() {
    loop("ts_h", 2, [&] {
      line("float ts_tmax = ts_ninf;");
      loop("ts_nt", 8, [&] {
        line("ts_tmax = fmaxf(ts_tmax, fmaxf(ts_s[ts_nt][2 * ts_h], ts_s[ts_nt][2 * ts_h + 1]));");
      });
      line("ts_tmax = fmaxf(ts_tmax, ts_shfl_xor(ts_tmax, 1));");
      line("ts_tmax = fmaxf(ts_tmax, ts_shfl_xor(ts_tmax, 2));");
      line("const float ts_new = fmaxf(ts_mx[ts_h], ts_tmax);");
      // Every score so far -inf: nothing to subtract (exp(-inf) = 0 leaves P 0).
      line("const float ts_base = ts_new == ts_ninf ? 0.0f : ts_new;");
      line("const float ts_alpha = ts_mx[ts_h] == ts_ninf ? 0.0f : exp2f(ts_mx[ts_h] - ts_base);");
      line("float ts_sum = 0.0f;");
      loop("ts_nt", 8, [&] {
        loop("ts_c", 2, [&] {
          line("const float ts_p = exp2f(ts_s[ts_nt][2 * ts_h + ts_c] - ts_base);");
          line("ts_s[ts_nt][2 * ts_h + ts_c] = ts_p;");
          line("ts_sum += ts_p;");
        });
      });
      line("ts_l[ts_h] = ts_l[ts_h] * ts_alpha + ts_sum;");
      line("ts_mx[ts_h] = ts_new;");
      loop("ts_q", e_ / 8, [&] {
        line("ts_o[ts_q][2 * ts_h] *= ts_alpha;");
        line("ts_o[ts_q][2 * ts_h + 1] *= ts_alpha;");
      });
    });
  }

  // O += P V: P's A fragments from the score accumulators (k16 block kk
  // is score tiles 2 kk and 2 kk + 1), V's B fragments with ldmatrix .trans.
  void pv() {
    const std::string pack = str_cat("ts_pack_", half_);
    const std::string pa = str_cat("const unsigned ts_pa[4] = {", pack, "(ts_s[2 * ts_kk][0], ts_s[2 * ts_kk][1]), ",
                                   pack, "(ts_s[2 * ts_kk][2], ts_s[2 * ts_kk][3]), ", pack,
                                   "(ts_s[2 * ts_kk + 1][0], ts_s[2 * ts_kk + 1][1]), ", pack,
                                   "(ts_s[2 * ts_kk + 1][2], ts_s[2 * ts_kk + 1][3])};");
    if (pv_wgmma_) {
      // m64nEk16 with P from registers (its A fragments, as for mma.sync)
      // and V N-major: 16 keys a step, 2048 bytes apart in the swizzled tile.
      // P's fragments are all packed before the fence: registers written
      // between wgmmas would make ptxas wait for the warpgroup each time.
      line(str_cat("unsigned ts_pk[", kKeys / 16, "][4];"));
      loop("ts_kk", kKeys / 16, [&] {
        line(pa);
        line("ts_pk[ts_kk][0] = ts_pa[0]; ts_pk[ts_kk][1] = ts_pa[1]; ts_pk[ts_kk][2] = ts_pa[2]; "
             "ts_pk[ts_kk][3] = ts_pa[3];");
      });
      line("ts_wgmma_fence();");
      loop("ts_kk", kKeys / 16, [&] {
        line(str_cat("ts_wgmma_rs_", half_, "_n", e_,
                     "_t1(&ts_o[0][0], ts_pk[ts_kk], ts_wdesc_n(ts_vaddr + ts_kk * 2048u));"));
      });
      line("ts_wgmma_commit();");
      line("ts_wgmma_wait0();");
      return;
    }
    loop("ts_kk", kKeys / 16, [&] {
      line(pa);
      // ldmatrix.x4.trans: V's B fragments of two 8-column tiles (lanes
      // 16-31 address the second).
      loop("ts_np", e_ / 16, [&] {
        line("unsigned ts_vb[4];");
        line("ts_ldsm_x4_trans(ts_vb, &ts_Vb[ts_kk * 16 + (ts_lane & 15)][ts_np * 16 + (ts_lane >> 4) * 8]);");
        line(str_cat("ts_mma_", half_, "(ts_o[2 * ts_np], ts_pa, ts_vb);"));
        line(str_cat("ts_mma_", half_, "(ts_o[2 * ts_np + 1], ts_pa, ts_vb + 2);"));
      });
    });
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

 private:
  loop::AttentionView a_;
  CodeSink& out_;
  int d_ = 0, e_ = 0;
  const char* half_ = "bf16";
  bool async_ = false;  // K and V are plain loads: cp.async, two buffers
  bool wgmma_ = false;     // scores by wgmma (sm_90a, d a multiple of 64, async_)
  bool pv_wgmma_ = false;  // and P V (e a multiple of 64)
  int rows_ = 64, threads_ = 128;  // query rows and threads a block
};

}  // namespace

int flash_attention_threads(const loop::StmtNode& s, CodeSink& out, bool wgmma) {
  return FlashWriter(s, out, wgmma).threads();
}

LaunchGeometry emit_flash_attention(const loop::StmtNode& s, CodeSink& out, bool wgmma) {
  FlashWriter w(s, out, wgmma);
  w.write();
  return w.launch();
}

}  // namespace tessel::cuda::detail
