// Pooling: MaxPool (with the optional Indices output), AveragePool, LpPool,
// the global pools and MaxUnpool. MaxRoiPool and RoiAlign are in pool_roi.cpp.
//
// A window along each spatial axis is planned once per output coordinate
// (which input coordinates it covers, and how many padded positions it
// spans); every output element then walks the cartesian product of those
// per-axis lists, so padding and ceil_mode overflow never need a bounds check
// in the inner loop. Values are read as double (exact for every accepted
// dtype) and sums accumulate in double.
#include <cmath>
#include <limits>

#include "tessel/ops/conv/conv_util.h"
#include "tessel/ops/registry.h"

namespace tessel {

void register_pool_roi_ops(OpRegistry& r);  // pool_roi.cpp

namespace {

using convutil::Window;

bool is_maxpool_type(DType dt) { return convutil::is_conv_float(dt) || dt == DType::I8 || dt == DType::U8; }

// Per spatial axis and output coordinate: the covered input coordinates, and
// the number of window positions inside [-pad_begin, in + pad_end) (the
// divisor of AveragePool with count_include_pad).
struct AxisPlan {
  std::vector<std::vector<int64_t>> coords;
  std::vector<int64_t> padded_count;
};

std::vector<AxisPlan> plan_windows(const Window& w, const std::vector<int64_t>& in, const std::vector<int64_t>& out) {
  const size_t nd = in.size();
  std::vector<AxisPlan> plan(nd);
  for (size_t d = 0; d < nd; ++d) {
    plan[d].coords.resize(static_cast<size_t>(out[d]));
    plan[d].padded_count.resize(static_cast<size_t>(out[d]));
    for (int64_t o = 0; o < out[d]; ++o) {
      int64_t count = 0;
      for (int64_t k = 0; k < w.kernel[d]; ++k) {
        const int64_t i = o * w.strides[d] - w.pads[d] + k * w.dilations[d];
        if (i >= 0 && i < in[d]) plan[d].coords[static_cast<size_t>(o)].push_back(i);
        if (i < in[d] + w.pads[nd + d]) ++count;
      }
      plan[d].padded_count[static_cast<size_t>(o)] = count;
    }
  }
  return plan;
}

// Calls f(offset_row_major, offset_col_major) for every input element of the
// window at output coordinate `o`.
template <class F>
void for_each_in_window(const std::vector<AxisPlan>& plan, const std::vector<int64_t>& o,
                        const std::vector<int64_t>& in, F&& f) {
  const size_t nd = plan.size();
  std::vector<const std::vector<int64_t>*> lists(nd);
  for (size_t d = 0; d < nd; ++d) {
    lists[d] = &plan[d].coords[static_cast<size_t>(o[d])];
    if (lists[d]->empty()) return;
  }
  std::vector<size_t> pos(nd, 0);
  while (true) {
    int64_t row = 0, colm = 0, cstride = 1;
    for (size_t d = 0; d < nd; ++d) {
      const int64_t i = (*lists[d])[pos[d]];
      row = row * in[d] + i;
      colm += i * cstride;
      cstride *= in[d];
    }
    f(row, colm);
    size_t d = nd;
    while (d > 0) {
      --d;
      if (++pos[d] < lists[d]->size()) break;
      pos[d] = 0;
      if (d == 0) return;
    }
    if (nd == 0) return;
  }
}

// Advances a row-major coordinate; returns false after the last one.
bool next_coord(std::vector<int64_t>& o, const std::vector<int64_t>& extent) {
  for (size_t d = o.size(); d-- > 0;) {
    if (++o[d] < extent[d]) return true;
    o[d] = 0;
  }
  return false;
}

// ---- shared infer/kernel frame for windowed pools -----------------------------------

void pool_infer_common(InferContext& ctx, bool (*accept)(DType), const char* accepted, bool with_dilations) {
  const DType dt = ctx.input_dtype(0);
  check_dtype(ctx.node, 0, dt, accept, accepted);
  if (!ctx.has_shape(0)) {
    for (size_t i = 0; i < ctx.out_types.size(); ++i)
      ctx.set_output_unknown_shape(i, i == 0 ? dt : DType::I64);
    return;
  }
  const Shape& xs = ctx.input_shape(0);
  TS_CHECK(xs.size() >= 3, ctx.node.describe(), ": input must have rank >= 3, got ", xs.size());
  const Window w = convutil::read_window(ctx.node, xs.size() - 2, nullptr, with_dilations, true);
  Shape out{xs[0], xs[1]};
  for (const Dim& d : convutil::forward_out_dims(w, Shape(xs.begin() + 2, xs.end()))) out.push_back(d);
  ctx.set_output(0, dt, out);
  if (ctx.out_types.size() > 1) ctx.set_output(1, DType::I64, out);
}

struct PoolFrame {
  int64_t planes = 0;  // N * C
  std::vector<int64_t> in, out, out_shape;
  int64_t in_size = 0, out_size = 0;
  Window w;
  std::vector<AxisPlan> plan;
};

PoolFrame pool_frame(const Node& node, const Tensor& x, bool with_dilations) {
  TS_CHECK(x.rank() >= 3, node.describe(), ": input must have rank >= 3, got ", x.rank());
  PoolFrame f;
  f.planes = checked_mul(x.dim(0), x.dim(1));
  f.in = convutil::dims_from(x, 2);
  f.w = convutil::read_window(node, f.in.size(), nullptr, with_dilations, true);
  f.out = convutil::forward_out_sizes(f.w, f.in, node);
  f.in_size = convutil::prod(f.in);
  f.out_size = convutil::prod(f.out);
  f.out_shape = {x.dim(0), x.dim(1)};
  f.out_shape.insert(f.out_shape.end(), f.out.begin(), f.out.end());
  convutil::check_elements(node, checked_mul(f.planes, f.out_size));
  f.plan = plan_windows(f.w, f.in, f.out);
  return f;
}

// ---- MaxPool ----------------------------------------------------------------------

void maxpool_infer(InferContext& ctx) {
  pool_infer_common(ctx, is_maxpool_type, "a float type, int8 or uint8", true);
}

void maxpool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  check_dtype(ctx.node, 0, x.dtype(), is_maxpool_type, "a float type, int8 or uint8");
  const int64_t storage_order = ctx.node.attr_int("storage_order", 0);
  TS_CHECK(storage_order == 0 || storage_order == 1, ctx.node.describe(), ": storage_order must be 0 or 1");
  PoolFrame f = pool_frame(ctx.node, x, true);
  const std::vector<double> xv = convutil::to_f64(x);
  std::vector<double> y(static_cast<size_t>(f.planes * f.out_size));
  std::vector<int64_t> idx(y.size(), 0);
  for (int64_t p = 0; p < f.planes; ++p) {
    const double* plane = xv.data() + p * f.in_size;
    std::vector<int64_t> o(f.in.size(), 0);
    for (int64_t j = 0; j < f.out_size; ++j, next_coord(o, f.out)) {
      // NaN propagates (as numpy/PyTorch max do); ties keep the first index.
      double best = -std::numeric_limits<double>::infinity();
      int64_t best_row = -1, best_col = -1;
      for_each_in_window(f.plan, o, f.in, [&](int64_t row, int64_t colm) {
        const double v = plane[row];
        if (best_row < 0 || v > best || (std::isnan(v) && !std::isnan(best))) {
          best = v;
          best_row = row;
          best_col = colm;
        }
      });
      // A window entirely in the padding has no element; -inf is the max of
      // the empty set (only reachable with pads >= kernel extent).
      y[static_cast<size_t>(p * f.out_size + j)] = best;
      const int64_t local = storage_order == 0 ? best_row : best_col;
      idx[static_cast<size_t>(p * f.out_size + j)] = local < 0 ? -1 : p * f.in_size + local;
    }
  }
  ctx.set_output(0, convutil::from_f64(x.dtype(), f.out_shape, y));
  if (ctx.output_wanted(1)) {
    Tensor it(DType::I64, f.out_shape);
    if (!idx.empty()) std::copy(idx.begin(), idx.end(), it.mutable_data<int64_t>());
    ctx.set_output(1, std::move(it));
  }
}

// ---- AveragePool / LpPool ------------------------------------------------------------

void avgpool_infer(InferContext& ctx) {
  pool_infer_common(ctx, convutil::is_conv_float, "a float type (f16, bf16, f32, f64)", true);
}

void avgpool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  check_dtype(ctx.node, 0, x.dtype(), convutil::is_conv_float, "a float type (f16, bf16, f32, f64)");
  const bool include_pad = ctx.node.attr_int("count_include_pad", 0) != 0;
  PoolFrame f = pool_frame(ctx.node, x, true);
  const std::vector<double> xv = convutil::to_f64(x);
  std::vector<double> y(static_cast<size_t>(f.planes * f.out_size));
  const size_t nd = f.in.size();
  for (int64_t p = 0; p < f.planes; ++p) {
    const double* plane = xv.data() + p * f.in_size;
    std::vector<int64_t> o(nd, 0);
    for (int64_t j = 0; j < f.out_size; ++j, next_coord(o, f.out)) {
      double sum = 0;
      int64_t count = 0;
      for_each_in_window(f.plan, o, f.in, [&](int64_t row, int64_t) {
        sum += plane[row];
        ++count;
      });
      if (include_pad) {
        count = 1;
        for (size_t d = 0; d < nd; ++d) count *= f.plan[d].padded_count[static_cast<size_t>(o[d])];
      }
      y[static_cast<size_t>(p * f.out_size + j)] = sum / static_cast<double>(count);
    }
  }
  ctx.set_output(0, convutil::from_f64(x.dtype(), f.out_shape, y));
}

