#include "tessel/loop/intrinsics.h"

namespace tessel::loop {

const std::vector<IntrinsicInfo>& all_intrinsics() {
  // pow stays expanded everywhere: ours is correctly rounded for f32 (and
  // exact products for the constant exponents 2-4), CUDA's powf is 4 ulp.
  static const std::vector<IntrinsicInfo> table = {
      {"sqrt", 1, false, true, false},    {"fabs", 1, false, true, false},  {"floor", 1, false, true, false},
      {"ceil", 1, false, true, false},    {"trunc", 1, false, true, false}, {"rint", 1, false, true, false},
      {"fma", 3, false, true, false},     {"copysign", 2, false, true, false},
      {"isnan", 1, true, true, false},    {"isinf", 1, true, true, false},
      {"exp", 1, false, false, true},     {"expm1", 1, false, false, true}, {"log", 1, false, false, true},
      {"log1p", 1, false, false, true},   {"sigmoid", 1, false, false, true},
      {"tanh", 1, false, false, true},    {"erf", 1, false, false, true},   {"sin", 1, false, false, true},
      {"cos", 1, false, false, true},     {"tan", 1, false, false, true},   {"atan", 1, false, false, true},
      {"asin", 1, false, false, true},    {"acos", 1, false, false, true},  {"sinh", 1, false, false, true},
      {"cosh", 1, false, false, true},    {"asinh", 1, false, false, true}, {"acosh", 1, false, false, true},
      {"atanh", 1, false, false, true},   {"pow", 2, false, false, false},
  };
  return table;
}

const IntrinsicInfo* find_intrinsic(const std::string& name) {
  for (const IntrinsicInfo& i : all_intrinsics())
    if (name == i.name) return &i;
  return nullptr;
}

std::set<std::string> cuda_native_intrinsics() {
  std::set<std::string> out;
  for (const IntrinsicInfo& i : all_intrinsics())
    if (i.cuda_native) out.insert(i.name);
  return out;
}

}  // namespace tessel::loop
