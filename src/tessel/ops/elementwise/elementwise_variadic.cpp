// Ops over several broadcast inputs: Sum Mean Max Min (1..N inputs), Where,
// and Clip (whose bounds are optional scalar inputs).
#include <cmath>
#include <limits>

#include "tessel/ops/elementwise/elementwise.h"

namespace tessel::ew {

namespace {

std::vector<size_t> all_inputs(size_t n) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = i;
  return v;
}

// Output shape of a variadic op over concrete inputs.
std::vector<int64_t> broadcast_all(const KernelContext& ctx) {
  std::vector<int64_t> out = ctx.input(0).shape();
  for (size_t i = 1; i < ctx.num_inputs(); ++i) out = broadcast_dims(out, ctx.input(i).shape(), ctx.node);
  return out;
}

void check_variadic_dtypes(const KernelContext& ctx, DTypeSet set) {
  TS_CHECK(ctx.num_inputs() >= 1, ctx.node.describe(), ": needs at least one input");
  require_dtype(ctx.node, 0, ctx.input(0).dtype(), set);
  for (size_t i = 1; i < ctx.num_inputs(); ++i)
    require_same_dtype(ctx.node, i, ctx.input(0).dtype(), ctx.input(i).dtype());
}

// ---- Sum, Mean: accumulated in double, rounded once ---------------------------------------

template <bool kMean>
void sum_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  require_dtype(ctx.node, 0, dt, kFloat);
  for (size_t i = 1; i < ctx.num_inputs(); ++i) require_same_dtype(ctx.node, i, dt, ctx.input_dtype(i));
  infer_broadcast_output(ctx, all_inputs(ctx.num_inputs()), dt);
}

template <bool kMean>
void sum_kernel(KernelContext& ctx) {
  check_variadic_dtypes(ctx, kFloat);
  const std::vector<int64_t> shape = broadcast_all(ctx);
  Tensor out(ctx.input(0).dtype(), shape);
  std::vector<double> acc(static_cast<size_t>(out.numel()), 0.0);
  visit_float(out.dtype(), ctx.node, [&]<class IO>() {
    using S = typename IO::S;
    for (size_t k = 0; k < ctx.num_inputs(); ++k) {
      const Tensor& in = ctx.input(k);
      const S* p = in.data<S>();
      broadcast_walk<1>(shape, {&in.shape()},
                        [&](int64_t o, const std::array<int64_t, 1>& ix) { acc[o] += IO::load(p[ix[0]]); });
    }
    const double n = static_cast<double>(ctx.num_inputs());
    S* po = out.mutable_data<S>();
    for (size_t i = 0; i < acc.size(); ++i) po[i] = IO::store(kMean ? acc[i] / n : acc[i]);
  });
  ctx.set_output(0, std::move(out));
}

// ---- Max, Min: NaN propagates (as numpy's maximum/minimum) ----------------------------------

template <bool kMax>
void minmax_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  require_dtype(ctx.node, 0, dt, kNumeric);
  for (size_t i = 1; i < ctx.num_inputs(); ++i) require_same_dtype(ctx.node, i, dt, ctx.input_dtype(i));
  infer_broadcast_output(ctx, all_inputs(ctx.num_inputs()), dt);
  if (!is_int(dt)) return;
  infer_sym_nary(ctx, all_inputs(ctx.num_inputs()), [](const std::vector<Dim>& v) -> std::optional<Dim> {
    Dim r = v[0];
    for (size_t i = 1; i < v.size(); ++i) r = kMax ? Dim::max(r, v[i]) : Dim::min(r, v[i]);
    return r;
  });
}

template <bool kMax, class T>
T pick(T a, T b) {
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(a) || std::isnan(b)) return std::numeric_limits<T>::quiet_NaN();
  }
  return kMax ? (b > a ? b : a) : (b < a ? b : a);
}

template <bool kMax>
void minmax_kernel(KernelContext& ctx) {
  check_variadic_dtypes(ctx, kNumeric);
  const std::vector<int64_t> shape = broadcast_all(ctx);
  const DType dt = ctx.input(0).dtype();
  Tensor out(dt, shape);
  // Folds the inputs into an accumulator of the compute type C (double for
  // floats: exact for every float dtype), then stores.
  auto fold = [&]<class S, class C>(auto load, auto store) {
    std::vector<C> acc(static_cast<size_t>(out.numel()));
    for (size_t k = 0; k < ctx.num_inputs(); ++k) {
      const Tensor& in = ctx.input(k);
      const S* p = in.data<S>();
      broadcast_walk<1>(shape, {&in.shape()}, [&](int64_t o, const std::array<int64_t, 1>& ix) {
        const C v = load(p[ix[0]]);
        acc[o] = k == 0 ? v : pick<kMax, C>(acc[o], v);
      });
    }
    S* po = out.mutable_data<S>();
    for (size_t i = 0; i < acc.size(); ++i) po[i] = store(acc[i]);
  };
  if (is_float(dt)) {
    visit_float(dt, ctx.node, [&]<class IO>() {
      using S = typename IO::S;
      fold.template operator()<S, double>([](S v) { return IO::load(v); }, [](double v) { return IO::store(v); });
    });
  } else {
    visit_int(dt, ctx.node, [&]<class T>() {
      fold.template operator()<T, T>([](T v) { return v; }, [](T v) { return v; });
    });
  }
  ctx.set_output(0, std::move(out));
}

