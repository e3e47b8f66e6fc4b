// Resize (every mode of the latest opset) and the removed Upsample, which is
// Resize with asymmetric coordinates and floor rounding.
//
// Resizing is separable: each resized axis is processed in turn, each output
// coordinate mapping to a short list of (input index, weight) taps. Nearest
// mode is a pure gather, exact for every dtype (strings included); linear
// and cubic accumulate in double and round once at the end.
#include <cmath>
#include <cstring>
#include <limits>

#include "tessel/ops/conv/conv_util.h"
#include "tessel/ops/registry.h"

namespace tessel {

void register_image_grid_ops(OpRegistry& r);  // image_grid.cpp

namespace {

enum class Mode { Nearest, Linear, Cubic };
enum class Coord { HalfPixel, HalfPixelSymmetric, PytorchHalfPixel, AlignCorners, Asymmetric, TfHalfPixelForNN, TfCropAndResize };
enum class NearestMode { RoundPreferFloor, RoundPreferCeil, Floor, Ceil };

struct ResizeAttrs {
  Mode mode = Mode::Nearest;
  Coord coord = Coord::HalfPixel;
  NearestMode nearest = NearestMode::RoundPreferFloor;
  double cubic_a = -0.75;
  bool exclude_outside = false;
  bool antialias = false;
  double extrapolation = 0.0;
  std::string aspect = "stretch";
};

ResizeAttrs read_attrs(const Node& n) {
  ResizeAttrs a;
  const std::string mode = n.attr_string("mode", "nearest");
  if (mode == "nearest") a.mode = Mode::Nearest;
  else if (mode == "linear" || mode == "bilinear" || mode == "trilinear") a.mode = Mode::Linear;
  else if (mode == "cubic") a.mode = Mode::Cubic;
  else fail(n.describe(), ": unknown mode '", mode, "'");
  const std::string ct = n.attr_string("coordinate_transformation_mode", "half_pixel");
  if (ct == "half_pixel") a.coord = Coord::HalfPixel;
  else if (ct == "half_pixel_symmetric") a.coord = Coord::HalfPixelSymmetric;
  else if (ct == "pytorch_half_pixel") a.coord = Coord::PytorchHalfPixel;
  else if (ct == "align_corners") a.coord = Coord::AlignCorners;
  else if (ct == "asymmetric") a.coord = Coord::Asymmetric;
  else if (ct == "tf_half_pixel_for_nn") a.coord = Coord::TfHalfPixelForNN;
  else if (ct == "tf_crop_and_resize") a.coord = Coord::TfCropAndResize;
  else fail(n.describe(), ": unknown coordinate_transformation_mode '", ct, "'");
  const std::string nm = n.attr_string("nearest_mode", "round_prefer_floor");
  if (nm == "round_prefer_floor") a.nearest = NearestMode::RoundPreferFloor;
  else if (nm == "round_prefer_ceil") a.nearest = NearestMode::RoundPreferCeil;
  else if (nm == "floor") a.nearest = NearestMode::Floor;
  else if (nm == "ceil") a.nearest = NearestMode::Ceil;
  else fail(n.describe(), ": unknown nearest_mode '", nm, "'");
  a.cubic_a = n.attr_float("cubic_coeff_a", -0.75f);
  a.exclude_outside = n.attr_int("exclude_outside", 0) != 0;
  a.antialias = n.attr_int("antialias", 0) != 0;
  a.extrapolation = n.attr_float("extrapolation_value", 0.0f);
  a.aspect = n.attr_string("keep_aspect_ratio_policy", "stretch");
  TS_CHECK(a.aspect == "stretch" || a.aspect == "not_larger" || a.aspect == "not_smaller", n.describe(),
           ": unknown keep_aspect_ratio_policy '", a.aspect, "'");
  return a;
}

// Normalised `axes` attribute (default: every axis).
std::vector<int64_t> read_axes(const Node& n, int64_t rank) {
  std::vector<int64_t> axes;
  if (!n.has_attr("axes")) {
    for (int64_t i = 0; i < rank; ++i) axes.push_back(i);
    return axes;
  }
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t a : n.attr_ints("axes")) {
    const int64_t d = normalize_axis(a, rank, n);
    TS_CHECK(!seen[static_cast<size_t>(d)], n.describe(), ": axis ", a, " is repeated in axes");
    seen[static_cast<size_t>(d)] = true;
    axes.push_back(d);
  }
  return axes;
}

// ---- per-axis plans ---------------------------------------------------------------

struct Tap {
  int64_t index;
  double weight;
};

// What one output coordinate along an axis reads.
struct OutPoint {
  bool extrapolated = false;  // takes the extrapolation value
  std::vector<Tap> taps;      // nearest: one tap, index -1 = excluded (value 0)
};

struct AxisSpec {
  int64_t in = 0, out = 0;
  double scale = 1.0;
  double roi_start = 0.0, roi_end = 1.0;
};

double source_coord(const ResizeAttrs& a, const AxisSpec& s, int64_t y) {
  const double yd = static_cast<double>(y), in = static_cast<double>(s.in);
  const double out_f = s.scale * in;  // the (possibly fractional) target length
  switch (a.coord) {
    case Coord::HalfPixel: return (yd + 0.5) / s.scale - 0.5;
    case Coord::HalfPixelSymmetric: {
      const double adjustment = static_cast<double>(s.out) / out_f;
      const double offset = in / 2 * (1 - adjustment);
      return offset + (yd + 0.5) / s.scale - 0.5;
    }
    case Coord::PytorchHalfPixel: return s.out > 1 ? (yd + 0.5) / s.scale - 0.5 : 0.0;
    case Coord::AlignCorners: return out_f == 1 ? 0.0 : yd * (in - 1) / (out_f - 1);
    case Coord::Asymmetric: return yd / s.scale;
    case Coord::TfHalfPixelForNN: return (yd + 0.5) / s.scale;
    case Coord::TfCropAndResize:
      if (out_f == 1) return (s.roi_start + s.roi_end) * (in - 1) / 2;
      return s.roi_start * (in - 1) + yd * (s.roi_end - s.roi_start) * (in - 1) / (out_f - 1);
  }
  return 0.0;
}

double cubic_kernel(double t, double a) {
  t = std::fabs(t);
  if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
  if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
  return 0.0;
}

OutPoint plan_point(const ResizeAttrs& a, const AxisSpec& s, int64_t y) {
  OutPoint p;
  const double x = source_coord(a, s, y);
  if (a.coord == Coord::TfCropAndResize && (x < 0 || x > static_cast<double>(s.in - 1) || std::isnan(x))) {
    p.extrapolated = true;
    return p;
  }
  TS_CHECK(std::isfinite(x) && std::fabs(x) < 1e15, "Resize: source coordinate is not finite");
  // The tap to the left of x, so that ratio lies in (0, 1]: an integer x
  // counts as ratio 1 from its left neighbour.
  const double fl = std::floor(x);
  const int64_t left = static_cast<int64_t>(fl) - (x == fl ? 1 : 0);
  const double ratio = x - static_cast<double>(left);
  auto clamp = [&](int64_t i) { return std::min(std::max<int64_t>(i, 0), s.in - 1); };
  switch (a.mode) {
    case Mode::Nearest: {
      bool right = false;
      switch (a.nearest) {
        case NearestMode::RoundPreferFloor: right = ratio > 0.5; break;
        case NearestMode::RoundPreferCeil: right = ratio >= 0.5; break;
        case NearestMode::Floor: right = ratio == 1.0; break;
        case NearestMode::Ceil: right = true; break;
      }
      const int64_t i = left + (right ? 1 : 0);
      const bool outside = i < 0 || i >= s.in;
      p.taps.push_back({a.exclude_outside && outside ? -1 : clamp(i), 1.0});
      return p;
    }
    case Mode::Linear:
    case Mode::Cubic: {
      // Filter support in taps: 2 (linear) or 4 (cubic), stretched by 1/scale
      // when antialiasing a downscale.
      const double fs = a.antialias ? std::min(s.scale, 1.0) : 1.0;
      const double support = a.mode == Mode::Linear ? 1.0 : 2.0;
      const int64_t start = a.antialias ? static_cast<int64_t>(std::floor(-support / fs)) + 1
                                        : (a.mode == Mode::Linear ? 0 : -1);
      double sum = 0;
      for (int64_t i = start; i <= 1 - start; ++i) {
        const double t = (static_cast<double>(i) - ratio) * fs;
        double w = a.mode == Mode::Linear ? std::max(0.0, 1.0 - std::fabs(t)) : cubic_kernel(t, a.cubic_a);
        const int64_t idx = left + i;
        if (a.exclude_outside && (idx < 0 || idx >= s.in)) w = 0;
        p.taps.push_back({clamp(idx), w});
        sum += w;
      }
      // Antialias filters and exclude_outside are renormalised to sum 1.
      if ((a.antialias || a.exclude_outside) && sum != 0)
        for (Tap& t : p.taps) t.weight /= sum;
      return p;
    }
  }
  return p;
}

// ---- geometry: output sizes and scales ------------------------------------------------

struct ResizeGeom {
  std::vector<AxisSpec> axes;  // one per input axis
  std::vector<int64_t> out_shape;
};

// Values of an optional float/int input; empty when absent or empty (opset
// 11 passes an empty `scales` when `sizes` is used).
std::vector<double> optional_values(const KernelContext& ctx, size_t i) {
  std::vector<double> v;
  if (!ctx.has_input(i)) return v;
  const Tensor& t = ctx.input(i);
  TS_CHECK(t.dtype() != DType::String, ctx.node.describe(), ": input ", i, " must be numeric");
  for (int64_t k = 0; k < t.numel(); ++k) v.push_back(t.get_f64(k));
  return v;
}

ResizeGeom resize_geom(const Node& node, const ResizeAttrs& a, const std::vector<int64_t>& in,
                       const std::vector<double>& roi, const std::vector<double>& scales,
                       const std::vector<int64_t>& sizes) {
  const int64_t rank = static_cast<int64_t>(in.size());
  const std::vector<int64_t> axes = read_axes(node, rank);
  const size_t na = axes.size();
  TS_CHECK(scales.empty() != sizes.empty(), node.describe(), ": exactly one of scales and sizes must be given");
  ResizeGeom g;
  g.axes.resize(in.size());
  for (size_t d = 0; d < in.size(); ++d) g.axes[d] = {in[d], in[d], 1.0, 0.0, 1.0};
  if (a.coord == Coord::TfCropAndResize) {
    TS_CHECK(roi.size() == 2 * na, node.describe(), ": roi has ", roi.size(), " values, expected ", 2 * na);
    for (size_t i = 0; i < na; ++i) {
      g.axes[static_cast<size_t>(axes[i])].roi_start = roi[i];
      g.axes[static_cast<size_t>(axes[i])].roi_end = roi[na + i];
    }
  }
  if (!scales.empty()) {
    TS_CHECK(scales.size() == na, node.describe(), ": scales has ", scales.size(), " values, expected ", na);
    for (size_t i = 0; i < na; ++i) {
      AxisSpec& s = g.axes[static_cast<size_t>(axes[i])];
      TS_CHECK(scales[i] > 0 && std::isfinite(scales[i]), node.describe(), ": scale ", scales[i], " must be positive");
      s.scale = scales[i];
      const double o = std::floor(scales[i] * static_cast<double>(s.in));
      TS_CHECK(o < static_cast<double>(Tensor::kMaxElements), node.describe(), ": output size is too large");
      s.out = static_cast<int64_t>(o);
    }
  } else {
    TS_CHECK(sizes.size() == na, node.describe(), ": sizes has ", sizes.size(), " values, expected ", na);
    for (size_t i = 0; i < na; ++i) {
      const AxisSpec& s = g.axes[static_cast<size_t>(axes[i])];
      TS_CHECK(sizes[i] >= 0, node.describe(), ": size ", sizes[i], " must be >= 0");
      TS_CHECK(s.in > 0 || sizes[i] == 0, node.describe(), ": cannot resize an empty axis to size ", sizes[i]);
    }
    if (a.aspect == "stretch") {
      for (size_t i = 0; i < na; ++i) {
        AxisSpec& s = g.axes[static_cast<size_t>(axes[i])];
        s.out = sizes[i];
        s.scale = s.in ? static_cast<double>(sizes[i]) / static_cast<double>(s.in) : 1.0;
      }
    } else {
      double scale = a.aspect == "not_larger" ? std::numeric_limits<double>::infinity() : 0.0;
      for (size_t i = 0; i < na; ++i) {
        const AxisSpec& s = g.axes[static_cast<size_t>(axes[i])];
        if (s.in == 0) continue;
        const double r = static_cast<double>(sizes[i]) / static_cast<double>(s.in);
        scale = a.aspect == "not_larger" ? std::min(scale, r) : std::max(scale, r);
      }
      if (!std::isfinite(scale)) scale = 1.0;
      for (size_t i = 0; i < na; ++i) {
        AxisSpec& s = g.axes[static_cast<size_t>(axes[i])];
        s.scale = scale;
        s.out = static_cast<int64_t>(std::floor(scale * static_cast<double>(s.in) + 0.5));  // round half up
      }
    }
  }
  for (const AxisSpec& s : g.axes) {
    TS_CHECK(s.in > 0 || s.out == 0, node.describe(), ": cannot resize an empty axis to size ", s.out);
    g.out_shape.push_back(s.out);
  }
  convutil::check_elements(node, checked_numel(g.out_shape));
  return g;
}

// An axis that the reference leaves untouched.
bool is_identity(const ResizeAttrs& a, const AxisSpec& s) {
  const bool roi_trivial = a.coord != Coord::TfCropAndResize || (s.roi_start == 0.0 && s.roi_end == 1.0);
  return s.scale == 1.0 && s.out == s.in && roi_trivial;
}

// ---- the resampling itself ----------------------------------------------------------

// Resizes `src` (shape `shape`) along `axis`; returns the new buffer and
// updates shape. Numeric path (linear, cubic).
std::vector<double> resize_axis_weighted(const std::vector<double>& src, std::vector<int64_t>& shape, size_t axis,
                                         const std::vector<OutPoint>& plan, double extrapolation) {
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t in = shape[axis], out = static_cast<int64_t>(plan.size());
  std::vector<double> dst(static_cast<size_t>(outer * out * inner), 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t y = 0; y < out; ++y) {
      double* d = dst.data() + (o * out + y) * inner;
      const OutPoint& p = plan[static_cast<size_t>(y)];
      if (p.extrapolated) {
        std::fill(d, d + inner, extrapolation);
        continue;
      }
      for (const Tap& t : p.taps) {
        const double* s = src.data() + (o * in + t.index) * inner;
        for (int64_t j = 0; j < inner; ++j) d[j] += t.weight * s[j];
      }
    }
  shape[axis] = out;
  return dst;
}

// Nearest path: maps output flat positions to input flat positions (-1 =
// value 0, -2 = extrapolation value), axis by axis.
std::vector<int64_t> resize_axis_gather(const std::vector<int64_t>& src, std::vector<int64_t>& shape, size_t axis,
                                        const std::vector<OutPoint>& plan) {
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t in = shape[axis], out = static_cast<int64_t>(plan.size());
  std::vector<int64_t> dst(static_cast<size_t>(outer * out * inner));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t y = 0; y < out; ++y) {
      int64_t* d = dst.data() + (o * out + y) * inner;
      const OutPoint& p = plan[static_cast<size_t>(y)];
      const int64_t idx = p.extrapolated ? -2 : p.taps[0].index;
      if (idx < 0) {
        std::fill(d, d + inner, idx);
        continue;
      }
      const int64_t* s = src.data() + (o * in + idx) * inner;
      std::copy(s, s + inner, d);
    }
  shape[axis] = out;
  return dst;
}

