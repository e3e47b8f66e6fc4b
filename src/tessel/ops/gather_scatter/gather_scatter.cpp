// Indexing operators: Gather, GatherElements, GatherND, Scatter (removed alias
// of ScatterElements), ScatterElements, ScatterND, TensorScatter, Compress,
// OneHot, NonZero, Unique.
//
// Every index read from a tensor is range-checked before use: an index out
// of range is a tessel::Error at run time, never an out-of-bounds access
// (OneHot is the exception the spec defines: such rows are all off_value).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "tessel/ops/movement/movement_common.h"
#include "tessel/support/error.h"

namespace tessel::movement {
namespace {

// Normalises a possibly negative index into [0, n) or throws.
int64_t checked_index(int64_t i, int64_t n, const Node& node, const char* what) {
  TS_CHECK(i >= -n && i < n, node.describe(), ": ", what, " ", i, " is out of range for a dimension of size ", n);
  return i < 0 ? i + n : i;
}

// All indices of an index tensor, as int64.
std::vector<int64_t> all_indices(const Tensor& t, const Node& n, const char* what) {
  TS_CHECK(is_index_dtype(t.dtype()), n.describe(), ": ", what, " must be int32 or int64, got ",
           dtype_name(t.dtype()));
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.get_i64(i);
  return v;
}

int64_t prod(const std::vector<int64_t>& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p = checked_mul(p, s[i]);
  return p;
}

// ---- Gather --------------------------------------------------------------------------

void gather_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_index_input(ctx, 1, false);
  if (!ctx.has_shape(0) || !ctx.has_shape(1)) {
    ctx.set_output_unknown_shape(0, dt);
    return;
  }
  const Shape& s = ctx.input_shape(0);
  const Shape& is = ctx.input_shape(1);
  TS_CHECK(!s.empty(), ctx.node.describe(), ": data must have rank >= 1");
  const int64_t axis = normalize_axis(ctx.node.attr_int("axis", 0), static_cast<int64_t>(s.size()), ctx.node);
  Shape out(s.begin(), s.begin() + axis);
  out.insert(out.end(), is.begin(), is.end());
  out.insert(out.end(), s.begin() + axis + 1, s.end());
  // Picking entries of a symbolic vector: Gather(Shape(x), 0) and the like.
  if (s.size() == 1 && is.size() <= 1) {
    const auto data = ctx.input_dims_value(0);
    const auto idx = const_ints(ctx, 1);
    if (data && idx) {
      // An index out of range is left to the kernel: the node may be in an
      // If branch that never runs for these shapes.
      const int64_t n = static_cast<int64_t>(data->size());
      SymValue v;
      for (int64_t i : *idx) {
        if (i < -n || i >= n) return ctx.set_output(0, dt, std::move(out));
        v.push_back((*data)[static_cast<size_t>(i < 0 ? i + n : i)]);
      }
      maybe_set_sym(ctx, 0, std::move(v));
    }
  }
  ctx.set_output(0, dt, std::move(out));
}

void gather_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& it = ctx.input(1);
  TS_CHECK(x.rank() >= 1, ctx.node.describe(), ": data must have rank >= 1");
  const size_t axis = static_cast<size_t>(normalize_axis(ctx.node.attr_int("axis", 0), static_cast<int64_t>(x.rank()), ctx.node));
  auto idx = all_indices(it, ctx.node, "indices");
  const int64_t n = x.shape()[axis];
  for (int64_t& i : idx) i = checked_index(i, n, ctx.node, "index");
  std::vector<int64_t> out_dims(x.shape().begin(), x.shape().begin() + static_cast<int64_t>(axis));
  out_dims.insert(out_dims.end(), it.shape().begin(), it.shape().end());
  out_dims.insert(out_dims.end(), x.shape().begin() + static_cast<int64_t>(axis) + 1, x.shape().end());
  Tensor out(x.dtype(), out_dims);
  const int64_t outer = prod(x.shape(), 0, axis), inner = prod(x.shape(), axis + 1, x.rank());
  const int64_t k = static_cast<int64_t>(idx.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < k; ++j)
      copy_elems(x, (o * n + idx[static_cast<size_t>(j)]) * inner, out, (o * k + j) * inner, inner);
  ctx.set_output(0, std::move(out));
}

