// Layout operators: Transpose, Concat, Split, Slice, Tile, Pad, DepthToSpace,
// SpaceToDepth, CenterCropPad, Trilu, ReverseSequence.
//
// Kernels that permute or sub-select elements express the mapping as per-axis
// offset tables and run the generic strided copy (copy_box), so one loop
// serves every dtype and every op.
#include <algorithm>
#include <limits>

#include "tessel/ops/movement/movement_common.h"
#include "tessel/support/error.h"

namespace tessel::movement {
namespace {

// ---- Transpose ---------------------------------------------------------------------

std::vector<int64_t> transpose_perm(const Node& n, size_t rank) {
  std::vector<int64_t> perm;
  if (n.has_attr("perm")) {
    perm = n.attr_ints("perm");
  } else {
    for (size_t i = rank; i-- > 0;) perm.push_back(static_cast<int64_t>(i));
  }
  TS_CHECK(perm.size() == rank, n.describe(), ": perm has ", perm.size(), " entries for an input of rank ", rank);
  std::vector<bool> seen(rank, false);
  for (int64_t& p : perm) {
    p = normalize_axis(p, static_cast<int64_t>(rank), n);
    TS_CHECK(!seen[static_cast<size_t>(p)], n.describe(), ": perm is not a permutation");
    seen[static_cast<size_t>(p)] = true;
  }
  return perm;
}

void transpose_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  if (!ctx.has_shape(0)) {
    if (ctx.node.has_attr("perm"))
      ctx.set_output(0, dt, fresh_shape(ctx, 0, ctx.node.attr_ints("perm").size()));
    else
      ctx.set_output_unknown_shape(0, dt);
    return;
  }
  const Shape& s = ctx.input_shape(0);
  const auto perm = transpose_perm(ctx.node, s.size());
  Shape out;
  for (int64_t p : perm) out.push_back(s[static_cast<size_t>(p)]);
  ctx.set_output(0, dt, std::move(out));
  if (const SymValue* v = ctx.input_sym(0); v && s.size() <= 1) ctx.set_output_sym(0, *v);
}

void transpose_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const auto perm = transpose_perm(ctx.node, x.rank());
  const auto strides = strides_of(x.shape());
  std::vector<int64_t> out_dims;
  AxisTables tab;
  for (int64_t p : perm) {
    const int64_t n = x.dim(static_cast<int>(p));
    out_dims.push_back(n);
    std::vector<int64_t> t(static_cast<size_t>(n));
    for (int64_t o = 0; o < n; ++o) t[static_cast<size_t>(o)] = o * strides[static_cast<size_t>(p)];
    tab.push_back(std::move(t));
  }
  Tensor out(x.dtype(), out_dims);
  copy_box(x, tab, out, {}, out_dims);
  ctx.set_output(0, std::move(out));
}

// ---- Concat -----------------------------------------------------------------------------

void concat_infer(InferContext& ctx) {
  TS_CHECK(ctx.num_inputs() >= 1, ctx.node.describe(), ": needs at least one input");
  const DType dt = ctx.input_dtype(0);
  for (size_t i = 1; i < ctx.num_inputs(); ++i)
    TS_CHECK(ctx.input_dtype(i) == dt || ctx.input_dtype(i) == DType::Undefined || dt == DType::Undefined,
             ctx.node.describe(), ": input ", i, " has dtype ", dtype_name(ctx.input_dtype(i)), ", input 0 has ",
             dtype_name(dt));
  const Shape* ref = nullptr;
  bool all_known = true;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (ctx.has_shape(i)) {
      if (!ref) ref = &ctx.input_shape(i);
    } else {
      all_known = false;
    }
  }
  if (!ref) {
    ctx.set_output_unknown_shape(0, dt);
    return;
  }
  const int64_t rank = static_cast<int64_t>(ref->size());
  TS_CHECK(rank >= 1, ctx.node.describe(), ": inputs must have rank >= 1");
  const int64_t axis = normalize_axis(ctx.node.attr("axis", Attribute::Kind::Int).i, rank, ctx.node);
  Shape out = *ref;
  Dim total = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    if (!ctx.has_shape(i)) continue;
    const Shape& s = ctx.input_shape(i);
    TS_CHECK(static_cast<int64_t>(s.size()) == rank, ctx.node.describe(), ": input ", i, " has shape ", shape_str(s),
             ", input 0 has rank ", rank);
    for (int64_t d = 0; d < rank; ++d) {
      const Dim& x = s[static_cast<size_t>(d)];
      if (d == axis) continue;
      Dim& o = out[static_cast<size_t>(d)];
      TS_CHECK(!(x.is_const() && o.is_const()) || x == o, ctx.node.describe(), ": input ", i, " has shape ",
               shape_str(s), ", which does not match ", shape_str(*ref), " outside axis ", axis);
      if (x.is_const()) o = x;  // prefer the constant when one side is symbolic
    }
    total = total + s[static_cast<size_t>(axis)];
  }
  out[static_cast<size_t>(axis)] = all_known ? total : fresh_dim(ctx, 0, static_cast<size_t>(axis));
  ctx.set_output(0, dt, out);
  if (rank == 1 && all_known) {
    SymValue v;
    for (size_t i = 0; i < ctx.num_inputs(); ++i) {
      auto part = ctx.input_dims_value(i);
      if (!part) return;
      v.insert(v.end(), part->begin(), part->end());
    }
    maybe_set_sym(ctx, 0, std::move(v));
  }
}