int64_t read_p(const Node& n) {
  const int64_t p = n.attr_int("p", 2);
  TS_CHECK(p >= 1, n.describe(), ": p = ", p, " must be >= 1");
  return p;
}

double lp_root(double sum, int64_t p) {
  return p == 1 ? sum : p == 2 ? std::sqrt(sum) : std::pow(sum, 1.0 / static_cast<double>(p));
}

void lppool_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  check_dtype(ctx.node, 0, x.dtype(), convutil::is_conv_float, "a float type (f16, bf16, f32, f64)");
  const int64_t p = read_p(ctx.node);
  PoolFrame f = pool_frame(ctx.node, x, true);
  const std::vector<double> xv = convutil::to_f64(x);
  std::vector<double> y(static_cast<size_t>(f.planes * f.out_size));
  for (int64_t pl = 0; pl < f.planes; ++pl) {
    const double* plane = xv.data() + pl * f.in_size;
    std::vector<int64_t> o(f.in.size(), 0);
    for (int64_t j = 0; j < f.out_size; ++j, next_coord(o, f.out)) {
      double sum = 0;
      for_each_in_window(f.plan, o, f.in, [&](int64_t row, int64_t) {
        sum += std::pow(std::fabs(plane[row]), static_cast<double>(p));
      });
      y[static_cast<size_t>(pl * f.out_size + j)] = lp_root(sum, p);
    }
  }
  ctx.set_output(0, convutil::from_f64(x.dtype(), f.out_shape, y));
}

