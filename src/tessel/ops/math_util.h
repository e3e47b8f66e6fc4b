// Helpers shared by the math op families (reductions, softmax, matmul,
// normalisation, losses). Header-only so that each family file stays
// self-contained; anything more general belongs in ops/common.h.
//
// Numeric policy of these reference kernels: floating inputs are read into
// double, computed in double (so sums of K terms are far more exact than the
// float result) and rounded once when stored. Integer inputs are computed in
// 64-bit integer arithmetic that wraps, and wrapped again to the output width.
#pragma once

#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

#include "tessel/ir/graph.h"
#include "tessel/ops/common.h"
#include "tessel/support/error.h"

namespace tessel::mathops {

// The float types of most math ops (ONNX "tensor(float16|float|double|bfloat16)").
inline constexpr std::initializer_list<DType> kFloatTypes = {DType::F16, DType::F32, DType::F64, DType::BF16};
// Float types plus the 32/64-bit integers (Reduce*, MatMul, Gemm, CumSum).
inline constexpr std::initializer_list<DType> kNumericTypes = {DType::F16, DType::F32, DType::F64, DType::BF16,
                                                              DType::I32, DType::I64, DType::U32, DType::U64};
// Float types plus every 8/16/32/64-bit integer (ArgMax, TopK, Einsum).
inline constexpr std::initializer_list<DType> kAllNumericTypes = {
    DType::F16, DType::F32, DType::F64, DType::BF16, DType::I8,  DType::I16,
    DType::I32, DType::I64, DType::U8,  DType::U16,  DType::U32, DType::U64};

inline bool dtype_in(DType t, std::initializer_list<DType> set) {
  for (DType d : set)
    if (d == t) return true;
  return false;
}

inline std::string dtype_list(std::initializer_list<DType> set) {
  std::string s;
  for (DType d : set) s += (s.empty() ? "" : "|") + std::string(dtype_name(d));
  return s;
}

// Throws "<node>: input K has dtype X, expected a|b|c" unless dt is allowed.
inline void require_dtype(const Node& n, size_t input, DType dt, std::initializer_list<DType> allowed) {
  if (!dtype_in(dt, allowed))
    fail(n.describe(), ": input ", input, " has dtype ", dtype_name(dt), ", expected ", dtype_list(allowed));
}

// Whole tensor as doubles. f32/f64 are read through typed pointers (the hot
// path of real models); the rest through get_f64.
inline std::vector<double> to_doubles(const Tensor& t) {
  const int64_t n = t.numel();
  std::vector<double> v(static_cast<size_t>(n));
  if (t.dtype() == DType::F32) {
    const float* p = t.data<float>();
    for (int64_t i = 0; i < n; ++i) v[i] = p[i];
  } else if (t.dtype() == DType::F64) {
    if (n) std::memcpy(v.data(), t.data<double>(), static_cast<size_t>(n) * sizeof(double));
  } else {
    for (int64_t i = 0; i < n; ++i) v[i] = t.get_f64(i);
  }
  return v;
}

// Stores doubles into `t` (same element count), rounding once per element.
inline void store_doubles(Tensor& t, const double* v) {
  const int64_t n = t.numel();
  if (t.dtype() == DType::F32) {
    float* p = t.mutable_data<float>();
    for (int64_t i = 0; i < n; ++i) p[i] = static_cast<float>(v[i]);
  } else if (t.dtype() == DType::F64) {
    if (n) std::memcpy(t.mutable_data<double>(), v, static_cast<size_t>(n) * sizeof(double));
  } else {
    for (int64_t i = 0; i < n; ++i) t.set_f64(i, v[i]);
  }
}

inline Tensor tensor_from_doubles(DType dt, std::vector<int64_t> shape, const std::vector<double>& v) {
  Tensor t(dt, std::move(shape));
  TS_CHECK(static_cast<int64_t>(v.size()) == t.numel(), "tensor_from_doubles: element count mismatch");
  store_doubles(t, v.data());
  return t;
}

// Integer tensors as int64 (unsigned 64-bit values keep their bit pattern).
inline std::vector<int64_t> to_int64s(const Tensor& t) {
  const int64_t n = t.numel();
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = t.get_i64(i);
  return v;
}

inline Tensor tensor_from_int64s(DType dt, std::vector<int64_t> shape, const std::vector<int64_t>& v) {
  Tensor t(dt, std::move(shape));
  TS_CHECK(static_cast<int64_t>(v.size()) == t.numel(), "tensor_from_int64s: element count mismatch");
  if (dt == DType::I64) {
    if (!v.empty()) std::memcpy(t.mutable_data<int64_t>(), v.data(), v.size() * sizeof(int64_t));
  } else {
    for (size_t i = 0; i < v.size(); ++i) t.set_i64(static_cast<int64_t>(i), v[i]);
  }
  return t;
}

// A tensor viewed as [outer, n, inner] around one axis: element (o, k, i) is
// at flat index (o * n + k) * inner + i.
struct AxisSplit {
  int64_t outer = 1, n = 1, inner = 1;
};
inline AxisSplit split_at_axis(const std::vector<int64_t>& shape, int64_t axis) {
  AxisSplit s;
  for (int64_t d = 0; d < static_cast<int64_t>(shape.size()); ++d) {
    if (d < axis) s.outer *= shape[d];
    else if (d == axis) s.n = shape[d];
    else s.inner *= shape[d];
  }
  return s;
}

// Integer contents of a 0-D or 1-D int32/int64 tensor (axes, k, ...).
inline std::vector<int64_t> read_index_list(const Node& n, const Tensor& t, const char* what) {
  TS_CHECK(t.dtype() == DType::I64 || t.dtype() == DType::I32, n.describe(), ": ", what,
           " must be int64 (or int32), got ", dtype_name(t.dtype()));
  TS_CHECK(t.rank() <= 1, n.describe(), ": ", what, " must be a scalar or a 1-D tensor, got shape ",
           dims_str(t.shape()));
  return to_int64s(t);
}

// Normalises a list of axes for `rank` and rejects duplicates.
inline std::vector<int64_t> normalize_axes(std::vector<int64_t> axes, int64_t rank, const Node& n) {
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  for (int64_t& a : axes) {
    a = normalize_axis(a, rank, n);
    TS_CHECK(!seen[a], n.describe(), ": axis ", a, " appears twice");
    seen[a] = true;
  }
  return axes;
}

// ---- upgrade helpers ----------------------------------------------------------

// Makes `t` a constant input number `index` of `n` (padding with omitted inputs).
inline void set_const_input(Node& n, size_t index, Tensor t, const std::string& prefix) {
  Value* v = n.owner->add_initializer(n.owner->fresh_name(prefix), std::move(t));
  if (n.inputs.size() <= index) n.inputs.resize(index + 1, nullptr);
  n.inputs[index] = v;
}

inline void drop_attrs(Node& n, std::initializer_list<const char*> names) {
  for (const char* a : names) n.attrs.erase(a);
}

}  // namespace tessel::mathops