void concat_kernel(KernelContext& ctx) {
  TS_CHECK(ctx.num_inputs() >= 1, ctx.node.describe(), ": needs at least one input");
  const Tensor& first = ctx.input(0);
  const int64_t rank = static_cast<int64_t>(first.rank());
  TS_CHECK(rank >= 1, ctx.node.describe(), ": inputs must have rank >= 1");
  const int64_t axis = normalize_axis(ctx.node.attr("axis", Attribute::Kind::Int).i, rank, ctx.node);
  std::vector<int64_t> out_dims = first.shape();
  out_dims[static_cast<size_t>(axis)] = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    TS_CHECK(t.dtype() == first.dtype(), ctx.node.describe(), ": input ", i, " has dtype ", dtype_name(t.dtype()),
             ", input 0 has ", dtype_name(first.dtype()));
    TS_CHECK(static_cast<int64_t>(t.rank()) == rank, ctx.node.describe(), ": input ", i, " has shape ",
             dims_str(t.shape()), ", input 0 has ", dims_str(first.shape()));
    for (int64_t d = 0; d < rank; ++d)
      TS_CHECK(d == axis || t.dim(static_cast<int>(d)) == first.dim(static_cast<int>(d)), ctx.node.describe(),
               ": input ", i, " has shape ", dims_str(t.shape()), ", input 0 has ", dims_str(first.shape()));
    out_dims[static_cast<size_t>(axis)] = checked_add(out_dims[static_cast<size_t>(axis)], t.dim(static_cast<int>(axis)));
  }
  Tensor out(first.dtype(), out_dims);
  // Each input contributes one contiguous chunk per outer index.
  const int64_t outer = checked_numel(std::vector<int64_t>(out_dims.begin(), out_dims.begin() + axis));
  const int64_t inner = checked_numel(std::vector<int64_t>(out_dims.begin() + axis + 1, out_dims.end()));
  const int64_t out_row = out_dims[static_cast<size_t>(axis)] * inner;
  int64_t col = 0;
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Tensor& t = ctx.input(i);
    const int64_t chunk = t.dim(static_cast<int>(axis)) * inner;
    for (int64_t o = 0; o < outer; ++o) copy_elems(t, o * chunk, out, o * out_row + col, chunk);
    col += chunk;
  }
  ctx.set_output(0, std::move(out));
}

// Opset < 4 defaulted the axis to 1.
void concat_upgrade(Node& n, int64_t opset) {
  if (opset < 4 && !n.has_attr("axis")) n.attrs["axis"] = Attribute::of_int(1);
}

// ---- Split -----------------------------------------------------------------------------

// Chunk sizes of Split without a split input: ceil(dim / n) each, the last
// one smaller when dim does not divide.
std::vector<int64_t> even_split(int64_t dim, int64_t n, const Node& node) {
  TS_CHECK(n >= 1, node.describe(), ": num_outputs must be >= 1");
  const int64_t chunk = (dim + n - 1) / n;
  std::vector<int64_t> sizes(static_cast<size_t>(n), chunk);
  sizes.back() = dim - chunk * (n - 1);
  TS_CHECK(sizes.back() >= 0, node.describe(), ": cannot split a dimension of ", dim, " into ", n, " outputs");
  return sizes;
}