// Rounds a double result into x's dtype: integers round half to even and
// saturate (as the spec's reference does), floats round once.
Tensor store_result(DType dt, const std::vector<int64_t>& shape, const std::vector<double>& v) {
  if (is_float(dt)) return convutil::from_f64(dt, shape, v);
  Tensor t(dt, shape);
  for (size_t i = 0; i < v.size(); ++i) {
    double x = std::nearbyint(v[i]);
    if (dt == DType::Bool) {
      t.set_i64(static_cast<int64_t>(i), v[i] != 0);
    } else if (is_unsigned_int(dt)) {
      const double hi = std::ldexp(1.0, int_bits(dt)) - 1;
      x = std::isnan(x) ? 0 : std::min(std::max(x, 0.0), hi);
      t.set_u64(static_cast<int64_t>(i), x >= 1.8446744073709552e19 ? UINT64_MAX : static_cast<uint64_t>(x));
    } else {
      const double lim = std::ldexp(1.0, int_bits(dt) - 1);
      x = std::isnan(x) ? 0 : std::min(std::max(x, -lim), lim - 1);
      t.set_i64(static_cast<int64_t>(i), x >= 9.2233720368547758e18 ? INT64_MAX : static_cast<int64_t>(x));
    }
  }
  return t;
}

Tensor run_resize(const Node& node, const ResizeAttrs& a, const Tensor& x, const ResizeGeom& g) {
  TS_CHECK(!(a.mode == Mode::Nearest && a.antialias), node.describe(), ": antialias is not defined for nearest mode");
  std::vector<int64_t> shape = x.shape();
  std::vector<std::vector<OutPoint>> plans(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    if (is_identity(a, g.axes[d])) continue;
    for (int64_t y = 0; y < g.axes[d].out; ++y) plans[d].push_back(plan_point(a, g.axes[d], y));
  }
  if (a.mode == Mode::Nearest) {
    std::vector<int64_t> idx(static_cast<size_t>(x.numel()));
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int64_t>(i);
    for (size_t d = 0; d < shape.size(); ++d)
      if (!is_identity(a, g.axes[d])) idx = resize_axis_gather(idx, shape, d, plans[d]);
    Tensor y(x.dtype(), g.out_shape);
    if (x.dtype() == DType::String) {
      const auto& src = x.strings();
      auto& dst = y.mutable_strings();
      for (size_t i = 0; i < idx.size(); ++i) dst[i] = idx[i] >= 0 ? src[static_cast<size_t>(idx[i])] : std::string();
      return y;
    }
    const int es = dtype_storage_size(x.dtype());
    const uint8_t* src = x.raw();
    uint8_t* dst = y.mutable_raw();
    bool any_fill = false;
    for (size_t i = 0; i < idx.size(); ++i) {
      if (idx[i] >= 0) std::memcpy(dst + i * es, src + idx[i] * es, static_cast<size_t>(es));
      else any_fill = true;
    }
    if (any_fill)
      for (size_t i = 0; i < idx.size(); ++i)
        if (idx[i] < 0) y.set_f64(static_cast<int64_t>(i), idx[i] == -2 ? a.extrapolation : 0.0);
    return y;
  }
  TS_CHECK(x.dtype() != DType::String, node.describe(), ": strings can only be resized in nearest mode");
  std::vector<double> v = convutil::to_f64(x);
  for (size_t d = 0; d < shape.size(); ++d)
    if (!is_identity(a, g.axes[d])) v = resize_axis_weighted(v, shape, d, plans[d], a.extrapolation);
  return store_result(x.dtype(), g.out_shape, v);
}

