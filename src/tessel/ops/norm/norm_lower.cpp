// Compiled forms of the normalisations (LayerNormalization, RMSNormalization,
// InstanceNormalization, MeanVarianceNormalization, LpNormalization,
// inference-mode BatchNormalization) and of inference-mode Dropout. Statistics are two
// reductions over the normalised axes, computed in f32 (f64 for f64 inputs)
// and hoisted to the row, so each row is read three times and written once.
#include "tessel/ops/lowering.h"
#include "tessel/ops/registry.h"

namespace tessel {
namespace {

using namespace lower_expr;

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

// A row's statistics in the compute type, each a reduction over the row:
// the mean (unused by RMSNormalization) and sqrt(variance + epsilon).
struct RowStats {
  Expr mean, std;
};

template <bool Rms>
RowStats row_stats(LowerContext& ctx, const Rows& rows, const Idx& index, DType t) {
  const Expr n = row_count(rows, t);
  const Expr eps = constant(t, ctx.node.attr_float("epsilon", 1e-5f));
  RowStats s;
  Expr var;
  if (Rms) {
    var = div(row_sum(ctx, rows, index, t, [](const Expr& x) { return x * x; }), n);
  } else {
    s.mean = div(row_sum(ctx, rows, index, t, [](const Expr& x) { return x; }), n);
    var = div(row_sum(ctx, rows, index, t, [&](const Expr& x) { return (x - s.mean) * (x - s.mean); }), n);
  }
  s.std = intrinsic("sqrt", var + eps);
  return s;
}

// Output 0 is Y; LayerNormalization's outputs 1 and 2 are the Mean and
// InvStdDev (in stash_type), indexed like X with 1s at the normalised axes,
// which row_sum does not read.
template <bool Rms>
Expr lower_rownorm(LowerContext& ctx, size_t output, const Idx& index) {
  const DType t = compute_type(ctx.in_dtype(0));
  if (!is_float(t)) ctx.unsupported("non-float input");
  const Rows rows = rows_of(ctx);
  const RowStats st = row_stats<Rms>(ctx, rows, index, t);
  if (output == 1) return loop::cast(ctx.out_dtype(1), st.mean);
  if (output == 2) return loop::cast(ctx.out_dtype(2), div(constant(t, 1), st.std));
  const Expr x = input_as_compute(ctx, 0, index);
  Expr y = div(Rms ? x : x - st.mean, st.std) * input_as_compute(ctx, 1, broadcast_index(ctx, 1, index));
  if (!Rms && ctx.has_input(2)) y = y + input_as_compute(ctx, 2, broadcast_index(ctx, 2, index));
  return loop::cast(ctx.out_dtype(), y);
}

// Dropout without dropping: inference (training_mode absent or a constant
// false), or a constant ratio of 0. Y is X and the mask (output 1) is all
// true. Training with a ratio draws random numbers: the interpreter's job.
Expr lower_dropout(LowerContext& ctx, size_t output, const Idx& index) {
  if (ctx.has_input(2)) {
    const Tensor* training = ctx.input_const(2);
    const Tensor* ratio = ctx.has_input(1) ? ctx.input_const(1) : nullptr;
    const bool drops = !training || (training->get_i64(0) != 0 && !(ratio && ratio->get_f64(0) == 0));
    if (drops) ctx.unsupported("training mode");
  }
  return output == 1 ? loop::bool_imm(true) : ctx.input(0, index);
}

// x[n, c, ...] with per-channel operands: scale * (x - mean) / sqrt(var + eps) + bias.
Expr channel_norm(LowerContext& ctx, const Idx& index, const Expr& mean, const Expr& var) {
  const DType t = mean.dtype();
  const Expr c = index[1];
  const Expr eps = constant(t, ctx.node.attr_float("epsilon", 1e-5f));
  const Expr k = div(input_as_compute(ctx, 1, {c}), intrinsic("sqrt", var + eps));
  return loop::cast(ctx.out_dtype(), (input_as_compute(ctx, 0, index) - mean) * k + input_as_compute(ctx, 2, {c}));
}

// Statistics over the spatial dims of each (n, c).
Expr lower_instancenorm(LowerContext& ctx, size_t, const Idx& index) {
  const DType t = compute_type(ctx.in_dtype(0));
  if (!is_float(t)) ctx.unsupported("non-float input");
  const Idx shape = ctx.in_shape(0);
  const Rows rows = {2, Idx(shape.begin() + 2, shape.end())};
  const Expr n = row_count(rows, t);
  const Expr mean = div(row_sum(ctx, rows, index, t, [](const Expr& x) { return x; }), n);
  const Expr var = div(row_sum(ctx, rows, index, t, [&](const Expr& x) { return (x - mean) * (x - mean); }), n);
  return channel_norm(ctx, index, mean, var);
}

// Sum of f(x) over the `red` axes at the kept coordinates of `index`.
Expr axes_sum(LowerContext& ctx, const std::vector<bool>& red, const Idx& index, DType t,
              const std::function<Expr(const Expr&)>& f) {
  const Idx shape = ctx.in_shape(0);
  Idx extents;
  for (size_t d = 0; d < red.size(); ++d)
    if (red[d]) extents.push_back(shape[d]);
  return ctx.reduce(ReduceOp::Sum, constant(t, 0), extents, [&](const Idx& k) {
    Idx at = index;
    size_t j = 0;
    for (size_t d = 0; d < red.size(); ++d)
      if (red[d]) at[d] = k[j++];
    return f(input_as_compute(ctx, 0, at));
  });
}

// Inference mode: the running statistics are inputs. Training mode: Y uses
// the batch statistics of each channel (over N and the spatial dims), and
// outputs 1 and 2 are the running mean and variance moved towards them by
// momentum (population variance, as the reference).
Expr lower_batchnorm(LowerContext& ctx, size_t output, const Idx& index) {
  const DType t = compute_type(ctx.in_dtype(0));
  if (!is_float(t)) ctx.unsupported("non-float input");
  if (ctx.node.attr_int("training_mode", 0) == 0) {
    if (output != 0) ctx.unsupported("running statistics outside training mode");
    return channel_norm(ctx, index, input_as_compute(ctx, 3, {index[1]}), input_as_compute(ctx, 4, {index[1]}));
  }
  const Expr c = output == 0 ? index[1] : index[0];
  Idx at(ctx.in_rank(0), Expr(0));  // a position of channel c; axes_sum replaces the others
  at[1] = c;
  std::vector<bool> red(at.size(), true);
  red[1] = false;
  Expr count = Expr(1);
  const Idx shape = ctx.in_shape(0);
  for (size_t d = 0; d < shape.size(); ++d)
    if (red[d]) count = count * shape[d];
  const Expr n = loop::cast(t, count);
  const Expr mean = div(axes_sum(ctx, red, at, t, [](const Expr& x) { return x; }), n);
  const Expr var = div(axes_sum(ctx, red, at, t, [&](const Expr& x) { return (x - mean) * (x - mean); }), n);
  if (output == 0) return channel_norm(ctx, index, mean, var);
  const Expr momentum = constant(t, ctx.node.attr_float("momentum", 0.9f));
  const size_t running = output == 1 ? 3 : 4;
  const Expr batch = output == 1 ? mean : var;
  const Expr v = input_as_compute(ctx, running, {c}) * momentum + batch * (constant(t, 1) - momentum);
  return loop::cast(ctx.out_dtype(output), v);
}

// (x - mean) / (std + 1e-9) over `axes` (the spec's function body).
Expr lower_mvn(LowerContext& ctx, size_t, const Idx& index) {
  const DType t = compute_type(ctx.in_dtype(0));
  if (!is_float(t)) ctx.unsupported("non-float input");
  const int64_t rank = static_cast<int64_t>(ctx.in_rank(0));
  std::vector<bool> red(static_cast<size_t>(rank), false);
  const Idx shape = ctx.in_shape(0);
  Expr count = Expr(1);
  for (int64_t a : ctx.node.attr_ints("axes", {0, 2, 3})) {
    const size_t d = static_cast<size_t>(normalize_axis(a, rank, ctx.node));
    if (!red[d]) count = count * shape[d];
    red[d] = true;
  }
  const Expr n = loop::cast(t, count);
  const Expr mean = div(axes_sum(ctx, red, index, t, [](const Expr& x) { return x; }), n);
  const Expr var = div(axes_sum(ctx, red, index, t, [&](const Expr& x) { return (x - mean) * (x - mean); }), n);
  const Expr y = div(input_as_compute(ctx, 0, index) - mean, intrinsic("sqrt", var) + constant(t, 1e-9));
  return loop::cast(ctx.out_dtype(), y);
}

// x / ||x||_p along the axis (p = 1 or 2); a zero vector stays zero.
Expr lower_lpnorm(LowerContext& ctx, size_t, const Idx& index) {
  const DType t = compute_type(ctx.in_dtype(0));
  if (!is_float(t)) ctx.unsupported("non-float input");
  const int64_t p = ctx.node.attr_int("p", 2);
  if (p != 1 && p != 2) ctx.unsupported("p other than 1 and 2");
  const int64_t rank = static_cast<int64_t>(ctx.in_rank(0));
  std::vector<bool> red(static_cast<size_t>(rank), false);
  red[static_cast<size_t>(normalize_axis(ctx.node.attr_int("axis", -1), rank, ctx.node))] = true;
  Expr norm = axes_sum(ctx, red, index, t, [&](const Expr& x) {
    return p == 1 ? intrinsic("fabs", x) : x * x;
  });
  if (p == 2) norm = intrinsic("sqrt", norm);
  const Expr zero = constant(t, 0);
  const Expr y = loop::select(eq(norm, zero), zero, div(input_as_compute(ctx, 0, index), norm));
  return loop::cast(ctx.out_dtype(), y);
}

}  // namespace

void register_norm_lowerings(OpRegistry& r) {
  r.set_lowering("", "LayerNormalization", FusionKind::Reduction, lower_rownorm<false>);
  r.set_multi_output_lowering("", "LayerNormalization");
  r.set_lowering("", "RMSNormalization", FusionKind::Reduction, lower_rownorm<true>);
  r.set_lowering("", "Dropout", FusionKind::Elementwise, lower_dropout);
  r.set_multi_output_lowering("", "Dropout");
  r.set_lowering("", "BatchNormalization", FusionKind::Elementwise, lower_batchnorm);
  r.set_multi_output_lowering("", "BatchNormalization");
  r.set_lowering("", "InstanceNormalization", FusionKind::Reduction, lower_instancenorm);
  r.set_lowering("", "MeanVarianceNormalization", FusionKind::Reduction, lower_mvn);
  r.set_lowering("", "LpNormalization", FusionKind::Reduction, lower_lpnorm);
}

}  // namespace tessel
