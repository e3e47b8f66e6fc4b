// What a step costs at given sizes, for profiles that explain a kernel's
// time against the machine's ceilings (tessel bench --profile): the bytes it
// must move at least (every value it reads and writes, once; of a table it
// only Gathers from, the rows gathered) and the
// floating-point operations of its contractions (MatMul, Gemm, Conv: two per
// multiply-add; other ops count 0, they are bound by bytes).
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "tessel/runtime/step.h"

namespace tessel {

struct StepCost {
  int64_t bytes = 0;
  double flops = 0;
};

// Values whose sizes `bindings` does not fix count 0.
StepCost step_cost(const Step& s, const std::map<std::string, int64_t>& bindings);

}  // namespace tessel
