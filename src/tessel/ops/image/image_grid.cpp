// Sampling grids: GridSample (N-D, nearest/linear/cubic, zeros/border/
// reflection padding) and AffineGrid (2-D and 3-D), following the PyTorch
// semantics the ONNX spec describes.
#include <cmath>

#include "tessel/ops/conv/conv_util.h"
#include "tessel/ops/registry.h"

namespace tessel {

namespace {

enum class SampleMode { Nearest, Linear, Cubic };
enum class PadMode { Zeros, Border, Reflection };

SampleMode read_sample_mode(const Node& n) {
  const std::string m = n.attr_string("mode", "linear");
  if (m == "nearest") return SampleMode::Nearest;
  if (m == "linear" || m == "bilinear") return SampleMode::Linear;
  if (m == "cubic" || m == "bicubic") return SampleMode::Cubic;
  fail(n.describe(), ": unknown mode '", m, "'");
}

PadMode read_pad_mode(const Node& n) {
  const std::string m = n.attr_string("padding_mode", "zeros");
  if (m == "zeros") return PadMode::Zeros;
  if (m == "border") return PadMode::Border;
  if (m == "reflection") return PadMode::Reflection;
  fail(n.describe(), ": unknown padding_mode '", m, "'");
}

// Reflects x into [lo, hi] repeatedly (PyTorch's reflect_coordinates).
double reflect(double x, double lo, double hi) {
  const double range = hi - lo;
  if (range <= 0) return lo;
  if (x < lo) {
    const double dx = lo - x;
    const double n = std::floor(dx / range);
    const double r = dx - n * range;
    return std::fmod(n, 2.0) == 0 ? lo + r : hi - r;
  }
  if (x > hi) {
    const double dx = x - hi;
    const double n = std::floor(dx / range);
    const double r = dx - n * range;
    return std::fmod(n, 2.0) == 0 ? hi - r : lo + r;
  }
  return x;
}

struct Sampler {
  PadMode pad;
  bool align_corners;
  std::vector<int64_t> dims;        // spatial sizes of X
  std::vector<double> lo, hi;       // valid coordinate range per dim