// ---- Where ---------------------------------------------------------------------------------

void where_infer(InferContext& ctx) {
  require_dtype(ctx.node, 0, ctx.input_dtype(0), kBool);
  const DType dt = ctx.input_dtype(1);
  require_same_dtype(ctx.node, 2, dt, ctx.input_dtype(2));
  infer_broadcast_output(ctx, {0, 1, 2}, dt);
  if (is_float(dt) || dt == DType::String) return;
  infer_sym_nary(ctx, {0, 1, 2}, [](const std::vector<Dim>& v) -> std::optional<Dim> {
    if (auto c = v[0].const_value()) return *c != 0 ? v[1] : v[2];
    if (v[1] == v[2]) return v[1];
    return std::nullopt;
  });
}

// Selects elements of storage type S (any dtype: only bits are copied).
template <class S>
Tensor where_select(const Tensor& c, const Tensor& x, const Tensor& y, const std::vector<int64_t>& shape) {
  Tensor out(x.dtype(), shape);
  const uint8_t* pc = c.data<uint8_t>();
  const S* px = x.data<S>();
  const S* py = y.data<S>();
  S* po = out.mutable_data<S>();
  broadcast_walk<3>(shape, {&c.shape(), &x.shape(), &y.shape()}, [&](int64_t o, const std::array<int64_t, 3>& ix) {
    po[o] = pc[ix[0]] ? px[ix[1]] : py[ix[2]];
  });
  return out;
}

void where_kernel(KernelContext& ctx) {
  const Tensor& c = ctx.input(0);
  const Tensor& x = ctx.input(1);
  const Tensor& y = ctx.input(2);
  require_dtype(ctx.node, 0, c.dtype(), kBool);
  require_same_dtype(ctx.node, 2, x.dtype(), y.dtype());
  const std::vector<int64_t> shape =
      broadcast_dims(broadcast_dims(c.shape(), x.shape(), ctx.node), y.shape(), ctx.node);
  if (x.dtype() == DType::String) {
    Tensor out(DType::String, shape);
    auto& so = out.mutable_strings();
    const auto& sx = x.strings();
    const auto& sy = y.strings();
    const uint8_t* pc = c.data<uint8_t>();
    broadcast_walk<3>(shape, {&c.shape(), &x.shape(), &y.shape()}, [&](int64_t o, const std::array<int64_t, 3>& ix) {
      so[o] = pc[ix[0]] ? sx[ix[1]] : sy[ix[2]];
    });
    ctx.set_output(0, std::move(out));
    return;
  }
  switch (dtype_storage_size(x.dtype())) {
    case 1: ctx.set_output(0, where_select<uint8_t>(c, x, y, shape)); return;
    case 2: ctx.set_output(0, where_select<uint16_t>(c, x, y, shape)); return;
    case 4: ctx.set_output(0, where_select<uint32_t>(c, x, y, shape)); return;
    case 8: ctx.set_output(0, where_select<uint64_t>(c, x, y, shape)); return;
    default: fail(ctx.node.describe(), ": unsupported dtype ", dtype_name(x.dtype()));
  }
}

// ---- Clip ------------------------------------------------------------------------------------

// A bound input: omitted, or a tensor of one element with the input's dtype.
const Tensor* clip_bound(const KernelContext& ctx, size_t i) {
  if (!ctx.has_input(i)) return nullptr;
  const Tensor& t = ctx.input(i);
  require_same_dtype(ctx.node, i, ctx.input(0).dtype(), t.dtype());
  TS_CHECK(t.numel() == 1, ctx.node.describe(), ": input ", i, " (", i == 1 ? "min" : "max",
           ") must be a scalar, got shape ", dims_str(t.shape()));
  return &t;
}

void clip_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  require_dtype(ctx.node, 0, dt, kNumeric);
  for (size_t i = 1; i < 3; ++i) {
    if (!ctx.has_input(i)) continue;
    require_same_dtype(ctx.node, i, dt, ctx.input_dtype(i));
    if (ctx.has_shape(i)) {
      const std::optional<int64_t> n = num_elements(ctx.input_shape(i)).const_value();
      TS_CHECK(!n || *n == 1, ctx.node.describe(), ": input ", i, " must be a scalar, got shape ",
               shape_str(ctx.input_shape(i)));
    }
  }
  infer_same_shape(ctx, dt);
  if (!is_int(dt)) return;
  std::vector<size_t> ins = {0};
  const bool lo = ctx.has_input(1), hi = ctx.has_input(2);
  if (lo) ins.push_back(1);
  if (hi) ins.push_back(2);
  infer_sym_nary(ctx, ins, [&](const std::vector<Dim>& v) -> std::optional<Dim> {
    Dim r = v[0];
    if (lo) r = Dim::max(r, v[1]);
    if (hi) r = Dim::min(r, v[lo ? 2 : 1]);
    return r;
  });
}

