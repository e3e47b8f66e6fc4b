#include "tessel/ops/movement_common.h"

namespace tessel::movement {
void register_layout_ops(OpRegistry& r) { (void)r; }
}  // namespace tessel::movement
