// The GEMM path of the lowering engine: a group made of one contraction
// (MatMul, Gemm) and the elementwise ops that consume it is lowered as the
// packed, register-blocked GEMM of schedule/gemm.h, with the rest of the
// group as its epilogue; with NestSchedule::gpu_gemm, as one Contract
// statement (loop/ir.h) holding the same A, B and epilogue instead.
//
// How the pieces are found without a pattern per op: the group's root is
// lowered once at symbolic indices (gb*, gi*, gj) while the contraction's
// reduction is captured instead of built (it must be Σ_k a·b with a free of
// gj and b free of gi*), which yields the A and B access functions. The
// epilogue lowers the root again per output element with that reduction
// replaced by the finished dot product. Anything else (a second reduction,
// a product of another shape) falls back to the generic loop nest.
#include <algorithm>
#include <optional>

#include "tessel/loop/affine.h"
#include "tessel/loop/simplify.h"
#include "tessel/loop/visit.h"
#include "tessel/lower/group_lowerer.h"
#include "tessel/schedule/gemm.h"
#include "tessel/support/error.h"

namespace tessel::lowering {

namespace {

bool mentions_any(const Expr& e, const Idx& vars) {
  for (const Expr& v : vars)
    if (loop::mentions_var(e, v->name)) return true;
  return false;
}

// The index vector of `i` in [0, prod(dims)) over `dims`, row-major.
Idx delinearize(const Expr& i, const Idx& dims) {
  Idx r(dims.size());
  Expr rest = i;
  for (size_t d = dims.size(); d-- > 0;) {
    r[d] = d == 0 ? rest : loop::floormod(rest, dims[d]);
    if (d > 0) rest = loop::floordiv(rest, dims[d]);
  }
  return r;
}

Idx vars_named(const char* prefix, size_t n) {
  Idx v;
  for (size_t k = 0; k < n; ++k) v.push_back(loop::var(str_cat(prefix, k)));
  return v;
}

int64_t hint(const Dim& d) { return d.is_const() ? d.value() : -1; }

}  // namespace

void find_b_panels(const Expr& b, const Expr& k, const Expr& column, const loop::Bounds& bounds, GemmOperands* ops,
                   int64_t batch, const std::string& batch_var) {
  if (b->kind != loop::ExprKind::Load || !b->buffer || b->buffer->scope != loop::BufferScope::Param ||
      b->buffer->dtype != DType::F32 || b->buffer->shape.size() != 3)
    return;
  int64_t panels = 0, width = 0;
  if (!loop::as_const_int(b->buffer->shape[0], &panels) || !loop::as_const_int(b->buffer->shape[2], &width) ||
      width < 1 || batch < 1 || panels % batch != 0)
    return;
  // A batch of B: each product's panels follow the previous one's.
  panels /= batch;
  const Expr base = batch > 1 ? loop::var(batch_var) * Expr(panels) : Expr(0);
  const Expr expected =
      loop::load(b->buffer, {base + loop::floordiv(column, Expr(width)), k, loop::floormod(column, Expr(width))});
  // Both sides in fold_affine's canonical form: b may come simplified but
  // unfolded (a conv weight's k, a sum over its digits).
  const auto canonical = [&](const Expr& e) { return loop::simplify(loop::fold_affine(e, bounds), bounds); };
  if (!loop::equal(canonical(expected), canonical(b))) return;
  ops->b_panels = b->buffer;
  ops->panel_width = width;
  ops->panel_columns = panels * width;
  ops->b_panel_base = base;
}

Expr GroupLowerer::contraction_reduce(ReduceOp op, const Expr& init, const Idx& extents,
                                      const std::function<Expr(const Idx&)>& body) {
  if (conv_.active) return conv_reduce(op, init, extents, body);
  const bool zero = init->kind == loop::ExprKind::FloatImm && init->float_value == 0;
  if (current_ != gemm_.node || op != ReduceOp::Sum || extents.size() != 1 || !zero || init.dtype() != DType::F32)
    throw NotGemm{};
  if (!gemm_.probing) return gemm_.acc;
  gemm_.k = loop::var("gk");
  const Expr v = body({gemm_.k});
  if (v->kind != loop::ExprKind::Binary || v->binary != loop::BinaryOp::Mul) throw NotGemm{};
  capture_product(v->args[0], v->args[1]);
  gemm_.acc = extents[0];  // the K extent, kept until the probe ends
  return loop::var("gacc", DType::F32);
}

void GroupLowerer::capture_product(const Expr& a, const Expr& b) {
  // The root reads the contraction at two different places (a roll: Concat
  // of two Slices of it): one GEMM cannot give both, since the epilogue sees
  // one accumulator per output element.
  if (gemm_.a.defined() && (!loop::equal(gemm_.a, a) || !loop::equal(gemm_.b, b))) throw NotGemm{};
  gemm_.a = a;
  gemm_.b = b;
}

// f32, f16 and bf16 contractions all sum cast<f32> products in f32 (their
// compute definitions), which is what the packed CPU GEMM and the Contract
// statement take; the epilogue rounds to the output type.
bool gemm_output_type(DType t) { return t == DType::F32 || t == DType::F16 || t == DType::BF16; }

// A float MatMul or Gemm: what the packed GEMM or the Contract statement takes.
bool gemm_candidate(const Node& n) {
  return n.domain.empty() && (n.op == "MatMul" || n.op == "Gemm") && gemm_output_type(n.outputs.at(0)->type.dtype);
}

Stmt contract_statement(const GemmOperands& ops, const std::string& prefix) {
  const loop::ContractVars v{ops.batch_var.empty() ? prefix + "_b" : ops.batch_var, prefix + "_i", prefix + "_j",
                             prefix + "_k", prefix + "_acc"};
  const Expr i = loop::var(v.i), j = loop::var(v.j), k = loop::var(v.k);
  return loop::contract(v, ops.batch, ops.M, ops.N, ops.K, ops.a(i, k), ops.b(k, j),
                        ops.epilogue(i, j, loop::var(v.acc, DType::F32)));
}

std::optional<LoweredGroup> GroupLowerer::try_contraction() {
  if (!sched_.gemm && !sched_.gpu_gemm) return std::nullopt;
  const Node* c = nullptr;
  for (const Node* n : group_.nodes) {
    const OpSchema* s = reg_.find(n->domain, n->op);
    if (s && s->fusion == FusionKind::Contraction) {
      // Two contractions (SwiGLU's gate and up projections): the first one
      // gets its own kernel, so that each can be a packed GEMM.
      if (c) throw FusionRejected(str_cat(c->describe(), ": a second contraction in the group"), c);
      c = n;
    }
  }
  const bool contract = sched_.gpu_gemm;
  if (!c || !(gemm_candidate(*c) || conv_candidate(*c))) return std::nullopt;
  // Grouped convolutions have no Contract form (the CPU's direct depthwise
  // kernel is a CPU schedule): the generic nest, one thread per element.
  if (contract && c->op == "Conv" && c->attr_int("group", 1) != 1) return std::nullopt;
  std::optional<LoweredGroup> lg;
  try {
    lg = conv_candidate(*c) ? lower_conv(*c) : lower_contraction(*c);
  } catch (const NotGemm&) {
  } catch (const LoweringUnsupported&) {
    return std::nullopt;  // the generic path reports it
  } catch (const FusionRejected&) {
  }
  // The consumers do not keep the rows/columns structure (a Transpose or a
  // RoPE's Slice/Concat after the MatMul): store the product and run them in
  // a kernel of their own rather than the generic nest, which would be a
  // naive triple loop.
  if (!lg && c != group_.root)
    throw FusionRejected(str_cat(c->describe(), ": its consumers do not fit the GEMM epilogue"), c);
  return lg;
}

// The root's shape may differ from the contraction's: a Reshape after it
// splits its rows (Gemm -> [batch, seq, features]) or its columns
// (tessel::Im2Col's MatMul [N, OC, OH * OW] -> [N, OC, OH, OW]). Columns are
// the root's last dim, or its last two when their product is the
// contraction's last dim; the probe decides whether the index splits so.
std::optional<LoweredGroup> GroupLowerer::lower_contraction(const Node& c) {
  if (std::optional<LoweredGroup> lg = lower_contraction_with(c, 1)) return lg;
  const Value* out = group_.root->outputs.at(group_.root_output);
  const Value* cout = c.outputs.at(0);
  if (!out->type.has_shape() || !cout->type.has_shape() || out->type.shape->size() < 3) return std::nullopt;
  const Shape& dims = *out->type.shape;
  const Dim& last = cout->type.shape->back();
  const Dim& d1 = dims[dims.size() - 2];
  const Dim& d2 = dims.back();
  if (!last.is_const() || !d1.is_const() || !d2.is_const() || d2.value() == last.value() ||
      d1.value() * d2.value() != last.value())
    return std::nullopt;
  gemm_ = GemmCapture{};
  memo_.clear();
  return lower_contraction_with(c, 2);
}

std::optional<LoweredGroup> GroupLowerer::lower_contraction_with(const Node& c, size_t column_dims) {
  const Value* out = group_.root->outputs.at(group_.root_output);
  const Value* cout = c.outputs.at(0);
  if (!out->type.has_shape() || !cout->type.has_shape()) return std::nullopt;
  if (!loop::is_computable(out->type.dtype)) return std::nullopt;
  const Shape& dims = *out->type.shape;
  const size_t r = dims.size();
  if (r < 1 + column_dims) return std::nullopt;
  // A and B must be matrices (or batches of them); Gemm's C may be anything
  // that broadcasts.
  for (size_t i = 0; i < 2; ++i) {
    const Value* in = c.inputs.at(i);
    if (!in->type.has_shape() || in->type.shape->size() < 2) return std::nullopt;
  }
  // B without batch dims: A's batch dims fold into M (a Linear layer on
  // [batch, seq, features]); otherwise loop over the batch.
  const bool folded = c.inputs[1]->type.shape->size() == 2;
  const Idx shape = shape_of(out);
  const long ncol = static_cast<long>(column_dims);
  const size_t nbatch = folded ? 0 : r - 1 - column_dims;
  const Idx batch_dims(shape.begin(), shape.begin() + static_cast<long>(nbatch));
  const Idx lead_dims(shape.begin() + static_cast<long>(nbatch), shape.end() - ncol);
  const Idx col_dims(shape.end() - ncol, shape.end());
  Dim columns = 1;
  for (size_t d = r - column_dims; d < r; ++d) columns = columns * dims[d];
  const Idx gb = vars_named("gb", nbatch), gi = vars_named("gi", lead_dims.size());
  const Expr gj = loop::var("gj");
  Idx probe_index = gb;
  probe_index.insert(probe_index.end(), gi.begin(), gi.end());
  const Idx gj_at = delinearize(gj, col_dims);
  probe_index.insert(probe_index.end(), gj_at.begin(), gj_at.end());

  // Probe: capture A and B.
  gemm_.node = &c;
  gemm_.probing = true;
  levels_.assign(1, Level{});
  output_levels_ = 1;
  value_at(out, probe_index);
  if (!gemm_.a.defined()) return std::nullopt;
  const Expr K = gemm_.acc, k = gemm_.k;
  // Ranges of the probe's variables turn the index arithmetic of reshapes
  // between the contraction and the root back into plain indices
  // (((gi * N + gj) floordiv N) => gi when 0 <= gj < N).
  loop::Bounds bounds;
  const auto bound = [&](const std::string& v, const Dim& d) {
    if (d.is_const() && d.value() > 0) bounds[v] = {0, d.value() - 1};
  };
  for (size_t d = 0; d < nbatch; ++d) bound(gb[d]->name, dims[d]);
  for (size_t d = 0; d < gi.size(); ++d) bound(gi[d]->name, dims[nbatch + d]);
  bound("gj", columns);
  if (K->kind == loop::ExprKind::IntImm && K->int_value > 0) bounds[k->name] = {0, K->int_value - 1};
  // fold_affine first: a reshape's floordiv/floormod pairs (the columns of
  // [N, OC, OH * OW] read as [N, OC, OH, OW]) become plain sums the range
  // rules can simplify.
  const Expr a_probe = loop::simplify(loop::fold_affine(gemm_.a, bounds), bounds);
  const Expr b_probe = loop::simplify(loop::fold_affine(gemm_.b, bounds), bounds);
  if (loop::mentions_var(a_probe, "gj") || mentions_any(b_probe, gi)) return std::nullopt;
  // A batch of products (B has batch dims too) is gemm_nest's batch: its
  // outer loop binds bb, whose row-major digits are the batch indices gb*.
  const std::string bb = fresh("bb");
  Dim batch = 1;
  for (size_t d = 0; d < nbatch; ++d) batch = batch * dims[d];
  loop::VarMap batch_index;
  const Idx bb_digits = delinearize(loop::var(bb), batch_dims);
  for (size_t d = 0; d < nbatch; ++d) batch_index[gb[d]->name] = bb_digits[d];
  const Expr a = loop::substitute(a_probe, batch_index), b = loop::substitute(b_probe, batch_index);

  Dim M = 1;
  for (size_t d = nbatch; d + column_dims < r; ++d) M = M * dims[d];
  GemmOperands ops;
  ops.M = dim_to_expr(M, &syms_);
  ops.N = dim_to_expr(columns, &syms_);
  ops.K = K;
  ops.batch = dim_to_expr(batch, &syms_);
  ops.batch_var = bb;
  const auto row = [&](const Expr& i) {
    loop::VarMap m;
    Idx at = delinearize(i, lead_dims);
    for (size_t d = 0; d < gi.size(); ++d) m[gi[d]->name] = at[d];
    return m;
  };
  ops.a = [&](const Expr& i, const Expr& kk) {
    loop::VarMap m = row(i);
    m[k->name] = kk;
    return loop::substitute(a, m);
  };
  ops.b = [&](const Expr& kk, const Expr& j) { return loop::substitute(b, {{k->name, kk}, {"gj", j}}); };
  loop::BufferRef out_buf = make_buffer(str_cat("out", params_.size()), out->type.dtype, shape, loop::BufferScope::Param);
  // Built at variables with known ranges (so reshapes simplify as in the
  // probe), then instantiated at the micro-kernel's (i, j).
  const Expr ei = loop::var("gei"), ej = loop::var("gej");
  if (M.is_const() && M.value() > 0) bounds[ei->name] = {0, M.value() - 1};
  bound(ej->name, columns);
  ops.epilogue = [&](const Expr& i, const Expr& j, const Expr& acc) {
    gemm_.probing = false;
    gemm_.acc = acc;
    memo_.clear();
    levels_.assign(1, Level{});
    Idx index = gb;
    const Idx at = delinearize(ei, lead_dims);
    index.insert(index.end(), at.begin(), at.end());
    const Idx col_at = delinearize(ej, col_dims);
    index.insert(index.end(), col_at.begin(), col_at.end());
    const Expr v = value_at(out, index);
    std::vector<Stmt> stmts = levels_[0].stmts;
    stmts.push_back(loop::store(out_buf, index, v));
    const Stmt st = loop::simplify(wrap_allocs(levels_[0].allocs, loop::seq(stmts)), bounds);
    loop::VarMap instance = batch_index;
    instance[ei->name] = i;
    instance[ej->name] = j;
    return loop::substitute(st, instance);
  };

  if (sched_.gpu_gemm) {
    const Stmt body = contract_statement(ops, fresh("g"));
    gemm_ = GemmCapture{};
    LoweredGroup lg = finish(body, out_buf, std::nullopt);
    lg.schedule = "contract";
    return lg;
  }

  // Tiles over (M block, N block) pack each B block once per M block, as
  // the M-block loop does, and give a small M (an LM head: M = 128, N =
  // 32000) its tasks from N.
  int64_t k_hint = -1;
  if (!loop::as_const_int(loop::simplify(K), &k_hint)) k_hint = -1;
  // The thread count is the runtime's choice and the lowering's CpuInfo may
  // not know the host (cores = 1): balance the tiles for at least two, so
  // that e.g. GPT-2's N = 2304 gives 6 tiles rather than 5.
  CpuInfo cpu = sched_.cpu;
  cpu.cores = std::max(cpu.cores, 2);
  if (batch.is_const()) find_b_panels(b, k, loop::var("gj"), bounds, &ops, batch.value(), bb);
  GemmSchedule gs = default_gemm_schedule(cpu, hint(M), hint(columns), k_hint, sched_.parallel, hint(batch),
                                          static_cast<bool>(ops.b_panels));
  gs.parallel_over_m_blocks = sched_.parallel;
  gs.pack_b = !b_panels_fit(ops, gs);
  if (sched_.tuned) apply_gemm_knobs(*sched_.tuned, &gs);
  Stmt body = gemm_nest(ops, gs, fresh("g"));
  std::optional<Dim> parallel_extent;
  // gemm_parallel_extent, as a Dim for the runtime (a loop of one
  // iteration is simplified away).
  const Dim n_units = gs.parallel_over_n_blocks ? Dim::ceildiv(columns, Dim(gs.nc)) : Dim(1);
  const Dim units = batch * Dim::ceildiv(M, Dim(gs.mc)) * n_units;
  if (gs.parallel_over_m_blocks && !(units.is_const() && units.value() == 1)) parallel_extent = units;
  gemm_ = GemmCapture{};
  LoweredGroup lg = finish(body, out_buf, parallel_extent);
  lg.schedule = "gemm";
  add_gemm_knobs(gs, &lg.sched);
  lg.gemm_shape = {hint(M), hint(columns), k_hint, hint(batch), ops.b_panels ? ops.panel_width : 0,
                   ops.b_panels ? ops.panel_columns : 0};
  return lg;
}

}  // namespace tessel::lowering
