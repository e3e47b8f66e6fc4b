// Data-movement operators. The family is split over these files:
//   shape_ops.cpp               Constant, Identity, Shape, Size, Reshape, Flatten,
//                               Squeeze, Unsqueeze, Expand, ConstantOfShape, Range, EyeLike
//   movement_layout.cpp         register_layout_ops, over:
//     movement_transpose.cpp    Transpose, DepthToSpace, SpaceToDepth, ReverseSequence
//     movement_concat_split.cpp Concat, Split, Tile
//     movement_slice_pad.cpp    Slice, Pad, CenterCropPad, Trilu
//   ../gather_scatter/          Gather*, Scatter*, TensorScatter (gather.cpp,
//                               scatter.cpp), Compress, OneHot, NonZero, Unique
//                               (select_ops.cpp)
// with their shared helpers in movement_common.h; their compiled forms are
// movement_lower.cpp, layout_lower.cpp, split_lower.cpp and
// ../gather_scatter/scatter_lower.cpp.
#include "tessel/ops/movement/movement_common.h"
#include "tessel/ops/registry.h"

namespace tessel {

void register_movement_ops(OpRegistry& r) {
  movement::register_shape_ops(r);
  movement::register_layout_ops(r);
  movement::register_gather_scatter_ops(r);
}

}  // namespace tessel
