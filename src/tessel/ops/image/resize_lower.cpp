// Compiled form of Resize (nearest, linear, cubic; every coordinate
// transformation mode, exclude_outside, antialias, extrapolation). The output
// shape must be static; scales and roi may be run-time operands (loaded in the
// kernel). Each resized axis maps its output coordinate to a source
// coordinate with the reference's own double-precision formula, evaluated in
// the kernel (f64), so that floor and rounding decisions agree exactly. An
// axis whose scale is not a constant 1 is resampled even when its size is
// unchanged (exact: the weights are then 0 and 1). Linear/cubic interpolation is a reduction
// over the taps of every resized axis: product of the per-axis weights times
// the (clamped) tap element, accumulated in f64 like the reference.
#include <cmath>
#include <limits>

#include "tessel/ops/lowering.h"
#include "tessel/ops/registry.h"

namespace tessel {
namespace {

using namespace lower_expr;

// One axis: sizes, and the scale and roi as f64 expressions (loaded in the
// kernel when those operands are only known at run time).
struct Axis {
  int64_t in = 0, out = 0;
  Expr scale, roi_start, roi_end;
  bool identity = true;
};

struct Attrs {
  std::string mode, coord, nearest;
  double cubic_a = -0.75, extrapolation = 0;
  bool exclude_outside = false, antialias = false;
};

Attrs read_attrs(const Node& n) {
  Attrs a;
  a.mode = n.attr_string("mode", "nearest");
  if (a.mode == "bilinear" || a.mode == "trilinear") a.mode = "linear";
  a.coord = n.attr_string("coordinate_transformation_mode", "half_pixel");
  a.nearest = n.attr_string("nearest_mode", "round_prefer_floor");
  a.cubic_a = n.attr_float("cubic_coeff_a", -0.75f);
  a.exclude_outside = n.attr_int("exclude_outside", 0) != 0;
  a.antialias = n.attr_int("antialias", 0) != 0;
  a.extrapolation = n.attr_float("extrapolation_value", 0.0f);
  return a;
}

// Element k of a float operand as an f64 immediate when constant, else loaded.
Expr operand_value(LowerContext& ctx, size_t i, int64_t k) {
  if (const Tensor* t = ctx.input_const(i)) return f64(t->get_f64(k));
  return loop::cast(DType::F64, ctx.input(i, {Expr(k)}));
}

int64_t operand_length(LowerContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return 0;
  const std::vector<int64_t> d = const_in_dims(ctx, i);
  return d.empty() ? 1 : d[0];
}

bool as_const_float(const Expr& e, double* v) {
  if (e->kind != loop::ExprKind::FloatImm) return false;
  *v = e->float_value;
  return true;
}

bool is_zero(const Expr& e) {
  double v = 1;
  return as_const_float(e, &v) && v == 0.0;
}

bool is_one(const Expr& e) {
  double v = 0;
  return as_const_float(e, &v) && v == 1.0;
}

// Per-axis geometry from scales/sizes/roi (the reference's rules).
std::vector<Axis> read_axes(LowerContext& ctx, const Attrs& a) {
  const std::vector<int64_t> in = const_in_dims(ctx, 0);
  const int64_t rank = static_cast<int64_t>(in.size());
  std::vector<int64_t> axes;
  if (ctx.node.has_attr("axes")) {
    for (int64_t x : ctx.node.attr_ints("axes")) axes.push_back(normalize_axis(x, rank, ctx.node));
  } else {
    for (int64_t d = 0; d < rank; ++d) axes.push_back(d);
  }
  const Shape& out = *ctx.node.outputs[0]->type.shape;
  std::vector<Axis> ax(in.size());
  for (size_t d = 0; d < in.size(); ++d) {
    if (!out[d].is_const()) ctx.unsupported("symbolic output size");
    ax[d].in = in[d];
    ax[d].out = out[d].value();
    ax[d].scale = f64(1);
    ax[d].roi_start = f64(0);
    ax[d].roi_end = f64(1);
  }
  const size_t na = axes.size();
  if (a.coord == "tf_crop_and_resize") {
    if (operand_length(ctx, 1) != static_cast<int64_t>(2 * na)) ctx.unsupported("roi length");
    for (size_t i = 0; i < na; ++i) {
      ax[static_cast<size_t>(axes[i])].roi_start = operand_value(ctx, 1, static_cast<int64_t>(i));
      ax[static_cast<size_t>(axes[i])].roi_end = operand_value(ctx, 1, static_cast<int64_t>(na + i));
    }
  }
  const std::string aspect = ctx.node.attr_string("keep_aspect_ratio_policy", "stretch");
  if (operand_length(ctx, 2) > 0) {
    if (operand_length(ctx, 2) != static_cast<int64_t>(na)) ctx.unsupported("scales length");
    for (size_t i = 0; i < na; ++i) ax[static_cast<size_t>(axes[i])].scale = operand_value(ctx, 2, static_cast<int64_t>(i));
  } else if (aspect == "stretch") {
    for (size_t i = 0; i < na; ++i) {
      Axis& s = ax[static_cast<size_t>(axes[i])];
      s.scale = f64(s.in ? static_cast<double>(s.out) / static_cast<double>(s.in) : 1.0);
    }
  } else {
    // One scale for all axes, from the constant sizes.
    const std::vector<int64_t> sizes = const_input_ints(ctx, 3, "sizes");
    double scale = aspect == "not_larger" ? std::numeric_limits<double>::infinity() : 0.0;
    for (size_t i = 0; i < na && i < sizes.size(); ++i) {
      const int64_t n = ax[static_cast<size_t>(axes[i])].in;
      if (n == 0) continue;
      const double r = static_cast<double>(sizes[i]) / static_cast<double>(n);
      scale = aspect == "not_larger" ? std::min(scale, r) : std::max(scale, r);
    }
    if (!std::isfinite(scale)) scale = 1.0;
    for (size_t i = 0; i < na; ++i) ax[static_cast<size_t>(axes[i])].scale = f64(scale);
  }
  for (Axis& s : ax) {
    const bool roi_trivial = a.coord != "tf_crop_and_resize" || (is_zero(s.roi_start) && is_one(s.roi_end));
    s.identity = is_one(s.scale) && s.out == s.in && roi_trivial;
  }
  return ax;
}

// The source coordinate of output coordinate y (an f64 expression), with the
// reference's operation order.
Expr source_coord(LowerContext& ctx, const Attrs& a, const Axis& s, const Expr& y) {
  const Expr yd = loop::cast(DType::F64, y);
  const Expr in = f64(static_cast<double>(s.in)), in1 = f64(static_cast<double>(s.in - 1));
  const Expr out_f = s.scale * in;  // the (possibly fractional) target length
  const Expr is_unit = eq(out_f, f64(1));
  const Expr half_pixel = div(yd + f64(0.5), s.scale) - f64(0.5);
  if (a.coord == "half_pixel") return half_pixel;
  if (a.coord == "half_pixel_symmetric") {
    const Expr adjustment = div(f64(static_cast<double>(s.out)), out_f);
    const Expr offset = div(in, f64(2)) * (f64(1) - adjustment);
    return offset + div(yd + f64(0.5), s.scale) - f64(0.5);
  }
  if (a.coord == "pytorch_half_pixel") return s.out > 1 ? half_pixel : f64(0);
  if (a.coord == "align_corners") return loop::select(is_unit, f64(0), div(yd * in1, out_f - f64(1)));
  if (a.coord == "asymmetric") return div(yd, s.scale);
  if (a.coord == "tf_half_pixel_for_nn") return div(yd + f64(0.5), s.scale);
  if (a.coord == "tf_crop_and_resize") {
    const Expr centre = div((s.roi_start + s.roi_end) * in1, f64(2));
    return loop::select(is_unit, centre,
                        s.roi_start * in1 + div(yd * (s.roi_end - s.roi_start) * in1, out_f - f64(1)));
  }
  ctx.unsupported("coordinate_transformation_mode " + a.coord);
}

// Along one axis: the tap left of the source coordinate (ratio in (0, 1]),
// and whether the coordinate lies outside the crop (tf_crop_and_resize).
struct AxisPoint {
  Expr left, ratio, extrapolated;
};

AxisPoint axis_point(LowerContext& ctx, const Attrs& a, const Axis& s, const Expr& y) {
  const Expr x = source_coord(ctx, a, s, y);
  AxisPoint p;
  p.extrapolated = loop::bool_imm(false);
  if (a.coord == "tf_crop_and_resize")
    p.extrapolated = or_(or_(lt(x, f64(0)), gt(x, f64(static_cast<double>(s.in - 1)))),
                         is_nan(x));
  // Coordinates beyond any input (a corrupt scale) would overflow the index.
  ctx.check(or_(p.extrapolated, lt(intrinsic("fabs", x), f64(1e15))),
            str_cat(ctx.node.describe(), ": source coordinate is not finite"));
  // Keep the conversion defined for the coordinates that are discarded.
  const Expr safe = loop::select(p.extrapolated, f64(0), x);
  const Expr fl = intrinsic("floor", safe);
  p.left = loop::cast(DType::I64, fl) - loop::select(eq(safe, fl), Expr(1), Expr(0));
  p.ratio = safe - loop::cast(DType::F64, p.left);
  return p;
}

Expr clamp_axis(const Expr& i, const Axis& s) { return clamp_index(i, Expr(0), Expr(s.in - 1)); }
Expr outside(const Expr& i, const Axis& s) { return loop::unary(loop::UnaryOp::Not, in_range(i, Expr(0), Expr(s.in))); }


// Taps of a linear/cubic filter: offsets [start, 1 - start] from `left`.
struct Filter {
  int64_t start = 0;
  double fs = 1;
  int64_t taps() const { return 2 - 2 * start; }
};

Filter filter_of(LowerContext& ctx, const Attrs& a, const Axis& s) {
  Filter f;
  if (a.antialias) {
    double scale = 0;
    if (!as_const_float(s.scale, &scale)) ctx.unsupported("antialias with scales known only at run time");
    f.fs = std::min(scale, 1.0);
  }
  const double support = a.mode == "linear" ? 1.0 : 2.0;
  f.start = a.antialias ? static_cast<int64_t>(std::floor(-support / f.fs)) + 1 : (a.mode == "linear" ? 0 : -1);
  return f;
}

// Unnormalised weight of tap k (0-based) at a point.
Expr tap_weight(const Attrs& a, const Axis& s, const Filter& f, const AxisPoint& p, const Expr& k) {
  const Expr off = k + Expr(f.start);
  const Expr t = (loop::cast(DType::F64, off) - p.ratio) * f64(f.fs);
  Expr w = a.mode == "linear" ? loop::max(f64(0), f64(1) - intrinsic("fabs", t)) : cubic_weight(t, a.cubic_a);
  if (a.exclude_outside) w = loop::select(outside(p.left + off, s), f64(0), w);
  return w;
}

Expr store(LowerContext& ctx, const Expr& v) {
  const DType out = ctx.out_dtype();
  if (is_float(out)) return loop::cast(out, v);
  if (out == DType::Bool) return ne(v, f64(0));
  // Integers round half to even and saturate, as the reference does.
  const Expr r = intrinsic("rint", v);
  const Expr lo = loop::cast(DType::F64, lowest(out)), hi = loop::cast(DType::F64, highest(out));
  const Expr c = loop::select(is_nan(r), f64(0), loop::max(lo, loop::min(r, hi)));
  return loop::cast(out, c);
}

Expr nearest(LowerContext& ctx, const Attrs& a, const std::vector<Axis>& ax, const Idx& index) {
  Idx at = index;
  Expr excluded = loop::bool_imm(false), extrapolated = loop::bool_imm(false);
  for (size_t d = 0; d < ax.size(); ++d) {
    if (ax[d].identity) continue;
    const AxisPoint p = axis_point(ctx, a, ax[d], index[d]);
    Expr right;
    if (a.nearest == "round_prefer_floor") right = gt(p.ratio, f64(0.5));
    else if (a.nearest == "round_prefer_ceil") right = ge(p.ratio, f64(0.5));
    else if (a.nearest == "floor") right = eq(p.ratio, f64(1));
    else if (a.nearest == "ceil") right = loop::bool_imm(true);
    else ctx.unsupported("nearest_mode " + a.nearest);
    const Expr i = p.left + loop::select(right, Expr(1), Expr(0));
    if (a.exclude_outside) excluded = or_(excluded, outside(i, ax[d]));
    extrapolated = or_(extrapolated, p.extrapolated);
    at[d] = clamp_axis(i, ax[d]);
  }
  const Expr x = ctx.input(0, at);
  const Expr fill = loop::select(extrapolated, constant(x.dtype(), a.extrapolation), constant(x.dtype(), 0));
  return loop::select(or_(excluded, extrapolated), fill, x);
}

Expr interpolate(LowerContext& ctx, const Attrs& a, const std::vector<Axis>& ax, const Idx& index) {
  std::vector<size_t> resized;
  std::vector<AxisPoint> points;
  std::vector<Filter> filters;
  Idx extents;
  Expr extrapolated = loop::bool_imm(false);
  for (size_t d = 0; d < ax.size(); ++d) {
    if (ax[d].identity) continue;
    resized.push_back(d);
    points.push_back(axis_point(ctx, a, ax[d], index[d]));
    filters.push_back(filter_of(ctx, a, ax[d]));
    extents.push_back(Expr(filters.back().taps()));
    extrapolated = or_(extrapolated, points.back().extrapolated);
  }
  if (resized.empty()) return store(ctx, loop::cast(DType::F64, ctx.input(0, index)));
  // Antialias filters and exclude_outside are renormalised to sum 1 per axis.
  const bool normalise = a.antialias || a.exclude_outside;
  std::vector<Expr> norms(resized.size());
  if (normalise)
    for (size_t r = 0; r < resized.size(); ++r) {
      const Expr sum = ctx.reduce(ReduceOp::Sum, f64(0), {extents[r]}, [&](const Idx& k) {
        return tap_weight(a, ax[resized[r]], filters[r], points[r], k[0]);
      });
      norms[r] = loop::select(eq(sum, f64(0)), f64(1), sum);
    }
  const Expr v = ctx.reduce(ReduceOp::Sum, f64(0), extents, [&](const Idx& k) {
    Idx at = index;
    Expr w = f64(1);
    for (size_t r = 0; r < resized.size(); ++r) {
      const Axis& s = ax[resized[r]];
      Expr wr = tap_weight(a, s, filters[r], points[r], k[r]);
      if (normalise) wr = div(wr, norms[r]);
      w = w * wr;
      at[resized[r]] = clamp_axis(points[r].left + k[r] + Expr(filters[r].start), s);
    }
    return w * loop::cast(DType::F64, ctx.input(0, at));
  });
  return store(ctx, loop::select(extrapolated, f64(a.extrapolation), v));
}

Expr lower_resize(LowerContext& ctx, size_t, const Idx& index) {
  const Attrs a = read_attrs(ctx.node);
  if (a.mode != "nearest" && a.mode != "linear" && a.mode != "cubic") ctx.unsupported("mode " + a.mode);
  if (a.mode == "nearest" && a.antialias) ctx.unsupported("antialias with nearest");
  const std::vector<Axis> ax = read_axes(ctx, a);
  return a.mode == "nearest" ? nearest(ctx, a, ax, index) : interpolate(ctx, a, ax, index);
}

}  // namespace

void register_resize_lowerings(OpRegistry& r) {
  r.set_lowering("", "Resize", FusionKind::Reduction, lower_resize);
}

}  // namespace tessel