// LpPool-1 and GlobalLpPool-1 carried p as a float attribute.
void lp_upgrade(Node& node, int64_t opset) {
  auto it = node.attrs.find("p");
  if (it != node.attrs.end() && it->second.kind == Attribute::Kind::Float) {
    const float p = it->second.f;
    TS_CHECK(p >= 1 && p == std::floor(p), node.describe(), ": p = ", p, " must be a positive integer");
    it->second = Attribute::of_int(static_cast<int64_t>(p));
  }
  (void)opset;
}

// ---- global pools -----------------------------------------------------------------

enum class GlobalKind { Avg, Max, Lp };

void global_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_dtype(ctx.node, 0, dt, convutil::is_conv_float, "a float type (f16, bf16, f32, f64)");
  if (!ctx.has_shape(0)) return ctx.set_output_unknown_shape(0, dt);
  const Shape& xs = ctx.input_shape(0);
  TS_CHECK(xs.size() >= 2, ctx.node.describe(), ": input must have rank >= 2, got ", xs.size());
  Shape out{xs[0], xs[1]};
  out.resize(xs.size(), Dim(1));
  ctx.set_output(0, dt, out);
}

template <GlobalKind K>
void global_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  check_dtype(ctx.node, 0, x.dtype(), convutil::is_conv_float, "a float type (f16, bf16, f32, f64)");
  TS_CHECK(x.rank() >= 2, ctx.node.describe(), ": input must have rank >= 2, got ", x.rank());
  const int64_t p = K == GlobalKind::Lp ? read_p(ctx.node) : 1;
  const int64_t planes = checked_mul(x.dim(0), x.dim(1));
  const int64_t size = convutil::prod(convutil::dims_from(x, 2));
  const std::vector<double> xv = convutil::to_f64(x);
  std::vector<double> y(static_cast<size_t>(planes));
  for (int64_t pl = 0; pl < planes; ++pl) {
    const double* v = xv.data() + pl * size;
    double acc = K == GlobalKind::Max ? -std::numeric_limits<double>::infinity() : 0.0;
    for (int64_t i = 0; i < size; ++i) {
      switch (K) {
        case GlobalKind::Avg: acc += v[i]; break;
        case GlobalKind::Max: acc = (v[i] > acc || std::isnan(v[i])) && !std::isnan(acc) ? v[i] : acc; break;
        case GlobalKind::Lp: acc += std::pow(std::fabs(v[i]), static_cast<double>(p)); break;
      }
    }
    switch (K) {
      case GlobalKind::Avg: acc /= static_cast<double>(size); break;
      case GlobalKind::Max: break;
      case GlobalKind::Lp: acc = lp_root(acc, p); break;
    }
    y[static_cast<size_t>(pl)] = acc;
  }
  std::vector<int64_t> shape{x.dim(0), x.dim(1)};
  shape.resize(x.rank(), 1);
  ctx.set_output(0, convutil::from_f64(x.dtype(), shape, y));
}