int64_t split_count(const Node& n, size_t outputs) {
  if (n.has_attr("num_outputs")) {
    const int64_t k = n.attr_int("num_outputs", 0);
    TS_CHECK(k == static_cast<int64_t>(outputs), n.describe(), ": num_outputs is ", k, " but the node has ",
             outputs, " outputs");
    return k;
  }
  return static_cast<int64_t>(outputs);
}

void split_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_index_input(ctx, 1, true);
  const size_t nout = ctx.out_types.size();
  if (!ctx.has_shape(0)) {
    for (size_t i = 0; i < nout; ++i) ctx.set_output_unknown_shape(i, dt);
    return;
  }
  const Shape& s = ctx.input_shape(0);
  const int64_t axis = normalize_axis(ctx.node.attr_int("axis", 0), static_cast<int64_t>(s.size()), ctx.node);
  const Dim& dim = s[static_cast<size_t>(axis)];
  std::vector<Dim> sizes;
  if (ctx.has_input(1)) {
    if (auto v = ctx.input_dims_value(1)) {
      TS_CHECK(v->size() == nout, ctx.node.describe(), ": split has ", v->size(), " entries for ", nout, " outputs");
      sizes = *v;
      Dim total = 0;
      for (const Dim& d : sizes) total = total + d;
      TS_CHECK(!(total.is_const() && dim.is_const()) || total == dim, ctx.node.describe(), ": split sizes sum to ",
               total.str(), " but the dimension is ", dim.str());
    } else {
      for (size_t i = 0; i < nout; ++i) sizes.push_back(fresh_dim(ctx, i, static_cast<size_t>(axis)));
    }
  } else {
    const int64_t n = split_count(ctx.node, nout);
    if (dim.is_const() && n >= 1 && (dim.value() + n - 1) / n * (n - 1) > dim.value()) {
      // Not splittable. The node may sit in an If branch that never runs for
      // this shape (the expanded AffineGrid does this), so only the kernel
      // reports it.
      for (size_t i = 0; i < nout; ++i) sizes.push_back(fresh_dim(ctx, i, static_cast<size_t>(axis)));
    } else if (dim.is_const()) {
      for (int64_t x : even_split(dim.value(), n, ctx.node)) sizes.push_back(x);
    } else {
      const Dim chunk = Dim::ceildiv(dim, n);
      sizes.assign(static_cast<size_t>(n), chunk);
      sizes.back() = dim - chunk * (n - 1);
    }
  }
  const auto in_val = ctx.input_dims_value(0);
  Dim offset = 0;
  for (size_t i = 0; i < nout; ++i) {
    Shape o = s;
    o[static_cast<size_t>(axis)] = sizes[i];
    ctx.set_output(i, dt, o);
    // Pieces of a 1-D symbolic value (a shape vector split in parts).
    if (in_val && s.size() == 1 && offset.is_const() && sizes[i].is_const()) {
      const int64_t a = offset.value(), b = a + sizes[i].value();
      if (a >= 0 && b <= static_cast<int64_t>(in_val->size()) && a <= b)
        ctx.set_output_sym(i, SymValue(in_val->begin() + a, in_val->begin() + b));
    }
    offset = offset + sizes[i];
  }
}

void split_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const size_t nout = ctx.num_outputs();
  const int64_t axis = normalize_axis(ctx.node.attr_int("axis", 0), static_cast<int64_t>(x.rank()), ctx.node);
  const int64_t dim = x.dim(static_cast<int>(axis));
  std::vector<int64_t> sizes;
  if (ctx.has_input(1)) {
    sizes = int_values(ctx.input(1), ctx.node, "split");
    TS_CHECK(sizes.size() == nout, ctx.node.describe(), ": split has ", sizes.size(), " entries for ", nout,
             " outputs");
    int64_t total = 0;
    for (int64_t v : sizes) {
      TS_CHECK(v >= 0, ctx.node.describe(), ": negative split size ", v);
      total = checked_add(total, v);
    }
    TS_CHECK(total == dim, ctx.node.describe(), ": split sizes sum to ", total, " but axis ", axis, " has size ", dim);
  } else {
    sizes = even_split(dim, split_count(ctx.node, nout), ctx.node);
  }
  const auto& shape = x.shape();
  const int64_t outer = checked_numel(std::vector<int64_t>(shape.begin(), shape.begin() + axis));
  const int64_t inner = checked_numel(std::vector<int64_t>(shape.begin() + axis + 1, shape.end()));
  int64_t col = 0;
  for (size_t i = 0; i < nout; ++i) {
    std::vector<int64_t> od = shape;
    od[static_cast<size_t>(axis)] = sizes[i];
    Tensor out(x.dtype(), od);
    const int64_t chunk = sizes[i] * inner;
    for (int64_t o = 0; o < outer; ++o) copy_elems(x, o * dim * inner + col, out, o * chunk, chunk);
    col += chunk;
    ctx.set_output(i, std::move(out));
  }
}

