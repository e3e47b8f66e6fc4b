// Scatters: ScatterElements (and its old name Scatter), ScatterND and
// TensorScatter (a KV-cache update), with the reductions (add, mul, max, min)
// that ScatterElements and ScatterND apply to colliding updates.
#include <algorithm>
#include <cmath>

#include "tessel/ops/gather_scatter/gather_scatter.h"
#include "tessel/ops/movement/movement_common.h"
#include "tessel/support/error.h"

namespace tessel::movement {
namespace {

// ---- ScatterElements ------------------------------------------------------------------

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

// ---- ScatterND --------------------------------------------------------------------------

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

}  // namespace

void register_scatter_ops(OpRegistry& r) {
  // Scatter (opsets 9-10) is ScatterElements without reduction.
  add_op(r, {.name = "Scatter", .min_inputs = 3, .max_inputs = 3, .infer = scatter_elements_infer,
             .kernel = scatter_elements_kernel, .since_version = 9});
  add_op(r, {.name = "ScatterElements", .min_inputs = 3, .max_inputs = 3, .infer = scatter_elements_infer,
             .kernel = scatter_elements_kernel, .since_version = 11});
  add_op(r, {.name = "ScatterND", .min_inputs = 3, .max_inputs = 3, .infer = scatter_nd_infer,
             .kernel = scatter_nd_kernel, .since_version = 11});
  add_op(r, {.name = "TensorScatter", .min_inputs = 2, .max_inputs = 3, .infer = tensor_scatter_infer,
             .kernel = tensor_scatter_kernel, .since_version = 24});
}

}  // namespace tessel::movement
