// Region-of-interest pooling: MaxRoiPool (Fast R-CNN, integer bins) and
// RoiAlign (Mask R-CNN, bilinear samples averaged or maxed per bin).
#include <algorithm>
#include <cmath>
#include <limits>

#include "tessel/ops/conv/conv_util.h"
#include "tessel/ops/registry.h"

namespace tessel {

namespace {

const char* kFloatTypes = "a float type (f16, bf16, f32, f64)";

// Shared checks: X is [N, C, H, W] and rois is [R, cols].
void check_roi_inputs(const Node& node, const Tensor& x, const Tensor& rois, int64_t cols) {
  check_dtype(node, 0, x.dtype(), convutil::is_conv_float, kFloatTypes);
  TS_CHECK(rois.dtype() == x.dtype(), node.describe(), ": rois dtype differs from input dtype");
  TS_CHECK(x.rank() == 4, node.describe(), ": input must have rank 4, got ", x.rank());
  TS_CHECK(rois.rank() == 2 && rois.dim(1) == cols, node.describe(), ": rois must have shape [num_rois, ", cols,
           "], got ", dims_str(rois.shape()));
}

// ---- MaxRoiPool -----------------------------------------------------------------

std::vector<int64_t> pooled_shape(const Node& node) {
  TS_CHECK(node.has_attr("pooled_shape"), node.describe(), ": attribute pooled_shape is required");
  std::vector<int64_t> ps = node.attr_ints("pooled_shape");
  TS_CHECK(ps.size() == 2 && ps[0] >= 1 && ps[1] >= 1, node.describe(), ": pooled_shape must be two positive values");
  return ps;
}

void max_roi_pool_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_dtype(ctx.node, 0, dt, convutil::is_conv_float, kFloatTypes);
  const std::vector<int64_t> ps = pooled_shape(ctx.node);
  if (!ctx.has_shape(0) || !ctx.has_shape(1)) return ctx.set_output_unknown_shape(0, dt);
  const Shape& xs = ctx.input_shape(0);
  const Shape& rs = ctx.input_shape(1);
  TS_CHECK(xs.size() == 4, ctx.node.describe(), ": input must have rank 4, got ", xs.size());
  TS_CHECK(rs.size() == 2, ctx.node.describe(), ": rois must have rank 2, got ", rs.size());
  ctx.set_output(0, dt, {rs[0], xs[1], ps[0], ps[1]});
}

void max_roi_pool_kernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  check_roi_inputs(node, x, rois, 5);
  const std::vector<int64_t> ps = pooled_shape(node);
  const double scale = node.attr_float("spatial_scale", 1.0f);
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3), r = rois.dim(0);
  const std::vector<double> xv = convutil::to_f64(x);
  const std::vector<double> rv = convutil::to_f64(rois);
  std::vector<double> y(static_cast<size_t>(convutil::check_elements(node, checked_mul(checked_mul(r, c), checked_mul(ps[0], ps[1])))));
  for (int64_t ri = 0; ri < r; ++ri) {
    const double* roi = rv.data() + ri * 5;
    TS_CHECK(std::isfinite(roi[0]) && roi[0] >= 0 && roi[0] < static_cast<double>(n), node.describe(),
             ": roi ", ri, " has batch index ", roi[0], " outside [0, ", n, ")");
    const int64_t b = static_cast<int64_t>(roi[0]);
    // Fast R-CNN: corners rounded to the feature grid, inclusive end.
    auto grid = [&](double v) {
      const double s = std::round(v * scale);
      TS_CHECK(std::isfinite(s) && std::fabs(s) < 1e15, node.describe(), ": roi ", ri, " has a non-finite corner");
      return static_cast<int64_t>(s);
    };
    const int64_t x1 = grid(roi[1]), y1 = grid(roi[2]), x2 = grid(roi[3]), y2 = grid(roi[4]);
    const double bin_h = static_cast<double>(std::max<int64_t>(y2 - y1 + 1, 1)) / static_cast<double>(ps[0]);
    const double bin_w = static_cast<double>(std::max<int64_t>(x2 - x1 + 1, 1)) / static_cast<double>(ps[1]);
    for (int64_t ci = 0; ci < c; ++ci) {
      const double* plane = xv.data() + (b * c + ci) * h * w;
      for (int64_t ph = 0; ph < ps[0]; ++ph)
        for (int64_t pw = 0; pw < ps[1]; ++pw) {
          auto clampi = [](int64_t v, int64_t hi) { return std::min(std::max<int64_t>(v, 0), hi); };
          const int64_t hs = clampi(static_cast<int64_t>(std::floor(ph * bin_h)) + y1, h);
          const int64_t he = clampi(static_cast<int64_t>(std::ceil((ph + 1) * bin_h)) + y1, h);
          const int64_t ws = clampi(static_cast<int64_t>(std::floor(pw * bin_w)) + x1, w);
          const int64_t we = clampi(static_cast<int64_t>(std::ceil((pw + 1) * bin_w)) + x1, w);
          // An empty bin yields 0, as in Caffe and ONNX Runtime.
          double best = (hs >= he || ws >= we) ? 0.0 : -std::numeric_limits<double>::infinity();
          for (int64_t yy = hs; yy < he; ++yy)
            for (int64_t xx = ws; xx < we; ++xx) best = std::max(best, plane[yy * w + xx]);
          y[static_cast<size_t>(((ri * c + ci) * ps[0] + ph) * ps[1] + pw)] = best;
        }
    }
  }
  ctx.set_output(0, convutil::from_f64(x.dtype(), {r, c, ps[0], ps[1]}, y));
}

