// Compiled forms of the reduction family: Reduce*, (Log)Softmax, Hardmax,
// ArgMax/ArgMin, TopK and the cumulative CumSum/CumProd. A
// reduction is a LowerContext::reduce over the reduced axes; the lowering
// engine hoists it to the loop level of the kept axes, so Softmax computes
// its row maximum and row sum once per row, not once per element.
// Floats accumulate in compute_type (f32 for f16/bf16/f32); the interpreter
// accumulates in double, and the difference is within K·2^-24·Σ|terms|.
#include <limits>

#include "tessel/ops/lowering.h"
#include "tessel/ops/registry.h"

namespace tessel {
namespace {

using namespace lower_expr;

// Which input axes a Reduce* node reduces (axes from the constant input 1).
std::vector<bool> reduced_axes(LowerContext& ctx) {
  const size_t rank = ctx.in_rank(0);
  std::vector<int64_t> axes;
  if (ctx.has_input(1)) {
    const Tensor* t = ctx.input_const(1);
    if (!t) ctx.unsupported("axes are not a constant");
    for (int64_t i = 0; i < t->numel(); ++i) axes.push_back(t->get_i64(i));
  }
  std::vector<bool> red(rank, false);
  if (axes.empty()) {
    if (ctx.node.attr_int("noop_with_empty_axes", 0) == 0) red.assign(rank, true);
    return red;
  }
  for (int64_t a : axes) red[static_cast<size_t>(normalize_axis(a, static_cast<int64_t>(rank), ctx.node))] = true;
  return red;
}

// Reduces f(x[i]) over the reduced axes of input 0 for output `index`.
Expr reduce_input(LowerContext& ctx, const std::vector<bool>& red, const Idx& index, ReduceOp op, Expr init,
                  const std::function<Expr(const Expr&)>& f) {
  const bool keep = ctx.node.attr_int("keepdims", 1) != 0;
  const Idx in_shape = ctx.in_shape(0);
  Idx extents;
  for (size_t d = 0; d < red.size(); ++d)
    if (red[d]) extents.push_back(in_shape[d]);
  return ctx.reduce(op, init, extents, [&](const Idx& k) {
    Idx in_index;
    size_t out_d = 0, red_d = 0;
    for (size_t d = 0; d < red.size(); ++d) {
      if (red[d]) {
        in_index.push_back(k[red_d++]);
        if (keep) ++out_d;
      } else {
        in_index.push_back(index[out_d++]);
      }
    }
    return f(input_as_compute(ctx, 0, in_index));
  });
}

// Product of the reduced extents, as a float of type t.
Expr reduced_count(LowerContext& ctx, const std::vector<bool>& red, DType t) {
  const Idx in_shape = ctx.in_shape(0);
  Expr n = Expr(1);
  for (size_t d = 0; d < red.size(); ++d)
    if (red[d]) n = n * in_shape[d];
  return loop::cast(t, n);
}

enum class Kind { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

template <Kind K>
Expr lower_reduce(LowerContext& ctx, size_t, const Idx& index) {
  const DType t = compute_type(ctx.in_dtype(0));
  if (t == DType::Bool) ctx.unsupported("bool reduction");
  const std::vector<bool> red = reduced_axes(ctx);
  const auto id = [](const Expr& x) { return x; };
  const auto sq = [](const Expr& x) { return x * x; };
  const auto abs = [](const Expr& x) {
    if (is_float(x.dtype())) return intrinsic("fabs", x);
    if (is_unsigned_int(x.dtype())) return x;
    return loop::select(lt(x, constant(x.dtype(), 0)), -x, x);
  };
  const Expr zero = constant(t, 0);
  Expr r;
  switch (K) {
    case Kind::Sum: r = reduce_input(ctx, red, index, ReduceOp::Sum, zero, id); break;
    case Kind::Mean:
      r = reduce_input(ctx, red, index, ReduceOp::Sum, zero, id);
      r = div(r, reduced_count(ctx, red, t));
      break;
    case Kind::Max: r = reduce_input(ctx, red, index, ReduceOp::Max, lowest(t), id); break;
    case Kind::Min: r = reduce_input(ctx, red, index, ReduceOp::Min, highest(t), id); break;
    case Kind::Prod: r = reduce_input(ctx, red, index, ReduceOp::Prod, constant(t, 1), id); break;
    case Kind::L1: r = reduce_input(ctx, red, index, ReduceOp::Sum, zero, abs); break;
    case Kind::SumSquare: r = reduce_input(ctx, red, index, ReduceOp::Sum, zero, sq); break;
    case Kind::L2:
      if (!is_float(t)) ctx.unsupported("integer ReduceL2");
      r = intrinsic("sqrt", reduce_input(ctx, red, index, ReduceOp::Sum, zero, sq));
      break;
    case Kind::LogSum:
      r = intrinsic("log", reduce_input(ctx, red, index, ReduceOp::Sum, zero, id));
      break;
    case Kind::LogSumExp: {
      // max-shifted so that large inputs do not overflow exp.
      Expr m = reduce_input(ctx, red, index, ReduceOp::Max, lowest(t), id);
      Expr safe_m = loop::select(loop::call("isinf", DType::Bool, {m}), zero, m);
      Expr s = reduce_input(ctx, red, index, ReduceOp::Sum, zero,
                            [&](const Expr& x) { return intrinsic("exp", x - safe_m); });
      r = intrinsic("log", s) + safe_m;
      break;
    }
  }
  return loop::cast(ctx.out_dtype(), r);
}

// Softmax / LogSoftmax over one axis (opset 13 semantics; the importer
// upgrades older models).
template <bool Log>
Expr lower_softmax(LowerContext& ctx, size_t, const Idx& index) {
  const DType t = compute_type(ctx.in_dtype(0));
  if (!is_float(t)) ctx.unsupported("non-float softmax");
  const size_t rank = ctx.in_rank(0);
  const size_t axis = static_cast<size_t>(normalize_axis(ctx.node.attr_int("axis", -1), static_cast<int64_t>(rank), ctx.node));
  const Idx shape = ctx.in_shape(0);
  const auto at = [&](const Expr& k) {
    Idx i = index;
    i[axis] = k;
    return input_as_compute(ctx, 0, i);
  };
  Expr m = ctx.reduce(ReduceOp::Max, constant(t, -std::numeric_limits<double>::infinity()), {shape[axis]},
                      [&](const Idx& k) { return at(k[0]); });
  Expr s = ctx.reduce(ReduceOp::Sum, constant(t, 0), {shape[axis]},
                      [&](const Idx& k) { return intrinsic("exp", at(k[0]) - m); });
  Expr x = input_as_compute(ctx, 0, index);
  Expr r = Log ? x - m - intrinsic("log", s) : div(intrinsic("exp", x - m), s);
  return loop::cast(ctx.out_dtype(), r);
}

// ArgMax/ArgMin as two reductions: the best value, then the first (or last)
// index holding it. NaN counts as the best, as in the interpreter.
template <bool Max>
Expr lower_arg(LowerContext& ctx, size_t, const Idx& index) {
  const DType t = compute_type(ctx.in_dtype(0));
  if (t == DType::Bool) ctx.unsupported("bool input");
  const size_t rank = ctx.in_rank(0);
  const size_t axis = static_cast<size_t>(normalize_axis(ctx.node.attr_int("axis", 0), static_cast<int64_t>(rank), ctx.node));
  const bool keep = ctx.node.attr_int("keepdims", 1) != 0;
  const bool last = ctx.node.attr_int("select_last_index", 0) != 0;
  const Expr n = ctx.in_shape(0)[axis];
  const auto at = [&](const Expr& k) {
    Idx i = index;
    if (keep)
      i[axis] = k;
    else
      i.insert(i.begin() + static_cast<long>(axis), k);
    return input_as_compute(ctx, 0, i);
  };
  const Expr best = ctx.reduce(Max ? ReduceOp::Max : ReduceOp::Min, Max ? lowest(t) : highest(t), {n},
                               [&](const Idx& k) { return at(k[0]); });
  const Expr idx = ctx.reduce(last ? ReduceOp::Max : ReduceOp::Min, last ? Expr(-1) : n, {n}, [&](const Idx& k) {
    return loop::select(same_or_both_nan(at(k[0]), best), k[0], last ? Expr(-1) : n);
  });
  return loop::cast(ctx.out_dtype(), idx);
}

// Hardmax: 1 at the first maximum along the axis (the first NaN wins), else 0.
Expr lower_hardmax(LowerContext& ctx, size_t, const Idx& index) {
  const DType t = compute_type(ctx.in_dtype(0));
  const size_t axis = static_cast<size_t>(normalize_axis(ctx.node.attr_int("axis", -1), static_cast<int64_t>(ctx.in_rank(0)), ctx.node));
  const Expr n = ctx.in_shape(0)[axis];
  const auto at = [&](const Expr& k) {
    Idx i = index;
    i[axis] = k;
    return input_as_compute(ctx, 0, i);
  };
  const Expr best = ctx.reduce(ReduceOp::Max, lowest(t), {n}, [&](const Idx& k) { return at(k[0]); });
  const Expr first = ctx.reduce(ReduceOp::Min, n, {n}, [&](const Idx& k) {
    return loop::select(same_or_both_nan(at(k[0]), best), k[0], n);
  });
  return loop::select(eq(index[axis], first), constant(ctx.out_dtype(), 1), constant(ctx.out_dtype(), 0));
}

// CumSum/CumProd: a reduction whose range along the axis depends on the
// output position: [0, i] (exclusive: [0, i)), reversed [i, n) (exclusive:
// (i, n)). Integers wrap at their width, as the interpreter's do.
template <ReduceOp Op>
Expr lower_cumulative(LowerContext& ctx, size_t, const Idx& index) {
  const DType t = compute_type(ctx.in_dtype(0));
  if (t == DType::Bool) ctx.unsupported("bool input");
  const std::vector<int64_t> a = const_input_ints(ctx, 1, "axis");
  if (a.size() != 1) ctx.unsupported("axis must hold one value");
  const size_t axis = static_cast<size_t>(normalize_axis(a[0], static_cast<int64_t>(ctx.in_rank(0)), ctx.node));
  const bool exclusive = ctx.node.attr_int("exclusive", 0) != 0, reverse = ctx.node.attr_int("reverse", 0) != 0;
  const Expr n = ctx.in_shape(0)[axis], i = index[axis];
  const Expr first = reverse ? (exclusive ? i + Expr(1) : i) : Expr(0);
  const Expr count = reverse ? n - first : (exclusive ? i : i + Expr(1));
  const Expr r = ctx.reduce(Op, constant(t, Op == ReduceOp::Prod ? 1 : 0), {count}, [&](const Idx& k) {
    Idx at = index;
    at[axis] = first + k[0];
    return input_as_compute(ctx, 0, at);
  });
  return loop::cast(ctx.out_dtype(), r);
}

// TopK as a selection by rank. The rank of element i along the axis is the
// number of elements ordered before it (NaN above every number, ties by the
// lower index, as the reference's sort); output position j takes the element
// of rank j. That is K * n^2 comparisons per line, so lines past kTopKWork
// stay on the interpreter's partial sort.
constexpr int64_t kTopKWork = int64_t{1} << 24;

Expr lower_topk(LowerContext& ctx, size_t output, const Idx& index) {
  const DType t = compute_type(ctx.in_dtype(0));
  if (t == DType::Bool) ctx.unsupported("bool input");
  const size_t axis = static_cast<size_t>(normalize_axis(ctx.node.attr_int("axis", -1), static_cast<int64_t>(ctx.in_rank(0)), ctx.node));
  const int64_t n = const_in_dims(ctx, 0)[axis];
  const std::vector<int64_t> k = const_input_ints(ctx, 1, "K");
  if (k.size() != 1) ctx.unsupported("K must hold one value");
  if (static_cast<double>(k[0]) * static_cast<double>(n) * static_cast<double>(n) > kTopKWork)
    ctx.unsupported("K times the squared axis size is past the compiled form's budget");
  const bool largest = ctx.node.attr_int("largest", 1) != 0;
  const auto at = [&](const Expr& i) {
    Idx in = index;
    in[axis] = i;
    return input_as_compute(ctx, 0, in);
  };
  const auto above = [&](const Expr& a, const Expr& b) {  // a > b, NaN above every number
    if (!is_float(t)) return gt(a, b);
    return or_(gt(a, b), and_(is_nan(a), loop::unary(loop::UnaryOp::Not, is_nan(b))));
  };
  const auto better = [&](const Expr& a, const Expr& b) { return largest ? above(a, b) : above(b, a); };
  const auto rank = [&](const Expr& i) {
    const Expr xi = at(i);
    return ctx.reduce(ReduceOp::Sum, Expr(0), {Expr(n)}, [&](const Idx& m) {
      const Expr xm = at(m[0]);
      const Expr before = or_(better(xm, xi), and_(loop::unary(loop::UnaryOp::Not, better(xi, xm)), lt(m[0], i)));
      return loop::select(before, Expr(1), Expr(0));
    });
  };
  const Expr chosen = ctx.reduce(ReduceOp::Max, Expr(-1), {Expr(n)}, [&](const Idx& i) {
    return loop::select(eq(rank(i[0]), index[axis]), i[0], Expr(-1));
  });
  if (output == 1) return loop::cast(ctx.out_dtype(1), chosen);
  Idx in = index;
  in[axis] = clamp_index(chosen, Expr(0), Expr(n - 1));
  return ctx.input(0, in);
}

}  // namespace

void register_reduction_lowerings(OpRegistry& r) {
  const auto red = [&](const char* name, LowerFn f) { r.set_lowering("", name, FusionKind::Reduction, f); };
  red("ReduceSum", lower_reduce<Kind::Sum>);
  red("ReduceMean", lower_reduce<Kind::Mean>);
  red("ReduceMax", lower_reduce<Kind::Max>);
  red("ReduceMin", lower_reduce<Kind::Min>);
  red("ReduceProd", lower_reduce<Kind::Prod>);
  red("ReduceL1", lower_reduce<Kind::L1>);
  red("ReduceL2", lower_reduce<Kind::L2>);
  red("ReduceLogSum", lower_reduce<Kind::LogSum>);
  red("ReduceLogSumExp", lower_reduce<Kind::LogSumExp>);
  red("ReduceSumSquare", lower_reduce<Kind::SumSquare>);
  red("Softmax", lower_softmax<false>);
  red("LogSoftmax", lower_softmax<true>);
  red("ArgMax", lower_arg<true>);
  red("ArgMin", lower_arg<false>);
  red("Hardmax", lower_hardmax);
  red("CumSum", lower_cumulative<ReduceOp::Sum>);
  red("CumProd", lower_cumulative<ReduceOp::Prod>);
  red("TopK", lower_topk);
  r.set_multi_output_lowering("", "TopK");
}

}  // namespace tessel
