// Convolutions on the GEMM path. A Conv with group 1 is an implicit GEMM
// per image n:
//
//   out[n, oc, p] = Σ_k W[oc, k] · X_im2col[n, k, p]
//
// with M = OC (A = the weights, [OC, C·prod(kernel)] row-major as stored),
// N = the output positions p (the spatial dims flattened, contiguous in
// NCHW), K = C·prod(kernel). Nothing is materialised: the packing of B
// evaluates the conv's own tap expression (index arithmetic and the padding
// select), and the rest of the group (bias, Relu, residual Add, ...) is the
// epilogue, as on the MatMul path (contraction.cpp).
//
// The conv's reduction is captured with one variable per extent (channel,
// kernel offsets), so that A and B are written over k through its row-major
// digits. Every parameter buffer is then viewed as flat: an index whose
// digits are the row-major digits of one position (the weights' (c, kh, kw)
// of k, an activation's (oh, ow) of p) folds back into that position, so
// that a 1x1 stride-1 conv packs B with plain vector loads and the epilogue
// stores whole vectors.
#include <algorithm>
#include <map>

#include "tessel/loop/simplify.h"
#include "tessel/loop/visit.h"
#include "tessel/lower/group_lowerer.h"
#include "tessel/schedule/gemm.h"
#include "tessel/support/error.h"

namespace tessel::lowering {

namespace {

using loop::BinaryOp;
using loop::ExprKind;

bool is_binary(const Expr& e, BinaryOp op) { return e->kind == ExprKind::Binary && e->binary == op; }

// The row-major digits of `p` in [0, prod(dims)); 0 for dims of 1 (so that
// they do not hide the quotients that horner_step folds).
Idx digits(const Expr& p, const Idx& dims) {
  Idx r(dims.size());
  Expr rest = p;
  for (size_t d = dims.size(); d-- > 0;) {
    if (loop::is_const(dims[d], 1)) {
      r[d] = d == 0 ? rest : Expr(0);
      continue;
    }
    r[d] = d == 0 ? rest : loop::floormod(rest, dims[d]);
    if (d > 0) rest = loop::floordiv(rest, dims[d]);
  }
  return r;
}

// The sum of `terms` without terms[skip]; undefined when nothing is left.
Expr sum_except(const std::vector<Expr>& terms, size_t skip) {
  Expr sum;
  for (size_t t = 0; t < terms.size(); ++t)
    if (t != skip) sum = sum.defined() ? sum + terms[t] : terms[t];
  return sum;
}

// acc * extent + i, where a quotient and remainder of one y fold back:
// (A + y floordiv c) * c + (B + y floormod c) => A * c + y + B (A and B
// possibly absent), so that digits of a position fold into the position. A
// dim of 1 is indexed by 0 and leaves acc as it is.
Expr horner_step(const Expr& acc, const Expr& i, const Expr& extent) {
  if (loop::is_const(extent, 1) && loop::is_const(i, 0)) return acc;
  std::vector<Expr> outer, inner;
  loop::collect_addends(acc, &outer);
  loop::collect_addends(i, &inner);
  for (size_t t = 0; t < inner.size(); ++t) {
    if (!is_binary(inner[t], BinaryOp::FloorMod) || !loop::equal(inner[t]->args[1], extent)) continue;
    const Expr& y = inner[t]->args[0];
    for (size_t u = 0; u < outer.size(); ++u) {
      const Expr& q = outer[u];
      if (!is_binary(q, BinaryOp::FloorDiv) || !loop::equal(q->args[0], y) || !loop::equal(q->args[1], extent))
        continue;
      const Expr a = sum_except(outer, u), b = sum_except(inner, t);
      Expr r = a.defined() ? a * extent + y : y;
      return b.defined() ? r + b : r;
    }
  }
  return acc * extent + i;
}

Expr row_major_offset(const Idx& index, const Idx& shape) {
  Expr acc = index.at(0);
  for (size_t d = 1; d < index.size(); ++d) acc = horner_step(acc, index[d], shape[d]);
  return acc;
}

// Rewrites every access to a parameter buffer into an access to a 1-D view
// of it (the same memory, row-major).
class FlatView {
 public:
  loop::BufferRef of(const loop::BufferRef& b) {
    auto it = flat_.find(b.get());
    if (it != flat_.end()) return it->second;
    Expr numel = Expr(1);
    for (const Expr& d : b->shape) numel = numel * d;
    loop::BufferRef f = make_buffer(b->name, b->dtype, {loop::simplify(numel)}, loop::BufferScope::Param);
    flat_[b.get()] = f;
    return f;
  }

