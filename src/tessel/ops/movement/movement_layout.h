// The layout operators' files (private to ops/movement/): each registers its
// own ops, and register_layout_ops (movement_layout.cpp) calls them all.
#pragma once

#include "tessel/ops/registry.h"

namespace tessel::movement {

void register_transpose_ops(OpRegistry& r);     // movement_transpose.cpp
void register_concat_split_ops(OpRegistry& r);  // movement_concat_split.cpp
void register_slice_pad_ops(OpRegistry& r);     // movement_slice_pad.cpp

}  // namespace tessel::movement
