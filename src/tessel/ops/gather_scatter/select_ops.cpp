// Indexing operators whose output shape depends on the input values:
// Compress (the positions a mask selects), OneHot (the depth given as data),
// NonZero (the non-zero positions) and Unique (the distinct slices).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "tessel/ops/gather_scatter/gather_scatter.h"
#include "tessel/ops/movement/movement_common.h"
#include "tessel/support/error.h"

namespace tessel::movement {
namespace {

// ---- Compress --------------------------------------------------------------------------

// Positions selected by a bool condition along an axis of size n.
std::vector<int64_t> selected(const Tensor& cond, int64_t n, const Node& node) {
  TS_CHECK(cond.dtype() == DType::Bool, node.describe(), ": condition must be bool, got ", dtype_name(cond.dtype()));
  TS_CHECK(cond.rank() == 1, node.describe(), ": condition must be 1-D, got ", dims_str(cond.shape()));
  std::vector<int64_t> sel;
  for (int64_t i = 0; i < cond.numel(); ++i) {
    if (!cond.get_i64(i)) continue;
    TS_CHECK(i < n, node.describe(), ": condition selects position ", i, " of an axis of size ", n);
    sel.push_back(i);
  }
  return sel;
}

void compress_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  if (ctx.input_dtype(1) != DType::Undefined)
    check_dtype(ctx.node, 1, ctx.input_dtype(1), [](DType t) { return t == DType::Bool; }, "bool");
  Dim count = fresh_dim(ctx, 0, 0);
  if (const Tensor* c = ctx.input_const(1)) {
    int64_t k = 0;
    for (int64_t i = 0; i < c->numel(); ++i) k += c->get_i64(i) != 0;
    count = k;
  }
  if (!ctx.node.has_attr("axis")) {
    ctx.set_output(0, dt, {count});
    return;
  }
  if (!ctx.has_shape(0)) {
    ctx.set_output_unknown_shape(0, dt);
    return;
  }
  Shape out = ctx.input_shape(0);
  const int64_t axis = normalize_axis(ctx.node.attr_int("axis", 0), static_cast<int64_t>(out.size()), ctx.node);
  out[static_cast<size_t>(axis)] = ctx.input_const(1) ? count : fresh_dim(ctx, 0, static_cast<size_t>(axis));
  ctx.set_output(0, dt, std::move(out));
}

void compress_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& cond = ctx.input(1);
  if (!ctx.node.has_attr("axis")) {
    const auto sel = selected(cond, x.numel(), ctx.node);
    Tensor out(x.dtype(), {static_cast<int64_t>(sel.size())});
    for (size_t j = 0; j < sel.size(); ++j) copy_elems(x, sel[j], out, static_cast<int64_t>(j), 1);
    ctx.set_output(0, std::move(out));
    return;
  }
  TS_CHECK(x.rank() >= 1, ctx.node.describe(), ": input must have rank >= 1 when axis is given");
  const size_t axis =
      static_cast<size_t>(normalize_axis(ctx.node.attr_int("axis", 0), static_cast<int64_t>(x.rank()), ctx.node));
  const int64_t n = x.shape()[axis];
  const auto sel = selected(cond, n, ctx.node);
  std::vector<int64_t> out_dims = x.shape();
  out_dims[axis] = static_cast<int64_t>(sel.size());
  Tensor out(x.dtype(), out_dims);
  const int64_t outer = prod(x.shape(), 0, axis), inner = prod(x.shape(), axis + 1, x.rank());
  const int64_t k = static_cast<int64_t>(sel.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < k; ++j)
      copy_elems(x, (o * n + sel[static_cast<size_t>(j)]) * inner, out, (o * k + j) * inner, inner);
  ctx.set_output(0, std::move(out));
}

// ---- OneHot ------------------------------------------------------------------------------

bool onehot_index_dtype(DType t) { return (is_int(t) && int_bits(t) >= 8) || t == DType::F16 || t == DType::F32 || t == DType::F64; }