  // Index along dim d for integer position i, or -1 for "zero".
  int64_t index(size_t d, int64_t i) const {
    const int64_t n = dims[d];
    if (i >= 0 && i < n) return i;
    switch (pad) {
      case PadMode::Zeros: return -1;
      case PadMode::Border: return std::min(std::max<int64_t>(i, 0), n - 1);
      case PadMode::Reflection: {
        const int64_t r = static_cast<int64_t>(reflect(static_cast<double>(i), lo[d], hi[d]));
        return std::min(std::max<int64_t>(r, 0), n - 1);
      }
    }
    return -1;
  }
};

double cubic_weight(double t) {
  const double a = -0.75;
  t = std::fabs(t);
  if (t <= 1) return ((a + 2) * t - (a + 3)) * t * t + 1;
  if (t < 2) return ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
  return 0.0;
}

bool is_grid_float(DType d) { return convutil::is_conv_float(d); }

void grid_sample_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_dtype(ctx.node, 0, dt, [](DType d) { return d != DType::String && d != DType::Undefined; }, "a numeric type");
  check_dtype(ctx.node, 1, ctx.input_dtype(1), is_grid_float, "a float type");
  read_sample_mode(ctx.node);
  read_pad_mode(ctx.node);
  if (!ctx.has_shape(0) || !ctx.has_shape(1)) return ctx.set_output_unknown_shape(0, dt);
  const Shape& xs = ctx.input_shape(0);
  const Shape& gs = ctx.input_shape(1);
  TS_CHECK(xs.size() >= 3, ctx.node.describe(), ": input must have rank >= 3, got ", xs.size());
  TS_CHECK(gs.size() == xs.size(), ctx.node.describe(), ": grid rank ", gs.size(), " differs from input rank ", xs.size());
  if (gs.back().is_const())
    TS_CHECK(gs.back().value() == static_cast<int64_t>(xs.size() - 2), ctx.node.describe(), ": grid's last dim must be ",
             xs.size() - 2);
  Shape out{xs[0], xs[1]};
  out.insert(out.end(), gs.begin() + 1, gs.end() - 1);
  ctx.set_output(0, dt, out);
}

void grid_sample_kernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Tensor& x = ctx.input(0);
  const Tensor& grid = ctx.input(1);
  TS_CHECK(x.dtype() != DType::String, node.describe(), ": strings cannot be sampled");
  check_dtype(node, 1, grid.dtype(), is_grid_float, "a float type");
  TS_CHECK(x.rank() >= 3, node.describe(), ": input must have rank >= 3, got ", x.rank());
  const size_t r = x.rank() - 2;
  TS_CHECK(grid.rank() == x.rank() && grid.dim(0) == x.dim(0) && grid.shape().back() == static_cast<int64_t>(r),
           node.describe(), ": grid must have shape [N, ..., ", r, "] with N = ", x.dim(0), ", got ",
           dims_str(grid.shape()));
  const SampleMode mode = read_sample_mode(node);
  Sampler s;
  s.pad = read_pad_mode(node);
  s.align_corners = node.attr_int("align_corners", 0) != 0;
  s.dims = convutil::dims_from(x, 2);
  for (size_t d = 0; d < r; ++d) {
    s.lo.push_back(s.align_corners ? 0.0 : -0.5);
    s.hi.push_back(s.align_corners ? static_cast<double>(s.dims[d]) - 1 : static_cast<double>(s.dims[d]) - 0.5);
  }
  const int64_t n = x.dim(0), c = x.dim(1);
  const int64_t in_size = convutil::prod(s.dims);
  std::vector<int64_t> out_sp(grid.shape().begin() + 1, grid.shape().end() - 1);
  const int64_t out_size = convutil::prod(out_sp);
  convutil::check_elements(node, checked_mul(checked_mul(x.dim(0), x.dim(1)), out_size));
  std::vector<int64_t> out_shape{n, c};
  out_shape.insert(out_shape.end(), out_sp.begin(), out_sp.end());
  const std::vector<double> xv = convutil::to_f64(x);
  const std::vector<double> gv = convutil::to_f64(grid);
  std::vector<double> y(static_cast<size_t>(checked_mul(checked_mul(n, c), out_size)), 0.0);
  if (in_size == 0) {
    ctx.set_output(0, convutil::from_f64(x.dtype(), out_shape, y));
    return;
  }
  const int taps_per_dim = mode == SampleMode::Nearest ? 1 : mode == SampleMode::Linear ? 2 : 4;
  std::vector<std::vector<int64_t>> tap_idx(r, std::vector<int64_t>(static_cast<size_t>(taps_per_dim)));
  std::vector<std::vector<double>> tap_w(r, std::vector<double>(static_cast<size_t>(taps_per_dim)));
  std::vector<int> t(r);
  for (int64_t b = 0; b < n; ++b)
    for (int64_t p = 0; p < out_size; ++p) {
      // Grid vectors list the innermost axis first.
      const double* gp = gv.data() + (b * out_size + p) * static_cast<int64_t>(r);
      for (size_t d = 0; d < r; ++d) {
        const double g = gp[r - 1 - d];
        const double len = static_cast<double>(s.dims[d]);
        double v = s.align_corners ? (g + 1) / 2 * (len - 1) : ((g + 1) * len - 1) / 2;
        if (mode == SampleMode::Nearest) v = std::nearbyint(v);  // half to even, like PyTorch
        // Out-of-range points move inside first, except cubic with border
        // padding: there each tap is clamped on its own (PyTorch and ONNX
        // Runtime; the spec's Python reference clamps the point instead).
        if (v < s.lo[d] || v > s.hi[d]) {
          if (s.pad == PadMode::Border && mode != SampleMode::Cubic) v = std::min(std::max(v, 0.0), len - 1);
          else if (s.pad == PadMode::Reflection) v = reflect(v, s.lo[d], s.hi[d]);
        }
        TS_CHECK(std::isfinite(v) || s.pad == PadMode::Zeros, node.describe(), ": grid holds a non-finite coordinate");
        if (!std::isfinite(v)) v = -1e9;  // zeros padding: reads nothing
        v = std::min(std::max(v, -1e9), 1e9);
        switch (mode) {
          case SampleMode::Nearest:
            tap_idx[d][0] = s.index(d, static_cast<int64_t>(v));
            tap_w[d][0] = 1;
            break;
          case SampleMode::Linear: {
            const double f = std::floor(v);
            const int64_t i0 = static_cast<int64_t>(f);
            tap_idx[d][0] = s.index(d, i0);
            tap_idx[d][1] = s.index(d, i0 + 1);
            tap_w[d][0] = 1 - (v - f);
            tap_w[d][1] = v - f;
            break;
          }
          case SampleMode::Cubic: {
            const double f = std::floor(v);
            const int64_t i0 = static_cast<int64_t>(f);
            for (int k = 0; k < 4; ++k) {
              tap_idx[d][static_cast<size_t>(k)] = s.index(d, i0 - 1 + k);
              tap_w[d][static_cast<size_t>(k)] = cubic_weight(v - f + 1 - k);
            }
            break;
          }
        }
      }
      for (int64_t ch = 0; ch < c; ++ch) {
        const double* plane = xv.data() + (b * c + ch) * in_size;
        double acc = 0;
        std::fill(t.begin(), t.end(), 0);
        while (true) {
          double w = 1;
          int64_t off = 0;
          bool zero = false;
          for (size_t d = 0; d < r; ++d) {
            const int64_t i = tap_idx[d][static_cast<size_t>(t[d])];
            if (i < 0) zero = true;
            off = off * s.dims[d] + i;
            w *= tap_w[d][static_cast<size_t>(t[d])];
          }
          if (!zero) acc += w * plane[off];
          size_t d = r;
          while (d > 0 && ++t[d - 1] == taps_per_dim) t[--d] = 0;
          if (d == 0) break;
        }
        y[static_cast<size_t>((b * c + ch) * out_size + p)] = acc;
      }
    }
  ctx.set_output(0, convutil::from_f64(x.dtype(), out_shape, y));
}