// ---- GatherElements / ScatterElements -------------------------------------------------

// Checks that `indices` (and updates) may address `data` along every axis but
// `axis`, and returns the normalised axis.
size_t elements_axis(const Node& n, const Tensor& data, const Tensor& indices) {
  const int64_t r = static_cast<int64_t>(data.rank());
  TS_CHECK(r >= 1, n.describe(), ": data must have rank >= 1");
  TS_CHECK(indices.rank() == data.rank(), n.describe(), ": indices has shape ", dims_str(indices.shape()),
           ", data has ", dims_str(data.shape()), " (ranks must match)");
  const size_t axis = static_cast<size_t>(normalize_axis(n.attr_int("axis", 0), r, n));
  for (size_t d = 0; d < data.rank(); ++d)
    TS_CHECK(d == axis || indices.shape()[d] <= data.shape()[d], n.describe(), ": indices shape ",
             dims_str(indices.shape()), " exceeds data shape ", dims_str(data.shape()), " on axis ", d);
  return axis;
}

// Calls f(i, data_offset) for every element i of `shape` (the indices'
// shape), where data_offset addresses data at the same coordinates with the
// `axis` coordinate replaced by the (checked) index.
template <class F>
void for_each_element_target(const Node& n, const Tensor& data, const Tensor& indices, size_t axis, F&& f) {
  const auto& shape = indices.shape();
  const auto ds = strides_of(data.shape());
  const int64_t dim = data.shape()[axis];
  std::vector<int64_t> c(shape.size(), 0);
  const int64_t total = indices.numel();
  for (int64_t i = 0; i < total; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      if (d != axis) off += c[d] * ds[d];
    off += checked_index(indices.get_i64(i), dim, n, "index") * ds[axis];
    f(i, off);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++c[d] < shape[d]) break;
      c[d] = 0;
    }
  }
}

void gather_elements_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_index_input(ctx, 1, false);
  if (ctx.has_shape(0) && ctx.has_shape(1)) {
    TS_CHECK(ctx.input_shape(0).size() == ctx.input_shape(1).size(), ctx.node.describe(),
             ": data and indices must have the same rank");
    normalize_axis(ctx.node.attr_int("axis", 0), static_cast<int64_t>(ctx.input_shape(0).size()), ctx.node);
  }
  if (ctx.has_shape(1))
    ctx.set_output(0, dt, ctx.input_shape(1));
  else
    ctx.set_output_unknown_shape(0, dt);
}

void gather_elements_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& it = ctx.input(1);
  TS_CHECK(is_index_dtype(it.dtype()), ctx.node.describe(), ": indices must be int32 or int64");
  const size_t axis = elements_axis(ctx.node, x, it);
  Tensor out(x.dtype(), it.shape());
  for_each_element_target(ctx.node, x, it, axis, [&](int64_t i, int64_t off) { copy_elems(x, off, out, i, 1); });
  ctx.set_output(0, std::move(out));
}

enum class Reduction { None, Add, Mul, Max, Min };

Reduction reduction_of(const Node& n) {
  const std::string r = n.attr_string("reduction", "none");
  if (r == "none") return Reduction::None;
  if (r == "add") return Reduction::Add;
  if (r == "mul") return Reduction::Mul;
  if (r == "max") return Reduction::Max;
  if (r == "min") return Reduction::Min;
  fail(n.describe(), ": unknown reduction '", r, "'");
}