// Integer value of element i of a numeric tensor (floats truncate).
int64_t as_index(const Tensor& t, int64_t i) {
  if (!is_float(t.dtype())) return t.get_i64(i);
  const double v = t.get_f64(i);
  TS_CHECK(std::isfinite(v) && std::fabs(v) < 9.2e18, "OneHot: index ", v, " is not a finite integer");
  return static_cast<int64_t>(v);
}

void onehot_infer(InferContext& ctx) {
  check_dtype(ctx.node, 0, ctx.input_dtype(0), onehot_index_dtype, "an integer or float type");
  check_dtype(ctx.node, 1, ctx.input_dtype(1), onehot_index_dtype, "an integer or float type");
  const DType dt = ctx.input_dtype(2);
  if (!ctx.has_shape(0)) {
    ctx.set_output_unknown_shape(0, dt);
    return;
  }
  Shape out = ctx.input_shape(0);
  const int64_t r = static_cast<int64_t>(out.size());
  const int64_t a = ctx.node.attr_int("axis", -1);
  TS_CHECK(a >= -r - 1 && a <= r, ctx.node.describe(), ": axis ", a, " is out of range for output rank ", r + 1);
  const int64_t axis = a < 0 ? a + r + 1 : a;
  Dim depth = fresh_dim(ctx, 0, static_cast<size_t>(axis));
  if (const Tensor* d = ctx.input_const(1); d && d->numel() == 1) depth = as_index(*d, 0);
  else if (auto v = ctx.input_dims_value(1); v && v->size() == 1) depth = (*v)[0];
  out.insert(out.begin() + axis, depth);
  ctx.set_output(0, dt, std::move(out));
}

void onehot_kernel(KernelContext& ctx) {
  const Tensor& ind = ctx.input(0);
  const Tensor& dt = ctx.input(1);
  const Tensor& values = ctx.input(2);
  check_dtype(ctx.node, 0, ind.dtype(), onehot_index_dtype, "an integer or float type");
  check_dtype(ctx.node, 1, dt.dtype(), onehot_index_dtype, "an integer or float type");
  TS_CHECK(dt.numel() == 1, ctx.node.describe(), ": depth must hold one value, got shape ", dims_str(dt.shape()));
  TS_CHECK(values.numel() == 2 && values.rank() == 1, ctx.node.describe(),
           ": values must be [off_value, on_value], got shape ", dims_str(values.shape()));
  const int64_t depth = as_index(dt, 0);
  TS_CHECK(depth >= 1, ctx.node.describe(), ": depth must be >= 1, got ", depth);
  const int64_t r = static_cast<int64_t>(ind.rank());
  const int64_t a = ctx.node.attr_int("axis", -1);
  TS_CHECK(a >= -r - 1 && a <= r, ctx.node.describe(), ": axis ", a, " is out of range for output rank ", r + 1);
  const size_t axis = static_cast<size_t>(a < 0 ? a + r + 1 : a);
  std::vector<int64_t> out_dims = ind.shape();
  out_dims.insert(out_dims.begin() + static_cast<int64_t>(axis), depth);
  Tensor out(values.dtype(), out_dims);
  fill_with(out, values, 0);
  const int64_t outer = prod(ind.shape(), 0, axis), inner = prod(ind.shape(), axis, ind.shape().size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      int64_t k = as_index(ind, o * inner + i);
      if (k < 0) k += depth;
      if (k < 0 || k >= depth) continue;  // out of range: the row stays off_value
      copy_elems(values, 1, out, (o * depth + k) * inner + i, 1);
    }
  ctx.set_output(0, std::move(out));
}

// ---- NonZero -----------------------------------------------------------------------------

bool is_nonzero(const Tensor& t, int64_t i) {
  if (t.dtype() == DType::String) return !t.strings()[static_cast<size_t>(i)].empty();
  if (is_float(t.dtype())) return t.get_f64(i) != 0;  // NaN counts as non-zero
  return t.get_u64(i) != 0;
}

