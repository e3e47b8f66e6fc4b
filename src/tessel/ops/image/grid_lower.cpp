// Compiled forms of GridSample and AffineGrid (PyTorch semantics, as the
// reference kernels). GridSample maps each grid vector to input coordinates
// in f64 with the reference's formulas (unnormalise, round for nearest, move
// out-of-range points inside for border/reflection padding), then sums the
// 1/2/4 taps per spatial dim weighted like the reference; taps in the zero
// padding contribute nothing and read a clamped element.
#include <cmath>

#include "tessel/ops/lowering.h"
#include "tessel/ops/registry.h"

namespace tessel {
namespace {

using namespace lower_expr;

struct GridAxis {
  double len = 0, lo = 0, hi = 0;
};

// x reflected into [lo, hi] repeatedly (PyTorch's reflect_coordinates).
Expr reflect(const Expr& x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return f64(lo);
  const auto fold = [&](const Expr& dx, double from, double to) {
    const Expr n = intrinsic("floor", div(dx, f64(range)));
    const Expr r = dx - n * f64(range);
    const Expr even = eq(n - f64(2) * intrinsic("floor", n * f64(0.5)), f64(0));
    return loop::select(even, f64(from) + r * f64(from < to ? 1 : -1), f64(to) + r * f64(from < to ? -1 : 1));
  };
  const Expr below = fold(f64(lo) - x, lo, hi), above = fold(x - f64(hi), hi, lo);
  return loop::select(lt(x, f64(lo)), below, loop::select(gt(x, f64(hi)), above, x));
}

struct Tap {
  Expr index, zero, weight;  // clamped index, "reads zero padding", weight
};

class GridSampler {
 public:
  explicit GridSampler(LowerContext& ctx) : ctx_(ctx) {
    const Node& n = ctx.node;
    mode_ = n.attr_string("mode", "linear");
    if (mode_ == "bilinear") mode_ = "linear";
    if (mode_ == "bicubic") mode_ = "cubic";
    pad_ = n.attr_string("padding_mode", "zeros");
    if (mode_ != "nearest" && mode_ != "linear" && mode_ != "cubic") ctx.unsupported("mode " + mode_);
    if (pad_ != "zeros" && pad_ != "border" && pad_ != "reflection") ctx.unsupported("padding_mode " + pad_);
    const bool align = n.attr_int("align_corners", 0) != 0;
    align_ = align;
    for (int64_t d : const_in_dims(ctx, 0, 2)) {
      const double len = static_cast<double>(d);
      if (d == 0) ctx.unsupported("empty spatial dim");
      axes_.push_back({len, align ? 0.0 : -0.5, align ? len - 1 : len - 0.5});
    }
  }

  int64_t taps() const { return mode_ == "nearest" ? 1 : mode_ == "linear" ? 2 : 4; }

  Expr sample(const Idx& index) {
    const size_t r = axes_.size();
    std::vector<Expr> coord(r);
    for (size_t d = 0; d < r; ++d) {
      Idx g{index[0]};  // [b, o..., component]
      g.insert(g.end(), index.begin() + 2, index.end());
      g.push_back(Expr(static_cast<int64_t>(r - 1 - d)));  // grid vectors list the innermost axis first
      coord[d] = unnormalise(loop::cast(DType::F64, ctx_.input(1, g)), axes_[d]);
    }
    Idx extents(r, Expr(taps()));
    const Expr acc = ctx_.reduce(ReduceOp::Sum, f64(0), extents, [&](const Idx& k) {
      Idx at{index[0], index[1]};
      Expr w = f64(1), zero = loop::bool_imm(false);
      for (size_t d = 0; d < r; ++d) {
        const Tap t = tap(coord[d], axes_[d], k[d]);
        at.push_back(t.index);
        w = w * t.weight;
        zero = or_(zero, t.zero);
      }
      return loop::select(zero, f64(0), w * loop::cast(DType::F64, ctx_.input(0, at)));
    });
    return loop::cast(ctx_.out_dtype(), acc);
  }