// GridSample-16 named the modes bilinear/bicubic.
void grid_sample_upgrade(Node& node, int64_t opset) {
  if (opset >= 20) return;
  const std::string m = node.attr_string("mode", "bilinear");
  node.attrs["mode"] = Attribute::of_string(m == "bilinear" ? "linear" : m == "bicubic" ? "cubic" : m);
}

// ---- AffineGrid -------------------------------------------------------------------

void affine_grid_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_dtype(ctx.node, 0, dt, is_grid_float, "a float type");
  check_dtype(ctx.node, 1, ctx.input_dtype(1), [](DType d) { return d == DType::I64; }, "int64");
  auto size = ctx.input_dims_value(1);
  if (!size) return ctx.set_output_unknown_shape(0, dt);
  TS_CHECK(size->size() == 4 || size->size() == 5, ctx.node.describe(), ": size must have 4 or 5 values");
  Shape out{(*size)[0]};
  out.insert(out.end(), size->begin() + 2, size->end());
  out.push_back(static_cast<int64_t>(size->size() - 2));
  ctx.set_output(0, dt, out);
}

void affine_grid_kernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Tensor& theta = ctx.input(0);
  const Tensor& size = ctx.input(1);
  check_dtype(node, 0, theta.dtype(), is_grid_float, "a float type");
  check_dtype(node, 1, size.dtype(), [](DType d) { return d == DType::I64; }, "int64");
  TS_CHECK(size.rank() == 1 && (size.numel() == 4 || size.numel() == 5), node.describe(),
           ": size must be [N, C, H, W] or [N, C, D, H, W]");
  const int64_t r = size.numel() - 2;
  const int64_t n = size.get_i64(0);
  TS_CHECK(theta.rank() == 3 && theta.dim(0) == n && theta.dim(1) == r && theta.dim(2) == r + 1, node.describe(),
           ": theta must have shape [", n, ", ", r, ", ", r + 1, "], got ", dims_str(theta.shape()));
  const bool align = node.attr_int("align_corners", 0) != 0;
  std::vector<int64_t> sp;
  for (int64_t i = 2; i < size.numel(); ++i) {
    TS_CHECK(size.get_i64(i) >= 0, node.describe(), ": size values must be >= 0");
    sp.push_back(size.get_i64(i));
  }
  // Base coordinate along an axis of length len, in [-1, 1].
  auto base = [&](int64_t i, int64_t len) {
    if (align) return len == 1 ? -1.0 : -1.0 + 2.0 * static_cast<double>(i) / static_cast<double>(len - 1);
    return (2.0 * static_cast<double>(i) + 1) / static_cast<double>(len) - 1;
  };
  const int64_t points = convutil::prod(sp);
  convutil::check_elements(node, checked_mul(checked_mul(n, points), r));
  std::vector<int64_t> out_shape{n};
  out_shape.insert(out_shape.end(), sp.begin(), sp.end());
  out_shape.push_back(r);
  const std::vector<double> th = convutil::to_f64(theta);
  std::vector<double> y(static_cast<size_t>(checked_mul(checked_mul(n, points), r)));
  std::vector<int64_t> o(static_cast<size_t>(r), 0);
  for (int64_t b = 0; b < n; ++b) {
    std::fill(o.begin(), o.end(), 0);
    for (int64_t p = 0; p < points; ++p) {
      // Homogeneous position (x, y[, z], 1) with x the innermost axis.
      std::vector<double> h(static_cast<size_t>(r + 1), 1.0);
      for (int64_t d = 0; d < r; ++d) h[static_cast<size_t>(d)] = base(o[static_cast<size_t>(r - 1 - d)], sp[static_cast<size_t>(r - 1 - d)]);
      for (int64_t row = 0; row < r; ++row) {
        double acc = 0;
        for (int64_t k = 0; k <= r; ++k) acc += th[static_cast<size_t>((b * r + row) * (r + 1) + k)] * h[static_cast<size_t>(k)];
        y[static_cast<size_t>((b * points + p) * r + row)] = acc;
      }
      for (int64_t d = r - 1; d >= 0; --d) {
        if (++o[static_cast<size_t>(d)] < sp[static_cast<size_t>(d)]) break;
        o[static_cast<size_t>(d)] = 0;
      }
    }
  }
  ctx.set_output(0, convutil::from_f64(theta.dtype(), out_shape, y));
}

}  // namespace

void register_image_grid_ops(OpRegistry& r) {
  r.add({"GridSample", "", 2, 2, 1, 1, grid_sample_infer, grid_sample_kernel, grid_sample_upgrade, 16});
  r.add({"AffineGrid", "", 2, 2, 1, 1, affine_grid_infer, affine_grid_kernel, nullptr, 20});
}

}  // namespace tessel