void nonzero_infer(InferContext& ctx) {
  const Dim rank = ctx.has_shape(0) ? Dim(static_cast<int64_t>(std::max<size_t>(1, ctx.input_shape(0).size())))
                                    : fresh_dim(ctx, 0, 0);
  ctx.set_output(0, DType::I64, {rank, fresh_dim(ctx, 0, 1)});
}

void nonzero_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  // A scalar is treated as a 1-element vector (numpy's historic behaviour).
  const std::vector<int64_t> shape = x.rank() == 0 ? std::vector<int64_t>{1} : x.shape();
  std::vector<int64_t> hits;
  for (int64_t i = 0; i < x.numel(); ++i)
    if (is_nonzero(x, i)) hits.push_back(i);
  const int64_t r = static_cast<int64_t>(shape.size()), n = static_cast<int64_t>(hits.size());
  Tensor out(DType::I64, {r, n});
  int64_t* o = out.mutable_data<int64_t>();
  const auto strides = strides_of(shape);
  for (int64_t j = 0; j < n; ++j)
    for (int64_t d = 0; d < r; ++d)
      o[d * n + j] = (hits[static_cast<size_t>(j)] / strides[static_cast<size_t>(d)]) % shape[static_cast<size_t>(d)];
  ctx.set_output(0, std::move(out));
}

// ---- Unique ------------------------------------------------------------------------------

// Three-way comparison of two elements of the same tensor, in numpy's sort
// order (NaN after everything, all NaNs equal).
int compare_elems(const Tensor& t, int64_t a, int64_t b) {
  const DType dt = t.dtype();
  if (dt == DType::String) {
    const int c = t.strings()[static_cast<size_t>(a)].compare(t.strings()[static_cast<size_t>(b)]);
    return (c > 0) - (c < 0);
  }
  if (is_float(dt)) {
    const double x = t.get_f64(a), y = t.get_f64(b);
    const bool nx = std::isnan(x), ny = std::isnan(y);
    if (nx || ny) return nx == ny ? 0 : (nx ? 1 : -1);
    return (x > y) - (x < y);
  }
  if (dt == DType::U64) {
    const uint64_t x = t.get_u64(a), y = t.get_u64(b);
    return (x > y) - (x < y);
  }
  const int64_t x = t.get_i64(a), y = t.get_i64(b);
  return (x > y) - (x < y);
}

void unique_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  const Dim u = fresh_dim(ctx, 0, 0);
  const bool has_axis = ctx.node.has_attr("axis");
  if (!has_axis) {
    ctx.set_output(0, dt, {u});
  } else if (ctx.has_shape(0)) {
    Shape s = ctx.input_shape(0);
    const int64_t axis = normalize_axis(ctx.node.attr_int("axis", 0), static_cast<int64_t>(s.size()), ctx.node);
    s[static_cast<size_t>(axis)] = u;
    ctx.set_output(0, dt, std::move(s));
  } else {
    ctx.set_output_unknown_shape(0, dt);
  }
  const size_t nout = ctx.out_types.size();
  if (nout > 1) ctx.set_output(1, DType::I64, {u});
  if (nout > 2) {
    Dim n = fresh_dim(ctx, 2, 0);
    if (ctx.has_shape(0)) {
      const Shape& s = ctx.input_shape(0);
      n = has_axis ? s[static_cast<size_t>(normalize_axis(ctx.node.attr_int("axis", 0), static_cast<int64_t>(s.size()),
                                                          ctx.node))]
                   : num_elements(s);
    }
    ctx.set_output(2, DType::I64, {n});
  }
  if (nout > 3) ctx.set_output(3, DType::I64, {u});
}

