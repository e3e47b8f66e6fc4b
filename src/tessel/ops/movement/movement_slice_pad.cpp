// Layout operators that keep a window of the input and fill the rest: Slice
// (strided window), Pad (the input inside constant, reflected, edge or
// wrapped padding), CenterCropPad (a centred crop or pad) and Trilu (a
// triangle of each matrix, zeros elsewhere).
#include <algorithm>

#include "tessel/ops/movement/movement_common.h"
#include "tessel/ops/movement/movement_layout.h"
#include "tessel/support/error.h"

namespace tessel::movement {
namespace {

// ---- Slice -----------------------------------------------------------------------------

// Starts/ends beyond this magnitude mean "to the end" (exporters use
// INT64_MAX, INT32_MAX and INT64_MIN).
constexpr int64_t kHuge = int64_t{1} << 62;

struct SliceAxis {
  int64_t start = 0, count = 0, step = 1;
};

// Clamped start and element count of one sliced axis, as in the ONNX spec.
SliceAxis slice_axis(int64_t dim, int64_t start, int64_t end, int64_t step, const Node& n) {
  TS_CHECK(step != 0, n.describe(), ": step must not be zero");
  // Adding dim to a negative value cannot overflow (dim >= 0).
  if (start < 0) start += dim;
  if (end < 0) end += dim;
  SliceAxis a;
  a.step = step;
  if (step > 0) {
    start = std::clamp<int64_t>(start, 0, dim);
    end = std::clamp<int64_t>(end, 0, dim);
    a.count = end > start ? (end - start + step - 1) / step : 0;
  } else {
    start = std::clamp<int64_t>(start, 0, dim - 1);
    end = std::clamp<int64_t>(end, -1, dim - 1);
    a.count = start > end ? (start - end + (-step) - 1) / (-step) : 0;
  }
  a.start = a.count > 0 ? start : 0;
  return a;
}

// Symbolic counterpart for one axis; nullopt when the sign of a symbolic
// start/end is unknown.
std::optional<Dim> slice_count_sym(const Dim& dim, const Dim& start, const Dim& end, int64_t step) {
  auto norm = [&](const Dim& v, bool is_end) -> std::optional<Dim> {
    // Position after adding dim to negatives, clamped to [lo, hi].
    const Dim lo = step > 0 ? Dim(0) : (is_end ? Dim(-1) : Dim(0));
    const Dim hi = step > 0 ? dim : dim - 1;
    if (v.is_const() && v.value() >= kHuge) return hi;
    if (v.is_const() && v.value() <= -kHuge) return lo;
    if (known_nonneg(v)) return Dim::min(v, hi);
    if (known_negative(v)) return Dim::max(dim + v, lo);
    return std::nullopt;
  };
  auto s = norm(start, false), e = norm(end, true);
  if (!s || !e) return std::nullopt;
  // From the start, the clamped end is never before it.
  if (step > 0 && *s == Dim(0)) return Dim::ceildiv(*e, step);
  const Dim span = step > 0 ? *e - *s : *s - *e;
  return Dim::max(Dim::ceildiv(span, step > 0 ? step : -step), 0);
}

struct SliceParams {
  std::vector<int64_t> axes, steps;
};

// Axes and steps of a Slice node (defaults: all axes in order, step 1).
SliceParams slice_params(const Node& n, size_t count, int64_t rank, const std::optional<std::vector<int64_t>>& axes,
                         const std::optional<std::vector<int64_t>>& steps) {
  SliceParams p;
  if (axes) {
    TS_CHECK(axes->size() == count, n.describe(), ": axes has ", axes->size(), " entries, starts has ", count);
    p.axes = normalize_axes(*axes, rank, n);
  } else {
    TS_CHECK(static_cast<int64_t>(count) <= rank, n.describe(), ": starts has ", count, " entries for rank ", rank);
    for (size_t i = 0; i < count; ++i) p.axes.push_back(static_cast<int64_t>(i));
  }
  if (steps) {
    TS_CHECK(steps->size() == count, n.describe(), ": steps has ", steps->size(), " entries, starts has ", count);
    p.steps = *steps;
  } else {
    p.steps.assign(count, 1);
  }
  for (int64_t s : p.steps) TS_CHECK(s != 0, n.describe(), ": step must not be zero");
  return p;
}

void slice_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  for (size_t i = 1; i < 5; ++i) check_index_input(ctx, i, false);
  if (!ctx.has_shape(0)) {
    ctx.set_output_unknown_shape(0, dt);
    return;
  }
  const Shape& s = ctx.input_shape(0);
  const int64_t rank = static_cast<int64_t>(s.size());
  auto starts = ctx.input_dims_value(1), ends = ctx.input_dims_value(2);
  std::optional<std::vector<int64_t>> axes, steps;
  const bool axes_known = !ctx.has_input(3) || (axes = const_ints(ctx, 3)).has_value();
  const bool steps_known = !ctx.has_input(4) || (steps = const_ints(ctx, 4)).has_value();
  if (!starts || !ends || !axes_known || !steps_known) {
    // Without known axes any dim may change; otherwise only the sliced ones.
    Shape out = s;
    if (!axes_known || (ctx.has_input(3) && !axes)) {
      out = fresh_shape(ctx, 0, s.size());
    } else {
      std::vector<int64_t> ax;
      if (axes) {
        ax = normalize_axes(*axes, rank, ctx.node);
      } else if (auto len = known_length(ctx, 1)) {
        for (int64_t i = 0; i < *len && i < rank; ++i) ax.push_back(i);
      } else {
        for (int64_t i = 0; i < rank; ++i) ax.push_back(i);
      }
      for (int64_t a : ax) out[static_cast<size_t>(a)] = fresh_dim(ctx, 0, static_cast<size_t>(a));
    }
    ctx.set_output(0, dt, std::move(out));
    return;
  }
  TS_CHECK(starts->size() == ends->size(), ctx.node.describe(), ": starts has ", starts->size(), " entries, ends has ",
           ends->size());
  const SliceParams p = slice_params(ctx.node, starts->size(), rank, axes, steps);
  Shape out = s;
  for (size_t i = 0; i < p.axes.size(); ++i) {
    const size_t a = static_cast<size_t>(p.axes[i]);
    auto c = slice_count_sym(s[a], (*starts)[i], (*ends)[i], p.steps[i]);
    out[a] = c ? *c : fresh_dim(ctx, 0, a);
  }
  // Slicing a small symbolic vector (e.g. Shape(x)[2:]).
  const auto val = ctx.input_dims_value(0);
  if (val && rank == 1 && s[0].is_const() && static_cast<int64_t>(val->size()) == s[0].value() && !p.axes.empty() &&
      (*starts)[0].is_const() && (*ends)[0].is_const()) {
    const SliceAxis a = slice_axis(s[0].value(), (*starts)[0].value(), (*ends)[0].value(), p.steps[0], ctx.node);
    SymValue v;
    for (int64_t k = 0; k < a.count; ++k) v.push_back((*val)[static_cast<size_t>(a.start + k * a.step)]);
    ctx.set_output_sym(0, std::move(v));
  }
  ctx.set_output(0, dt, std::move(out));
}

void slice_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  const auto starts = index_values(ctx.input(1), ctx.node, "starts");
  const auto ends = index_values(ctx.input(2), ctx.node, "ends");
  TS_CHECK(starts.size() == ends.size(), ctx.node.describe(), ": starts has ", starts.size(), " entries, ends has ",
           ends.size());
  std::optional<std::vector<int64_t>> axes, steps;
  if (ctx.has_input(3)) axes = index_values(ctx.input(3), ctx.node, "axes");
  if (ctx.has_input(4)) steps = index_values(ctx.input(4), ctx.node, "steps");
  const SliceParams p = slice_params(ctx.node, starts.size(), rank, axes, steps);
  std::vector<SliceAxis> per_axis(static_cast<size_t>(rank));
  for (int64_t d = 0; d < rank; ++d) per_axis[static_cast<size_t>(d)].count = x.dim(static_cast<int>(d));
  for (size_t i = 0; i < p.axes.size(); ++i) {
    const size_t a = static_cast<size_t>(p.axes[i]);
    per_axis[a] = slice_axis(x.dim(static_cast<int>(a)), starts[i], ends[i], p.steps[i], ctx.node);
  }
  const auto strides = strides_of(x.shape());
  std::vector<int64_t> out_dims;
  AxisTables tab;
  for (size_t d = 0; d < per_axis.size(); ++d) {
    const SliceAxis& a = per_axis[d];
    out_dims.push_back(a.count);
    std::vector<int64_t> t(static_cast<size_t>(a.count));
    for (int64_t o = 0; o < a.count; ++o) t[static_cast<size_t>(o)] = (a.start + o * a.step) * strides[d];
    tab.push_back(std::move(t));
  }
  Tensor out(x.dtype(), out_dims);
  copy_box(x, tab, out, {}, out_dims);
  ctx.set_output(0, std::move(out));
}

