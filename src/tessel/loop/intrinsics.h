// The intrinsics a Call may name, with their arity and result type. The
// primitive ones agree with is_primitive_intrinsic() in ir.h; the others are
// expanded by math_expand.h before code generation, except where the target
// has its own implementation (`cuda_native`: CUDA's math library, whose error
// bounds, 1-4 ulp in the CUDA C++ Programming Guide's table, are those of
// our expansions; its code is branch-light where ours, written as selects,
// becomes divergent branches on a GPU).
#pragma once

#include <set>
#include <string>
#include <vector>

namespace tessel::loop {

struct IntrinsicInfo {
  const char* name;
  int arity;
  bool returns_bool;  // isnan/isinf; all others return their operands' type
  bool primitive;
  bool cuda_native;  // the CUDA code generator calls NAMEf / NAME (sigmoid: ts_sigmoid)
};

const std::vector<IntrinsicInfo>& all_intrinsics();
// nullptr for an unknown name.
const IntrinsicInfo* find_intrinsic(const std::string& name);
// The names whose Calls the CUDA code generator emits itself.
std::set<std::string> cuda_native_intrinsics();

}  // namespace tessel::loop
