// Scans and selections along one axis: CumSum, CumProd (exclusive, reverse)
// and TopK (k as an input since opset 10; ties broken by the lower index).
#include <algorithm>
#include <cmath>
#include <numeric>

#include "tessel/ops/math_util.h"
#include "tessel/ops/registry.h"

namespace tessel {

namespace {

using namespace mathops;

// ---- CumSum / CumProd ---------------------------------------------------------

// The scalar axis input (int32 or int64, 0-D or a 1-element 1-D tensor).
int64_t scan_axis(const Node& n, const Tensor& t, int64_t rank) {
  const std::vector<int64_t> v = read_index_list(n, t, "axis");
  TS_CHECK(v.size() == 1, n.describe(), ": axis must hold exactly one value, got ", v.size());
  return normalize_axis(v[0], rank, n);
}

// Runs the scan on every line; Acc is double for floats and uint64 (wrapping)
// for integers. `prod` selects multiplication.
template <class Acc>
void scan_lines(std::vector<Acc>& x, const AxisSplit& s, bool prod, bool exclusive, bool reverse) {
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      Acc* base = x.data() + o * s.n * s.inner + i;
      Acc acc = prod ? Acc(1) : Acc(0);
      for (int64_t step = 0; step < s.n; ++step) {
        const int64_t k = reverse ? s.n - 1 - step : step;
        const Acc v = base[k * s.inner];
        if (!exclusive) acc = prod ? acc * v : acc + v;
        base[k * s.inner] = acc;
        if (exclusive) acc = prod ? acc * v : acc + v;
      }
    }
}

template <bool kProd>
void scan_kernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.input(0);
  require_dtype(n, 0, x.dtype(), kNumericTypes);
  const int64_t axis = scan_axis(n, c.input(1), static_cast<int64_t>(x.rank()));
  const bool excl = n.attr_int("exclusive", 0) != 0, rev = n.attr_int("reverse", 0) != 0;
  const AxisSplit s = split_at_axis(x.shape(), axis);
  if (is_float(x.dtype())) {
    std::vector<double> v = to_doubles(x);
    scan_lines(v, s, kProd, excl, rev);
    c.set_output(0, tensor_from_doubles(x.dtype(), x.shape(), v));
  } else {
    std::vector<uint64_t> v(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) v[i] = x.get_u64(i);
    scan_lines(v, s, kProd, excl, rev);
    Tensor out(x.dtype(), x.shape());
    for (int64_t i = 0; i < x.numel(); ++i) out.set_u64(i, v[i]);
    c.set_output(0, out);
  }
}

void scan_infer(InferContext& c) {
  const Node& n = c.node;
  const DType dt = c.input_dtype(0);
  if (dt != DType::Undefined) require_dtype(n, 0, dt, kNumericTypes);
  const DType at = c.input_dtype(1);
  TS_CHECK(at == DType::Undefined || at == DType::I32 || at == DType::I64, n.describe(),
           ": axis must be int32 or int64, got ", dtype_name(at));
  if (!c.has_shape(0)) {
    c.set_output_unknown_shape(0, dt);
    return;
  }
  if (const Tensor* a = c.input_const(1)) scan_axis(n, *a, static_cast<int64_t>(c.input_shape(0).size()));
  c.set_output(0, dt, c.input_shape(0));
}

OpSchema scan_schema(const char* name, KernelFn k, int since) {
  OpSchema s;
  s.name = name;
  s.min_inputs = s.max_inputs = 2;
  s.infer = scan_infer;
  s.kernel = k;
  s.since_version = since;
  return s;
}

// ---- TopK ----------------------------------------------------------------------

int64_t read_k(const Node& n, const Tensor& t) {
  const std::vector<int64_t> v = read_index_list(n, t, "K");
  TS_CHECK(v.size() == 1, n.describe(), ": K must hold exactly one value, got ", v.size());
  TS_CHECK(v[0] >= 0, n.describe(), ": K must be non-negative, got ", v[0]);
  return v[0];
}

// Selects the k best of each line. NaN orders above every number (so it comes
// first for largest=1 and last for largest=0); equal values keep index order.
template <class V>
void topk_lines(const std::vector<V>& x, const AxisSplit& s, int64_t k, bool largest, std::vector<int64_t>* idx_out) {
  auto greater = [](V a, V b) {
    if constexpr (std::is_floating_point_v<V>) {
      if (std::isnan(a)) return !std::isnan(b);
      if (std::isnan(b)) return false;
    }
    return a > b;
  };
  std::vector<int64_t> order(static_cast<size_t>(s.n));
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t i = 0; i < s.inner; ++i) {
      const V* base = x.data() + o * s.n * s.inner + i;
      std::iota(order.begin(), order.end(), int64_t{0});
      auto before = [&](int64_t a, int64_t b) {
        const V va = base[a * s.inner], vb = base[b * s.inner];
        if (largest ? greater(va, vb) : greater(vb, va)) return true;
        if (largest ? greater(vb, va) : greater(va, vb)) return false;
        return a < b;
      };
      std::partial_sort(order.begin(), order.begin() + k, order.end(), before);
      for (int64_t j = 0; j < k; ++j) (*idx_out)[(o * k + j) * s.inner + i] = order[j];
    }
}

