#include "tessel/loop/intrinsics.h"

namespace tessel::loop {

const std::vector<IntrinsicInfo>& all_intrinsics() {
  static const std::vector<IntrinsicInfo> table = {
      {"sqrt", 1, false, true},   {"fabs", 1, false, true},     {"floor", 1, false, true},
      {"ceil", 1, false, true},   {"trunc", 1, false, true},    {"rint", 1, false, true},
      {"fma", 3, false, true},    {"copysign", 2, false, true}, {"isnan", 1, true, true},
      {"isinf", 1, true, true},
      {"exp", 1, false, false},   {"expm1", 1, false, false},   {"log", 1, false, false},
      {"log1p", 1, false, false}, {"sigmoid", 1, false, false}, {"tanh", 1, false, false},
      {"erf", 1, false, false},   {"sin", 1, false, false},     {"cos", 1, false, false},
      {"tan", 1, false, false},   {"atan", 1, false, false},    {"asin", 1, false, false},
      {"acos", 1, false, false},  {"sinh", 1, false, false},    {"cosh", 1, false, false},
      {"asinh", 1, false, false}, {"acosh", 1, false, false},   {"atanh", 1, false, false},
      {"pow", 2, false, false},
  };
  return table;
}

const IntrinsicInfo* find_intrinsic(const std::string& name) {
  for (const IntrinsicInfo& i : all_intrinsics())
    if (name == i.name) return &i;
  return nullptr;
}

}  // namespace tessel::loop
