// GEMM epilogues (emitter.h): the epilogue statement as the lambdas the
// kernels call per output element (ts_epilogue, or ts_epi_value and
// ts_epi_store, which the TMA GEMM and flash attention use too), and how the
// mma kernel (MmaWriter) hands them its accumulators.
#include <functional>
#include <memory>
#include <vector>

#include "tessel/codegen/cuda/mma_gemm_internal.h"
#include "tessel/loop/visit.h"
#include "tessel/support/error.h"

namespace tessel::cuda::detail {

using loop::Expr;

// The pipelined kernel's epilogue: the accumulators go to shared memory
// (the stages are free now), then the block walks its tile row by row,
// consecutive threads on consecutive columns. The epilogue is emitted once
// in a loop, not once per accumulator: unrolled 64 times, BERT's GELU
// made 16k instructions a warp that stalled on instruction fetch; and the
// stores of a warp are now 32 consecutive elements of a row.
void MmaWriter::shared_epilogue() {
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
void MmaWriter::epilogue_calls() {
  loop_nest({{"ts_mt", mt_}, {"ts_nt", nt_}, {"ts_r", 4}}, [&] {
    line(str_cat("const long long ts_i = ts_m0 + ts_wm * ", wm_, " + ts_mt * 16 + ts_g + (ts_r >> 1) * 8;"));
    line(str_cat("const long long ts_j = ts_n0 + ts_wn * ", wn_, " + ts_nt * 8 + ts_t * 2 + (ts_r & 1);"));
    line(str_cat("if (ts_i < ts_M && ts_j < ts_N) ts_epilogue(", var_name(c_.batch),
                 ", ts_i, ts_j, ts_acc[ts_mt][ts_nt][ts_r]);"));
  });
}

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

}  // namespace tessel::cuda::detail