// Opset < 10 took starts/ends/axes as attributes.
void slice_upgrade(Node& n, int64_t opset) {
  if (opset >= 10) return;
  attr_to_input(n, "starts", 1);
  attr_to_input(n, "ends", 2);
  attr_to_input(n, "axes", 3);
}

// ---- Pad -------------------------------------------------------------------------------

enum class PadMode { Constant, Reflect, Edge, Wrap };

PadMode pad_mode(const Node& n) {
  const std::string m = n.attr_string("mode", "constant");
  if (m == "constant") return PadMode::Constant;
  if (m == "reflect") return PadMode::Reflect;
  if (m == "edge") return PadMode::Edge;
  if (m == "wrap") return PadMode::Wrap;
  fail(n.describe(), ": unknown mode '", m, "'");
}

// Per-axis (begin, end) pads over all axes from the pads input and axes.
template <class D>
std::vector<std::pair<D, D>> full_pads(const std::vector<D>& pads, const std::vector<int64_t>& axes, int64_t rank,
                                       const Node& n) {
  TS_CHECK(pads.size() == 2 * axes.size(), n.describe(), ": pads has ", pads.size(), " entries for ", axes.size(),
           " axes");
  std::vector<std::pair<D, D>> out(static_cast<size_t>(rank), {D(0), D(0)});
  for (size_t i = 0; i < axes.size(); ++i)
    out[static_cast<size_t>(axes[i])] = {pads[i], pads[i + axes.size()]};
  return out;
}