// ---- MaxUnpool ----------------------------------------------------------------------

// Default output sizes: the inverse of MaxPool's floor rule.
std::vector<int64_t> unpool_default_sizes(const Node& node, const Window& w, const std::vector<int64_t>& in) {
  const size_t nd = in.size();
  std::vector<int64_t> out(nd);
  for (size_t i = 0; i < nd; ++i) {
    out[i] = checked_add(checked_mul(in[i] - 1, w.strides[i]), w.kernel[i]) - w.pads[i] - w.pads[nd + i];
    TS_CHECK(out[i] >= 0, node.describe(), ": output size ", out[i], " along spatial axis ", i, " is negative");
  }
  return out;
}

void maxunpool_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  check_dtype(ctx.node, 0, dt, convutil::is_conv_float, "a float type (f16, bf16, f32, f64)");
  check_dtype(ctx.node, 1, ctx.input_dtype(1), [](DType d) { return d == DType::I64; }, "int64");
  if (ctx.has_input(2)) {
    auto v = ctx.input_dims_value(2);
    if (v) return ctx.set_output(0, dt, *v);
    return ctx.set_output_unknown_shape(0, dt);
  }
  if (!ctx.has_shape(0)) return ctx.set_output_unknown_shape(0, dt);
  const Shape& xs = ctx.input_shape(0);
  TS_CHECK(xs.size() >= 3, ctx.node.describe(), ": input must have rank >= 3, got ", xs.size());
  const size_t nd = xs.size() - 2;
  const Window w = convutil::read_window(ctx.node, nd, nullptr, false, false);
  Shape out{xs[0], xs[1]};
  for (size_t i = 0; i < nd; ++i)
    out.push_back((xs[i + 2] - 1) * w.strides[i] + (w.kernel[i] - w.pads[i] - w.pads[nd + i]));
  ctx.set_output(0, dt, out);
}