// Opset < 13 took split as an attribute; before 18 an absent split meant
// equal parts, one per output (now spelled num_outputs).
void split_upgrade(Node& n, int64_t opset) {
  if (opset < 13) attr_to_input(n, "split", 1);
  if (opset < 18 && !n.has_input(1) && !n.has_attr("num_outputs"))
    n.attrs["num_outputs"] = Attribute::of_int(static_cast<int64_t>(n.outputs.size()));
}

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

// ---- Tile ------------------------------------------------------------------------------

void tile_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_index_input(ctx, 1, true);
  if (!ctx.has_shape(0)) {
    ctx.set_output_unknown_shape(0, dt);
    return;
  }
  const Shape& s = ctx.input_shape(0);
  const auto reps = ctx.input_dims_value(1);
  if (!reps) {
    ctx.set_output(0, dt, fresh_shape(ctx, 0, s.size()));
    return;
  }
  TS_CHECK(reps->size() == s.size(), ctx.node.describe(), ": repeats has ", reps->size(), " entries for rank ",
           s.size());
  Shape out;
  for (size_t d = 0; d < s.size(); ++d) {
    TS_CHECK(!(*reps)[d].is_const() || (*reps)[d].value() >= 0, ctx.node.describe(), ": negative repeat");
    out.push_back(s[d] * (*reps)[d]);
  }
  ctx.set_output(0, dt, std::move(out));
}

void tile_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& r = ctx.input(1);
  TS_CHECK(r.rank() == 1, ctx.node.describe(), ": repeats must be 1-D, got ", dims_str(r.shape()));
  const auto reps = int_values(r, ctx.node, "repeats");
  TS_CHECK(reps.size() == x.rank(), ctx.node.describe(), ": repeats has ", reps.size(), " entries for rank ", x.rank());
  const auto strides = strides_of(x.shape());
  std::vector<int64_t> out_dims;
  AxisTables tab;
  for (size_t d = 0; d < reps.size(); ++d) {
    TS_CHECK(reps[d] >= 0, ctx.node.describe(), ": negative repeat ", reps[d]);
    const int64_t n = x.shape()[d];
    out_dims.push_back(checked_mul(n, reps[d]));
    std::vector<int64_t> t(static_cast<size_t>(out_dims.back()));
    for (int64_t o = 0; o < out_dims.back(); ++o) t[static_cast<size_t>(o)] = (o % n) * strides[d];
    tab.push_back(std::move(t));
  }
  Tensor out(x.dtype(), out_dims);
  copy_box(x, tab, out, {}, out_dims);
  ctx.set_output(0, std::move(out));
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

// ---- DepthToSpace, SpaceToDepth -----------------------------------------------------------

int64_t blocksize(const Node& n) {
  const int64_t b = n.attr("blocksize", Attribute::Kind::Int).i;
  TS_CHECK(b >= 1, n.describe(), ": blocksize must be >= 1, got ", b);
  return b;
}

bool crd_mode(const Node& n) {
  const std::string m = n.attr_string("mode", "DCR");
  TS_CHECK(m == "DCR" || m == "CRD", n.describe(), ": mode must be DCR or CRD, got '", m, "'");
  return m == "CRD";
}

void depth_to_space_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  const int64_t b = blocksize(ctx.node);
  crd_mode(ctx.node);
  if (!ctx.has_shape(0)) {
    ctx.set_output(0, dt, fresh_shape(ctx, 0, 4));
    return;
  }
  const Shape& s = ctx.input_shape(0);
  TS_CHECK(s.size() == 4, ctx.node.describe(), ": input must be 4-D, got ", shape_str(s));
  TS_CHECK(!s[1].is_const() || s[1].value() % (b * b) == 0, ctx.node.describe(), ": channels ", s[1].str(),
           " are not divisible by blocksize^2 = ", b * b);
  ctx.set_output(0, dt, {s[0], Dim::floordiv(s[1], b * b), s[2] * b, s[3] * b});
}