 private:
  Expr unnormalise(const Expr& g, const GridAxis& a) {
    Expr v = align_ ? div(g + f64(1), f64(2)) * f64(a.len - 1)
                    : div((g + f64(1)) * f64(a.len) - f64(1), f64(2));
    if (mode_ == "nearest") v = intrinsic("rint", v);
    const Expr out = or_(lt(v, f64(a.lo)), gt(v, f64(a.hi)));
    if (pad_ == "border" && mode_ != "cubic")
      v = loop::select(out, loop::max(f64(0), loop::min(v, f64(a.len - 1))), v);
    else if (pad_ == "reflection")
      v = loop::select(out, reflect(v, a.lo, a.hi), v);
    const Expr finite = loop::unary(loop::UnaryOp::Not, or_(is_nan(v),
                                                             loop::call("isinf", DType::Bool, {v})));
    if (pad_ != "zeros") ctx_.check(finite, str_cat(ctx_.node.describe(), ": grid holds a non-finite coordinate"));
    v = loop::select(finite, v, f64(-1e9));
    return loop::max(f64(-1e9), loop::min(v, f64(1e9)));
  }

  // Tap k along one axis at coordinate v.
  Tap tap(const Expr& v, const GridAxis& a, const Expr& k) {
    const Expr f = intrinsic("floor", v);
    const Expr i0 = loop::cast(DType::I64, mode_ == "nearest" ? v : f);
    Tap t;
    Expr i;
    if (mode_ == "nearest") {
      i = i0;
      t.weight = f64(1);
    } else if (mode_ == "linear") {
      i = i0 + k;
      t.weight = loop::select(eq(k, Expr(0)), f64(1) - (v - f), v - f);
    } else {
      i = i0 - Expr(1) + k;
      t.weight = cubic_weight(v - f + f64(1) - loop::cast(DType::F64, k), -0.75);
    }
    const int64_t n = static_cast<int64_t>(a.len);
    const Expr inside = in_range(i, Expr(0), Expr(n));
    t.zero = loop::bool_imm(false);
    Expr j = i;
    if (pad_ == "zeros") {
      t.zero = loop::unary(loop::UnaryOp::Not, inside);
    } else if (pad_ == "reflection") {
      j = loop::select(inside, i, loop::cast(DType::I64, reflect(loop::cast(DType::F64, i), a.lo, a.hi)));
    }
    t.index = clamp_index(j, Expr(0), Expr(n - 1));
    return t;
  }

  LowerContext& ctx_;
  std::string mode_, pad_;
  bool align_ = false;
  std::vector<GridAxis> axes_;
};

Expr lower_grid_sample(LowerContext& ctx, size_t, const Idx& index) {
  if (!is_float(ctx.out_dtype())) ctx.unsupported("non-float input");
  return GridSampler(ctx).sample(index);
}

// AffineGrid: theta[b] times the homogeneous base position (x innermost).
// The spatial sizes are the output's ([N, spatial..., r]), so the size
// operand need not be constant.
Expr lower_affine_grid(LowerContext& ctx, size_t, const Idx& index) {
  std::vector<int64_t> size{0, 0};  // N and C are not needed
  for (const Dim& d : *ctx.node.outputs[0]->type.shape) {
    if (!d.is_const()) ctx.unsupported("symbolic output size");
    size.push_back(d.value());
  }
  size.erase(size.begin() + 2);  // the output's N
  size.pop_back();               // and its vector length
  const int64_t r = static_cast<int64_t>(size.size()) - 2;
  const bool align = ctx.node.attr_int("align_corners", 0) != 0;
  const DType t = DType::F64;
  const Expr row = index.back();
  Expr acc = loop::cast(t, ctx.input(0, {index[0], row, Expr(r)}));  // the translation column
  for (int64_t d = 0; d < r; ++d) {
    const int64_t axis = r - 1 - d;  // spatial axis of homogeneous coordinate d
    const double len = static_cast<double>(size[static_cast<size_t>(2 + axis)]);
    const Expr i = loop::cast(t, index[static_cast<size_t>(1 + axis)]);
    Expr base;
    if (align) base = len == 1 ? f64(-1) : f64(-1) + div(f64(2) * i, f64(len - 1));
    else base = div(f64(2) * i + f64(1), f64(len)) - f64(1);
    acc = acc + loop::cast(t, ctx.input(0, {index[0], row, Expr(d)})) * base;
  }
  return loop::cast(ctx.out_dtype(), acc);
}

}  // namespace

void register_grid_lowerings(OpRegistry& r) {
  r.set_lowering("", "GridSample", FusionKind::Reduction, lower_grid_sample);
  r.set_lowering("", "AffineGrid", FusionKind::Elementwise, lower_affine_grid);
}

}  // namespace tessel