bool is_resize_scale_type(DType d) { return d == DType::F32 || d == DType::F16 || d == DType::F64; }

void resize_kernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Tensor& x = ctx.input(0);
  TS_CHECK(x.dtype() != DType::Undefined, node.describe(), ": input has no dtype");
  const ResizeAttrs a = read_attrs(node);
  std::vector<double> roi = optional_values(ctx, 1);
  if (ctx.has_input(1)) check_dtype(node, 1, ctx.input(1).dtype(), is_resize_scale_type, "a float type");
  const std::vector<double> scales = optional_values(ctx, 2);
  std::vector<int64_t> sizes;
  if (ctx.has_input(3)) {
    const Tensor& s = ctx.input(3);
    check_dtype(node, 3, s.dtype(), [](DType d) { return d == DType::I64; }, "int64");
    for (int64_t i = 0; i < s.numel(); ++i) sizes.push_back(s.get_i64(i));
  }
  const ResizeGeom g = resize_geom(node, a, x.shape(), roi, scales, sizes);
  ctx.set_output(0, run_resize(node, a, x, g));
}

// ---- shape inference ------------------------------------------------------------------

// floor(d * s) over symbolic d when s is a binary fraction p/2^k; nullopt else.
std::optional<Dim> scaled_dim(const Dim& d, double s) {
  if (auto c = d.const_value()) return static_cast<int64_t>(std::floor(s * static_cast<double>(*c)));
  for (int64_t q = 1; q <= 1024; q *= 2) {
    const double p = s * static_cast<double>(q);
    if (p == std::floor(p) && p < 1e9) return Dim::floordiv(d * static_cast<int64_t>(p), q);
  }
  return std::nullopt;
}