void space_to_depth_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  const int64_t b = blocksize(ctx.node);
  crd_mode(ctx.node);
  if (!ctx.has_shape(0)) {
    ctx.set_output(0, dt, fresh_shape(ctx, 0, 4));
    return;
  }
  const Shape& s = ctx.input_shape(0);
  TS_CHECK(s.size() == 4, ctx.node.describe(), ": input must be 4-D, got ", shape_str(s));
  for (size_t d = 2; d < 4; ++d)
    TS_CHECK(!s[d].is_const() || s[d].value() % b == 0, ctx.node.describe(), ": spatial size ", s[d].str(),
             " is not divisible by blocksize ", b);
  ctx.set_output(0, dt, {s[0], s[1] * (b * b), Dim::floordiv(s[2], b), Dim::floordiv(s[3], b)});
}

// Both ops are a 6-D transpose: out6[o] = in6[perm(o)], where the 6-D views of
// the input and the output are plain reshapes.
void permute6(KernelContext& ctx, const Tensor& x, const std::vector<int64_t>& in6, const std::vector<int64_t>& perm,
              const std::vector<int64_t>& out4) {
  const auto strides = strides_of(in6);
  std::vector<int64_t> out6;
  AxisTables tab;
  for (int64_t p : perm) {
    const int64_t n = in6[static_cast<size_t>(p)];
    out6.push_back(n);
    std::vector<int64_t> t(static_cast<size_t>(n));
    for (int64_t o = 0; o < n; ++o) t[static_cast<size_t>(o)] = o * strides[static_cast<size_t>(p)];
    tab.push_back(std::move(t));
  }
  Tensor out(x.dtype(), out6);
  copy_box(x, tab, out, {}, out6);
  ctx.set_output(0, out.reshaped(out4));
}

void depth_to_space_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t b = blocksize(ctx.node);
  TS_CHECK(x.rank() == 4, ctx.node.describe(), ": input must be 4-D, got ", dims_str(x.shape()));
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  TS_CHECK(c % (b * b) == 0, ctx.node.describe(), ": channels ", c, " are not divisible by blocksize^2 = ", b * b);
  const int64_t oc = c / (b * b);
  const std::vector<int64_t> out4 = {n, oc, checked_mul(h, b), checked_mul(w, b)};
  if (crd_mode(ctx.node))
    permute6(ctx, x, {n, oc, b, b, h, w}, {0, 1, 4, 2, 5, 3}, out4);
  else
    permute6(ctx, x, {n, b, b, oc, h, w}, {0, 3, 4, 1, 5, 2}, out4);
}

void space_to_depth_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t b = blocksize(ctx.node);
  TS_CHECK(x.rank() == 4, ctx.node.describe(), ": input must be 4-D, got ", dims_str(x.shape()));
  const int64_t n = x.dim(0), c = x.dim(1), h = x.dim(2), w = x.dim(3);
  TS_CHECK(h % b == 0 && w % b == 0, ctx.node.describe(), ": spatial dims ", h, "x", w,
           " are not divisible by blocksize ", b);
  const std::vector<int64_t> in6 = {n, c, h / b, b, w / b, b};
  const std::vector<int64_t> out4 = {n, checked_mul(c, b * b), h / b, w / b};
  if (crd_mode(ctx.node))
    permute6(ctx, x, in6, {0, 1, 3, 5, 2, 4}, out4);
  else
    permute6(ctx, x, in6, {0, 3, 5, 1, 2, 4}, out4);
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

// ---- ReverseSequence ----------------------------------------------------------------------

void reverse_sequence_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_index_input(ctx, 1, true);
  const int64_t ba = ctx.node.attr_int("batch_axis", 1), ta = ctx.node.attr_int("time_axis", 0);
  TS_CHECK((ba == 0 || ba == 1) && (ta == 0 || ta == 1) && ba != ta, ctx.node.describe(),
           ": batch_axis and time_axis must be 0 and 1 in some order");
  if (!ctx.has_shape(0)) {
    ctx.set_output_unknown_shape(0, dt);
    return;
  }
  TS_CHECK(ctx.input_shape(0).size() >= 2, ctx.node.describe(), ": input must have rank >= 2");
  ctx.set_output(0, dt, ctx.input_shape(0));
}