void clip_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  require_dtype(ctx.node, 0, x.dtype(), kNumeric);
  const Tensor* lo = clip_bound(ctx, 1);
  const Tensor* hi = clip_bound(ctx, 2);
  if (is_float(x.dtype())) {
    const double l = lo ? lo->get_f64(0) : -std::numeric_limits<double>::infinity();
    const double h = hi ? hi->get_f64(0) : std::numeric_limits<double>::infinity();
    ctx.set_output(0, visit_float(x.dtype(), ctx.node, [&]<class IO>() {
      using S = typename IO::S;
      // min(max(x, lo), hi): when lo > hi every element becomes hi; NaN stays.
      return map_unary<S, S>(x, x.dtype(), [&](S s) {
        const double v = IO::load(s);
        if (std::isnan(v)) return s;
        return IO::store(std::fmin(std::fmax(v, l), h));
      });
    }));
    return;
  }
  ctx.set_output(0, visit_int(x.dtype(), ctx.node, [&]<class T>() {
    const T l = lo ? lo->data<T>()[0] : std::numeric_limits<T>::lowest();
    const T h = hi ? hi->data<T>()[0] : std::numeric_limits<T>::max();
    return map_unary<T, T>(x, x.dtype(), [&](T v) {
      const T m = v < l ? l : v;
      return m > h ? h : m;
    });
  }));
}

// Before opset 11 the bounds were float attributes; they become constant
// inputs of the input's dtype (through CastLike when that is not known yet).
void clip_upgrade(Node& node, int64_t opset) {
  drop_consumed_inputs(node);
  if (opset >= 11) return;
  const bool has_min = node.has_attr("min"), has_max = node.has_attr("max");
  const float mn = node.attr_float("min", -std::numeric_limits<float>::max());
  const float mx = node.attr_float("max", std::numeric_limits<float>::max());
  node.attrs.erase("min");
  node.attrs.erase("max");
  Graph* g = node.owner;
  Value* x = node.input(0);
  TS_CHECK(x, node.describe(), ": input 0 is missing");
  auto bound = [&](float v, const char* what) -> Value* {
    const DType dt = x->type.dtype;
    if (dt != DType::Undefined) {
      Tensor t(dt, {});
      t.set_f64(0, v);
      return g->add_initializer(g->fresh_name(node.name + "_" + what), t);
    }
    Value* f = g->add_initializer(g->fresh_name(node.name + "_" + what), Tensor::scalar_f32(v));
    return g->insert_node_before(&node, "CastLike", {f, x}, 1)->outputs[0];
  };
  node.inputs.resize(3, nullptr);
  node.inputs[1] = has_min ? bound(mn, "min") : nullptr;
  node.inputs[2] = has_max ? bound(mx, "max") : nullptr;
  while (!node.inputs.empty() && !node.inputs.back()) node.inputs.pop_back();
}

OpSchema variadic(const char* name, InferFn infer, KernelFn kernel, int since, UpgradeFn upgrade) {
  return OpSchema{.name = name, .domain = "", .min_inputs = 1, .max_inputs = -1, .min_outputs = 1,
                  .max_outputs = 1, .infer = infer, .kernel = kernel, .upgrade = upgrade,
                  .since_version = since};
}

}  // namespace

void register_variadic_ops(OpRegistry& r) {
  // Opset-1 forms carried consumed_inputs; broadcasting (opset 8) only widens.
  r.add(variadic("Sum", sum_infer<false>, sum_kernel<false>, 1, upgrade_legacy_unary));
  r.add(variadic("Mean", sum_infer<true>, sum_kernel<true>, 1, upgrade_legacy_unary));
  r.add(variadic("Max", minmax_infer<true>, minmax_kernel<true>, 1, upgrade_legacy_unary));
  r.add(variadic("Min", minmax_infer<false>, minmax_kernel<false>, 1, upgrade_legacy_unary));
  r.add(OpSchema{.name = "Where", .domain = "", .min_inputs = 3, .max_inputs = 3, .min_outputs = 1,
                 .max_outputs = 1, .infer = where_infer, .kernel = where_kernel, .since_version = 9});
  r.add(OpSchema{.name = "Clip", .domain = "", .min_inputs = 1, .max_inputs = 3, .min_outputs = 1,
                 .max_outputs = 1, .infer = clip_infer, .kernel = clip_kernel, .upgrade = clip_upgrade,
                 .since_version = 1});
}

}  // namespace tessel::ew