// out[oi] = reduce(out[oi], upd[ui]) in the dtype's own arithmetic: doubles
// for floats (correctly rounded back), wrapping 64-bit integers otherwise.
void reduce_into(Tensor& out, int64_t oi, const Tensor& upd, int64_t ui, Reduction r) {
  const DType t = out.dtype();
  if (is_float(t)) {
    const double a = out.get_f64(oi), b = upd.get_f64(ui);
    double v = b;
    switch (r) {
      case Reduction::None: v = b; break;
      case Reduction::Add: v = a + b; break;
      case Reduction::Mul: v = a * b; break;
      case Reduction::Max: v = std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b); break;
      case Reduction::Min: v = std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b); break;
    }
    out.set_f64(oi, v);
    return;
  }
  if (t == DType::U64) {
    const uint64_t a = out.get_u64(oi), b = upd.get_u64(ui);
    uint64_t v = b;
    switch (r) {
      case Reduction::None: v = b; break;
      case Reduction::Add: v = a + b; break;
      case Reduction::Mul: v = a * b; break;
      case Reduction::Max: v = std::max(a, b); break;
      case Reduction::Min: v = std::min(a, b); break;
    }
    out.set_u64(oi, v);
    return;
  }
  // Other integers and bool; set_i64 wraps to the width (bool: != 0).
  const int64_t a = out.get_i64(oi), b = upd.get_i64(ui);
  int64_t v = b;
  switch (r) {
    case Reduction::None: v = b; break;
    case Reduction::Add: v = static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); break;
    case Reduction::Mul: v = static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); break;
    case Reduction::Max: v = std::max(a, b); break;
    case Reduction::Min: v = std::min(a, b); break;
  }
  out.set_i64(oi, v);
}

// Applies n consecutive updates: plain copies, or reductions.
void scatter_run(Tensor& out, int64_t oi, const Tensor& upd, int64_t ui, int64_t n, Reduction r) {
  if (r == Reduction::None) {
    copy_elems(upd, ui, out, oi, n);
    return;
  }
  for (int64_t k = 0; k < n; ++k) reduce_into(out, oi + k, upd, ui + k, r);
}

void check_reduction_dtype(const Node& n, DType t, Reduction r) {
  TS_CHECK(r == Reduction::None || t != DType::String, n.describe(), ": reduction is not defined for strings");
}

void scatter_elements_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_index_input(ctx, 1, false);
  check_reduction_dtype(ctx.node, dt, reduction_of(ctx.node));
  if (ctx.input_dtype(2) != DType::Undefined && dt != DType::Undefined)
    TS_CHECK(ctx.input_dtype(2) == dt, ctx.node.describe(), ": updates has dtype ", dtype_name(ctx.input_dtype(2)),
             ", data has ", dtype_name(dt));
  if (ctx.has_shape(1) && ctx.has_shape(2))
    TS_CHECK(ctx.input_shape(1).size() == ctx.input_shape(2).size(), ctx.node.describe(),
             ": indices and updates must have the same shape");
  if (ctx.has_shape(0)) {
    normalize_axis(ctx.node.attr_int("axis", 0), static_cast<int64_t>(ctx.input_shape(0).size()), ctx.node);
    ctx.set_output(0, dt, ctx.input_shape(0));
  } else {
    ctx.set_output_unknown_shape(0, dt);
  }
}

void scatter_elements_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& it = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  const Reduction r = reduction_of(ctx.node);
  check_reduction_dtype(ctx.node, x.dtype(), r);
  TS_CHECK(is_index_dtype(it.dtype()), ctx.node.describe(), ": indices must be int32 or int64");
  TS_CHECK(upd.dtype() == x.dtype(), ctx.node.describe(), ": updates has dtype ", dtype_name(upd.dtype()),
           ", data has ", dtype_name(x.dtype()));
  TS_CHECK(upd.shape() == it.shape(), ctx.node.describe(), ": updates shape ", dims_str(upd.shape()),
           " differs from indices shape ", dims_str(it.shape()));
  const size_t axis = elements_axis(ctx.node, x, it);
  Tensor out = x;
  out.mutable_raw();
  for_each_element_target(ctx.node, x, it, axis,
                          [&](int64_t i, int64_t off) { scatter_run(out, off, upd, i, 1, r); });
  ctx.set_output(0, std::move(out));
}

