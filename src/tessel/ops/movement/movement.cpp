// Data-movement operators. The family is split over three files:
//   shape_ops.cpp      Constant, Identity, Shape, Size, Reshape, Flatten,
//                      Squeeze, Unsqueeze, Expand, ConstantOfShape, Range, EyeLike
//   movement_layout.cpp Transpose, Concat, Split, Slice, Tile, Pad,
//                      DepthToSpace, SpaceToDepth, CenterCropPad, Trilu,
//                      ReverseSequence
//   gather_scatter.cpp Gather, GatherElements, GatherND, Scatter,
//                      ScatterElements, ScatterND, TensorScatter, Compress,
//                      OneHot, NonZero, Unique
// with their shared helpers in movement_common.h.
#include "tessel/ops/movement/movement_common.h"
#include "tessel/ops/registry.h"

namespace tessel {

void register_movement_ops(OpRegistry& r) {
  movement::register_shape_ops(r);
  movement::register_layout_ops(r);
  movement::register_gather_scatter_ops(r);
}

}  // namespace tessel
