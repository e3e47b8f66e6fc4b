// How the GEMM kernel (MmaWriter, mma_gemm_internal.h) moves its operands
// from global memory into the shared tiles: element by element or as
// 16-byte vectors through registers, or with cp.async straight into the
// stages (on sm_90a in the 128-byte swizzled layout wgmma reads).
#include "tessel/codegen/cuda/mma_gemm_internal.h"

#include "tessel/support/error.h"

namespace tessel::cuda::detail {

// Element (row r, unit u) of this thread's q-th unit of a tile with `rows`
// rows, consecutive threads along k (k_major) or along the rows.
void MmaWriter::unit_position(int rows, bool k_major) {
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
void MmaWriter::load_tiles() {
  for (const Side* x : {&a_, &b_}) {
    switch (x->how) {
      case OperandLoad::Elements: load_elements(*x); break;
      case OperandLoad::VectorK:
      case OperandLoad::VectorRows: load_vectors(*x); break;
    }
  }
}

void MmaWriter::load_elements(const Side& x) {
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
void MmaWriter::vector_position(const Side& x) {
  const int per_row = x.how == OperandLoad::VectorK ? t_.bk / 8 : x.rows / 8;
  line(str_cat("const int ts_e = ts_tid + ts_q * ", t_.threads(), ";"));
  line(str_cat("const int ts_row = ts_e / ", per_row, ", ts_c = ts_e % ", per_row, ";"));
}

// The source of this thread's vector (ts_row, ts_c) of the tile at
// ts_k0, through the operand's full index expression at indices clamped
// into range (an address inside the buffer); sets ts_ro/ts_rv, the
// unclamped outer and inner indices. Returns the address expression.
std::string MmaWriter::vector_source(const Side& x) {
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
void MmaWriter::load_vectors(const Side& x) {
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
std::string MmaWriter::vector_slot(const Side& x) {
  return x.how == OperandLoad::VectorK ? "[ts_row][ts_c * 4]" : "[ts_row][ts_c * 8]";
}

MmaWriter::SharedLayout MmaWriter::shared_layout(const Side& x) const {
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
void MmaWriter::vector_sources(const Side& x) {
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
void MmaWriter::copy_tiles(const std::string& stage) {
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
void MmaWriter::store_tiles(const std::string& stage) {
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

}  // namespace tessel::cuda::detail
