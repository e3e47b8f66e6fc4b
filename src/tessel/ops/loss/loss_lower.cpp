// Compiled forms of NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss.
// The loss at one target position is -w[t] * logp[n, t, d...] (0 where t is
// ignore_index); "sum" and "mean" are reductions over the target positions,
// and "mean" divides by a second reduction, the sum of the weights applied
// (not the count), as the spec's function bodies do. The class index is data:
// it is checked at run time and clamped for the load.
// SoftmaxCrossEntropyLoss's log-probabilities are a log-softmax over the
// class axis: a max and a sum of exponentials per position.
#include <limits>

#include "tessel/ops/lowering.h"
#include "tessel/ops/registry.h"

namespace tessel {
namespace {

using namespace lower_expr;

// Index [n, c, d...] of the scores for target position [n, d...].
Idx score_index(const Idx& pos, const Expr& c) {
  Idx at{pos[0], c};
  at.insert(at.end(), pos.begin() + 1, pos.end());
  return at;
}

// log_softmax(x)[n, c, d...] over c (SoftmaxCrossEntropyLoss), else x.
Expr log_prob(LowerContext& ctx, const Idx& pos, const Expr& c, bool softmax) {
  const Expr x = input_as_compute(ctx, 0, score_index(pos, c));
  if (!softmax) return x;
  const DType t = x.dtype();
  const Expr classes = ctx.in_shape(0)[1];
  const auto at = [&](const Idx& k) { return input_as_compute(ctx, 0, score_index(pos, k[0])); };
  const Expr m = ctx.reduce(ReduceOp::Max, lowest(t), {classes}, at);
  const Expr s = ctx.reduce(ReduceOp::Sum, constant(t, 0), {classes},
                            [&](const Idx& k) { return intrinsic("exp", at(k) - m); });
  return x - m - intrinsic("log", s);
}

// The class of target position `pos` (checked, clamped), whether it is
// ignored, and its weight (0 where ignored).
struct Target {
  Expr ignored, c, weight;
};

Target read_target(LowerContext& ctx, const Idx& pos) {
  const DType t = compute_type(ctx.in_dtype(0));
  const Expr classes = ctx.in_shape(0)[1];
  const Expr target = loop::cast(DType::I64, ctx.input(1, pos));
  Expr ignored = loop::bool_imm(false);
  if (ctx.node.has_attr("ignore_index"))
    ignored = eq(target, Expr(ctx.node.attr_int("ignore_index", 0)));
  ctx.check(or_(ignored, in_range(target, Expr(0), classes)),
            str_cat(ctx.node.describe(), ": target value out of range"));
  const Expr c = clamp_index(target, Expr(0), classes - Expr(1));
  const Expr w = ctx.has_input(2) ? input_as_compute(ctx, 2, {c}) : constant(t, 1);
  return {ignored, c, loop::select(ignored, constant(t, 0), w)};
}

// -w[t] * logp[n, t, d...] at target position `pos` (0 where ignored).
Expr position_loss(LowerContext& ctx, const Idx& pos, bool softmax) {
  const Target tg = read_target(ctx, pos);
  return loop::select(tg.ignored, constant(tg.weight.dtype(), 0), -log_prob(ctx, pos, tg.c, softmax) * tg.weight);
}

template <bool Softmax>
Expr lower_loss(LowerContext& ctx, size_t output, const Idx& index) {
  const DType t = compute_type(ctx.in_dtype(0));
  if (!is_float(t)) ctx.unsupported(str_cat("dtype ", dtype_name(t)));
  if (output == 1) {  // SoftmaxCrossEntropyLoss's log_prob: index is [n, c, d...]
    Idx pos{index[0]};
    pos.insert(pos.end(), index.begin() + 2, index.end());
    return loop::cast(ctx.out_dtype(1), log_prob(ctx, pos, index[1], true));
  }
  const std::string red = ctx.node.attr_string("reduction", "mean");
  if (red == "none") return loop::cast(ctx.out_dtype(), position_loss(ctx, index, Softmax));
  if (red != "sum" && red != "mean") ctx.unsupported(str_cat("reduction ", red));
  const Idx positions = ctx.in_shape(1);
  const Expr zero = constant(t, 0);
  const Expr sum = ctx.reduce(ReduceOp::Sum, zero, positions,
                              [&](const Idx& k) { return position_loss(ctx, k, Softmax); });
  if (red == "sum") return loop::cast(ctx.out_dtype(), sum);
  const Expr wsum = ctx.reduce(ReduceOp::Sum, zero, positions,
                               [&](const Idx& k) { return read_target(ctx, k).weight; });
  return loop::cast(ctx.out_dtype(), div(sum, wsum));
}

}  // namespace

void register_loss_lowerings(OpRegistry& r) {
  r.set_lowering("", "NegativeLogLikelihoodLoss", FusionKind::Reduction, lower_loss<false>);
  r.set_lowering("", "SoftmaxCrossEntropyLoss", FusionKind::Reduction, lower_loss<true>);
  r.set_multi_output_lowering("", "SoftmaxCrossEntropyLoss");  // log_prob is output 1
}

}  // namespace tessel