std::vector<int64_t> all_axes(int64_t rank) {
  std::vector<int64_t> a;
  for (int64_t i = 0; i < rank; ++i) a.push_back(i);
  return a;
}

void pad_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_index_input(ctx, 1, true);
  check_index_input(ctx, 3, false);
  pad_mode(ctx.node);
  if (ctx.has_input(2) && ctx.input_dtype(2) != DType::Undefined && dt != DType::Undefined)
    TS_CHECK(ctx.input_dtype(2) == dt, ctx.node.describe(), ": constant_value has dtype ",
             dtype_name(ctx.input_dtype(2)), ", data has ", dtype_name(dt));
  if (!ctx.has_shape(0)) {
    ctx.set_output_unknown_shape(0, dt);
    return;
  }
  const Shape& s = ctx.input_shape(0);
  const int64_t rank = static_cast<int64_t>(s.size());
  std::optional<std::vector<int64_t>> axes;
  if (ctx.has_input(3)) {
    axes = const_ints(ctx, 3);
    if (!axes) {
      ctx.set_output(0, dt, fresh_shape(ctx, 0, s.size()));
      return;
    }
    *axes = normalize_axes(*axes, rank, ctx.node);
  } else {
    axes = all_axes(rank);
  }
  const auto pads = ctx.input_dims_value(1);
  if (!pads) {
    Shape out = s;
    for (int64_t a : *axes) out[static_cast<size_t>(a)] = fresh_dim(ctx, 0, static_cast<size_t>(a));
    ctx.set_output(0, dt, std::move(out));
    return;
  }
  const auto fp = full_pads(*pads, *axes, rank, ctx.node);
  Shape out;
  for (size_t d = 0; d < s.size(); ++d) {
    out.push_back(s[d] + fp[d].first + fp[d].second);
    TS_CHECK(!out.back().is_const() || out.back().value() >= 0, ctx.node.describe(), ": pads make axis ", d,
             " negative");
  }
  ctx.set_output(0, dt, std::move(out));
}

// Source coordinate of output coordinate `o` along an axis of size n with
// `begin` padding, or -1 for a constant-padded position.
int64_t pad_source(PadMode mode, int64_t o, int64_t begin, int64_t n) {
  const int64_t i = o - begin;
  if (i >= 0 && i < n) return i;
  switch (mode) {
    case PadMode::Constant: return -1;
    case PadMode::Edge: return i < 0 ? 0 : n - 1;
    case PadMode::Wrap: return ((i % n) + n) % n;
    case PadMode::Reflect: {
      if (n == 1) return 0;
      const int64_t period = 2 * (n - 1);
      int64_t r = ((i % period) + period) % period;
      return r < n ? r : period - r;
    }
  }
  return -1;
}