void resize_infer_common(InferContext& ctx, size_t scales_in, size_t sizes_in) {
  const DType dt = ctx.input_dtype(0);
  const Node& node = ctx.node;
  const ResizeAttrs a = read_attrs(node);
  if (!ctx.has_shape(0)) return ctx.set_output_unknown_shape(0, dt);
  const Shape& xs = ctx.input_shape(0);
  const std::vector<int64_t> axes = read_axes(node, static_cast<int64_t>(xs.size()));
  Shape out = xs;
  const Tensor* sc = ctx.input_const(scales_in);
  if (sc && sc->numel() > 0) {
    TS_CHECK(sc->numel() == static_cast<int64_t>(axes.size()), node.describe(), ": scales has ", sc->numel(),
             " values, expected ", axes.size());
    for (size_t i = 0; i < axes.size(); ++i) {
      const double s = sc->get_f64(static_cast<int64_t>(i));
      TS_CHECK(s > 0 && std::isfinite(s), node.describe(), ": scale ", s, " must be positive");
      auto d = scaled_dim(xs[static_cast<size_t>(axes[i])], s);
      if (!d) return ctx.set_output_unknown_shape(0, dt);
      out[static_cast<size_t>(axes[i])] = *d;
    }
    return ctx.set_output(0, dt, out);
  }
  if (sizes_in < ctx.num_inputs() && ctx.has_input(sizes_in)) {
    auto sv = ctx.input_dims_value(sizes_in);
    if (!sv) return ctx.set_output_unknown_shape(0, dt);
    TS_CHECK(sv->size() == axes.size(), node.describe(), ": sizes has ", sv->size(), " values, expected ", axes.size());
    if (a.aspect == "stretch") {
      for (size_t i = 0; i < axes.size(); ++i) out[static_cast<size_t>(axes[i])] = (*sv)[i];
      return ctx.set_output(0, dt, out);
    }
    // Aspect-preserving policies need concrete sizes.
    std::vector<int64_t> in, sizes;
    for (const Dim& d : xs) {
      if (!d.is_const()) return ctx.set_output_unknown_shape(0, dt);
      in.push_back(d.value());
    }
    for (const Dim& d : *sv) {
      if (!d.is_const()) return ctx.set_output_unknown_shape(0, dt);
      sizes.push_back(d.value());
    }
    const ResizeGeom g = resize_geom(node, a, in, {}, {}, sizes);
    return ctx.set_output(0, dt, shape_of(g.out_shape));
  }
  ctx.set_output_unknown_shape(0, dt);
}

