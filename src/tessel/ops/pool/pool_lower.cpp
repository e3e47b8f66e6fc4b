// Compiled forms of the pools: MaxPool (with its Indices),
// AveragePool, LpPool and the global pools. A window is a reduction over the
// kernel offsets; taps that fall into the padding read a clamped (in-bounds)
// element and select the identity instead. AveragePool's divisor is a second
// reduction counting the taps (inside the input, or inside the padded input
// with count_include_pad), which the engine hoists beside the sum.
#include <cmath>

#include "tessel/ops/registry.h"
#include "tessel/ops/conv/window_lower.h"

namespace tessel {
namespace {

using namespace lower_expr;

Idx spatial(const Idx& index) { return Idx(index.begin() + 2, index.end()); }

// x[n, c, tap] in compute type.
Expr tap_value(LowerContext& ctx, const Idx& index, const WindowTap& t) {
  Idx at{index[0], index[1]};
  at.insert(at.end(), t.at.begin(), t.at.end());
  return input_as_compute(ctx, 0, at);
}

// Reduces f(x) over the window taps inside the input; `identity` elsewhere.
Expr window_reduce(LowerContext& ctx, const SpatialWindow& sw, const Idx& index, ReduceOp op, const Expr& identity,
                   const std::function<Expr(const Expr&)>& f) {
  return ctx.reduce(op, identity, kernel_extents(sw), [&](const Idx& k) {
    const WindowTap t = forward_tap(sw, spatial(index), k);
    return loop::select(t.inside, f(tap_value(ctx, index, t)), identity);
  });
}

// The number of taps counted by AveragePool's divisor: those inside the input,
// or (count_include_pad) those inside the input plus its padding.
Expr tap_count(LowerContext& ctx, const SpatialWindow& sw, const Idx& index, DType t, bool include_pad) {
  const Idx o = spatial(index);
  return ctx.reduce(ReduceOp::Sum, constant(t, 0), kernel_extents(sw), [&](const Idx& k) {
    Expr counted;
    for (size_t d = 0; d < sw.rank(); ++d) {
      const Expr i = o[d] * Expr(sw.w.strides[d]) + k[d] * Expr(sw.w.dilations[d]) - Expr(sw.w.pads[d]);
      const Expr hi = Expr(sw.in[d] + (include_pad ? sw.w.pads[sw.rank() + d] : 0));
      counted = and_all(counted, in_range(i, Expr(include_pad ? -sw.w.pads[d] : 0), hi));
    }
    return loop::select(counted, constant(t, 1), constant(t, 0));
  });
}

// MaxPool's storage_order 1: the offset with the first spatial dim fastest.
Expr column_major_offset(const Idx& at, const Idx& dims) {
  return flatten_index(Idx(at.rbegin(), at.rend()), Idx(dims.rbegin(), dims.rend()));
}

void require_float(LowerContext& ctx, DType t) {
  if (!is_float(t)) ctx.unsupported(str_cat("dtype ", dtype_name(t)));
}

// Output 0 is the maximum; output 1 (Indices) the flat input index of the
// first tap holding it in the window's row-major order (a NaN counts as the
// maximum; -1 when every tap is padding), as the reference kernel picks it.
Expr lower_maxpool(LowerContext& ctx, size_t output, const Idx& index) {
  const DType t = compute_type(ctx.in_dtype(0));
  const SpatialWindow sw = forward_window(ctx, nullptr, true, true);
  const Expr m = window_reduce(ctx, sw, index, ReduceOp::Max, lowest(t), [](const Expr& x) { return x; });
  if (output == 0) return loop::cast(ctx.out_dtype(), m);
  const int64_t order = ctx.node.attr_int("storage_order", 0);
  if (order != 0 && order != 1) ctx.unsupported(str_cat("storage_order ", order));
  Idx dims;
  int64_t plane_size = 1;
  for (int64_t d : sw.in) {
    dims.push_back(Expr(d));
    plane_size *= d;
  }
  // Row-major offsets grow along the window's scan, so the first tap holding
  // the maximum has the smallest one.
  const Expr none = Expr(plane_size);
  const Expr first = ctx.reduce(ReduceOp::Min, none, kernel_extents(sw), [&](const Idx& k) {
    const WindowTap tap = forward_tap(sw, spatial(index), k);
    const Expr hit = and_(tap.inside, same_or_both_nan(tap_value(ctx, index, tap), m));
    return loop::select(hit, flatten_index(tap.at, dims), none);
  });
  const Expr plane = index[0] * ctx.in_shape(0)[1] + index[1];
  const Expr local = order == 0 ? first : column_major_offset(unflatten_index(first, dims), dims);
  return loop::select(eq(first, none), Expr(-1), plane * none + local);
}

Expr lower_avgpool(LowerContext& ctx, size_t, const Idx& index) {
  const DType t = compute_type(ctx.in_dtype(0));
  require_float(ctx, t);
  const SpatialWindow sw = forward_window(ctx, nullptr, true, true);
  const bool include_pad = ctx.node.attr_int("count_include_pad", 0) != 0;
  const Expr sum = window_reduce(ctx, sw, index, ReduceOp::Sum, constant(t, 0), [](const Expr& x) { return x; });
  const Expr n = tap_count(ctx, sw, index, t, include_pad);
  return loop::cast(ctx.out_dtype(), div(sum, n));
}

// |x|^p and its root, with the exact forms for p = 1 and 2.
Expr lp_power(const Expr& x, int64_t p) {
  const Expr a = intrinsic("fabs", x);
  if (p == 1) return a;
  if (p == 2) return x * x;
  return loop::call("pow", x.dtype(), {a, constant(x.dtype(), static_cast<double>(p))});
}
Expr lp_root(const Expr& s, int64_t p) {
  if (p == 1) return s;
  if (p == 2) return intrinsic("sqrt", s);
  return loop::call("pow", s.dtype(), {s, constant(s.dtype(), 1.0 / static_cast<double>(p))});
}

int64_t read_p(LowerContext& ctx) {
  const int64_t p = ctx.node.attr_int("p", 2);
  if (p < 1) ctx.unsupported("p below 1");
  return p;
}

Expr lower_lppool(LowerContext& ctx, size_t, const Idx& index) {
  const DType t = compute_type(ctx.in_dtype(0));
  require_float(ctx, t);
  const int64_t p = read_p(ctx);
  const SpatialWindow sw = forward_window(ctx, nullptr, true, true);
  const Expr s = window_reduce(ctx, sw, index, ReduceOp::Sum, constant(t, 0), [&](const Expr& x) { return lp_power(x, p); });
  return loop::cast(ctx.out_dtype(), lp_root(s, p));
}

enum class Global { Avg, Max, Lp };

template <Global G>
Expr lower_global(LowerContext& ctx, size_t, const Idx& index) {
  const DType t = compute_type(ctx.in_dtype(0));
  require_float(ctx, t);
  const Idx shape = ctx.in_shape(0);
  const Idx extents(shape.begin() + 2, shape.end());
  const int64_t p = G == Global::Lp ? read_p(ctx) : 1;
  const auto body = [&](const Idx& k) {
    Idx at{index[0], index[1]};
    at.insert(at.end(), k.begin(), k.end());
    const Expr x = input_as_compute(ctx, 0, at);
    return G == Global::Lp ? lp_power(x, p) : x;
  };
  Expr r;
  if (G == Global::Max) {
    r = ctx.reduce(ReduceOp::Max, lowest(t), extents, body);
  } else {
    r = ctx.reduce(ReduceOp::Sum, constant(t, 0), extents, body);
    if (G == Global::Lp) {
      r = lp_root(r, p);
    } else {
      Expr n = Expr(1);
      for (const Expr& e : extents) n = n * e;
      r = div(r, loop::cast(t, n));
    }
  }
  return loop::cast(ctx.out_dtype(), r);
}

}  // namespace

void register_pool_lowerings(OpRegistry& r) {
  const auto red = [&](const char* name, LowerFn f) { r.set_lowering("", name, FusionKind::Reduction, f); };
  red("MaxPool", lower_maxpool);
  r.set_multi_output_lowering("", "MaxPool");
  red("AveragePool", lower_avgpool);
  red("LpPool", lower_lppool);
  red("GlobalAveragePool", lower_global<Global::Avg>);
  red("GlobalMaxPool", lower_global<Global::Max>);
  red("GlobalLpPool", lower_global<Global::Lp>);
}

}  // namespace tessel