void pad_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  const PadMode mode = pad_mode(ctx.node);
  const Tensor& pt = ctx.input(1);
  TS_CHECK(pt.rank() == 1, ctx.node.describe(), ": pads must be 1-D, got ", dims_str(pt.shape()));
  const auto pads = int_values(pt, ctx.node, "pads");
  const auto axes = ctx.has_input(3)
                        ? normalize_axes(index_values(ctx.input(3), ctx.node, "axes"), rank, ctx.node)
                        : all_axes(rank);
  const auto fp = full_pads(pads, axes, rank, ctx.node);
  std::vector<int64_t> out_dims;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t n = x.dim(static_cast<int>(d));
    const int64_t o = checked_add(checked_add(n, fp[static_cast<size_t>(d)].first), fp[static_cast<size_t>(d)].second);
    TS_CHECK(o >= 0, ctx.node.describe(), ": pads make axis ", d, " of size ", n, " negative");
    TS_CHECK(mode == PadMode::Constant || n > 0 || o == 0, ctx.node.describe(),
             ": cannot pad an empty axis in this mode");
    out_dims.push_back(o);
  }
  Tensor out(x.dtype(), out_dims);
  if (mode == PadMode::Constant && ctx.has_input(2)) {
    fill_with(out, convert_scalar(ctx.input(2), x.dtype(), ctx.node, "constant_value"), 0);
  }
  // Source and destination tables over the box of output positions that read
  // the input (all of them, except constant padding).
  const auto in_strides = strides_of(x.shape()), out_strides = strides_of(out_dims);
  AxisTables src(static_cast<size_t>(rank)), dst(static_cast<size_t>(rank));
  std::vector<int64_t> box;
  for (int64_t d = 0; d < rank; ++d) {
    const size_t ud = static_cast<size_t>(d);
    for (int64_t o = 0; o < out_dims[ud]; ++o) {
      const int64_t i = pad_source(mode, o, fp[ud].first, x.dim(static_cast<int>(d)));
      if (i < 0) continue;
      src[ud].push_back(i * in_strides[ud]);
      dst[ud].push_back(o * out_strides[ud]);
    }
    box.push_back(static_cast<int64_t>(src[ud].size()));
  }
  copy_box(x, src, out, dst, box);
  ctx.set_output(0, std::move(out));
}

// Opsets < 11 took pads (opset 1: paddings) and the value as attributes.
void pad_upgrade(Node& n, int64_t opset) {
  if (opset >= 11) return;
  if (n.has_attr("paddings")) {
    n.attrs["pads"] = n.attrs["paddings"];
    n.attrs.erase("paddings");
  }
  attr_to_input(n, "pads", 1);
  if (n.has_attr("value")) {
    const float v = n.attr_float("value", 0);
    n.attrs.erase("value");
    // constant_value must have the data's dtype; it is known for graph inputs
    // and initializers (otherwise the kernel converts the float).
    const DType dt = n.has_input(0) ? n.inputs[0]->type.dtype : DType::Undefined;
    Tensor c = Tensor::scalar_f32(v);
    if (dt != DType::Undefined && dt != DType::String) c = c.cast(dt);
    if (v != 0) bind_const_input(n, 2, c, "value");
  }
}

// ---- CenterCropPad ------------------------------------------------------------------------

std::vector<int64_t> crop_axes(const Node& n, int64_t rank) {
  return n.has_attr("axes") ? normalize_axes(n.attr_ints("axes"), rank, n) : all_axes(rank);
}

void center_crop_pad_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_index_input(ctx, 1, false);
  if (!ctx.has_shape(0)) {
    ctx.set_output_unknown_shape(0, dt);
    return;
  }
  const Shape& s = ctx.input_shape(0);
  const auto axes = crop_axes(ctx.node, static_cast<int64_t>(s.size()));
  const auto target = ctx.input_dims_value(1);
  Shape out = s;
  if (target) TS_CHECK(target->size() == axes.size(), ctx.node.describe(), ": shape has ", target->size(),
                       " entries for ", axes.size(), " axes");
  for (size_t i = 0; i < axes.size(); ++i)
    out[static_cast<size_t>(axes[i])] = target ? (*target)[i] : fresh_dim(ctx, 0, static_cast<size_t>(axes[i]));
  ctx.set_output(0, dt, std::move(out));
}