void resize_infer(InferContext& ctx) {
  if (ctx.has_input(1)) check_dtype(ctx.node, 1, ctx.input_dtype(1), is_resize_scale_type, "a float type");
  if (ctx.has_input(2))
    check_dtype(ctx.node, 2, ctx.input_dtype(2), [](DType d) { return d == DType::F32; }, "float");
  if (ctx.has_input(3))
    check_dtype(ctx.node, 3, ctx.input_dtype(3), [](DType d) { return d == DType::I64; }, "int64");
  resize_infer_common(ctx, 2, 3);
}

// Resize-10 took (X, scales) and, like Upsample, mapped coordinates
// asymmetrically with floor rounding for nearest.
void resize_upgrade(Node& node, int64_t opset) {
  if (opset >= 11) return;
  Value* scales = node.input(1);
  node.inputs = {node.inputs.at(0), nullptr, scales};
  node.attrs["coordinate_transformation_mode"] = Attribute::of_string("asymmetric");
  if (node.attr_string("mode", "nearest") == "nearest") node.attrs["nearest_mode"] = Attribute::of_string("floor");
}

// ---- Upsample ------------------------------------------------------------------------

// Upsample is Resize with asymmetric coordinates and floor rounding.
ResizeAttrs upsample_attrs(const Node& node) {
  ResizeAttrs a;
  const std::string mode = node.attr_string("mode", "nearest");
  if (mode == "nearest") a.mode = Mode::Nearest;
  else if (mode == "linear" || mode == "bilinear") a.mode = Mode::Linear;
  else fail(node.describe(), ": unknown Upsample mode '", mode, "'");
  a.coord = Coord::Asymmetric;
  a.nearest = NearestMode::Floor;
  return a;
}

