// tessel::TileTransform: a small constant matrix applied to overlapping
// tiles along one axis ("tile"), or to a leading axis ("apply"). The CPU
// target's winograd_conv pass (passes/) writes a 3x3 convolution as two
// tile transforms of its input (rows, then columns), a batched GEMM, and two
// applies to the product: each transform is a pass over memory with S
// multiply-adds per element, vectorised along the innermost axis, instead of
// the Kronecker product's S * S.
//
// mode = "tile": X [d0, .., dr-1], Coef [E, S] (constant); attributes axis a,
// step m, pad p, tiles T:
//
//   Y [E, d0, .., T (at a), .., dr-1]
//   Y[e, .., t, ..] = sum_{s < S} Coef[e, s] * X[.., m t + s - p, ..]   (0 outside X)
//
// mode = "apply": X [E, d0, .., dr-1], Coef [R, E]; attribute axis a
// (0 to r, where the new axis goes among the dims after E):
//
//   Y [d0, .., R (at a), .., dr-1]
//   Y[.., i, ..] = sum_{e < E} Coef[i, e] * X[e, ..]
//
// The leading E axis is what each tile transform adds and each apply
// consumes, so that two tile transforms give [E2, E1, ...], whose
// flattening is the GEMM's batch axis with no transpose between.
// Fusion kind Isolated: every output element reads S elements of X, so a
// fused producer would be computed S times over, and a fused consumer that
// vectorises along another axis would gather; the kernel stands alone.
#include "tessel/ops/registry.h"

namespace tessel {

namespace {

struct Tiling {
  bool apply = false;
  int64_t axis = 0, step = 1, pad = 0, tiles = 0;
};

Tiling read_tiling(const Node& n) {
  Tiling t;
  const std::string mode = n.attr_string("mode", "");
  TS_CHECK(mode == "tile" || mode == "apply", n.describe(), ": mode must be 'tile' or 'apply'");
  t.apply = mode == "apply";
  t.axis = n.attr_int("axis", -1);
  TS_CHECK(t.axis >= 0, n.describe(), ": axis is required");
  if (!t.apply) {
    t.step = n.attr_int("step", 0);
    t.pad = n.attr_int("pad", 0);
    t.tiles = n.attr_int("tiles", 0);
    TS_CHECK(t.step >= 1 && t.step <= 64 && t.pad >= 0 && t.pad <= 64 && t.tiles >= 1, n.describe(),
             ": step (1 to 64), pad (0 to 64) and positive tiles are required");
  }
  return t;
}

// The output dims for input dims `x` and coefficients [rows, cols]; throws
// on a mismatch.
std::vector<int64_t> out_dims(const Node& n, const Tiling& t, const std::vector<int64_t>& x, int64_t rows,
                              int64_t cols) {
  TS_CHECK(rows >= 1 && cols >= 1 && rows <= 64 && cols <= 64, n.describe(), ": the coefficients must be a small matrix");
  const size_t ax = static_cast<size_t>(t.axis);
  std::vector<int64_t> y;
  if (t.apply) {
    TS_CHECK(!x.empty() && x[0] == cols, n.describe(), ": the coefficients have ", cols,
             " columns, the input's leading axis ", x.empty() ? 0 : x[0]);
    TS_CHECK(ax < x.size(), n.describe(), ": axis ", t.axis, " is out of range");
    y.assign(x.begin() + 1, x.end());
    y.insert(y.begin() + t.axis, rows);
  } else {
    TS_CHECK(ax < x.size(), n.describe(), ": axis ", t.axis, " is out of range");
    y = x;
    y[ax] = t.tiles;
    y.insert(y.begin(), rows);
  }
  return y;
}

void tile_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  const Tiling t = read_tiling(ctx.node);
  if (!ctx.has_shape(0) || !ctx.has_shape(1)) return ctx.set_output_unknown_shape(0, dt);
  TS_CHECK(dt == DType::F32 && ctx.input_dtype(1) == DType::F32, ctx.node.describe(), ": f32 only");
  const Shape& x = ctx.input_shape(0);
  const Shape& c = ctx.input_shape(1);
  TS_CHECK(c.size() == 2 && c[0].is_const() && c[1].is_const(), ctx.node.describe(),
           ": the coefficients must be a matrix of constant shape");
  // The dims the result depends on must be constant; the others carry over.
  std::vector<int64_t> xd;
  for (size_t d = 0; d < x.size(); ++d) {
    const bool needed = t.apply ? d == 0 : d == static_cast<size_t>(t.axis);
    TS_CHECK(!needed || x[d].is_const(), ctx.node.describe(), ": dim ", d, " must be constant");
    xd.push_back(x[d].is_const() ? x[d].value() : 1);
  }
  out_dims(ctx.node, t, xd, c[0].value(), c[1].value());  // checks
  Shape out;
  if (t.apply) {
    out.assign(x.begin() + 1, x.end());
    out.insert(out.begin() + t.axis, c[0]);
  } else {
    out = x;
    out[static_cast<size_t>(t.axis)] = Dim(t.tiles);
    out.insert(out.begin(), c[0]);
  }
  ctx.set_output(0, dt, out);
}

// The reference: one output element at a time, accumulated in f64 from the
// f32 operands.
void tile_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& c = ctx.input(1);
  const Tiling t = read_tiling(ctx.node);
  TS_CHECK(x.dtype() == DType::F32 && c.dtype() == DType::F32 && c.rank() == 2, ctx.node.describe(),
           ": an f32 input and a coefficient matrix expected");
  const std::vector<int64_t> xd = x.shape();
  const std::vector<int64_t> yd = out_dims(ctx.node, t, xd, c.dim(0), c.dim(1));
  const std::vector<int64_t> xs = strides_of(xd), ys = strides_of(yd);
  const size_t ax = static_cast<size_t>(t.axis);
  Tensor y(DType::F32, yd);
  std::vector<int64_t> idx(yd.size());
  for (int64_t o = 0; o < y.numel(); ++o) {
    for (size_t d = 0; d < yd.size(); ++d) idx[d] = o / ys[d] % yd[d];
    double acc = 0;
    if (t.apply) {
      // x's index: [e, idx without the new axis].
      int64_t base = 0;
      for (size_t d = 0, xdim = 1; d < idx.size(); ++d)
        if (d != ax) base += idx[d] * xs[xdim++];
      for (int64_t e = 0; e < c.dim(1); ++e) acc += c.get_f64(idx[ax] * c.dim(1) + e) * x.get_f64(base + e * xs[0]);
    } else {
      // idx = [e, x's dims with the tile at axis].
      for (int64_t s = 0; s < c.dim(1); ++s) {
        const int64_t at = t.step * idx[ax + 1] + s - t.pad;
        if (at < 0 || at >= xd[ax]) continue;
        int64_t off = 0;
        for (size_t d = 0; d < xd.size(); ++d) off += (d == ax ? at : idx[d + 1]) * xs[d];
        acc += c.get_f64(idx[0] * c.dim(1) + s) * x.get_f64(off);
      }
    }
    y.set_f64(o, acc);
  }
  ctx.set_output(0, std::move(y));
}