// ---- RoiAlign -------------------------------------------------------------------

void roi_align_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_dtype(ctx.node, 0, dt, convutil::is_conv_float, kFloatTypes);
  check_dtype(ctx.node, 2, ctx.input_dtype(2), [](DType d) { return d == DType::I64; }, "int64");
  const int64_t oh = ctx.node.attr_int("output_height", 1), ow = ctx.node.attr_int("output_width", 1);
  TS_CHECK(oh >= 1 && ow >= 1, ctx.node.describe(), ": output_height and output_width must be >= 1");
  if (!ctx.has_shape(0) || !ctx.has_shape(1)) return ctx.set_output_unknown_shape(0, dt);
  const Shape& xs = ctx.input_shape(0);
  const Shape& rs = ctx.input_shape(1);
  TS_CHECK(xs.size() == 4, ctx.node.describe(), ": input must have rank 4, got ", xs.size());
  TS_CHECK(rs.size() == 2, ctx.node.describe(), ": rois must have rank 2, got ", rs.size());
  ctx.set_output(0, dt, {rs[0], xs[1], oh, ow});
}

// One bilinear sample: four grid positions and their weights (all zero when
// the point lies more than one pixel outside the map).
struct Sample {
  int64_t pos[4] = {0, 0, 0, 0};
  double wt[4] = {0, 0, 0, 0};
};

Sample bilinear_sample(double y, double x, int64_t h, int64_t w) {
  Sample s;
  if (y < -1.0 || y > static_cast<double>(h) || x < -1.0 || x > static_cast<double>(w)) return s;
  y = std::max(y, 0.0);
  x = std::max(x, 0.0);
  int64_t y0 = static_cast<int64_t>(y), x0 = static_cast<int64_t>(x), y1, x1;
  if (y0 >= h - 1) {
    y0 = y1 = h - 1;
    y = static_cast<double>(y0);
  } else {
    y1 = y0 + 1;
  }
  if (x0 >= w - 1) {
    x0 = x1 = w - 1;
    x = static_cast<double>(x0);
  } else {
    x1 = x0 + 1;
  }
  const double ly = y - static_cast<double>(y0), lx = x - static_cast<double>(x0);
  const double hy = 1.0 - ly, hx = 1.0 - lx;
  s.pos[0] = y0 * w + x0;
  s.pos[1] = y0 * w + x1;
  s.pos[2] = y1 * w + x0;
  s.pos[3] = y1 * w + x1;
  s.wt[0] = hy * hx;
  s.wt[1] = hy * lx;
  s.wt[2] = ly * hx;
  s.wt[3] = ly * lx;
  return s;
}

