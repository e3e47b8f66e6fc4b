// Compiled forms of ScatterElements and ScatterND as gathers: each output
// element looks through the update positions that may target it (one axis
// for ScatterElements, the index tuples for ScatterND). Without a reduction
// the last matching update wins (a max-reduction over positions picks it);
// add/mul/max/min fold every matching update into the data value. Indices
// are data: checked at run time, clamped for loads.
#include "tessel/ops/lowering.h"
#include "tessel/ops/registry.h"

namespace tessel {
namespace {

using namespace lower_expr;


// indices value normalised against an axis of size `dim`, checked.
Expr checked_index(LowerContext& ctx, const Expr& raw, const Expr& dim) {
  Expr n = loop::cast(DType::I64, raw);
  n = loop::select(lt(n, Expr(0)), n + dim, n);
  ctx.check(in_range(n, Expr(0), dim), str_cat(ctx.node.describe(), ": index out of range"));
  return n;
}

// Folds the updates selected by match(k) into `data`, or (no reduction) takes
// the update at the last matching position (positions ordered by `order`).
struct Candidates {
  Idx extents;
  std::function<Expr(const Idx&)> match, update, order;
  std::function<Expr(const Expr&)> update_at_order;  // the update at a position number
};

Expr fold_updates(LowerContext& ctx, const Expr& data, const Candidates& c) {
  const std::string red = ctx.node.attr_string("reduction", "none");
  const DType t = compute_type(data.dtype());
  if (red == "none") {
    const Expr last = ctx.reduce(ReduceOp::Max, Expr(-1), c.extents,
                                 [&](const Idx& k) { return loop::select(c.match(k), c.order(k), Expr(-1)); });
    return loop::select(ge(last, Expr(0)), c.update_at_order(loop::max(last, Expr(0))), data);
  }
  if (t == DType::Bool) ctx.unsupported("bool reduction");
  ReduceOp op;
  Expr init;
  if (red == "add") op = ReduceOp::Sum, init = constant(t, 0);
  else if (red == "mul") op = ReduceOp::Prod, init = constant(t, 1);
  else if (red == "max") op = ReduceOp::Max, init = lowest(t);
  else if (red == "min") op = ReduceOp::Min, init = highest(t);
  else ctx.unsupported("reduction " + red);
  const Expr folded = ctx.reduce(op, init, c.extents, [&](const Idx& k) {
    return loop::select(c.match(k), loop::cast(t, c.update(k)), init);
  });
  const Expr d = loop::cast(t, data);
  Expr r;
  switch (op) {
    case ReduceOp::Sum: r = d + folded; break;
    case ReduceOp::Prod: r = d * folded; break;
    case ReduceOp::Max: r = loop::max(d, folded); break;
    case ReduceOp::Min: r = loop::min(d, folded); break;
  }
  return loop::cast(data.dtype(), r);
}

Expr lower_scatter_elements(LowerContext& ctx, size_t, const Idx& index) {
  const size_t rank = index.size();
  const size_t axis = static_cast<size_t>(normalize_axis(ctx.node.attr_int("axis", 0), static_cast<int64_t>(rank), ctx.node));
  const Idx ushape = ctx.in_shape(2);
  const Expr dim = ctx.in_shape(0)[axis];
  Expr inside = loop::bool_imm(true);
  Idx p = index;
  for (size_t d = 0; d < rank; ++d) {
    if (d == axis) continue;
    inside = and_(inside, lt(index[d], ushape[d]));
    p[d] = loop::min(index[d], ushape[d] - Expr(1));
  }
  const auto at = [&](const Expr& k) {
    Idx q = p;
    q[axis] = k;
    return q;
  };
  Candidates c;
  c.extents = {ushape[axis]};
  c.match = [&](const Idx& k) {
    return and_(inside, eq(checked_index(ctx, ctx.input(1, at(k[0])), dim), index[axis]));
  };
  c.update = [&](const Idx& k) { return ctx.input(2, at(k[0])); };
  c.order = [](const Idx& k) { return k[0]; };
  c.update_at_order = [&](const Expr& k) { return ctx.input(2, at(k)); };
  return fold_updates(ctx, ctx.input(0, index), c);
}

Expr lower_scatter_nd(LowerContext& ctx, size_t, const Idx& index) {
  const std::vector<int64_t> ind = const_in_dims(ctx, 1);
  const int64_t q = ind.back();
  const Idx dshape = ctx.in_shape(0);
  Candidates c;
  for (size_t d = 0; d + 1 < ind.size(); ++d) c.extents.push_back(Expr(ind[d]));
  const auto tail = [&](Idx at) {
    for (size_t d = static_cast<size_t>(q); d < index.size(); ++d) at.push_back(index[d]);
    return at;
  };
  c.match = [&](const Idx& k) {
    Expr m = loop::bool_imm(true);
    for (int64_t j = 0; j < q; ++j) {
      Idx at = k;
      at.push_back(Expr(j));
      const Expr n = checked_index(ctx, ctx.input(1, at), dshape[static_cast<size_t>(j)]);
      m = and_(m, eq(n, index[static_cast<size_t>(j)]));
    }
    return m;
  };
  c.update = [&](const Idx& k) { return ctx.input(2, tail(k)); };
  c.order = [&](const Idx& k) { return flatten_index(k, c.extents); };
  c.update_at_order = [&](const Expr& flat) { return ctx.input(2, tail(unflatten_index(flat, c.extents))); };
  return fold_updates(ctx, ctx.input(0, index), c);
}

}  // namespace

void register_scatter_lowerings(OpRegistry& r) {
  r.set_lowering("", "ScatterElements", FusionKind::Reduction, lower_scatter_elements);
  r.set_lowering("", "ScatterND", FusionKind::Reduction, lower_scatter_nd);
}

}  // namespace tessel