void center_crop_pad_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(x.rank());
  const auto axes = crop_axes(ctx.node, rank);
  const auto target = index_values(ctx.input(1), ctx.node, "shape");
  TS_CHECK(target.size() == axes.size(), ctx.node.describe(), ": shape has ", target.size(), " entries for ",
           axes.size(), " axes");
  std::vector<int64_t> out_dims = x.shape(), src_start(x.rank(), 0), dst_start(x.rank(), 0), box = x.shape();
  for (size_t i = 0; i < axes.size(); ++i) {
    const size_t a = static_cast<size_t>(axes[i]);
    const int64_t n = x.shape()[a], t = target[i];
    TS_CHECK(t >= 0, ctx.node.describe(), ": negative target size ", t);
    out_dims[a] = t;
    // Crop takes the centre (extra element dropped at the end); pad centres
    // the input (extra padding at the end).
    if (t <= n) {
      src_start[a] = (n - t) / 2;
      box[a] = t;
    } else {
      dst_start[a] = (t - n) / 2;
    }
  }
  Tensor out(x.dtype(), out_dims);
  copy_box(x, box_tables(x.shape(), src_start, box), out, box_tables(out_dims, dst_start, box), box);
  ctx.set_output(0, std::move(out));
}

// ---- Trilu -------------------------------------------------------------------------------

void trilu_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_index_input(ctx, 1, true);
  if (!ctx.has_shape(0)) {
    ctx.set_output_unknown_shape(0, dt);
    return;
  }
  TS_CHECK(ctx.input_shape(0).size() >= 2, ctx.node.describe(), ": input must have rank >= 2, got ",
           shape_str(ctx.input_shape(0)));
  ctx.set_output(0, dt, ctx.input_shape(0));
}

void trilu_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  TS_CHECK(x.rank() >= 2, ctx.node.describe(), ": input must have rank >= 2, got ", dims_str(x.shape()));
  const int64_t k = ctx.has_input(1) ? int_scalar(ctx.input(1), ctx.node, "k") : 0;
  const bool upper = ctx.node.attr_int("upper", 1) != 0;
  const int64_t rows = x.dim(static_cast<int>(x.rank() - 2)), cols = x.dim(static_cast<int>(x.rank() - 1));
  const int64_t mats = rows * cols == 0 ? 0 : x.numel() / (rows * cols);
  Tensor out(x.dtype(), x.shape());
  for (int64_t m = 0; m < mats; ++m) {
    for (int64_t i = 0; i < rows; ++i) {
      // Kept columns: j >= i + k (upper) or j <= i + k (lower), clamped.
      const __int128 edge = static_cast<__int128>(i) + k;
      int64_t lo = 0, hi = cols;
      if (upper) {
        lo = static_cast<int64_t>(std::clamp<__int128>(edge, 0, cols));
      } else {
        hi = static_cast<int64_t>(std::clamp<__int128>(edge + 1, 0, cols));
      }
      const int64_t base = (m * rows + i) * cols;
      if (hi > lo) copy_elems(x, base + lo, out, base + lo, hi - lo);
    }
  }
  ctx.set_output(0, std::move(out));
}

}  // namespace

void register_slice_pad_ops(OpRegistry& r) {
  add_op(r, {.name = "Slice", .min_inputs = 1, .max_inputs = 5, .infer = slice_infer, .kernel = slice_kernel,
             .upgrade = slice_upgrade});
  add_op(r, {.name = "Pad", .min_inputs = 1, .max_inputs = 4, .infer = pad_infer, .kernel = pad_kernel,
             .upgrade = pad_upgrade});
  add_op(r, {.name = "CenterCropPad", .min_inputs = 2, .max_inputs = 2, .infer = center_crop_pad_infer,
             .kernel = center_crop_pad_kernel, .since_version = 18});
  add_op(r, {.name = "Trilu", .min_inputs = 1, .max_inputs = 2, .infer = trilu_infer, .kernel = trilu_kernel,
             .since_version = 14});
}

}  // namespace tessel::movement
