#include "tessel/lower/lower_group.h"

#include "tessel/lower/group_lowerer.h"

#include <map>
#include <set>

#include "tessel/loop/printer.h"
#include "tessel/loop/visit.h"
#include "tessel/lower/dim_expr.h"
#include "tessel/ops/lowering.h"
#include "tessel/support/error.h"

namespace tessel {

namespace lowering {

std::vector<Expr> NodeContext::in_shape(size_t i) { return gl_.shape_of(node.input(i)); }
std::vector<Expr> NodeContext::out_shape(size_t i) { return gl_.shape_of(node.outputs.at(i)); }
Expr NodeContext::input(size_t i, const Idx& index) {
  TS_CHECK(node.has_input(i), node.describe(), ": lowering reads omitted input ", i);
  return gl_.value_at(node.input(i), index);
}
Expr NodeContext::reduce(ReduceOp op, Expr init, const Idx& extents, const std::function<Expr(const Idx&)>& body) {
  return gl_.reduce(op, std::move(init), extents, body);
}
void NodeContext::check(Expr cond, const std::string& message) { gl_.check(std::move(cond), message); }

namespace {

bool one_element_local(const loop::BufferRef& b) {
  return b->scope == loop::BufferScope::Local && b->shape.size() == 1 && loop::is_const(b->shape[0], 1);
}

// Whether the per-element statements `body` of an output loop over `var`
// may run with that loop vectorized: their loops are serial with bounds
// that do not vary with `var` (every lane runs them the same number of
// times) and they allocate only one-element accumulators (which per_lane
// gives each lane its own). A pooling window's reduction is such a body.
bool lanes_can_run(const Stmt& body, const std::string& var) {
  bool ok = true;
  loop::visit_stmt(
      body,
      [&](const Stmt& s) {
        if (s->kind == loop::StmtKind::For)
          ok = ok && s->for_kind == loop::ForKind::Serial && !loop::mentions_var(s->min, var) &&
               !loop::mentions_var(s->extent, var);
        if (s->kind == loop::StmtKind::Allocate) ok = ok && one_element_local(s->buffer);
        ok = ok && s->kind != loop::StmtKind::Contract && s->kind != loop::StmtKind::Attention;
      },
      [](const Expr&) {});
  return ok;
}

// `body` with each one-element Local buffer it allocates made `w` elements,
// one per lane: its accesses [0] read and write [lane], and its Allocate
// moves out, to `moved` (the vectorized loop cannot hold one scalar that
// every lane writes).
Stmt per_lane(const Stmt& body, const Expr& lane, int64_t w, std::map<const loop::Buffer*, loop::BufferRef>* moved) {
  const std::function<Expr(const Expr&)> fe = [&](const Expr& e) {
    Expr x = loop::map_args(e, fe);
    if (x->kind != loop::ExprKind::Load) return x;
    auto it = moved->find(x->buffer.get());
    return it == moved->end() ? x : loop::load(it->second, {lane});
  };
  const std::function<Stmt(const Stmt&)> fs = [&](const Stmt& s) -> Stmt {
    if (s->kind == loop::StmtKind::Allocate && one_element_local(s->buffer)) {
      if (!moved->count(s->buffer.get())) {  // (a second copy of the body shares the first's)
        auto wide = std::make_shared<loop::Buffer>(*s->buffer);
        wide->name += "_lanes";
        wide->shape = {Expr(w)};
        (*moved)[s->buffer.get()] = wide;
      }
      return fs(s->body[0]);
    }
    if (s->kind == loop::StmtKind::Store) {
      auto it = moved->find(s->buffer.get());
      if (it != moved->end()) return loop::store(it->second, {lane}, fe(s->value));
    }
    return loop::map_stmt(s, fe, fs);
  };
  return fs(body);
}

}  // namespace

Expr scalar_immediate(const Tensor& t) {
  if (is_float(t.dtype())) return loop::float_imm(t.dtype(), t.get_f64(0));
  if (t.dtype() == DType::U64) return loop::int_imm(t.dtype(), static_cast<int64_t>(t.get_u64(0)));
  return loop::int_imm(t.dtype(), t.get_i64(0));
}

Expr combine(ReduceOp op, const Expr& acc, const Expr& v) {
  switch (op) {
    case ReduceOp::Sum: return acc + v;
    case ReduceOp::Prod: return acc * v;
    case ReduceOp::Max: return loop::max(acc, v);
    case ReduceOp::Min: return loop::min(acc, v);
  }
  fail("unknown reduction");
}

Stmt wrap_allocs(const std::vector<loop::BufferRef>& allocs, Stmt body) {
  for (auto it = allocs.rbegin(); it != allocs.rend(); ++it) body = loop::allocate(*it, body);
  return body;
}

loop::BufferRef make_buffer(const std::string& name, DType t, Idx shape, loop::BufferScope scope) {
  auto b = std::make_shared<loop::Buffer>();
  b->name = name;
  b->dtype = t;
  b->shape = std::move(shape);
  b->scope = scope;
  return b;
}

void require_computable(const Value* v) {
  if (!loop::is_computable(v->type.dtype))
    throw LoweringUnsupported(str_cat("%", v->name, " has dtype ", dtype_name(v->type.dtype),
                                      " which compiled kernels do not handle"));
}

loop::BufferRef GroupLowerer::param_for(const Value* v) {
  auto it = param_of_.find(v);
  if (it != param_of_.end()) return it->second;
  require_computable(v);
  loop::BufferRef b = make_buffer(str_cat("in", params_.size()), v->type.dtype, shape_of(v), loop::BufferScope::Param);
  param_of_[v] = b;
  param_values_.push_back(v);
  params_.push_back(b);
  return b;
}

Expr GroupLowerer::inline_member(const Value* v, const Idx& index) {
  const Node& n = *v->producer;
  const OpSchema* s = reg_.find(n.domain, n.op);
  TS_CHECK(s && s->lower, n.describe(), ": fused without a lowering");
  const size_t out = static_cast<size_t>(v->producer_output);
  std::string key;
  if (s->fusion == FusionKind::Reduction || s->fusion == FusionKind::Contraction) {
    key = str_cat(static_cast<const void*>(&n), "#", out);
    for (const Expr& e : index) key += "," + loop::print(e);
    auto it = memo_.find(key);
    if (it != memo_.end()) return it->second;
  }
  NodeContext ctx(n, *this);
  Expr e;
  const Node* outer = current_;
  current_ = &n;
  try {
    e = s->lower(ctx, out, index);
  } catch (LoweringUnsupported& u) {
    if (!u.node) u.node = &n;
    throw;
  }
  current_ = outer;
  TS_CHECK(e.dtype() == v->type.dtype, n.describe(), ": lowering gives ", dtype_name(e.dtype()), " for %", v->name,
           " of ", dtype_name(v->type.dtype));
  if (!key.empty()) memo_[key] = e;
  return e;
}

Expr GroupLowerer::value_at(const Value* v, const Idx& index) {
  TS_CHECK(v != nullptr, "lowering reads an omitted value");
  if (v->producer && members_.count(v->producer)) return inline_member(v, index);
  require_computable(v);
  if (v->constant && v->constant->numel() == 1) return scalar_immediate(*v->constant);
  return loop::load(param_for(v), index);
}

size_t GroupLowerer::level_of(const Expr& e, size_t below) const {
  size_t deepest = 0;
  loop::visit_expr(e, [&](const Expr& x) {
    if (x->kind == loop::ExprKind::Var) {
      auto it = var_level_.find(x->name);
      if (it != var_level_.end() && it->second < below) deepest = std::max(deepest, it->second);
    } else if (x->kind == loop::ExprKind::Load) {
      auto it = acc_level_.find(x->buffer.get());
      if (it != acc_level_.end() && it->second < below) deepest = std::max(deepest, it->second);
    }
  });
  return deepest;
}

Expr GroupLowerer::reduce(ReduceOp op, Expr init, const Idx& extents, const std::function<Expr(const Idx&)>& body) {
  if (gemm_.node) return contraction_reduce(op, init, extents, body);
  const size_t base = levels_.size();
  Idx vars;
  for (size_t j = 0; j < extents.size(); ++j) {
    const std::string name = fresh("k");
    var_level_[name] = levels_.size();
    levels_.emplace_back();
    vars.push_back(loop::var(name));
  }
  Expr value = body(vars);
  TS_CHECK(value.dtype() == init.dtype(), "reduction body of type ", dtype_name(value.dtype()), " but init of ",
           dtype_name(init.dtype()));
  loop::BufferRef acc = make_buffer(fresh("acc"), init.dtype(), {Expr(1)}, loop::BufferScope::Local);
  // Lane-parallel partial results (rfactor) when the innermost level holds
  // only the update: the partials are combined in a fixed order at the end.
  const Level& inner = levels_[base + extents.size() - 1];
  const int64_t w = sched_.vector_width;
  int64_t n = 0;
  const bool lanes = !extents.empty() && inner.stmts.empty() && inner.allocs.empty() && w > 1 &&
                     init.dtype() != DType::Bool && !(loop::as_const_int(extents.back(), &n) && n < 2 * w);
  loop::BufferRef part = lanes ? make_buffer(fresh("part"), init.dtype(), {Expr(w)}, loop::BufferScope::Local) : acc;
  Stmt s = lanes ? lane_reduction(op, part, vars.back()->name, extents.back(), value)
                 : loop::store(acc, {Expr(0)}, combine(op, loop::load(acc, {Expr(0)}), value));
  for (size_t j = extents.size(); j-- > 0;) {
    Level& lv = levels_[base + j];
    if (lanes && j + 1 == extents.size()) continue;  // the lane loops replace the innermost loop
    std::vector<Stmt> stmts = lv.stmts;
    stmts.push_back(s);
    s = loop::for_loop(vars[j]->name, Expr(0), extents[j], loop::ForKind::Serial, wrap_allocs(lv.allocs, loop::seq(stmts)));
  }
  levels_.resize(base);
  for (const Expr& v : vars) var_level_.erase(v->name);

  // The loop nest goes to the deepest enclosing level that anything in it
  // mentions, inner reductions' statements included.
  size_t t = level_of(init, base);
  loop::visit_stmt(s, [](const Stmt&) {}, [&](const Expr& e) { t = std::max(t, level_of(e, base)); });
  // Inside another reduction's loop this one would be recomputed per
  // iteration of that loop: materialise its node instead.
  if (t >= output_levels_ && current_ != group_.root)
    throw FusionRejected(str_cat(current_->describe(), ": would be recomputed inside a reduction"), current_);
  levels_[t].allocs.push_back(acc);
  if (lanes) {
    levels_[t].allocs.push_back(part);
    const std::string l = fresh("l");
    levels_[t].stmts.push_back(loop::for_loop(l, Expr(0), Expr(w), loop::ForKind::Vectorized,
                                              loop::store(part, {loop::var(l)}, init)));
    levels_[t].stmts.push_back(s);
    levels_[t].stmts.push_back(combine_lanes(op, acc, part));
  } else {
    levels_[t].stmts.push_back(loop::store(acc, {Expr(0)}, init));
    levels_[t].stmts.push_back(s);
  }
  acc_level_[acc.get()] = t;
  return loop::load(acc, {Expr(0)});
}

// for k in [0, extent): part[lane] = combine(part[lane], value(k)) as a
// vectorized loop over W lanes plus a scalar tail into lane 0.
Stmt GroupLowerer::lane_reduction(ReduceOp op, const loop::BufferRef& part, const std::string& k, const Expr& extent,
                                  const Expr& value) {
  const int64_t w = sched_.vector_width;
  const std::string ko = fresh("ko"), l = fresh("l");
  const Expr main = loop::floordiv(extent, Expr(w));
  const Expr lane = loop::var(l);
  Stmt vec = loop::for_loop(
      ko, Expr(0), main, loop::ForKind::Serial,
      loop::for_loop(l, Expr(0), Expr(w), loop::ForKind::Vectorized,
                     loop::store(part, {lane},
                                 combine(op, loop::load(part, {lane}),
                                         loop::substitute(value, {{k, loop::var(ko) * Expr(w) + lane}})))));
  Stmt tail = loop::for_loop(k, main * Expr(w), extent - main * Expr(w), loop::ForKind::Serial,
                             loop::store(part, {Expr(0)}, combine(op, loop::load(part, {Expr(0)}), value)));
  return loop::seq({vec, tail});
}

// acc[0] = part[0] combined with part[1..W), in lane order.
Stmt GroupLowerer::combine_lanes(ReduceOp op, const loop::BufferRef& acc, const loop::BufferRef& part) {
  const std::string l = fresh("l");
  return loop::seq({loop::store(acc, {Expr(0)}, loop::load(part, {Expr(0)})),
                    loop::for_loop(l, Expr(1), Expr(sched_.vector_width - 1), loop::ForKind::Serial,
                                   loop::store(acc, {Expr(0)}, combine(op, loop::load(acc, {Expr(0)}),
                                                                       loop::load(part, {loop::var(l)}))))});
}

Stmt GroupLowerer::close_level(size_t depth, std::vector<Stmt> tail) {
  std::vector<Stmt> stmts = levels_[depth].stmts;
  for (Stmt& s : tail) stmts.push_back(std::move(s));
  return wrap_allocs(levels_[depth].allocs, loop::seq(std::move(stmts)));
}

// for var in [min, min + extent): body, split into a vectorized main part and
// a scalar tail when `vectorize`.
Stmt GroupLowerer::inner_loop(const std::string& var, const Expr& min, const Expr& extent, const Stmt& body,
                              bool vectorize) {
  const int64_t w = sched_.vector_width;
  int64_t n = 0;
  if (!vectorize || w <= 1 || (loop::as_const_int(extent, &n) && n < w))
    return loop::for_loop(var, min, extent, loop::ForKind::Serial, body);
  const std::string vo = fresh("vo"), vi = fresh("vi");
  Expr main = loop::floordiv(extent, Expr(w));
  Expr at = min + loop::var(vo) * Expr(w) + loop::var(vi);
  std::map<const loop::Buffer*, loop::BufferRef> lane_accs;
  // (Loops and lets of the body renamed: the scalar tail keeps the originals.)
  std::set<std::string> taken = loop::names_in(body);
  Stmt lanes = per_lane(loop::rename_bound(loop::substitute(body, {{var, at}}), "_v", &taken), loop::var(vi), w,
                        &lane_accs);
  Stmt vec = loop::for_loop(vo, Expr(0), main, loop::ForKind::Serial,
                            loop::for_loop(vi, Expr(0), Expr(w), loop::ForKind::Vectorized, lanes));
  if (lane_accs.empty()) {
    Stmt tail = loop::for_loop(var, min + main * Expr(w), extent - main * Expr(w), loop::ForKind::Serial, body);
    return loop::seq({vec, tail});
  }
  // With per-element statements the tail must be vectors too: as a scalar
  // loop LLVM unrolled each element's window and ran it in scalar code (a
  // pooling row's last 8 of 56 columns took longer than the other 48). A
  // constant remainder runs as narrower vectors, 8 then 4 then 2 lanes, and
  // at most one scalar element; any other as one more vector whose lanes
  // past the extent are masked off (their loads then gather).
  std::vector<Stmt> parts{vec};
  const auto tail_vector = [&](const Expr& start, int64_t lanes, const Expr& cond) {
    const std::string ti = fresh("ti");
    const Expr pos = start + loop::var(ti);
    Stmt b = per_lane(loop::rename_bound(loop::substitute(body, {{var, min + pos}}), "_t", &taken), loop::var(ti), w,
                      &lane_accs);
    if (cond.defined()) b = loop::if_then(loop::binary(loop::BinaryOp::Lt, pos, cond), b);
    parts.push_back(loop::for_loop(ti, Expr(0), Expr(lanes), loop::ForKind::Vectorized, b));
  };
  if (loop::as_const_int(extent, &n)) {
    int64_t at = n / w * w;
    for (int64_t lanes = w / 2; lanes >= 2; lanes /= 2)
      if (n - at >= lanes) {
        tail_vector(Expr(at), lanes, Expr());
        at += lanes;
      }
    if (at < n) parts.push_back(loop::for_loop(var, min + Expr(at), Expr(n - at), loop::ForKind::Serial, body));
  } else {
    tail_vector(main * Expr(w), w, extent);
  }
  Stmt all = loop::seq(parts);
  for (const auto& [old, wide] : lane_accs) all = loop::allocate(wide, all);
  return all;
}

LoweredGroup GroupLowerer::run() {
  const Node& root = *group_.root;
  const Value* out = root.outputs.at(group_.root_output);
  TS_CHECK(out != nullptr, root.describe(), ": root without an output");
  require_computable(out);
  const Idx shape = shape_of(out);
  const size_t r = shape.size();
  // Levels: 0 = kernel top; 1 = inside the parallel loop; r >= 1: innermost = inside the element loop.
  levels_.assign(r == 0 ? 1 : 3, Level{});
  output_levels_ = levels_.size();
  Idx index;
  const std::string p = fresh("p");
  std::vector<std::pair<std::string, Expr>> lets;  // outer index vars from p
  Expr outer_extent = Expr(1), inner_min = Expr(0), inner_extent;
  std::string inner_var;
  if (r == 1) {
    inner_var = "i0";
    outer_extent = loop::floordiv(shape[0] + Expr(kChunk - 1), Expr(kChunk));
    inner_min = loop::var(p) * Expr(kChunk);
    inner_extent = loop::min(Expr(kChunk), shape[0] - inner_min);
    index = {loop::var(inner_var)};
  } else if (r >= 2) {
    Expr stride = Expr(1);
    for (size_t k = r - 1; k-- > 0;) {
      Expr q = loop::floordiv(loop::var(p), stride);
      lets.insert(lets.begin(), {str_cat("i", k), k == 0 ? q : loop::floormod(q, shape[k])});
      stride = stride * shape[k];
    }
    outer_extent = stride;
    inner_var = str_cat("i", r - 1);
    inner_extent = shape[r - 1];
    for (size_t k = 0; k < r; ++k) index.push_back(loop::var(str_cat("i", k)));
  }
  if (r >= 1) {
    var_level_[p] = 1;
    for (const auto& [name, e] : lets) var_level_[name] = 1;
    var_level_[inner_var] = 2;
  }
  Expr value = value_at(out, index);
  loop::BufferRef out_buf =
      make_buffer(str_cat("out", params_.size()), out->type.dtype, shape, loop::BufferScope::Param);
  Stmt st = loop::store(out_buf, index, value);
  Stmt body;
  if (r == 0) {
    body = close_level(0, {st});
  } else {
    // Per-element statements (a pooling window's reduction) run in the
    // vectorized loop too, each lane with its own accumulator: before, such
    // a loop stayed serial and LLVM vectorized it with a gather per tap.
    const Stmt element = close_level(2, {st});
    const bool vectorizable = lanes_can_run(element, inner_var);
    Stmt inner = inner_loop(inner_var, inner_min, inner_extent, element, vectorizable);
    Stmt row = close_level(1, {inner});
    for (auto it = lets.rbegin(); it != lets.rend(); ++it) row = loop::let(it->first, it->second, row);
    const loop::ForKind kind = sched_.parallel ? loop::ForKind::Parallel : loop::ForKind::Serial;
    body = close_level(0, {loop::for_loop(p, Expr(0), outer_extent, kind, row)});
  }

  std::optional<Dim> parallel_extent;
  if (r >= 1 && sched_.parallel) {
    const Shape& dims = *out->type.shape;
    Dim n = 1;
    if (r == 1) {
      n = Dim::ceildiv(dims[0], Dim(kChunk));
    } else {
      for (size_t k = 0; k + 1 < r; ++k) n = n * dims[k];
    }
    parallel_extent = n;
  }
  return finish(body, out_buf, parallel_extent);
}

LoweredGroup GroupLowerer::finish(Stmt body, const loop::BufferRef& out_buf, std::optional<Dim> parallel_extent) {
  LoweredGroup lg;
  lg.kernel.name = group_.name;
  lg.kernel.params = params_;
  lg.kernel.num_inputs = params_.size();
  lg.kernel.params.push_back(out_buf);
  lg.kernel.syms.assign(syms_.begin(), syms_.end());
  lg.kernel.body = std::move(body);
  lg.params = param_values_;
  lg.params.push_back(group_.root->outputs[group_.root_output]);
  lg.parallel_extent = std::move(parallel_extent);
  return lg;
}

}  // namespace lowering

namespace {

// The nest.* knobs of a tuned schedule over the defaults.
NestSchedule with_nest_knobs(const NestSchedule& s) {
  NestSchedule out = s;
  if (!s.tuned) return out;
  if (const Primitive* v = s.tuned->find("nest.vector")) out.vector_width = static_cast<int>(v->int_attr("width", 16));
  if (const Primitive* p = s.tuned->find("nest.parallel")) out.parallel = p->int_attr("on", 1) != 0;
  return out;
}

LoweredGroup lower_with(const FusionGroup& g, const OpRegistry& reg, const NestSchedule& s) {
  {
    lowering::GroupLowerer attention(g, reg, s);
    if (std::optional<LoweredGroup> lg = attention.try_attention()) return std::move(*lg);
  }
  {
    lowering::GroupLowerer gemm(g, reg, s);
    if (std::optional<LoweredGroup> lg = gemm.try_contraction()) return std::move(*lg);
  }
  lowering::GroupLowerer gl(g, reg, s);  // fresh: the GEMM attempt may have left state behind
  return gl.run();
}

// lg.sched: the kind, the knobs the nest kinds read (the GEMM kinds added
// theirs), then the tuned schedule's loop primitives.
void record_schedule(const NestSchedule& s, LoweredGroup* lg) {
  lg->sched.kind = lg->schedule;
  if (lg->schedule == "nest") lg->sched.get("nest.vector").set("width", s.vector_width);
  if (lg->schedule == "nest" || lg->schedule == "depthwise") lg->sched.get("nest.parallel").set("on", s.parallel ? 1 : 0);
  if (!s.tuned) return;
  for (const Primitive& p : s.tuned->prims)
    if (p.name.find('.') == std::string::npos) lg->sched.prims.push_back(p);
}

}  // namespace

LoweredGroup lower_group(const FusionGroup& g, const OpRegistry& reg, const NestSchedule& s) {
  TS_CHECK(g.compiled && g.root, "lower_group: group ", g.name, " has no compiled form");
  const NestSchedule eff = with_nest_knobs(s);
  LoweredGroup lg = lower_with(g, reg, eff);
  if (s.tuned)
    TS_CHECK(s.tuned->kind == lg.schedule, "schedule for ", g.name, ": a ", s.tuned->kind,
             " schedule does not apply to a ", lg.schedule, " kernel");
  record_schedule(eff, &lg);
  return lg;
}

NestSchedule default_schedule(const FusionGroup&) { return NestSchedule{}; }

}  // namespace tessel