void reverse_sequence_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t ba = ctx.node.attr_int("batch_axis", 1), ta = ctx.node.attr_int("time_axis", 0);
  TS_CHECK((ba == 0 || ba == 1) && (ta == 0 || ta == 1) && ba != ta, ctx.node.describe(),
           ": batch_axis and time_axis must be 0 and 1 in some order");
  TS_CHECK(x.rank() >= 2, ctx.node.describe(), ": input must have rank >= 2, got ", dims_str(x.shape()));
  const Tensor& lt = ctx.input(1);
  TS_CHECK(lt.dtype() == DType::I64 && lt.rank() == 1, ctx.node.describe(), ": sequence_lens must be 1-D int64");
  const auto lens = int_values(lt, ctx.node, "sequence_lens");
  const int64_t batch = x.dim(static_cast<int>(ba)), time = x.dim(static_cast<int>(ta));
  TS_CHECK(static_cast<int64_t>(lens.size()) == batch, ctx.node.describe(), ": sequence_lens has ", lens.size(),
           " entries for batch size ", batch);
  const auto strides = strides_of(x.shape());
  const int64_t inner = strides[1];  // elements after the first two axes
  Tensor out = x;  // positions past each length stay as they are
  out.mutable_raw();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t len = lens[static_cast<size_t>(b)];
    TS_CHECK(len >= 0 && len <= time, ctx.node.describe(), ": sequence length ", len, " is out of range [0, ", time,
             "]");
    for (int64_t t = 0; t < len; ++t) {
      const int64_t src_t = len - 1 - t;
      const int64_t di = b * strides[static_cast<size_t>(ba)] + t * strides[static_cast<size_t>(ta)];
      const int64_t si = b * strides[static_cast<size_t>(ba)] + src_t * strides[static_cast<size_t>(ta)];
      copy_elems(x, si, out, di, inner);
    }
  }
  ctx.set_output(0, std::move(out));
}

}  // namespace

void register_layout_ops(OpRegistry& r) {
  add_op(r, {.name = "Transpose", .min_inputs = 1, .max_inputs = 1, .infer = transpose_infer,
             .kernel = transpose_kernel});
  add_op(r, {.name = "Concat", .min_inputs = 1, .max_inputs = -1, .infer = concat_infer, .kernel = concat_kernel,
             .upgrade = concat_upgrade});
  add_op(r, {.name = "Split", .min_inputs = 1, .max_inputs = 2, .infer = split_infer, .kernel = split_kernel,
             .upgrade = split_upgrade, .since_version = 1, .min_outputs = 1, .max_outputs = -1});
  add_op(r, {.name = "Slice", .min_inputs = 1, .max_inputs = 5, .infer = slice_infer, .kernel = slice_kernel,
             .upgrade = slice_upgrade});
  add_op(r, {.name = "Tile", .min_inputs = 2, .max_inputs = 2, .infer = tile_infer, .kernel = tile_kernel,
             .since_version = 6});
  add_op(r, {.name = "Pad", .min_inputs = 1, .max_inputs = 4, .infer = pad_infer, .kernel = pad_kernel,
             .upgrade = pad_upgrade});
  add_op(r, {.name = "DepthToSpace", .min_inputs = 1, .max_inputs = 1, .infer = depth_to_space_infer,
             .kernel = depth_to_space_kernel});
  add_op(r, {.name = "SpaceToDepth", .min_inputs = 1, .max_inputs = 1, .infer = space_to_depth_infer,
             .kernel = space_to_depth_kernel});
  add_op(r, {.name = "CenterCropPad", .min_inputs = 2, .max_inputs = 2, .infer = center_crop_pad_infer,
             .kernel = center_crop_pad_kernel, .since_version = 18});
  add_op(r, {.name = "Trilu", .min_inputs = 1, .max_inputs = 2, .infer = trilu_infer, .kernel = trilu_kernel,
             .since_version = 14});
  add_op(r, {.name = "ReverseSequence", .min_inputs = 2, .max_inputs = 2, .infer = reverse_sequence_infer,
             .kernel = reverse_sequence_kernel, .since_version = 10});
}

}  // namespace tessel::movement
