// The indexing operators' files (private to ops/gather_scatter/): their
// registration, which register_gather_scatter_ops (gather_scatter.cpp) calls,
// and the index addressing that gathers and scatters share. Every index is
// range-checked before use.
#pragma once

#include <cstdint>
#include <vector>

#include "tessel/ops/movement/movement_common.h"

namespace tessel::movement {

void register_gather_ops(OpRegistry& r);   // gather.cpp
void register_scatter_ops(OpRegistry& r);  // scatter.cpp
void register_select_ops(OpRegistry& r);   // select_ops.cpp

// Normalises a possibly negative index into [0, n) or throws.
int64_t checked_index(int64_t i, int64_t n, const Node& node, const char* what);

int64_t prod(const std::vector<int64_t>& s, size_t from, size_t to);

// Checks that `indices` (and updates) may address `data` along every axis but
// `axis`, and returns the normalised axis.
size_t elements_axis(const Node& n, const Tensor& data, const Tensor& indices);

// Calls f(i, data_offset) for every element i of `shape` (the indices'
// shape), where data_offset addresses data at the same coordinates with the
// `axis` coordinate replaced by the (checked) index.
template <class F>
void for_each_element_target(const Node& n, const Tensor& data, const Tensor& indices, size_t axis, F&& f) {
  const auto& shape = indices.shape();
  const auto ds = strides_of(data.shape());
  const int64_t dim = data.shape()[axis];
  std::vector<int64_t> c(shape.size(), 0);
  const int64_t total = indices.numel();
  for (int64_t i = 0; i < total; ++i) {
    int64_t off = 0;
    for (size_t d = 0; d < shape.size(); ++d)
      if (d != axis) off += c[d] * ds[d];
    off += checked_index(indices.get_i64(i), dim, n, "index") * ds[axis];
    f(i, off);
    for (size_t d = shape.size(); d-- > 0;) {
      if (++c[d] < shape[d]) break;
      c[d] = 0;
    }
  }
}

// Flat offset (within a block of shape dims[from:]) addressed by one index
// tuple of length m, with negative indices wrapped and range checks.
int64_t nd_offset(const Tensor& indices, int64_t at, int64_t m, const std::vector<int64_t>& dims, size_t from,
                  const Node& n);

}  // namespace tessel::movement
