// The intrinsics a Call may name, with their arity and result type. The
// primitive ones agree with is_primitive_intrinsic() in ir.h; the others are
// expanded by math_expand.h before code generation.
#pragma once

#include <string>
#include <vector>

namespace tessel::loop {

struct IntrinsicInfo {
  const char* name;
  int arity;
  bool returns_bool;  // isnan/isinf; all others return their operands' type
  bool primitive;
};

const std::vector<IntrinsicInfo>& all_intrinsics();
// nullptr for an unknown name.
const IntrinsicInfo* find_intrinsic(const std::string& name);

}  // namespace tessel::loop
