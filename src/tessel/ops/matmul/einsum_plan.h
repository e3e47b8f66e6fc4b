// An Einsum equation resolved against its operands' ranks: one label per
// operand dim and per output dim. Shared by the reference kernel and the
// lowering.
#pragma once

#include <vector>

#include "tessel/ir/graph.h"

namespace tessel {

constexpr int kEllipsisBase = 52;  // labels 0..51 are letters; 52+i is ellipsis dim i

struct EinsumPlan {
  std::vector<std::vector<int>> in_labels;  // per operand, one label per dim
  std::vector<int> out_labels;
  int ellipsis_dims = 0;
};

// Parses n's equation (implicit or explicit output, ellipses, repeated
// labels) for operands of the given ranks; throws on a malformed equation.
EinsumPlan plan_einsum(const Node& n, const std::vector<size_t>& ranks);

}  // namespace tessel
