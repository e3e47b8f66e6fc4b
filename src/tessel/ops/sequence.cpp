#include "tessel/ops/registry.h"

namespace tessel {

void register_sequence_ops(OpRegistry& r) { (void)r; }

}  // namespace tessel
