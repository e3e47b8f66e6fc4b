#include "tessel/ops/conv/window_lower.h"

namespace tessel {

using namespace lower_expr;

SpatialWindow forward_window(LowerContext& ctx, const std::vector<int64_t>* kernel_from_w, bool with_dilations,
                             bool with_ceil) {
  if (ctx.in_rank(0) < 3) ctx.unsupported("input rank below 3");
  SpatialWindow sw;
  sw.in = const_in_dims(ctx, 0, 2);
  sw.w = convutil::read_window(ctx.node, sw.in.size(), kernel_from_w, with_dilations, with_ceil);
  sw.out = convutil::forward_out_sizes(sw.w, sw.in, ctx.node);
  return sw;
}

Expr and_all(const Expr& a, const Expr& b) {
  if (!a.defined()) return b;
  if (!b.defined()) return a;
  return and_(a, b);
}

WindowTap forward_tap(const SpatialWindow& sw, const std::vector<Expr>& o, const std::vector<Expr>& k) {
  WindowTap t;
  for (size_t d = 0; d < sw.rank(); ++d) {
    const Expr i = o[d] * Expr(sw.w.strides[d]) + k[d] * Expr(sw.w.dilations[d]) - Expr(sw.w.pads[d]);
    t.at.push_back(clamp_index(i, Expr(0), Expr(sw.in[d] - 1)));
    t.inside = and_all(t.inside, in_range(i, Expr(0), Expr(sw.in[d])));
  }
  if (!t.inside.defined()) t.inside = loop::bool_imm(true);
  return t;
}

std::vector<Expr> kernel_extents(const SpatialWindow& sw) {
  std::vector<Expr> e;
  for (int64_t k : sw.w.kernel) e.push_back(Expr(k));
  return e;
}

}  // namespace tessel
