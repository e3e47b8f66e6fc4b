// Compiled forms of the row normalisations (LayerNormalization,
// RMSNormalization) and of inference-mode Dropout. Statistics are two
// reductions over the normalised axes, computed in f32 (f64 for f64 inputs)
// and hoisted to the row, so each row is read three times and written once.
#include "tessel/ops/lowering.h"
#include "tessel/ops/registry.h"

namespace tessel {
namespace {

using loop::Expr;
using Idx = std::vector<Expr>;

struct Rows {
  size_t axis;
  Idx extents;  // the normalised dims
};

Rows rows_of(LowerContext& ctx) {
  const size_t rank = ctx.in_rank(0);
  Rows r;
  r.axis = static_cast<size_t>(normalize_axis(ctx.node.attr_int("axis", -1), static_cast<int64_t>(rank), ctx.node));
  const Idx shape = ctx.in_shape(0);
  r.extents.assign(shape.begin() + static_cast<long>(r.axis), shape.end());
  return r;
}

// Sum over the row of f(x) at the row of `index`.
Expr row_sum(LowerContext& ctx, const Rows& rows, const Idx& index, DType t, const std::function<Expr(const Expr&)>& f) {
  return ctx.reduce(ReduceOp::Sum, constant(t, 0), rows.extents, [&](const Idx& k) {
    Idx at(index.begin(), index.begin() + static_cast<long>(rows.axis));
    at.insert(at.end(), k.begin(), k.end());
    return f(input_as_compute(ctx, 0, at));
  });
}

Expr row_count(const Rows& rows, DType t) {
  Expr n = Expr(1);
  for (const Expr& e : rows.extents) n = n * e;
  return loop::cast(t, n);
}

template <bool Rms>
Expr lower_rownorm(LowerContext& ctx, size_t, const Idx& index) {
  const DType t = compute_type(ctx.in_dtype(0));
  if (!is_float(t)) ctx.unsupported("non-float input");
  const Rows rows = rows_of(ctx);
  const Expr n = row_count(rows, t);
  const Expr eps = constant(t, ctx.node.attr_float("epsilon", 1e-5f));
  const auto div = [](const Expr& a, const Expr& b) { return loop::binary(loop::BinaryOp::Div, a, b); };
  Expr centered = input_as_compute(ctx, 0, index);
  Expr var;
  if (Rms) {
    var = div(row_sum(ctx, rows, index, t, [](const Expr& x) { return x * x; }), n);
  } else {
    const Expr mean = div(row_sum(ctx, rows, index, t, [](const Expr& x) { return x; }), n);
    var = div(row_sum(ctx, rows, index, t, [&](const Expr& x) { return (x - mean) * (x - mean); }), n);
    centered = centered - mean;
  }
  Expr y = div(centered, loop::call("sqrt", t, {var + eps})) * input_as_compute(ctx, 1, broadcast_index(ctx, 1, index));
  if (!Rms && ctx.has_input(2)) y = y + input_as_compute(ctx, 2, broadcast_index(ctx, 2, index));
  return loop::cast(ctx.out_dtype(), y);
}

// Inference: Dropout is the identity (training_mode absent or constant false).
Expr lower_dropout(LowerContext& ctx, size_t, const Idx& index) {
  if (ctx.has_input(2)) {
    const Tensor* training = ctx.input_const(2);
    if (!training || training->get_i64(0) != 0) ctx.unsupported("training mode");
  }
  return ctx.input(0, index);
}

}  // namespace

void register_norm_lowerings(OpRegistry& r) {
  r.set_lowering("", "LayerNormalization", FusionKind::Reduction, lower_rownorm<false>);
  r.set_lowering("", "RMSNormalization", FusionKind::Reduction, lower_rownorm<true>);
  r.set_lowering("", "Dropout", FusionKind::Elementwise, lower_dropout);
}

}  // namespace tessel
