// Indexing operators: Gather, GatherElements, GatherND, Scatter (removed alias
// of ScatterElements), ScatterElements, ScatterND, TensorScatter, Compress,
// OneHot, NonZero, Unique.
//
// Every index read from a tensor is range-checked before use: an index out
// of range is a tessel::Error at run time, never an out-of-bounds access
// (OneHot is the exception the spec defines: such rows are all off_value).
//
// One file per kind, each registering its own ops:
//   gather.cpp      Gather, GatherElements, GatherND
//   scatter.cpp     Scatter, ScatterElements, ScatterND, TensorScatter
//   select_ops.cpp  Compress, OneHot, NonZero, Unique
// and here the index addressing they share (gather_scatter.h).
#include "tessel/ops/gather_scatter/gather_scatter.h"

#include "tessel/ops/movement/movement_common.h"
#include "tessel/support/error.h"

namespace tessel::movement {

int64_t checked_index(int64_t i, int64_t n, const Node& node, const char* what) {
  TS_CHECK(i >= -n && i < n, node.describe(), ": ", what, " ", i, " is out of range for a dimension of size ", n);
  return i < 0 ? i + n : i;
}

int64_t prod(const std::vector<int64_t>& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p = checked_mul(p, s[i]);
  return p;
}

// ---- GatherElements / ScatterElements -------------------------------------------------

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

// ---- GatherND / ScatterND ------------------------------------------------------------------

int64_t nd_offset(const Tensor& indices, int64_t at, int64_t m, const std::vector<int64_t>& dims, size_t from,
                  const Node& n) {
  int64_t off = 0;
  for (int64_t j = 0; j < m; ++j) {
    const int64_t d = dims[from + static_cast<size_t>(j)];
    off = off * d + checked_index(indices.get_i64(at + j), d, n, "index");
  }
  return off;
}

void register_gather_scatter_ops(OpRegistry& r) {
  register_gather_ops(r);
  register_scatter_ops(r);
  register_select_ops(r);
}

}  // namespace tessel::movement
