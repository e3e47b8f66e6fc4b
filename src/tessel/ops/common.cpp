#include "tessel/ops/common.h"

#include "tessel/support/error.h"

namespace tessel {

Shape broadcast_shapes(const Shape& a, const Shape& b, const Node& n) {
  const size_t r = std::max(a.size(), b.size());
  Shape out(r);
  for (size_t i = 0; i < r; ++i) {
    const Dim x = i + a.size() >= r ? a[i + a.size() - r] : Dim(1);
    const Dim y = i + b.size() >= r ? b[i + b.size() - r] : Dim(1);
    if (x == y || y == Dim(1)) {
      out[i] = x;
    } else if (x == Dim(1)) {
      out[i] = y;
    } else {
      TS_CHECK(!(x.is_const() && y.is_const()), n.describe(), ": shapes ", shape_str(a), " and ", shape_str(b),
               " cannot be broadcast");
      out[i] = Dim::max(x, y);
    }
  }
  return out;
}

std::vector<int64_t> broadcast_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b, const Node& n) {
  const size_t r = std::max(a.size(), b.size());
  std::vector<int64_t> out(r);
  for (size_t i = 0; i < r; ++i) {
    const int64_t x = i + a.size() >= r ? a[i + a.size() - r] : 1;
    const int64_t y = i + b.size() >= r ? b[i + b.size() - r] : 1;
    TS_CHECK(x == y || x == 1 || y == 1, n.describe(), ": shapes ", dims_str(a), " and ", dims_str(b),
             " cannot be broadcast");
    out[i] = x == 1 ? y : x;
  }
  return out;
}

BroadcastIndexer::BroadcastIndexer(const std::vector<int64_t>& in, const std::vector<int64_t>& out)
    : out_shape_(out), in_strides_(out.size(), 0) {
  identity_ = in == out;
  const size_t off = out.size() - in.size();
  int64_t stride = 1;
  for (size_t i = in.size(); i-- > 0;) {
    in_strides_[i + off] = in[i] == 1 ? 0 : stride;
    stride *= in[i];
  }
}

int64_t BroadcastIndexer::operator()(int64_t i) const {
  if (identity_) return i;
  int64_t idx = 0;
  for (size_t d = out_shape_.size(); d-- > 0;) {
    const int64_t e = out_shape_[d];
    if (e == 0) return 0;
    idx += (i % e) * in_strides_[d];
    i /= e;
  }
  return idx;
}

}  // namespace tessel