// ---- GatherND / ScatterND ------------------------------------------------------------------

// Flat offset (within a block of shape dims[from:]) addressed by one index
// tuple of length m, with negative indices wrapped and range checks.
int64_t nd_offset(const Tensor& indices, int64_t at, int64_t m, const std::vector<int64_t>& dims, size_t from,
                  const Node& n) {
  int64_t off = 0;
  for (int64_t j = 0; j < m; ++j) {
    const int64_t d = dims[from + static_cast<size_t>(j)];
    off = off * d + checked_index(indices.get_i64(at + j), d, n, "index");
  }
  return off;
}

void gather_nd_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_index_input(ctx, 1, true);
  if (!ctx.has_shape(0) || !ctx.has_shape(1)) {
    ctx.set_output_unknown_shape(0, dt);
    return;
  }
  const Shape& s = ctx.input_shape(0);
  const Shape& is = ctx.input_shape(1);
  const int64_t b = ctx.node.attr_int("batch_dims", 0);
  const int64_t r = static_cast<int64_t>(s.size()), q = static_cast<int64_t>(is.size());
  TS_CHECK(q >= 1 && r >= 1 && b >= 0 && b < std::min(q, r), ctx.node.describe(), ": invalid batch_dims ", b,
           " for data rank ", r, " and indices rank ", q);
  if (!is.back().is_const()) {
    ctx.set_output_unknown_shape(0, dt);
    return;
  }
  const int64_t m = is.back().value();
  TS_CHECK(m >= 1 && m <= r - b, ctx.node.describe(), ": last indices dimension ", m, " must be in [1, ", r - b, "]");
  Shape out(is.begin(), is.end() - 1);
  out.insert(out.end(), s.begin() + b + m, s.end());
  ctx.set_output(0, dt, std::move(out));
}

void gather_nd_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& it = ctx.input(1);
  TS_CHECK(it.dtype() == DType::I64, ctx.node.describe(), ": indices must be int64, got ", dtype_name(it.dtype()));
  const auto& ds = x.shape();
  const auto& is = it.shape();
  const int64_t b = ctx.node.attr_int("batch_dims", 0);
  const int64_t r = static_cast<int64_t>(ds.size()), q = static_cast<int64_t>(is.size());
  TS_CHECK(q >= 1 && r >= 1 && b >= 0 && b < std::min(q, r), ctx.node.describe(), ": invalid batch_dims ", b,
           " for data rank ", r, " and indices rank ", q);
  const int64_t m = is.back();
  TS_CHECK(m >= 1 && m <= r - b, ctx.node.describe(), ": last indices dimension ", m, " must be in [1, ", r - b, "]");
  for (int64_t d = 0; d < b; ++d)
    TS_CHECK(ds[static_cast<size_t>(d)] == is[static_cast<size_t>(d)], ctx.node.describe(),
             ": batch dimension ", d, " differs between data ", dims_str(ds), " and indices ", dims_str(is));
  const size_t ub = static_cast<size_t>(b), um = static_cast<size_t>(m);
  std::vector<int64_t> out_dims(is.begin(), is.end() - 1);
  out_dims.insert(out_dims.end(), ds.begin() + b + m, ds.end());
  Tensor out(x.dtype(), out_dims);
  const int64_t batches = prod(ds, 0, ub);
  const int64_t per_batch = prod(is, ub, is.size() - 1);  // index tuples per batch
  const int64_t slice = prod(ds, ub + um, ds.size());
  const int64_t block = prod(ds, ub, ds.size());          // data elements per batch
  for (int64_t bi = 0; bi < batches; ++bi)
    for (int64_t k = 0; k < per_batch; ++k) {
      const int64_t t = bi * per_batch + k;
      const int64_t off = nd_offset(it, t * m, m, ds, ub, ctx.node);
      copy_elems(x, bi * block + off * slice, out, t * slice, slice);
    }
  ctx.set_output(0, std::move(out));
}

