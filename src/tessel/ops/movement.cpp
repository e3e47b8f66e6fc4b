#include "tessel/ops/registry.h"

namespace tessel {

void register_movement_ops(OpRegistry& r) { (void)r; }

}  // namespace tessel
