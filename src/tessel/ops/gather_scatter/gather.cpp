// Gathers: Gather (whole slices along an axis), GatherElements (one element
// per index, along an axis) and GatherND (slices addressed by index tuples).
#include <algorithm>

#include "tessel/ops/gather_scatter/gather_scatter.h"
#include "tessel/ops/movement/movement_common.h"
#include "tessel/support/error.h"

namespace tessel::movement {
namespace {

// All indices of an index tensor, as int64.
std::vector<int64_t> all_indices(const Tensor& t, const Node& n, const char* what) {
  TS_CHECK(is_index_dtype(t.dtype()), n.describe(), ": ", what, " must be int32 or int64, got ",
           dtype_name(t.dtype()));
  std::vector<int64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[static_cast<size_t>(i)] = t.get_i64(i);
  return v;
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

// ---- GatherElements -------------------------------------------------------------------

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

// ---- GatherND ---------------------------------------------------------------------------

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

}  // namespace

void register_gather_ops(OpRegistry& r) {
  add_op(r, {.name = "Gather", .min_inputs = 2, .max_inputs = 2, .infer = gather_infer, .kernel = gather_kernel});
  add_op(r, {.name = "GatherElements", .min_inputs = 2, .max_inputs = 2, .infer = gather_elements_infer,
             .kernel = gather_elements_kernel, .since_version = 11});
  add_op(r, {.name = "GatherND", .min_inputs = 2, .max_inputs = 2, .infer = gather_nd_infer,
             .kernel = gather_nd_kernel, .since_version = 11});
}

}  // namespace tessel::movement
