// Reductions over axes: ReduceSum/Mean/Max/Min/Prod/L1/L2/LogSum/LogSumExp/
// SumSquare, and ArgMax/ArgMin. The softmax family, scans (CumSum, CumProd)
// and TopK live in reduction_softmax.cpp and reduction_scan.cpp.
//
// Latest forms: axes is an optional int64 input (ReduceSum since opset 13, the
// others since 18) with `noop_with_empty_axes`; older models carry axes as an
// attribute, which `upgrade` moves into a constant input.
#include <cmath>
#include <limits>

#include "tessel/ops/math_util.h"
#include "tessel/ops/registry.h"

namespace tessel {

void register_softmax_ops(OpRegistry& r);  // reduction_softmax.cpp
void register_scan_ops(OpRegistry& r);     // reduction_scan.cpp

namespace {

using namespace mathops;

enum class ReduceKind { Sum, Mean, Max, Min, Prod, L1, L2, LogSum, LogSumExp, SumSquare };

// dtypes accepted per kind (latest opset).
std::initializer_list<DType> reduce_types(ReduceKind k) {
  static constexpr std::initializer_list<DType> kMaxMin = {DType::F16, DType::F32, DType::F64, DType::BF16,
                                                          DType::I32, DType::I64, DType::U32, DType::U64,
                                                          DType::U8,  DType::I8,  DType::Bool};
  switch (k) {
    case ReduceKind::Max: case ReduceKind::Min: return kMaxMin;
    case ReduceKind::LogSum: case ReduceKind::LogSumExp: return kFloatTypes;
    case ReduceKind::Sum: case ReduceKind::Mean: case ReduceKind::Prod: case ReduceKind::L1:
    case ReduceKind::L2: case ReduceKind::SumSquare: return kNumericTypes;
  }
  return kNumericTypes;
}

// Which input axes are reduced, from the optional axes input. Returns one flag
// per input dim.
std::vector<bool> reduced_flags(const Node& n, int64_t rank, const std::vector<int64_t>* axes) {
  const bool noop = n.attr_int("noop_with_empty_axes", 0) != 0;
  std::vector<bool> red(static_cast<size_t>(rank), false);
  if (!axes || axes->empty()) {
    if (!noop) red.assign(static_cast<size_t>(rank), true);
    return red;
  }
  for (int64_t a : normalize_axes(*axes, rank, n)) red[a] = true;
  return red;
}

// Layout of one reduction: output shape and, per input dim, the stride of the
// output index it feeds (0 for reduced dims).
struct ReducePlan {
  std::vector<int64_t> out_shape;
  std::vector<int64_t> out_stride;
  int64_t out_numel = 1;
  int64_t group = 1;  // input elements per output element
};

ReducePlan make_plan(const std::vector<int64_t>& in_shape, const std::vector<bool>& red, bool keepdims) {
  ReducePlan p;
  const size_t r = in_shape.size();
  p.out_stride.assign(r, 0);
  std::vector<int64_t> full_out(r);  // keepdims layout, used for strides
  for (size_t d = 0; d < r; ++d) {
    full_out[d] = red[d] ? 1 : in_shape[d];
    if (red[d]) p.group *= in_shape[d];
    if (!red[d] || keepdims) p.out_shape.push_back(full_out[d]);
  }
  const std::vector<int64_t> st = strides_of(full_out);
  for (size_t d = 0; d < r; ++d) p.out_stride[d] = red[d] ? 0 : st[d];
  p.out_numel = checked_numel(p.out_shape);
  return p;
}

// Calls f(input_flat, output_flat) for every input element in memory order.
template <class F>
void walk(const std::vector<int64_t>& shape, const std::vector<int64_t>& ostride, F&& f) {
  const int64_t total = checked_numel(shape);
  if (total == 0) return;
  const size_t r = shape.size();
  if (r == 0) {
    f(int64_t{0}, int64_t{0});
    return;
  }
  const int64_t last = shape[r - 1], ls = ostride[r - 1];
  std::vector<int64_t> idx(r, 0);
  int64_t o = 0;
  for (int64_t i = 0; i < total; i += last) {
    for (int64_t j = 0; j < last; ++j) f(i + j, o + j * ls);
    for (size_t d = r - 1; d-- > 0;) {
      o += ostride[d];
      if (++idx[d] < shape[d]) break;
      o -= ostride[d] * shape[d];
      idx[d] = 0;
    }
  }
}

// ---- float reductions (computed in double) -------------------------------------

std::vector<double> reduce_float(ReduceKind k, const std::vector<double>& x, const std::vector<int64_t>& shape,
                                 const ReducePlan& p) {
  const double inf = std::numeric_limits<double>::infinity();
  double init = 0;
  if (k == ReduceKind::Max) init = -inf;
  if (k == ReduceKind::Min) init = inf;
  if (k == ReduceKind::Prod) init = 1;
  std::vector<double> acc(static_cast<size_t>(p.out_numel), init);

  if (k == ReduceKind::LogSumExp) {
    // Shift by the largest value below +inf so that exp cannot overflow; a
    // group of only -inf (or empty) gets shift 0 and yields log(0) = -inf.
    std::vector<double> mx(acc.size(), -inf);
    walk(shape, p.out_stride, [&](int64_t i, int64_t o) {
      if (x[i] != inf && x[i] > mx[o]) mx[o] = x[i];
    });
    for (double& m : mx)
      if (m == -inf) m = 0;
    walk(shape, p.out_stride, [&](int64_t i, int64_t o) { acc[o] += std::exp(x[i] - mx[o]); });
    for (size_t o = 0; o < acc.size(); ++o) acc[o] = std::log(acc[o]) + mx[o];
    return acc;
  }

  switch (k) {
    case ReduceKind::Sum: case ReduceKind::Mean: case ReduceKind::LogSum:
      walk(shape, p.out_stride, [&](int64_t i, int64_t o) { acc[o] += x[i]; });
      break;
    case ReduceKind::L1:
      walk(shape, p.out_stride, [&](int64_t i, int64_t o) { acc[o] += std::fabs(x[i]); });
      break;
    case ReduceKind::L2: case ReduceKind::SumSquare:
      walk(shape, p.out_stride, [&](int64_t i, int64_t o) { acc[o] += x[i] * x[i]; });
      break;
    case ReduceKind::Prod:
      walk(shape, p.out_stride, [&](int64_t i, int64_t o) { acc[o] *= x[i]; });
      break;
    case ReduceKind::Max:  // NaN propagates, as numpy's maximum.reduce
      walk(shape, p.out_stride, [&](int64_t i, int64_t o) {
        if (!std::isnan(acc[o]) && (std::isnan(x[i]) || x[i] > acc[o])) acc[o] = x[i];
      });
      break;
    case ReduceKind::Min:
      walk(shape, p.out_stride, [&](int64_t i, int64_t o) {
        if (!std::isnan(acc[o]) && (std::isnan(x[i]) || x[i] < acc[o])) acc[o] = x[i];
      });
      break;
    case ReduceKind::LogSumExp: break;  // handled above
  }
  switch (k) {
    case ReduceKind::Mean:
      for (double& a : acc) a /= static_cast<double>(p.group);
      break;
    case ReduceKind::L2:
      for (double& a : acc) a = std::sqrt(a);
      break;
    case ReduceKind::LogSum:
      for (double& a : acc) a = std::log(a);
      break;
    case ReduceKind::Sum: case ReduceKind::Max: case ReduceKind::Min: case ReduceKind::Prod:
    case ReduceKind::L1: case ReduceKind::LogSumExp: case ReduceKind::SumSquare:
      break;
  }
  return acc;
}

// ---- integer reductions (64-bit, wrapping) ------------------------------------

// Smallest / largest value of an integer (or bool) dtype, as its int64 bits.
int64_t int_lowest(DType t) {
  if (t == DType::Bool || is_unsigned_int(t)) return 0;
  return static_cast<int64_t>(uint64_t{1} << (int_bits(t) - 1)) * (int_bits(t) == 64 ? 1 : -1);
}
int64_t int_highest(DType t) {
  if (t == DType::Bool) return 1;
  const int bits = int_bits(t);
  if (is_unsigned_int(t)) return bits == 64 ? -1 : static_cast<int64_t>((uint64_t{1} << bits) - 1);
  return static_cast<int64_t>((uint64_t{1} << (bits - 1)) - 1);
}

std::vector<int64_t> reduce_int(ReduceKind k, DType dt, const Tensor& in, const ReducePlan& p) {
  const bool u64 = dt == DType::U64;
  const std::vector<int64_t> x = to_int64s(in);
  const std::vector<int64_t>& shape = in.shape();
  int64_t init = 0;
  if (k == ReduceKind::Max) init = int_lowest(dt);
  if (k == ReduceKind::Min) init = int_highest(dt);
  if (k == ReduceKind::Prod) init = 1;
  // Wrapping arithmetic is done on uint64 (signed overflow is undefined).
  std::vector<uint64_t> acc(static_cast<size_t>(p.out_numel), static_cast<uint64_t>(init));
  auto less = [u64](uint64_t a, uint64_t b) {
    return u64 ? a < b : static_cast<int64_t>(a) < static_cast<int64_t>(b);
  };
  switch (k) {
    case ReduceKind::Sum: case ReduceKind::Mean:
      walk(shape, p.out_stride, [&](int64_t i, int64_t o) { acc[o] += static_cast<uint64_t>(x[i]); });
      break;
    case ReduceKind::L1:
      walk(shape, p.out_stride, [&](int64_t i, int64_t o) {
        const uint64_t v = static_cast<uint64_t>(x[i]);
        acc[o] += (!u64 && x[i] < 0) ? uint64_t{0} - v : v;
      });
      break;
    case ReduceKind::L2: case ReduceKind::SumSquare:
      walk(shape, p.out_stride, [&](int64_t i, int64_t o) {
        const uint64_t v = static_cast<uint64_t>(x[i]);
        acc[o] += v * v;
      });
      break;
    case ReduceKind::Prod:
      walk(shape, p.out_stride, [&](int64_t i, int64_t o) { acc[o] *= static_cast<uint64_t>(x[i]); });
      break;
    case ReduceKind::Max:
      walk(shape, p.out_stride, [&](int64_t i, int64_t o) {
        if (less(acc[o], static_cast<uint64_t>(x[i]))) acc[o] = static_cast<uint64_t>(x[i]);
      });
      break;
    case ReduceKind::Min:
      walk(shape, p.out_stride, [&](int64_t i, int64_t o) {
        if (less(static_cast<uint64_t>(x[i]), acc[o])) acc[o] = static_cast<uint64_t>(x[i]);
      });
      break;
    case ReduceKind::LogSum: case ReduceKind::LogSumExp:
      fail("integer ", k == ReduceKind::LogSum ? "ReduceLogSum" : "ReduceLogSumExp", " is not defined");
  }
  std::vector<int64_t> out(acc.size());
  for (size_t o = 0; o < acc.size(); ++o) {
    uint64_t a = acc[o];
    if (k == ReduceKind::Mean) {
      // Truncates toward zero, as numpy's mean followed by a cast does.
      if (p.group == 0) a = 0;
      else if (u64) a /= static_cast<uint64_t>(p.group);
      else a = static_cast<uint64_t>(static_cast<int64_t>(a) / p.group);
    } else if (k == ReduceKind::L2) {
      const double s = u64 ? static_cast<double>(a) : static_cast<double>(static_cast<int64_t>(a));
      a = static_cast<uint64_t>(std::sqrt(s));
    }
    out[o] = static_cast<int64_t>(a);
  }
  return out;
}

// ---- op glue -------------------------------------------------------------------

template <ReduceKind K>
void reduce_kernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.input(0);
  require_dtype(n, 0, x.dtype(), reduce_types(K));
  std::vector<int64_t> axes;
  const bool has_axes = c.has_input(1);
  if (has_axes) axes = read_index_list(n, c.input(1), "axes");
  const int64_t rank = static_cast<int64_t>(x.rank());
  const std::vector<bool> red = reduced_flags(n, rank, has_axes ? &axes : nullptr);
  const ReducePlan p = make_plan(x.shape(), red, n.attr_int("keepdims", 1) != 0);
  if (is_float(x.dtype())) {
    c.set_output(0, tensor_from_doubles(x.dtype(), p.out_shape, reduce_float(K, to_doubles(x), x.shape(), p)));
  } else {
    c.set_output(0, tensor_from_int64s(x.dtype(), p.out_shape, reduce_int(K, x.dtype(), x, p)));
  }
}

// Folds a symbolic integer vector (the value of Shape(x) etc.) for the kinds
// that appear in shape arithmetic.
std::optional<Dim> fold_syms(ReduceKind k, const SymValue& v) {
  if (v.empty()) {
    if (k == ReduceKind::Sum) return Dim(0);
    if (k == ReduceKind::Prod) return Dim(1);
    return std::nullopt;
  }
  Dim acc = v[0];
  for (size_t i = 1; i < v.size(); ++i) {
    switch (k) {
      case ReduceKind::Sum: acc = acc + v[i]; break;
      case ReduceKind::Prod: acc = acc * v[i]; break;
      case ReduceKind::Max: acc = Dim::max(acc, v[i]); break;
      case ReduceKind::Min: acc = Dim::min(acc, v[i]); break;
      case ReduceKind::Mean: case ReduceKind::L1: case ReduceKind::L2: case ReduceKind::LogSum:
      case ReduceKind::LogSumExp: case ReduceKind::SumSquare:
        return std::nullopt;
    }
  }
  return acc;
}

template <ReduceKind K>
void reduce_infer(InferContext& c) {
  const Node& n = c.node;
  const DType dt = c.input_dtype(0);
  if (dt != DType::Undefined) require_dtype(n, 0, dt, reduce_types(K));
  std::optional<std::vector<int64_t>> axes;
  if (c.has_input(1)) {
    if (c.input_dtype(1) != DType::Undefined)
      TS_CHECK(c.input_dtype(1) == DType::I64, n.describe(), ": axes must be int64, got ",
               dtype_name(c.input_dtype(1)));
    const std::optional<SymValue> v = c.input_dims_value(1);
    if (!v) {
      c.set_output_unknown_shape(0, dt);
      return;
    }
    axes.emplace();
    for (const Dim& d : *v) {
      if (!d.is_const()) {  // axes computed from symbolic sizes: rank unknown
        c.set_output_unknown_shape(0, dt);
        return;
      }
      axes->push_back(d.value());
    }
  }
  if (!c.has_shape(0)) {
    c.set_output_unknown_shape(0, dt);
    return;
  }
  const Shape& in = c.input_shape(0);
  const int64_t rank = static_cast<int64_t>(in.size());
  const std::vector<bool> red = reduced_flags(n, rank, axes ? &*axes : nullptr);
  const bool keep = n.attr_int("keepdims", 1) != 0;
  Shape out;
  for (int64_t d = 0; d < rank; ++d) {
    if (!red[d]) out.push_back(in[d]);
    else if (keep) out.push_back(Dim(1));
  }
  c.set_output(0, dt, out);
  // Shape arithmetic: e.g. ReduceProd(Shape(x)) is the element count.
  if (const SymValue* s = c.input_sym(0); s && rank <= 1) {
    if (rank == 0 || !red[0]) {
      c.set_output_sym(0, *s);
    } else if (std::optional<Dim> f = fold_syms(K, *s)) {
      c.set_output_sym(0, SymValue{*f});
    }
  }
}

// Older opsets carry axes as an attribute; the latest form takes an input.
void reduce_upgrade_to(Node& n, int64_t opset, int64_t axes_input_since) {
  if (opset >= axes_input_since) return;
  if (n.has_attr("axes")) {
    const std::vector<int64_t> axes = n.attr_ints("axes");
    n.attrs.erase("axes");
    if (!axes.empty()) set_const_input(n, 1, Tensor::from_i64(axes), n.op + "_axes");
  }
}
void upgrade_axes_13(Node& n, int64_t opset) { reduce_upgrade_to(n, opset, 13); }
void upgrade_axes_18(Node& n, int64_t opset) { reduce_upgrade_to(n, opset, 18); }

template <ReduceKind K>
OpSchema reduce_schema(const char* name, UpgradeFn up) {
  OpSchema s;
  s.name = name;
  s.min_inputs = 1;
  s.max_inputs = 2;
  s.infer = reduce_infer<K>;
  s.kernel = reduce_kernel<K>;
  s.upgrade = up;
  return s;
}

// ---- ArgMax / ArgMin -------------------------------------------------------------

// Index of the best element of each [outer, n, inner] line. NaN counts as the
// best (numpy's argmax/argmin both stop at the first NaN).
template <bool kMax, class V>
void arg_lines(const std::vector<V>& x, const AxisSplit& s, bool last, std::vector<int64_t>* out) {
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      const V* base = x.data() + o * s.n * s.inner + i;
      int64_t best = 0;
      for (int64_t k = 1; k < s.n; ++k) {
        const V a = base[k * s.inner], b = base[best * s.inner];
        bool better;
        if constexpr (std::is_floating_point_v<V>) {
          if (std::isnan(b)) better = last && std::isnan(a);
          else if (std::isnan(a)) better = true;
          else better = kMax ? (a > b || (last && a == b)) : (a < b || (last && a == b));
        } else {
          better = kMax ? (a > b || (last && a == b)) : (a < b || (last && a == b));
        }
        if (better) best = k;
      }
      (*out)[o * s.inner + i] = best;
    }
}