void topk_kernel(KernelContext& c) {
  const Node& n = c.node;
  const Tensor& x = c.input(0);
  require_dtype(n, 0, x.dtype(), kAllNumericTypes);
  const int64_t axis = normalize_axis(n.attr_int("axis", -1), static_cast<int64_t>(x.rank()), n);
  const int64_t k = read_k(n, c.input(1));
  const AxisSplit s = split_at_axis(x.shape(), axis);
  TS_CHECK(k <= s.n, n.describe(), ": K = ", k, " exceeds the axis size ", s.n);
  const bool largest = n.attr_int("largest", 1) != 0;
  std::vector<int64_t> out_shape = x.shape();
  out_shape[axis] = k;
  std::vector<int64_t> idx(static_cast<size_t>(checked_numel(out_shape)));
  if (is_float(x.dtype())) topk_lines(to_doubles(x), s, k, largest, &idx);
  else if (x.dtype() == DType::U64) {
    std::vector<uint64_t> v(static_cast<size_t>(x.numel()));
    for (int64_t i = 0; i < x.numel(); ++i) v[i] = x.get_u64(i);
    topk_lines(v, s, k, largest, &idx);
  } else {
    topk_lines(to_int64s(x), s, k, largest, &idx);
  }
  // Gather the values by copying raw elements: exact for every dtype.
  Tensor vals(x.dtype(), out_shape);
  const int64_t es = dtype_storage_size(x.dtype());
  const uint8_t* src = x.raw();
  uint8_t* dst = vals.mutable_raw();
  for (int64_t o = 0; o < s.outer; ++o)
    for (int64_t j = 0; j < k; ++j)
      for (int64_t i = 0; i < s.inner; ++i) {
        const int64_t out_flat = (o * k + j) * s.inner + i;
        const int64_t in_flat = (o * s.n + idx[out_flat]) * s.inner + i;
        std::memcpy(dst + out_flat * es, src + in_flat * es, static_cast<size_t>(es));
      }
  c.set_output(0, vals);
  if (c.num_outputs() > 1) c.set_output(1, tensor_from_int64s(DType::I64, out_shape, idx));
}

void topk_infer(InferContext& c) {
  const Node& n = c.node;
  const DType dt = c.input_dtype(0);
  if (dt != DType::Undefined) require_dtype(n, 0, dt, kAllNumericTypes);
  const DType kt = c.input_dtype(1);
  TS_CHECK(kt == DType::Undefined || kt == DType::I64, n.describe(), ": K must be int64, got ", dtype_name(kt));
  const std::optional<SymValue> kv = c.input_dims_value(1);
  if (!c.has_shape(0) || !kv || kv->size() != 1) {
    c.set_output_unknown_shape(0, dt);
    if (c.out_types.size() > 1) c.set_output_unknown_shape(1, DType::I64);
    return;
  }
  Shape s = c.input_shape(0);
  const int64_t axis = normalize_axis(n.attr_int("axis", -1), static_cast<int64_t>(s.size()), n);
  const Dim k = (*kv)[0];
  if (k.is_const()) {
    TS_CHECK(k.value() >= 0, n.describe(), ": K must be non-negative, got ", k.value());
    if (s[axis].is_const())
      TS_CHECK(k.value() <= s[axis].value(), n.describe(), ": K = ", k.value(), " exceeds the axis size ",
               s[axis].value());
  }
  s[axis] = k;
  c.set_output(0, dt, s);
  if (c.out_types.size() > 1) c.set_output(1, DType::I64, s);
}

// Opset 1 carries k as an attribute.
void topk_upgrade(Node& n, int64_t opset) {
  if (opset >= 10) return;
  const int64_t k = n.attr_int("k", -1);
  TS_CHECK(k >= 0, n.describe(), ": attribute k is missing or negative");
  n.attrs.erase("k");
  set_const_input(n, 1, Tensor::from_i64({k}), "TopK_k");
}

}  // namespace

void register_scan_ops(OpRegistry& r) {
  r.add(scan_schema("CumSum", scan_kernel<false>, 11));
  r.add(scan_schema("CumProd", scan_kernel<true>, 26));
  OpSchema topk;
  topk.name = "TopK";
  topk.min_inputs = 1;  // opset 1 has no K input until upgraded
  topk.max_inputs = 2;
  topk.min_outputs = 1;
  topk.max_outputs = 2;
  topk.infer = topk_infer;
  topk.kernel = topk_kernel;
  topk.upgrade = topk_upgrade;
  r.add(topk);
}

}  // namespace tessel