void maxunpool_kernel(KernelContext& ctx) {
  const Node& node = ctx.node;
  const Tensor& x = ctx.input(0);
  const Tensor& ind = ctx.input(1);
  check_dtype(node, 0, x.dtype(), convutil::is_conv_float, "a float type (f16, bf16, f32, f64)");
  check_dtype(node, 1, ind.dtype(), [](DType d) { return d == DType::I64; }, "int64");
  TS_CHECK(x.rank() >= 3, node.describe(), ": input must have rank >= 3, got ", x.rank());
  TS_CHECK(ind.shape() == x.shape(), node.describe(), ": indices shape ", dims_str(ind.shape()),
           " differs from input shape ", dims_str(x.shape()));
  const std::vector<int64_t> in = convutil::dims_from(x, 2);
  const Window w = convutil::read_window(node, in.size(), nullptr, false, false);
  // Indices address the default (inferred) output layout; an explicit
  // output_shape then places that block at the start of each axis, as the
  // spec's reference does.
  std::vector<int64_t> inferred{x.dim(0), x.dim(1)};
  for (int64_t d : unpool_default_sizes(node, w, in)) inferred.push_back(d);
  std::vector<int64_t> shape = inferred;
  if (ctx.has_input(2)) {
    const Tensor& os = ctx.input(2);
    TS_CHECK(is_int(os.dtype()) && os.rank() == 1 && os.numel() == static_cast<int64_t>(x.rank()), node.describe(),
             ": output_shape must be a 1-D integer tensor of ", x.rank(), " values");
    shape.clear();
    for (int64_t i = 0; i < os.numel(); ++i) shape.push_back(os.get_i64(i));
    TS_CHECK(shape[0] == x.dim(0) && shape[1] == x.dim(1), node.describe(), ": output_shape ", dims_str(shape),
             " must keep N and C of the input");
    for (size_t d = 2; d < shape.size(); ++d)
      TS_CHECK(shape[d] >= inferred[d], node.describe(), ": output_shape ", dims_str(shape),
               " is smaller than the unpooled size ", dims_str(inferred));
  }
  const int64_t total = convutil::check_elements(node, checked_numel(inferred));
  convutil::check_elements(node, checked_numel(shape));
  const int64_t* iv = ind.data<int64_t>();
  const std::vector<double> xv = convutil::to_f64(x);
  std::vector<double> block(static_cast<size_t>(total), 0.0);
  for (int64_t i = 0; i < x.numel(); ++i) {
    TS_CHECK(iv[i] >= 0 && iv[i] < total, node.describe(), ": index ", iv[i], " is out of range for an output of ",
             total, " elements");
    block[static_cast<size_t>(iv[i])] = xv[static_cast<size_t>(i)];
  }
  std::vector<double> yv(static_cast<size_t>(checked_numel(shape)), 0.0);
  const std::vector<int64_t> bstr = strides_of(inferred), ystr = strides_of(shape);
  for (int64_t i = 0; i < total; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < inferred.size(); ++d) off += (i / bstr[d]) % inferred[d] * ystr[d];
    yv[static_cast<size_t>(off)] = block[static_cast<size_t>(i)];
  }
  ctx.set_output(0, convutil::from_f64(x.dtype(), shape, yv));
}

}  // namespace

void register_pool_ops(OpRegistry& r) {
  r.add({"MaxPool", "", 1, 1, 1, 2, maxpool_infer, maxpool_kernel, nullptr, 1});
  r.add({"AveragePool", "", 1, 1, 1, 1, avgpool_infer, avgpool_kernel, nullptr, 1});
  r.add({"LpPool", "", 1, 1, 1, 1, avgpool_infer, lppool_kernel, lp_upgrade, 1});
  r.add({"GlobalAveragePool", "", 1, 1, 1, 1, global_infer, global_kernel<GlobalKind::Avg>, nullptr, 1});
  r.add({"GlobalMaxPool", "", 1, 1, 1, 1, global_infer, global_kernel<GlobalKind::Max>, nullptr, 1});
  r.add({"GlobalLpPool", "", 1, 1, 1, 1, global_infer, global_kernel<GlobalKind::Lp>, lp_upgrade, 1});
  r.add({"MaxUnpool", "", 2, 3, 1, 1, maxunpool_infer, maxunpool_kernel, nullptr, 9});
  register_pool_roi_ops(r);
}

}  // namespace tessel
