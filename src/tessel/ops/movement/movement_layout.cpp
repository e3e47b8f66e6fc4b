// Layout operators: Transpose, Concat, Split, Slice, Tile, Pad, DepthToSpace,
// SpaceToDepth, CenterCropPad, Trilu, ReverseSequence.
//
// Kernels that permute or sub-select elements express the mapping as per-axis
// offset tables and run the generic strided copy (copy_box), so one loop
// serves every dtype and every op.
//
// One file per kind of movement, each registering its own ops:
//   movement_transpose.cpp    Transpose, DepthToSpace, SpaceToDepth, ReverseSequence
//   movement_concat_split.cpp Concat, Split, Tile
//   movement_slice_pad.cpp    Slice, Pad, CenterCropPad, Trilu
#include "tessel/ops/movement/movement_layout.h"

#include "tessel/ops/movement/movement_common.h"

namespace tessel::movement {

void register_layout_ops(OpRegistry& r) {
  register_transpose_ops(r);
  register_concat_split_ops(r);
  register_slice_pad_ops(r);
}

}  // namespace tessel::movement