std::vector<uint64_t> to_uint64s(const Tensor& t) {
  std::vector<uint64_t> v(static_cast<size_t>(t.numel()));
  for (int64_t i = 0; i < t.numel(); ++i) v[i] = t.get_u64(i);
  return v;
}

std::vector<int64_t> arg_shape(const std::vector<int64_t>& in, int64_t axis, bool keep) {
  std::vector<int64_t> out;
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    if (d != axis) out.push_back(in[d]);
    else if (keep) out.push_back(1);
  }
  return out;
}

template <bool kMax>
void arg_kernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.input(0);
  require_dtype(n, 0, x.dtype(), kAllNumericTypes);
  const int64_t axis = normalize_axis(n.attr_int("axis", 0), static_cast<int64_t>(x.rank()), n);
  const bool last = n.attr_int("select_last_index", 0) != 0;
  const AxisSplit s = split_at_axis(x.shape(), axis);
  TS_CHECK(s.n > 0 || s.outer * s.inner == 0, n.describe(), ": cannot take ", kMax ? "ArgMax" : "ArgMin",
           " over an empty axis");
  std::vector<int64_t> out(static_cast<size_t>(s.outer * s.inner));
  if (is_float(x.dtype())) arg_lines<kMax>(to_doubles(x), s, last, &out);
  else if (x.dtype() == DType::U64) arg_lines<kMax>(to_uint64s(x), s, last, &out);
  else arg_lines<kMax>(to_int64s(x), s, last, &out);
  c.set_output(0, tensor_from_int64s(DType::I64, arg_shape(x.shape(), axis, n.attr_int("keepdims", 1) != 0), out));
}