void scatter_nd_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_index_input(ctx, 1, true);
  check_reduction_dtype(ctx.node, dt, reduction_of(ctx.node));
  if (ctx.input_dtype(2) != DType::Undefined && dt != DType::Undefined)
    TS_CHECK(ctx.input_dtype(2) == dt, ctx.node.describe(), ": updates has dtype ", dtype_name(ctx.input_dtype(2)),
             ", data has ", dtype_name(dt));
  if (ctx.has_shape(0))
    ctx.set_output(0, dt, ctx.input_shape(0));
  else
    ctx.set_output_unknown_shape(0, dt);
}

void scatter_nd_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& it = ctx.input(1);
  const Tensor& upd = ctx.input(2);
  const Reduction r = reduction_of(ctx.node);
  check_reduction_dtype(ctx.node, x.dtype(), r);
  TS_CHECK(it.dtype() == DType::I64, ctx.node.describe(), ": indices must be int64, got ", dtype_name(it.dtype()));
  TS_CHECK(upd.dtype() == x.dtype(), ctx.node.describe(), ": updates has dtype ", dtype_name(upd.dtype()),
           ", data has ", dtype_name(x.dtype()));
  const auto& ds = x.shape();
  const auto& is = it.shape();
  TS_CHECK(is.size() >= 1, ctx.node.describe(), ": indices must have rank >= 1");
  const int64_t k = is.back();
  TS_CHECK(k >= 1 && k <= static_cast<int64_t>(ds.size()), ctx.node.describe(), ": last indices dimension ", k,
           " must be in [1, ", ds.size(), "]");
  std::vector<int64_t> expect(is.begin(), is.end() - 1);
  expect.insert(expect.end(), ds.begin() + k, ds.end());
  TS_CHECK(upd.shape() == expect, ctx.node.describe(), ": updates has shape ", dims_str(upd.shape()), ", expected ",
           dims_str(expect));
  Tensor out = x;
  out.mutable_raw();
  const int64_t tuples = prod(is, 0, is.size() - 1);
  const int64_t slice = prod(ds, static_cast<size_t>(k), ds.size());
  for (int64_t t = 0; t < tuples; ++t) {
    const int64_t off = nd_offset(it, t * k, k, ds, 0, ctx.node);
    scatter_run(out, off * slice, upd, t * slice, slice, r);
  }
  ctx.set_output(0, std::move(out));
}

// ---- TensorScatter -------------------------------------------------------------------------

bool circular_mode(const Node& n) {
  const std::string m = n.attr_string("mode", "linear");
  TS_CHECK(m == "linear" || m == "circular", n.describe(), ": mode must be linear or circular, got '", m, "'");
  return m == "circular";
}

void tensor_scatter_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_index_input(ctx, 2, true);
  circular_mode(ctx.node);
  if (ctx.has_shape(0)) {
    const int64_t r = static_cast<int64_t>(ctx.input_shape(0).size());
    const int64_t axis = normalize_axis(ctx.node.attr_int("axis", -2), r, ctx.node);
    TS_CHECK(axis != 0, ctx.node.describe(), ": axis must not be the batch axis 0");
    ctx.set_output(0, dt, ctx.input_shape(0));
  } else {
    ctx.set_output_unknown_shape(0, dt);
  }
}

