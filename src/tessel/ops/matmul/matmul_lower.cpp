// Compiled forms of MatMul, Gemm and Einsum as plain reductions over K. This is the
// generic definition (what a consumer inlines and what the differential tests
// check); the packed, register-blocked GEMM schedule replaces its loop nest
// when the group's root is the contraction.
#include <algorithm>

#include "tessel/ops/matmul/einsum_plan.h"
#include "tessel/ops/lowering.h"
#include "tessel/ops/registry.h"

namespace tessel {
namespace {

using namespace lower_expr;

// Where MatMul's operands A[..., i, k] and B[..., k, j] are read for one
// output element (numpy matmul: a 1-D operand has no M or N dim, and the
// batch dims broadcast). `a` and `b` are the operands' input numbers.
class MatmulOperands {
 public:
  MatmulOperands(LowerContext& ctx, size_t a, size_t b, const Idx& index)
      : ctx_(ctx), a_(a), b_(b), ra_(ctx.in_rank(a)), rb_(ctx.in_rank(b)) {
    // Output layout: batch..., [M if ra > 1], [N if rb > 1].
    const size_t nm = ra_ > 1 ? 1 : 0, nn = rb_ > 1 ? 1 : 0;
    const size_t nbatch = index.size() - nm - nn;
    out_batch_.assign(index.begin(), index.begin() + static_cast<long>(nbatch));
    i_ = nm ? index[nbatch] : Expr(0);
    j_ = nn ? index[nbatch + nm] : Expr(0);
  }
  Expr k_extent() { return ctx_.in_shape(a_)[ra_ - 1]; }
  Idx a_at(const Expr& k) {
    Idx at = batch(a_, ra_);
    if (ra_ > 1) at.push_back(i_);
    at.push_back(k);
    return at;
  }
  Idx b_at(const Expr& k) {
    Idx at = batch(b_, rb_);
    at.push_back(k);
    if (rb_ > 1) at.push_back(j_);
    return at;
  }