void unique_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const bool has_axis = ctx.node.has_attr("axis");
  const bool sorted = ctx.node.attr_int("sorted", 1) != 0;
  // View the input as `n` slices of `len` elements each; element k of slice s
  // is at base(s) + offset(k). Without an axis every element is a slice.
  size_t axis = 0;
  int64_t n = x.numel(), outer = 1, inner = 1;
  if (has_axis) {
    TS_CHECK(x.rank() >= 1, ctx.node.describe(), ": input must have rank >= 1 when axis is given");
    axis = static_cast<size_t>(normalize_axis(ctx.node.attr_int("axis", 0), static_cast<int64_t>(x.rank()), ctx.node));
    n = x.shape()[axis];
    outer = prod(x.shape(), 0, axis);
    inner = prod(x.shape(), axis + 1, x.rank());
  }
  auto elem = [&](int64_t s, int64_t k) { return ((k / inner) * n + s) * inner + k % inner; };
  const int64_t len = outer * inner;
  auto cmp = [&](int64_t a, int64_t b) {
    for (int64_t k = 0; k < len; ++k)
      if (int c = compare_elems(x, elem(a, k), elem(b, k))) return c;
    return 0;
  };
  std::vector<int64_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return cmp(a, b) < 0; });
  // Groups of equal slices in sorted order; a group's first member is its
  // first occurrence (the sort is stable).
  std::vector<int64_t> first, counts, group_of(static_cast<size_t>(n));
  for (size_t i = 0; i < order.size(); ++i) {
    if (i == 0 || cmp(order[i - 1], order[i]) != 0) {
      first.push_back(order[i]);
      counts.push_back(0);
    }
    counts.back()++;
    group_of[static_cast<size_t>(order[i])] = static_cast<int64_t>(first.size()) - 1;
  }
  const int64_t u = static_cast<int64_t>(first.size());
  // Output rank of each group: sorted order, or order of first occurrence.
  std::vector<int64_t> rank_of(static_cast<size_t>(u));
  std::iota(rank_of.begin(), rank_of.end(), 0);
  if (!sorted) {
    std::vector<int64_t> by_first(static_cast<size_t>(u));
    std::iota(by_first.begin(), by_first.end(), 0);
    std::sort(by_first.begin(), by_first.end(),
              [&](int64_t a, int64_t b) { return first[static_cast<size_t>(a)] < first[static_cast<size_t>(b)]; });
    for (int64_t p = 0; p < u; ++p) rank_of[static_cast<size_t>(by_first[static_cast<size_t>(p)])] = p;
  }
  std::vector<int64_t> y_dims = has_axis ? x.shape() : std::vector<int64_t>{u};
  if (has_axis) y_dims[axis] = u;
  Tensor y(x.dtype(), y_dims), idx(DType::I64, {u}), inv(DType::I64, {n}), cnt(DType::I64, {u});
  for (int64_t g = 0; g < u; ++g) {
    const int64_t p = rank_of[static_cast<size_t>(g)];
    const int64_t src = first[static_cast<size_t>(g)];
    for (int64_t o = 0; o < outer; ++o) copy_elems(x, (o * n + src) * inner, y, (o * u + p) * inner, inner);
    idx.set_i64(p, src);
    cnt.set_i64(p, counts[static_cast<size_t>(g)]);
  }
  for (int64_t s = 0; s < n; ++s) inv.set_i64(s, rank_of[static_cast<size_t>(group_of[static_cast<size_t>(s)])]);
  ctx.set_output(0, std::move(y));
  if (ctx.num_outputs() > 1) ctx.set_output(1, std::move(idx));
  if (ctx.num_outputs() > 2) ctx.set_output(2, std::move(inv));
  if (ctx.num_outputs() > 3) ctx.set_output(3, std::move(cnt));
}

}  // namespace

void register_select_ops(OpRegistry& r) {
  add_op(r, {.name = "Compress", .min_inputs = 2, .max_inputs = 2, .infer = compress_infer,
             .kernel = compress_kernel, .since_version = 9});
  add_op(r, {.name = "OneHot", .min_inputs = 3, .max_inputs = 3, .infer = onehot_infer, .kernel = onehot_kernel,
             .since_version = 9});
  add_op(r, {.name = "NonZero", .min_inputs = 1, .max_inputs = 1, .infer = nonzero_infer, .kernel = nonzero_kernel,
             .since_version = 9});
  add_op(r, {.name = "Unique", .min_inputs = 1, .max_inputs = 1, .infer = unique_infer, .kernel = unique_kernel,
             .since_version = 11, .min_outputs = 1, .max_outputs = 4});
}

}  // namespace tessel::movement
