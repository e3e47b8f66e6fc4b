// Object-detection post-processing: NonMaxSuppression (greedy, per batch and
// class, highest score first; ties keep the lower box index).
#include <algorithm>
#include <cmath>

#include "tessel/ops/movement/movement_common.h"
#include "tessel/ops/registry.h"

namespace tessel {

namespace {

struct Box {
  double x_min, y_min, x_max, y_max;
};

// Corner form of box i (either corner order, or center + size).
Box box_at(const std::vector<double>& b, int64_t i, bool center) {
  const double* p = b.data() + i * 4;
  if (center) {
    const double hw = p[2] / 2, hh = p[3] / 2;
    return {p[0] - hw, p[1] - hh, p[0] + hw, p[1] + hh};
  }
  return {std::min(p[1], p[3]), std::min(p[0], p[2]), std::max(p[1], p[3]), std::max(p[0], p[2])};
}

// True when IoU(a, b) is strictly greater than the threshold.
bool suppresses(const Box& a, const Box& b, double threshold) {
  const double ix0 = std::max(a.x_min, b.x_min), ix1 = std::min(a.x_max, b.x_max);
  if (ix1 <= ix0) return false;
  const double iy0 = std::max(a.y_min, b.y_min), iy1 = std::min(a.y_max, b.y_max);
  if (iy1 <= iy0) return false;
  const double inter = (ix1 - ix0) * (iy1 - iy0);
  const double area_a = (a.x_max - a.x_min) * (a.y_max - a.y_min);
  const double area_b = (b.x_max - b.x_min) * (b.y_max - b.y_min);
  const double uni = area_a + area_b - inter;
  if (inter <= 0 || area_a <= 0 || area_b <= 0 || uni <= 0) return false;
  return inter / uni > threshold;
}

bool is_f32(DType d) { return d == DType::F32; }

void nms_infer(InferContext& ctx) {
  check_dtype(ctx.node, 0, ctx.input_dtype(0), is_f32, "float");
  check_dtype(ctx.node, 1, ctx.input_dtype(1), is_f32, "float");
  if (ctx.has_input(2)) check_dtype(ctx.node, 2, ctx.input_dtype(2), [](DType d) { return d == DType::I64; }, "int64");
  for (size_t i : {3, 4})
    if (ctx.has_input(i)) check_dtype(ctx.node, i, ctx.input_dtype(i), is_f32, "float");
  // The number of selected boxes depends on the data.
  ctx.set_output(0, DType::I64, {movement::fresh_dim(ctx, 0, 0), 3});
}

// A scalar input (rank 0 or one element), or `def` when omitted or empty.
double scalar_or(const KernelContext& ctx, size_t i, double def, const char* what) {
  if (!ctx.has_input(i)) return def;
  const Tensor& t = ctx.input(i);
  if (t.numel() == 0) return def;
  TS_CHECK(t.numel() == 1, ctx.node.describe(), ": ", what, " must be a scalar, got shape ", dims_str(t.shape()));
  return t.get_f64(0);
}

void nms_kernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Tensor& boxes = ctx.input(0);
  const Tensor& scores = ctx.input(1);
  check_dtype(node, 0, boxes.dtype(), is_f32, "float");
  check_dtype(node, 1, scores.dtype(), is_f32, "float");
  TS_CHECK(boxes.rank() == 3 && boxes.dim(2) == 4, node.describe(), ": boxes must have shape [batches, boxes, 4], got ",
           dims_str(boxes.shape()));
  TS_CHECK(scores.rank() == 3 && scores.dim(0) == boxes.dim(0) && scores.dim(2) == boxes.dim(1), node.describe(),
           ": scores must have shape [", boxes.dim(0), ", classes, ", boxes.dim(1), "], got ", dims_str(scores.shape()));
  const int64_t cpb = node.attr_int("center_point_box", 0);
  TS_CHECK(cpb == 0 || cpb == 1, node.describe(), ": center_point_box must be 0 or 1");
  int64_t max_out = 0;
  if (ctx.has_input(2)) {
    const Tensor& m = ctx.input(2);
    TS_CHECK(m.dtype() == DType::I64 && m.numel() <= 1, node.describe(), ": max_output_boxes_per_class must be an int64 scalar");
    if (m.numel() == 1) max_out = m.get_i64(0);
  }
  const double iou = scalar_or(ctx, 3, 0.0, "iou_threshold");
  const bool has_score_th = ctx.has_input(4) && ctx.input(4).numel() > 0;
  const double score_th = scalar_or(ctx, 4, 0.0, "score_threshold");
  const int64_t nb = boxes.dim(0), nbox = boxes.dim(1), nc = scores.dim(1);
  std::vector<double> bv(static_cast<size_t>(boxes.numel())), sv(static_cast<size_t>(scores.numel()));
  for (int64_t i = 0; i < boxes.numel(); ++i) bv[static_cast<size_t>(i)] = boxes.get_f64(i);
  for (int64_t i = 0; i < scores.numel(); ++i) sv[static_cast<size_t>(i)] = scores.get_f64(i);
  std::vector<int64_t> out;
  for (int64_t b = 0; b < nb && max_out > 0; ++b) {
    const std::vector<double> batch(bv.begin() + b * nbox * 4, bv.begin() + (b + 1) * nbox * 4);
    for (int64_t c = 0; c < nc; ++c) {
      const double* s = sv.data() + (b * nc + c) * nbox;
      std::vector<int64_t> cand;
      for (int64_t i = 0; i < nbox; ++i)
        if (!std::isnan(s[i]) && (!has_score_th || s[i] > score_th)) cand.push_back(i);  // NaN never ranks
      // Highest score first; equal scores keep the lower index first.
      std::stable_sort(cand.begin(), cand.end(), [&](int64_t a, int64_t z) { return s[a] > s[z]; });
      std::vector<Box> kept;
      for (int64_t i : cand) {
        if (static_cast<int64_t>(kept.size()) >= max_out) break;
        const Box bx = box_at(batch, i, cpb == 1);
        bool ok = true;
        for (const Box& k : kept)
          if (suppresses(bx, k, iou)) {
            ok = false;
            break;
          }
        if (!ok) continue;
        kept.push_back(bx);
        out.insert(out.end(), {b, c, i});
      }
    }
  }
  Tensor t(DType::I64, {static_cast<int64_t>(out.size() / 3), 3});
  if (!out.empty()) std::copy(out.begin(), out.end(), t.mutable_data<int64_t>());
  ctx.set_output(0, std::move(t));
}

}  // namespace

void register_detection_ops(OpRegistry& r) {
  r.add({"NonMaxSuppression", "", 2, 5, 1, 1, nms_infer, nms_kernel, nullptr, 10});
}

}  // namespace tessel