// A sum of S (or E) products, written out: no accumulator loop, and each
// coefficient a load that does not depend on the innermost axis.
loop::Expr lower_tile(LowerContext& ctx, size_t, const std::vector<loop::Expr>& index) {
  using loop::Expr;
  const Tiling t = read_tiling(ctx.node);
  const std::vector<int64_t> c = const_in_dims(ctx, 1);
  const size_t ax = static_cast<size_t>(t.axis);
  Expr sum;
  if (t.apply) {
    std::vector<Expr> at{Expr(0)};
    for (size_t d = 0; d < index.size(); ++d)
      if (d != ax) at.push_back(index[d]);
    for (int64_t e = 0; e < c[1]; ++e) {
      at[0] = Expr(e);
      const Expr term = ctx.input(1, {index[ax], Expr(e)}) * ctx.input(0, at);
      sum = e == 0 ? term : sum + term;
    }
    return sum;
  }
  const int64_t len = const_in_dims(ctx, 0, ax)[0];
  std::vector<Expr> at(index.begin() + 1, index.end());
  for (int64_t s = 0; s < c[1]; ++s) {
    const Expr pos = index[ax + 1] * Expr(t.step) + Expr(s - t.pad);
    at[ax] = clamp_index(pos, Expr(0), Expr(len - 1));
    const Expr v = loop::select(in_range(pos, Expr(0), Expr(len)), ctx.input(0, at), constant(DType::F32, 0));
    const Expr term = ctx.input(1, {index[0], Expr(s)}) * v;
    sum = s == 0 ? term : sum + term;
  }
  return sum;
}

}  // namespace

void register_tile_transform_op(OpRegistry& r) {
  r.add({"TileTransform", "tessel", 2, 2, 1, 1, tile_infer, tile_kernel, nullptr, 1});
  r.set_lowering("tessel", "TileTransform", FusionKind::Isolated, lower_tile);
}

}  // namespace tessel