void upsample_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const ResizeAttrs a = upsample_attrs(ctx.node);
  const std::vector<double> scales = optional_values(ctx, 1);
  for (double s : scales) TS_CHECK(s >= 1, ctx.node.describe(), ": Upsample scale ", s, " must be >= 1");
  const ResizeGeom g = resize_geom(ctx.node, a, x.shape(), {}, scales, {});
  ctx.set_output(0, run_resize(ctx.node, a, x, g));
}

void upsample_infer(InferContext& ctx) {
  upsample_attrs(ctx.node);
  resize_infer_common(ctx, 1, 99);
}

// Upsample-1 had height_scale/width_scale and Upsample-7 a `scales`
// attribute; both become the `scales` input of Upsample-9.
void upsample_upgrade(Node& node, int64_t opset) {
  if (opset >= 9 || node.has_input(1)) return;
  std::vector<float> scales;
  if (node.has_attr("scales")) {
    scales = node.attr_floats("scales");
  } else {
    TS_CHECK(node.has_attr("height_scale") && node.has_attr("width_scale"), node.describe(),
             ": Upsample-1 needs height_scale and width_scale");
    scales = {1.0f, 1.0f, node.attr_float("height_scale", 1), node.attr_float("width_scale", 1)};
  }
  Tensor t(DType::F32, {static_cast<int64_t>(scales.size())});
  for (size_t i = 0; i < scales.size(); ++i) t.mutable_data<float>()[i] = scales[i];
  Value* c = node.owner->add_initializer(node.owner->fresh_name("upsample_scales"), t);
  node.inputs.resize(1);
  node.inputs.push_back(c);
  node.attrs.erase("scales");
  node.attrs.erase("height_scale");
  node.attrs.erase("width_scale");
}

}  // namespace

void register_image_ops(OpRegistry& r) {
  r.add({"Resize", "", 1, 4, 1, 1, resize_infer, resize_kernel, resize_upgrade, 10});
  OpSchema up{"Upsample", "", 1, 2, 1, 1, upsample_infer, upsample_kernel, upsample_upgrade, 1};
  up.removed_in = 11;  // deprecated in opset 10
  r.add(up);
  register_image_grid_ops(r);
}

}  // namespace tessel