void arg_infer(InferContext& c) {
  const Node& n = c.node;
  const DType dt = c.input_dtype(0);
  if (dt != DType::Undefined) require_dtype(n, 0, dt, kAllNumericTypes);
  if (!c.has_shape(0)) {
    c.set_output_unknown_shape(0, DType::I64);
    return;
  }
  const Shape& in = c.input_shape(0);
  const int64_t axis = normalize_axis(n.attr_int("axis", 0), static_cast<int64_t>(in.size()), n);
  const bool keep = n.attr_int("keepdims", 1) != 0;
  Shape out;
  for (int64_t d = 0; d < static_cast<int64_t>(in.size()); ++d) {
    if (d != axis) out.push_back(in[d]);
    else if (keep) out.push_back(Dim(1));
  }
  c.set_output(0, DType::I64, out);
}

OpSchema arg_schema(const char* name, KernelFn k) {
  OpSchema s;
  s.name = name;
  s.min_inputs = s.max_inputs = 1;
  s.infer = arg_infer;
  s.kernel = k;
  return s;
}

}  // namespace

void register_reduction_ops(OpRegistry& r) {
  r.add(reduce_schema<ReduceKind::Sum>("ReduceSum", upgrade_axes_13));
  r.add(reduce_schema<ReduceKind::Mean>("ReduceMean", upgrade_axes_18));
  r.add(reduce_schema<ReduceKind::Max>("ReduceMax", upgrade_axes_18));
  r.add(reduce_schema<ReduceKind::Min>("ReduceMin", upgrade_axes_18));
  r.add(reduce_schema<ReduceKind::Prod>("ReduceProd", upgrade_axes_18));
  r.add(reduce_schema<ReduceKind::L1>("ReduceL1", upgrade_axes_18));
  r.add(reduce_schema<ReduceKind::L2>("ReduceL2", upgrade_axes_18));
  r.add(reduce_schema<ReduceKind::LogSum>("ReduceLogSum", upgrade_axes_18));
  r.add(reduce_schema<ReduceKind::LogSumExp>("ReduceLogSumExp", upgrade_axes_18));
  r.add(reduce_schema<ReduceKind::SumSquare>("ReduceSumSquare", upgrade_axes_18));
  r.add(arg_schema("ArgMax", arg_kernel<true>));
  r.add(arg_schema("ArgMin", arg_kernel<false>));
  register_softmax_ops(r);
  register_scan_ops(r);
}

}  // namespace tessel
