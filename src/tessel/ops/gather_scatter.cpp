#include "tessel/ops/movement_common.h"

namespace tessel::movement {
void register_gather_scatter_ops(OpRegistry& r) { (void)r; }
}  // namespace tessel::movement
