// Helpers shared by the operator families: broadcasting, index arithmetic and
// dtype checks. Look here before writing a helper in an op file.
#pragma once

#include <cstdint>
#include <vector>

#include "tessel/ops/registry.h"
#include "tessel/support/error.h"

namespace tessel {

// Multidirectional (numpy) broadcast of two shapes; throws a clear error that
// names the node when they are incompatible. Symbolic dims: equal dims stay,
// 1 broadcasts, otherwise max(a,b) is used only when one side is known to be
// 1 at run time... so unequal symbolic dims give Dim::max(a, b).
Shape broadcast_shapes(const Shape& a, const Shape& b, const Node& n);
std::vector<int64_t> broadcast_dims(const std::vector<int64_t>& a, const std::vector<int64_t>& b, const Node& n);

// Maps flat indices of a broadcast output to flat indices of one input.
class BroadcastIndexer {
 public:
  BroadcastIndexer(const std::vector<int64_t>& in_shape, const std::vector<int64_t>& out_shape);
  // Input flat index for output flat index `i`. Sequential calls with i, i+1,
  // ... are cheap; random access is also correct.
  int64_t operator()(int64_t i) const;

 private:
  std::vector<int64_t> out_shape_, in_strides_;  // in_strides_ is 0 on broadcast axes
  bool identity_ = false;
};

// Throws "<node>: input K has dtype X, expected one of ..." unless pred(dtype).
template <class Pred>
void check_dtype(const Node& n, size_t input, DType dt, Pred pred, const char* expected) {
  if (!pred(dt))
    throw Error(str_cat(n.describe(), ": input ", input, " has dtype ", dtype_name(dt), ", expected ", expected));
}

}  // namespace tessel