 private:
  Idx batch(size_t operand, size_t rank) {
    return rank > 1 ? broadcast_leading(ctx_, operand, rank - 2, out_batch_) : Idx{};
  }
  LowerContext& ctx_;
  size_t a_, b_, ra_, rb_;
  Idx out_batch_;
  Expr i_, j_;
};

Expr lower_matmul(LowerContext& ctx, size_t, const Idx& index) {
  const DType t = compute_type(ctx.in_dtype(0));
  if (t == DType::Bool) ctx.unsupported("bool matmul");
  MatmulOperands mm(ctx, 0, 1, index);
  return loop::cast(ctx.out_dtype(), ctx.reduce(ReduceOp::Sum, constant(t, 0), {mm.k_extent()}, [&](const Idx& k) {
    return input_as_compute(ctx, 0, mm.a_at(k[0])) * input_as_compute(ctx, 1, mm.b_at(k[0]));
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

// Einsum: the product of the operands at the output labels' coordinates,
// summed over the other labels (a repeated label walks a diagonal; a
// broadcast ellipsis dim of size 1 reads element 0).
Expr lower_einsum(LowerContext& ctx, size_t, const Idx& index) {
  const DType t = compute_type(ctx.in_dtype(0));
  if (t == DType::Bool) ctx.unsupported("bool einsum");
  std::vector<size_t> ranks;
  std::vector<std::vector<int64_t>> dims;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    ranks.push_back(ctx.in_rank(i));
    dims.push_back(const_in_dims(ctx, i));
  }
  const EinsumPlan p = plan_einsum(ctx.node, ranks);
  std::vector<int64_t> size(static_cast<size_t>(kEllipsisBase + p.ellipsis_dims), -1);
  for (size_t i = 0; i < dims.size(); ++i)
    for (size_t d = 0; d < dims[i].size(); ++d) {
      int64_t& cur = size[static_cast<size_t>(p.in_labels[i][d])];
      cur = cur <= 1 ? dims[i][d] : cur;  // ellipsis dims of 1 stretch
    }
  std::vector<int> summed;
  Idx extents;
  for (int l = 0; l < static_cast<int>(size.size()); ++l)
    if (size[static_cast<size_t>(l)] >= 0 && std::find(p.out_labels.begin(), p.out_labels.end(), l) == p.out_labels.end()) {
      summed.push_back(l);
      extents.push_back(Expr(size[static_cast<size_t>(l)]));
    }
  const auto product = [&](const Idx& k) {
    const auto coord = [&](int l) {
      auto o = std::find(p.out_labels.begin(), p.out_labels.end(), l);
      if (o != p.out_labels.end()) return index[static_cast<size_t>(o - p.out_labels.begin())];
      return k[static_cast<size_t>(std::find(summed.begin(), summed.end(), l) - summed.begin())];
    };
    Expr prod;
    for (size_t i = 0; i < dims.size(); ++i) {
      Idx at;
      for (size_t d = 0; d < dims[i].size(); ++d) {
        const int l = p.in_labels[i][d];
        at.push_back(dims[i][d] == 1 && size[static_cast<size_t>(l)] != 1 ? Expr(0) : coord(l));
      }
      const Expr v = input_as_compute(ctx, i, at);
      prod = prod.defined() ? prod * v : v;
    }
    return prod;
  };
  const Expr r = summed.empty() ? product({}) : ctx.reduce(ReduceOp::Sum, constant(t, 0), extents, product);
  return loop::cast(ctx.out_dtype(), r);
}

// QLinearMatMul with per-tensor scales and zero points: the integer product
// of (a - a_zp) and (b - b_zp) (exact in i64), times one multiplier formed in
// the scales' dtype as the reference does, plus y_zp, rounded half to even
// and saturated.
Expr lower_qlinear_matmul(LowerContext& ctx, size_t, const Idx& index) {
  const DType out = ctx.out_dtype();
  if (!is_int(out)) ctx.unsupported(str_cat("output type ", dtype_name(out)));
  for (size_t i : {1, 2, 4, 5, 6, 7})
    if (ctx.has_input(i))
      for (int64_t d : const_in_dims(ctx, i))
        if (d != 1) ctx.unsupported("per-row or per-column quantization parameters");
  const auto scalar = [&](size_t i) { return ctx.input(i, Idx(ctx.in_rank(i), Expr(0))); };
  const auto zp = [&](size_t i) { return ctx.has_input(i) ? loop::cast(DType::I64, scalar(i)) : Expr(0); };
  MatmulOperands mm(ctx, 0, 3, index);
  const Expr azp = zp(2), bzp = zp(5);
  const Expr acc = ctx.reduce(ReduceOp::Sum, Expr(0), {mm.k_extent()}, [&](const Idx& k) {
    return (loop::cast(DType::I64, ctx.input(0, mm.a_at(k[0]))) - azp) *
           (loop::cast(DType::I64, ctx.input(3, mm.b_at(k[0]))) - bzp);
  });
  const Expr mult = div(scalar(1) * scalar(4), scalar(6));
  const Expr v = loop::cast(DType::F64, acc) * loop::cast(DType::F64, mult) + loop::cast(DType::F64, zp(7));
  const Expr r = intrinsic("rint", v);
  const Expr lo = loop::cast(DType::F64, lowest(out)), hi = loop::cast(DType::F64, highest(out));
  const Expr nan = is_nan(r);
  return loop::cast(out, loop::select(nan, constant(DType::F64, 0), loop::max(lo, loop::min(r, hi))));
}

}  // namespace

void register_matmul_lowerings(OpRegistry& r) {
  r.set_lowering("", "QLinearMatMul", FusionKind::Contraction, lower_qlinear_matmul);
  r.set_lowering("", "Einsum", FusionKind::Contraction, lower_einsum);
  r.set_lowering("", "MatMul", FusionKind::Contraction, lower_matmul);
  r.set_lowering("", "Gemm", FusionKind::Contraction, lower_gemm);
}

}  // namespace tessel
