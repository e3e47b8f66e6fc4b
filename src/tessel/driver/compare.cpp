#include "tessel/driver/compare.h"

#include <algorithm>
#include <cmath>

#include "tessel/support/error.h"

namespace tessel {

namespace {

std::string index_str(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> idx(shape.size());
  for (size_t k = shape.size(); k-- > 0;) {
    if (shape[k] == 0) break;
    idx[k] = flat % shape[k];
    flat /= shape[k];
  }
  return dims_str(idx);
}

std::string fmt(double v) { return str_cat(v); }

}  // namespace

Tolerance scaled_tolerance(const Tensor& expected, double rtol, double share, double floor) {
  double m = 0;
  if (is_float(expected.dtype()))
    for (int64_t i = 0; i < expected.numel(); ++i) {
      const double v = std::fabs(expected.get_f64(i));
      if (std::isfinite(v)) m = std::max(m, v);
    }
  Tolerance t;
  t.rtol = rtol;
  t.atol = floor + share * m;
  return t;
}

std::string compare_tensors(const Tensor& a, const Tensor& b, const Tolerance& tol) {
  if (a.dtype() != b.dtype())
    return str_cat("dtype ", dtype_name(a.dtype()), " but expected ", dtype_name(b.dtype()));
  if (a.shape() != b.shape()) return str_cat("shape ", dims_str(a.shape()), " but expected ", dims_str(b.shape()));
  const DType dt = a.dtype();
  const int64_t n = a.numel();
  int64_t bad = 0, first = -1;
  std::string first_msg;
  double max_err = 0;
  if (dt == DType::String) {
    for (int64_t i = 0; i < n; ++i) {
      const auto& x = a.strings()[static_cast<size_t>(i)];
      const auto& y = b.strings()[static_cast<size_t>(i)];
      if (x == y) continue;
      if (bad++ == 0) {
        first = i;
        first_msg = str_cat("got \"", x, "\", expected \"", y, "\"");
      }
    }
  } else if (is_float(dt)) {
    for (int64_t i = 0; i < n; ++i) {
      const double x = a.get_f64(i), y = b.get_f64(i);
      bool ok;
      if (std::isnan(y) || std::isnan(x)) {
        ok = std::isnan(x) && std::isnan(y);
      } else if (std::isinf(y) || std::isinf(x)) {
        ok = x == y;
      } else {
        const double err = std::fabs(x - y);
        ok = err <= tol.atol + tol.rtol * std::fabs(y);
        if (!ok) max_err = std::max(max_err, err);
      }
      if (ok) continue;
      if (bad++ == 0) {
        first = i;
        first_msg = str_cat("got ", fmt(x), ", expected ", fmt(y));
      }
    }
  } else {
    const bool u = is_unsigned_int(dt);
    for (int64_t i = 0; i < n; ++i) {
      const bool ok = u ? a.get_u64(i) == b.get_u64(i) : a.get_i64(i) == b.get_i64(i);
      if (ok) continue;
      if (bad++ == 0) {
        first = i;
        first_msg = u ? str_cat("got ", a.get_u64(i), ", expected ", b.get_u64(i))
                      : str_cat("got ", a.get_i64(i), ", expected ", b.get_i64(i));
      }
    }
  }
  if (bad == 0) return "";
  std::string msg = str_cat(bad, " of ", n, " elements differ; first at ", index_str(first, a.shape()), ": ", first_msg);
  if (max_err > 0) msg += str_cat(" (max abs error ", fmt(max_err), ")");
  return msg;
}

std::string compare_values(const RtValue& a, const RtValue& b, const Tolerance& tol) {
  auto kind = [](const RtValue& v) {
    return v.kind == RtValue::Kind::Tensor ? "a tensor" : v.kind == RtValue::Kind::Sequence ? "a sequence" : "none";
  };
  if (a.kind != b.kind) return str_cat("got ", kind(a), ", expected ", kind(b));
  switch (a.kind) {
    case RtValue::Kind::Tensor:
      return compare_tensors(a.tensor, b.tensor, tol);
    case RtValue::Kind::Sequence:
      if (a.seq.size() != b.seq.size()) return str_cat("sequence of ", a.seq.size(), ", expected ", b.seq.size());
      for (size_t i = 0; i < a.seq.size(); ++i) {
        std::string m = compare_tensors(a.seq[i], b.seq[i], tol);
        if (!m.empty()) return str_cat("sequence element ", i, ": ", m);
      }
      return "";
    case RtValue::Kind::None:
      return "";
  }
  return "";
}

}  // namespace tessel