void tensor_scatter_kernel(KernelContext& ctx) {
  const Tensor& past = ctx.input(0);
  const Tensor& upd = ctx.input(1);
  const bool circular = circular_mode(ctx.node);
  TS_CHECK(upd.dtype() == past.dtype(), ctx.node.describe(), ": update has dtype ", dtype_name(upd.dtype()),
           ", past_cache has ", dtype_name(past.dtype()));
  const auto& ps = past.shape();
  const auto& us = upd.shape();
  const int64_t r = static_cast<int64_t>(ps.size());
  TS_CHECK(r >= 2 && us.size() == ps.size(), ctx.node.describe(), ": past_cache ", dims_str(ps), " and update ",
           dims_str(us), " must have the same rank >= 2");
  const size_t axis = static_cast<size_t>(normalize_axis(ctx.node.attr_int("axis", -2), r, ctx.node));
  TS_CHECK(axis != 0, ctx.node.describe(), ": axis must not be the batch axis 0");
  for (size_t d = 0; d < ps.size(); ++d)
    TS_CHECK(d == axis ? us[d] <= ps[d] : us[d] == ps[d], ctx.node.describe(), ": update shape ", dims_str(us),
             " does not fit past_cache shape ", dims_str(ps));
  const int64_t batch = ps[0], max_seq = ps[axis], seq = us[axis];
  std::vector<int64_t> write(static_cast<size_t>(batch), 0);
  if (ctx.has_input(2)) {
    const Tensor& w = ctx.input(2);
    TS_CHECK(w.dtype() == DType::I64 && w.rank() == 1 && w.numel() == batch, ctx.node.describe(),
             ": write_indices must be int64 of shape [", batch, "]");
    write = int_values(w, ctx.node, "write_indices");
  }
  Tensor out = past;
  out.mutable_raw();
  const int64_t prefix = prod(ps, 0, axis);        // leading positions (batch first)
  const int64_t per_batch = prod(ps, 1, axis);     // leading positions per batch entry
  const int64_t inner = prod(ps, axis + 1, ps.size());
  for (int64_t p = 0; p < prefix; ++p) {
    const int64_t b = per_batch == 0 ? 0 : p / per_batch;
    for (int64_t s = 0; s < seq; ++s) {
      int64_t pos = write[static_cast<size_t>(b)] + s;
      if (circular) {
        pos = ((pos % max_seq) + max_seq) % max_seq;
      } else {
        TS_CHECK(pos >= 0 && pos < max_seq, ctx.node.describe(), ": write position ", pos,
                 " is out of range for a sequence of ", max_seq);
      }
      copy_elems(upd, (p * seq + s) * inner, out, (p * max_seq + pos) * inner, inner);
    }
  }
  ctx.set_output(0, std::move(out));
}

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

void register_gather_scatter_ops(OpRegistry& r) {
  add_op(r, {.name = "Gather", .min_inputs = 2, .max_inputs = 2, .infer = gather_infer, .kernel = gather_kernel});
  add_op(r, {.name = "GatherElements", .min_inputs = 2, .max_inputs = 2, .infer = gather_elements_infer,
             .kernel = gather_elements_kernel, .since_version = 11});
  add_op(r, {.name = "GatherND", .min_inputs = 2, .max_inputs = 2, .infer = gather_nd_infer,
             .kernel = gather_nd_kernel, .since_version = 11});
  // Scatter (opsets 9-10) is ScatterElements without reduction.
  add_op(r, {.name = "Scatter", .min_inputs = 3, .max_inputs = 3, .infer = scatter_elements_infer,
             .kernel = scatter_elements_kernel, .since_version = 9});
  add_op(r, {.name = "ScatterElements", .min_inputs = 3, .max_inputs = 3, .infer = scatter_elements_infer,
             .kernel = scatter_elements_kernel, .since_version = 11});
  add_op(r, {.name = "ScatterND", .min_inputs = 3, .max_inputs = 3, .infer = scatter_nd_infer,
             .kernel = scatter_nd_kernel, .since_version = 11});
  add_op(r, {.name = "TensorScatter", .min_inputs = 2, .max_inputs = 3, .infer = tensor_scatter_infer,
             .kernel = tensor_scatter_kernel, .since_version = 24});
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
