// Compiled forms of MatMul and Gemm as plain reductions over K. This is the
// generic definition (what a consumer inlines and what the differential tests
// check); the packed, register-blocked GEMM schedule replaces its loop nest
// when the group's root is the contraction.
#include "tessel/ops/lowering.h"
#include "tessel/ops/registry.h"

namespace tessel {
namespace {

using loop::Expr;
using Idx = std::vector<Expr>;

// Batch index of an operand of rank `rank` (>= 2) for output batch `out_batch`
// (numpy broadcasting, aligned from the right).
Idx operand_batch(LowerContext& ctx, size_t operand, const Idx& out_batch) {
  const Shape& s = *ctx.node.input(operand)->type.shape;
  const Shape& out = *ctx.node.outputs[0]->type.shape;
  const size_t nb = s.size() - 2;
  const size_t off = out_batch.size() - nb;
  const Idx dims = ctx.in_shape(operand);
  Idx r;
  for (size_t d = 0; d < nb; ++d) {
    if (s[d] == Dim(1))
      r.push_back(Expr(0));
    else if (s[d] == out[d + off])
      r.push_back(out_batch[d + off]);
    else
      r.push_back(loop::select(loop::binary(loop::BinaryOp::Eq, dims[d], Expr(1)), Expr(0), out_batch[d + off]));
  }
  return r;
}

Expr lower_matmul(LowerContext& ctx, size_t, const Idx& index) {
  const size_t ra = ctx.in_rank(0), rb = ctx.in_rank(1);
  const DType t = compute_type(ctx.in_dtype(0));
  if (t == DType::Bool) ctx.unsupported("bool matmul");
  // Output layout: batch..., [M if ra > 1], [N if rb > 1].
  const size_t nm = ra > 1 ? 1 : 0, nn = rb > 1 ? 1 : 0;
  const size_t nbatch = index.size() - nm - nn;
  const Idx out_batch(index.begin(), index.begin() + static_cast<long>(nbatch));
  const Expr i = nm ? index[nbatch] : Expr(0);
  const Expr j = nn ? index[nbatch + nm] : Expr(0);
  const Expr K = ctx.in_shape(0)[ra - 1];
  return loop::cast(ctx.out_dtype(), ctx.reduce(ReduceOp::Sum, constant(t, 0), {K}, [&](const Idx& k) {
    Idx ai = ra > 1 ? operand_batch(ctx, 0, out_batch) : Idx{};
    if (ra > 1) ai.push_back(i);
    ai.push_back(k[0]);
    Idx bi = rb > 1 ? operand_batch(ctx, 1, out_batch) : Idx{};
    bi.push_back(k[0]);
    if (rb > 1) bi.push_back(j);
    return input_as_compute(ctx, 0, ai) * input_as_compute(ctx, 1, bi);
  }));
}

Expr lower_gemm(LowerContext& ctx, size_t, const Idx& index) {
  const DType t = compute_type(ctx.in_dtype(0));
  if (t == DType::Bool) ctx.unsupported("bool gemm");
  const bool ta = ctx.node.attr_int("transA", 0) != 0, tb = ctx.node.attr_int("transB", 0) != 0;
  const double alpha = ctx.node.attr_float("alpha", 1.0f), beta = ctx.node.attr_float("beta", 1.0f);
  const Expr K = ctx.in_shape(0)[ta ? 0 : 1];
  Expr acc = ctx.reduce(ReduceOp::Sum, constant(t, 0), {K}, [&](const Idx& k) {
    Expr a = input_as_compute(ctx, 0, ta ? Idx{k[0], index[0]} : Idx{index[0], k[0]});
    Expr b = input_as_compute(ctx, 1, tb ? Idx{index[1], k[0]} : Idx{k[0], index[1]});
    return a * b;
  });
  Expr y = alpha == 1.0 ? acc : constant(t, alpha) * acc;
  if (ctx.has_input(2) && beta != 0) {
    Expr c = input_as_compute(ctx, 2, broadcast_index(ctx, 2, index));
    y = y + (beta == 1.0 ? c : constant(t, beta) * c);
  }
  return loop::cast(ctx.out_dtype(), y);
}

}  // namespace

void register_matmul_lowerings(OpRegistry& r) {
  r.set_lowering("", "MatMul", FusionKind::Contraction, lower_matmul);
  r.set_lowering("", "Gemm", FusionKind::Contraction, lower_gemm);
}

}  // namespace tessel