  Expr expr(const Expr& e) {
    Expr x = loop::map_args(e, [&](const Expr& a) { return expr(a); });
    if (x->kind != ExprKind::Load || x->buffer->scope != loop::BufferScope::Param || x->buffer->shape.size() < 2)
      return x;
    return loop::load(of(x->buffer), {row_major_offset(x->args, x->buffer->shape)});
  }

  Stmt stmt(const Stmt& s) {
    const auto fe = [&](const Expr& e) { return expr(e); };
    if (s->kind == loop::StmtKind::Store && s->buffer->scope == loop::BufferScope::Param && s->buffer->shape.size() >= 2) {
      Idx index;
      for (const Expr& i : s->indices) index.push_back(expr(i));
      return loop::store(of(s->buffer), {row_major_offset(index, s->buffer->shape)}, expr(s->value));
    }
    return loop::map_stmt(s, fe, [&](const Stmt& c) { return stmt(c); });
  }

  // The view of `b`, or `b` itself when it was never flattened.
  loop::BufferRef view_or_self(const loop::BufferRef& b) const {
    auto it = flat_.find(b.get());
    return it == flat_.end() ? b : it->second;
  }

 private:
  std::map<const loop::Buffer*, loop::BufferRef> flat_;
};

bool is_float_zero(const Expr& e) { return e->kind == ExprKind::FloatImm && e->float_value == 0; }

int64_t product(const Idx& extents) {
  int64_t n = 1;
  for (const Expr& e : extents) {
    int64_t v = 0;
    if (!loop::as_const_int(e, &v)) return -1;
    n *= v;
  }
  return n;
}

// The order of a convolution's reduction digits (channel, kernel offsets...)
// in its GEMM's k: as stored, or the offsets first (see lower_conv).
std::vector<size_t> reduction_order(size_t n, bool offsets_first) {
  std::vector<size_t> order;
  for (size_t d = offsets_first ? 1 : 0; d < n; ++d) order.push_back(d);
  if (offsets_first && n > 0) order.push_back(0);
  return order;
}

// The largest divisor of `channels` up to `kc`, where one of at least 16
// exists; else kc.
int64_t channel_block(int64_t channels, int64_t kc) {
  for (int64_t d = std::min(kc, channels); d >= 16; --d)
    if (channels % d == 0) return d;
  return kc;
}

}  // namespace

bool conv_candidate(const Node& n) {
  return n.domain.empty() && n.op == "Conv" && gemm_output_type(n.outputs.at(0)->type.dtype);
}

Expr GroupLowerer::conv_reduce(ReduceOp op, const Expr& init, const Idx& extents,
                               const std::function<Expr(const Idx&)>& body) {
  if (current_ != gemm_.node || op != ReduceOp::Sum || extents.empty() || !is_float_zero(init) ||
      init.dtype() != DType::F32)
    throw NotGemm{};
  if (!gemm_.probing) return gemm_.acc;
  conv_.extents = extents;
  conv_.ks.clear();
  for (size_t d = 0; d < extents.size(); ++d)
    conv_.ks.push_back(loop::is_const(extents[d], 1) ? Expr(0) : loop::var(str_cat("gk", d)));
  Expr v = body(conv_.ks);
  // Taps in the padding contribute select(inside, x * w, 0): the condition
  // goes with the factor that reads the input, into B's packing.
  if (v->kind == ExprKind::Select && is_float_zero(v->args[2])) {
    conv_.inside = v->args[0];
    v = v->args[1];
  }
  if (!is_binary(v, BinaryOp::Mul)) throw NotGemm{};
  capture_product(v->args[0], v->args[1]);
  return loop::var("gacc", DType::F32);
}

bool GroupLowerer::probe_conv(const Node& c, const Value* out, const Idx& index) {
  gemm_.node = &c;
  gemm_.probing = true;
  conv_ = ConvCapture{};
  conv_.active = true;
  levels_.assign(1, Level{});
  output_levels_ = 1;
  value_at(out, index);
  return gemm_.a.defined();
}

namespace {

// The value a root tessel::ToBlocked converts (the group's result in the
// plain layout), or null when the root is no ToBlocked.
const Value* blocked_root_input(const Node& root) {
  if (root.domain != "tessel" || root.op != "ToBlocked" || root.inputs.empty()) return nullptr;
  return root.inputs[0];
}

// The blocked index [n, c / b, s..., c % b] of the plain index [n, c, s...].
Idx blocked_index(const Idx& plain, int64_t block) {
  Idx r{plain[0], loop::floordiv(plain[1], Expr(block))};
  r.insert(r.end(), plain.begin() + 2, plain.end());
  r.push_back(loop::floormod(plain[1], Expr(block)));
  return r;
}

}  // namespace

// The input's width when `c` is an unpadded stride-1 2-D convolution over
// an input of constant shape whose kernel is wider than 1, else 0: such a
// convolution runs on the grid of (output row, input column) positions.
int64_t shifted_row_width(const Node& c, size_t rank) {
  const Value* x = c.input(0);
  if (rank != 4 || !x || !x->type.has_shape() || x->type.shape->size() != 4) return 0;
  const Dim& w = (*x->type.shape)[3];
  const Value* wt = c.input(1);
  if (!w.is_const() || !wt || !wt->type.has_shape() || wt->type.shape->size() != 4) return 0;
  const Dim& kw = (*wt->type.shape)[3];
  if (!kw.is_const() || kw.value() == 1 || c.attr_string("auto_pad", "NOTSET") != "NOTSET") return 0;
  if (c.attr_ints("strides", {1, 1}) != std::vector<int64_t>{1, 1}) return 0;
  if (c.attr_ints("pads", {0, 0, 0, 0}) != std::vector<int64_t>{0, 0, 0, 0}) return 0;
  return w.value();
}

std::optional<LoweredGroup> GroupLowerer::lower_conv(const Node& c) {
  const Value* stored = group_.root->outputs.at(group_.root_output);
  const Value* cout = c.outputs.at(0);
  if (c.attr_int("group", 1) != 1) return lower_depthwise(c);
  // A root tessel::ToBlocked (passes/blocked_layout.cpp): the epilogue
  // computes the plain value at (n, oc, position) and stores it at the
  // blocked index, where the 16 channels of a tile row are consecutive.
  const Value* blocked_from = blocked_root_input(*group_.root);
  const Value* out = blocked_from ? blocked_from : stored;
  const int64_t block = blocked_from ? stored->type.shape->back().value() : 0;
  if (!out->type.has_shape() || !cout->type.has_shape() || *out->type.shape != *cout->type.shape) return std::nullopt;
  const Shape& dims = *out->type.shape;
  const size_t r = dims.size();
  if (r < 3 || !dims[1].is_const()) return std::nullopt;
  int64_t positions = 1;
  for (size_t d = 2; d < r; ++d) {
    if (!dims[d].is_const()) return std::nullopt;
    positions *= dims[d].value();
  }
  const Idx shape = shape_of(out);
  const Idx spatial(shape.begin() + 2, shape.end());
  const Expr n = loop::var("gb0"), oc = loop::var("gi0"), gj = loop::var("gj");
  // Shifted rows: an unpadded stride-1 convolution (pad_conv_inputs.cpp)
  // whose output is `width - ow_count` columns narrower than its input is
  // computed at the positions j = oh * width + ow of the input's grid, ow <
  // width; the columns ow >= ow_count read the next row's first elements and
  // are not stored. Then the tap x[c, oh + kh dh, ow + kw dw] is the flat
  // element c H W + kh dh W + kw dw + j (the row digits fold, see
  // horner_step): B's rows are consecutive memory. Everything is first
  // written over the output's own (oh, ow), simplified where ow < ow_count
  // (no tap is then in the padding), and only then mapped to the grid.
  // Only over a stored input: its flat reads stay inside it (the last is
  // element C H W - 1), which a fused producer's own index arithmetic (a
  // Slice, a Concat) would not promise for the unstored columns.
  const Node* producer = c.input(0)->producer;
  const bool stored_input =
      !producer || std::find(group_.nodes.begin(), group_.nodes.end(), producer) == group_.nodes.end();
  // The GEMM's rows: the output channels (A = the weights, B = the taps,
  // the positions a vector) or, transposed, the positions (A = the taps,
  // B = the weights, the channels a vector). See conv_rows_are_positions.
  // A blocked output is stored a row of 16 channels at a time only with the
  // channels as the columns (a stem conv over 3 input channels).
  bool rows_are_positions = conv_rows_are_positions(c) || blocked_from;
  if (sched_.tuned)
    if (const Primitive* p = sched_.tuned->find("conv.gemm")) rows_are_positions = p->attr("rows") == "positions";
  if (sched_.gpu_gemm) rows_are_positions = false;
  // Rows of positions are read in place, one address per row and K block:
  // the grid's extra columns would only be wasted rows.
  const int64_t width = sched_.gpu_gemm || !stored_input || rows_are_positions ? 0 : shifted_row_width(c, r);
  const int64_t ow_count = r == 4 ? dims[3].value() : 0;
  const bool shifted = width > ow_count;
  const Expr gh = loop::var("gh"), gw = loop::var("gw");
  if (shifted) positions = (dims[2].value() - 1) * width + ow_count;
  const auto out_index = [&](const Expr& m, const Expr& p) {
    Idx index{n, m};
    if (shifted) return Idx{n, m, gh, gw};
    for (const Expr& e : digits(p, spatial)) index.push_back(e);
    return index;
  };
  loop::Bounds on_grid;
  if (shifted) on_grid = {{gh->name, {0, dims[2].value() - 1}}, {gw->name, {0, ow_count - 1}}};
  // An expression over (gh, gw), simplified there, at grid position p.
  const auto at_position = [&](const auto& e, const loop::Bounds& bounds, const Expr& p) {
    using T = std::decay_t<decltype(e)>;
    if (!shifted) return T(e);
    loop::Bounds b = bounds;
    b.insert(on_grid.begin(), on_grid.end());
    return T(loop::substitute(loop::simplify(e, b),
                            {{gh->name, loop::floordiv(p, Expr(width))}, {gw->name, loop::floormod(p, Expr(width))}}));
  };

  // Probe: capture the weights (A), the input tap (B) and the padding test.
  if (!probe_conv(c, out, out_index(oc, gj))) return std::nullopt;
  const int64_t K = product(conv_.extents);
  if (K < 0) return std::nullopt;
  loop::Bounds bounds;
  if (dims[0].is_const() && dims[0].value() > 0) bounds[n->name] = {0, dims[0].value() - 1};
  bounds[oc->name] = {0, dims[1].value() - 1};
  bounds[gj->name] = {0, positions - 1};
  for (size_t d = 0; d < conv_.ks.size(); ++d) {
    int64_t e = 0;
    loop::as_const_int(conv_.extents[d], &e);
    if (conv_.ks[d]->kind == ExprKind::Var) bounds[conv_.ks[d]->name] = {0, e - 1};
  }
  Expr a = loop::simplify(at_position(gemm_.a, bounds, gj), bounds);
  Expr b = loop::simplify(at_position(gemm_.b, bounds, gj), bounds);
  if (loop::mentions_var(a, gj->name)) std::swap(a, b);
  Expr inside = conv_.inside.defined() ? loop::simplify(at_position(conv_.inside, bounds, gj), bounds)
                                       : loop::bool_imm(true);
  if (loop::mentions_var(a, gj->name) || loop::mentions_var(b, oc->name) || loop::mentions_var(inside, oc->name))
    return std::nullopt;
  if (!loop::is_const(inside, 1)) b = loop::select(inside, b, loop::float_imm(DType::F32, 0));
  // Flattened only once k is written as digits, so that they fold.
  FlatView flat;

  GemmOperands ops;
  ops.M = shape[1];
  ops.N = Expr(positions);
  ops.K = Expr(K);
  // The order of the reduction's digits in k: (channel, kernel offsets) as
  // the weights store them or, with the positions as rows, the kernel
  // offsets first, so that a K block within one channel run holds the
  // offsets fixed and the taps' addresses step by one plane per k (A is
  // read in place: division by the kernel's extents in its k loop cost 2x).
  const std::vector<size_t> order = reduction_order(conv_.extents.size(), rows_are_positions);
  Idx extents_in_order;
  for (size_t d : order) extents_in_order.push_back(conv_.extents[d]);
  const auto k_digits = [&](const Expr& k) {
    loop::VarMap m;
    const Idx at = digits(k, extents_in_order);
    for (size_t t = 0; t < order.size(); ++t)
      if (conv_.ks[order[t]]->kind == ExprKind::Var) m[conv_.ks[order[t]]->name] = at[t];
    return m;
  };
  ops.a = [&](const Expr& i, const Expr& k) {
    loop::VarMap m = k_digits(k);
    m[oc->name] = i;
    return loop::simplify(flat.expr(loop::substitute(a, m)));
  };
  ops.b = [&](const Expr& k, const Expr& j) {
    loop::VarMap m = k_digits(k);
    m[gj->name] = j;
    return loop::simplify(flat.expr(loop::substitute(b, m)));
  };
  if (rows_are_positions) {
    std::swap(ops.M, ops.N);
    const auto weights = ops.a, taps = ops.b;
    ops.a = [taps](const Expr& i, const Expr& k) { return taps(k, i); };
    ops.b = [weights](const Expr& k, const Expr& j) { return weights(j, k); };
    // Weights prepacked for this orientation are B's panels, read in place:
    // the weight at (oc, digits) is the panels' element at k = the digits'
    // row-major position in reduction order.
    Idx ks_in_order;
    for (size_t d : order) ks_in_order.push_back(conv_.ks[d]);
    find_b_panels(a, row_major_offset(ks_in_order, extents_in_order), oc, bounds, &ops);
    if (ops.b_panels) {
      const loop::BufferRef p = ops.b_panels;
      const int64_t w = ops.panel_width;
      ops.b = [p, w](const Expr& k, const Expr& j) {
        return loop::load(p, {loop::floordiv(j, Expr(w)), k, loop::floormod(j, Expr(w))});
      };
    }
  }
  const loop::BufferRef out_buf = make_buffer(str_cat("out", params_.size()), out->type.dtype,
                                              blocked_from ? shape_of(stored) : shape, loop::BufferScope::Param);
  const Expr ei = loop::var("gei"), ej = loop::var("gej");
  bounds[ei->name] = bounds[oc->name];
  bounds[ej->name] = bounds[gj->name];
  ops.epilogue = [&](const Expr& i, const Expr& j, const Expr& acc) {
    gemm_.probing = false;
    gemm_.acc = acc;
    memo_.clear();
    levels_.assign(1, Level{});
    const Idx index = out_index(ei, ej);
    const Expr v = value_at(out, index);
    std::vector<Stmt> stmts = levels_[0].stmts;
    stmts.push_back(loop::store(out_buf, blocked_from ? blocked_index(index, block) : index, v));
    Stmt st = wrap_allocs(levels_[0].allocs, loop::seq(stmts));
    if (shifted) {
      st = at_position(st, bounds, ej);
      st = loop::if_then(loop::binary(BinaryOp::Lt, loop::floormod(ej, Expr(width)), Expr(ow_count)), st);
    }
    st = loop::simplify(flat.stmt(st), bounds);
    if (rows_are_positions) return loop::substitute(st, {{ei->name, j}, {ej->name, i}});
    return loop::substitute(st, {{ei->name, i}, {ej->name, j}});
  };

  // The images are gemm_nest's batch: one parallel loop over (image, tile)
  // pairs, so that one image still spreads over the cores.
  ops.batch = shape[0];
  ops.batch_var = n->name;
  if (sched_.gpu_gemm) {
    const Stmt body = contract_statement(ops, fresh("g"));
    for (loop::BufferRef& p : params_) p = flat.view_or_self(p);
    gemm_ = GemmCapture{};
    conv_ = ConvCapture{};
    LoweredGroup lg = finish(body, flat.view_or_self(out_buf), std::nullopt);
    lg.schedule = "conv_contract";
    return lg;
  }
  const int64_t images = dims[0].is_const() ? dims[0].value() : -1;
  // The runtime picks the thread count; balance the tiles for at least two.
  CpuInfo cpu = sched_.cpu;
  cpu.cores = std::max(cpu.cores, 2);
  const int64_t rows = rows_are_positions ? positions : dims[1].value();
  const int64_t columns = rows_are_positions ? dims[1].value() : positions;
  GemmSchedule gs =
      default_gemm_schedule(cpu, rows, columns, K, sched_.parallel, images, static_cast<bool>(ops.b_panels));
  gs.parallel_over_m_blocks = sched_.parallel;
  gs.pack_b = !b_panels_fit(ops, gs);
  // With the positions as rows, a K of up to 1024 is one block (its B
  // panel, K x 64 floats, stays in L2), walked as a nest over the digits
  // (GemmOperands::k_digits); a longer one takes blocks that divide the
  // channel count, which keep the offsets (first in k) fixed in a block.
  int64_t channels = 0;
  if (rows_are_positions && K <= 1024) {
    gs.kc = static_cast<int>(std::max<int64_t>(K, 1));
  } else if (order.size() > 1 && order.front() != 0 && loop::as_const_int(conv_.extents[0], &channels)) {
    gs.kc = static_cast<int>(channel_block(channels, gs.kc));
  }
  if (rows_are_positions && K > 0)
    for (const Expr& e : extents_in_order) ops.k_digits.push_back(e->int_value);
  if (sched_.tuned) apply_gemm_knobs(*sched_.tuned, &gs);
  const Stmt body = gemm_nest(ops, gs, fresh("g"));
  // gemm_parallel_extent as a Dim (a loop of one iteration is simplified away).
  std::optional<Dim> parallel_extent;
  const Dim n_units = gs.parallel_over_n_blocks ? Dim::ceildiv(Dim(columns), Dim(gs.nc)) : Dim(1);
  const Dim units = dims[0] * Dim::ceildiv(Dim(rows), Dim(gs.mc)) * n_units;
  if (gs.parallel_over_m_blocks && !(units.is_const() && units.value() == 1)) parallel_extent = units;

  for (loop::BufferRef& p : params_) p = flat.view_or_self(p);
  gemm_ = GemmCapture{};
  conv_ = ConvCapture{};
  LoweredGroup lg = finish(body, flat.view_or_self(out_buf), parallel_extent);
  lg.schedule = "conv_gemm";
  add_gemm_knobs(gs, &lg.sched);
  lg.sched.get("conv.gemm").set("rows", rows_are_positions ? "positions" : "channels");
  lg.gemm_shape = {rows, columns, K, images, ops.b_panels ? ops.panel_width : 0,
                   ops.b_panels ? ops.panel_columns : 0};
  return lg;
}

}  // namespace tessel::lowering