void roi_align_kernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Tensor& x = ctx.input(0);
  const Tensor& rois = ctx.input(1);
  const Tensor& bi = ctx.input(2);
  check_roi_inputs(node, x, rois, 4);
  check_dtype(node, 2, bi.dtype(), [](DType d) { return d == DType::I64; }, "int64");
  TS_CHECK(bi.rank() == 1 && bi.dim(0) == rois.dim(0), node.describe(), ": batch_indices must have shape [",
           rois.dim(0), "]");
  const std::string mode = node.attr_string("mode", "avg");
  TS_CHECK(mode == "avg" || mode == "max", node.describe(), ": mode must be 'avg' or 'max', got '", mode, "'");
  const std::string ctm = node.attr_string("coordinate_transformation_mode", "half_pixel");
  TS_CHECK(ctm == "half_pixel" || ctm == "output_half_pixel", node.describe(),
           ": coordinate_transformation_mode must be 'half_pixel' or 'output_half_pixel', got '", ctm, "'");
  const bool half_pixel = ctm == "half_pixel";
  const int64_t oh = node.attr_int("output_height", 1), ow = node.attr_int("output_width", 1);
  TS_CHECK(oh >= 1 && ow >= 1, node.describe(), ": output_height and output_width must be >= 1");
  const int64_t ratio = node.attr_int("sampling_ratio", 0);
  TS_CHECK(ratio >= 0, node.describe(), ": sampling_ratio must be >= 0");
  const double scale = node.attr_float("spatial_scale", 1.0f);
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3), r = rois.dim(0);
  const std::vector<double> xv = convutil::to_f64(x);
  const std::vector<double> rv = convutil::to_f64(rois);
  std::vector<double> y(static_cast<size_t>(convutil::check_elements(node, checked_mul(checked_mul(r, c), checked_mul(oh, ow)))), 0.0);
  // An empty feature map has nothing to sample: every bin is 0.
  for (int64_t ri = 0; ri < r && h > 0 && w > 0; ++ri) {
    const int64_t b = bi.data<int64_t>()[ri];
    TS_CHECK(b >= 0 && b < n, node.describe(), ": batch index ", b, " of roi ", ri, " is outside [0, ", n, ")");
    const double off = half_pixel ? 0.5 : 0.0;
    const double* roi = rv.data() + ri * 4;
    const double x0 = roi[0] * scale - off, y0 = roi[1] * scale - off;
    double rw = roi[2] * scale - off - x0, rh = roi[3] * scale - off - y0;
    if (!half_pixel) {  // legacy mode forces malformed rois to 1x1
      rw = std::max(rw, 1.0);
      rh = std::max(rh, 1.0);
    }
    const double bin_h = rh / static_cast<double>(oh), bin_w = rw / static_cast<double>(ow);
    auto grid_count = [&](double extent, int64_t bins) -> int64_t {
      if (ratio > 0) return ratio;
      const double g = std::ceil(extent / static_cast<double>(bins));
      TS_CHECK(std::isfinite(g) && g < 1e6, node.describe(), ": roi ", ri, " is too large or not finite");
      return std::max<int64_t>(static_cast<int64_t>(g), 0);
    };
    const int64_t gh = grid_count(rh, oh), gw = grid_count(rw, ow);
    convutil::check_elements(node, checked_mul(checked_mul(oh, ow), checked_mul(gh, gw)));
    const double count = static_cast<double>(std::max<int64_t>(gh * gw, 1));
    // Samples are shared by all channels.
    std::vector<Sample> samples;
    samples.reserve(static_cast<size_t>(oh * ow * gh * gw));
    for (int64_t ph = 0; ph < oh; ++ph)
      for (int64_t pw = 0; pw < ow; ++pw)
        for (int64_t iy = 0; iy < gh; ++iy) {
          const double yy = y0 + ph * bin_h + (iy + 0.5) * bin_h / static_cast<double>(gh);
          for (int64_t ix = 0; ix < gw; ++ix) {
            const double xx = x0 + pw * bin_w + (ix + 0.5) * bin_w / static_cast<double>(gw);
            samples.push_back(bilinear_sample(yy, xx, h, w));
          }
        }
    for (int64_t ci = 0; ci < c; ++ci) {
      const double* plane = xv.data() + (b * c + ci) * h * w;
      const Sample* s = samples.data();
      for (int64_t p = 0; p < oh * ow; ++p) {
        double acc = 0;
        for (int64_t k = 0; k < gh * gw; ++k, ++s) {
          if (mode == "avg") {
            for (int q = 0; q < 4; ++q) acc += s->wt[q] * plane[s->pos[q]];
          } else {
            // The spec's max mode takes the largest weighted corner.
            double v = s->wt[0] * plane[s->pos[0]];
            for (int q = 1; q < 4; ++q) v = std::max(v, s->wt[q] * plane[s->pos[q]]);
            acc = k == 0 ? v : std::max(acc, v);
          }
        }
        y[static_cast<size_t>((ri * c + ci) * oh * ow + p)] = mode == "avg" ? acc / count : acc;
      }
    }
  }
  ctx.set_output(0, convutil::from_f64(x.dtype(), {r, c, oh, ow}, y));
}

// RoiAlign before opset 16 had no coordinate_transformation_mode and behaved
// as 'output_half_pixel'.
void roi_align_upgrade(Node& node, int64_t opset) {
  if (opset < 16 && !node.has_attr("coordinate_transformation_mode"))
    node.attrs["coordinate_transformation_mode"] = Attribute::of_string("output_half_pixel");
}

}  // namespace

void register_pool_roi_ops(OpRegistry& r) {
  r.add({"MaxRoiPool", "", 2, 2, 1, 1, max_roi_pool_infer, max_roi_pool_kernel, nullptr, 1});
  r.add({"RoiAlign", "", 3, 3, 1, 1, roi_align_infer, roi_align_kernel, roi_align_upgrade, 10});
}

}  // namespace tessel
