// Sliding-window geometry shared by the convolution and pooling lowerings:
// the window attributes resolved for the node's (constant) spatial sizes, and
// the input coordinate a window tap reads.
#pragma once

#include "tessel/ops/conv/conv_util.h"
#include "tessel/ops/lowering.h"

namespace tessel {

struct SpatialWindow {
  convutil::Window w;           // pads resolved (auto_pad applied)
  std::vector<int64_t> in, out;  // spatial sizes
  size_t rank() const { return in.size(); }
};

// The forward window (Conv, pools) of ctx.node over input 0's spatial dims.
// `kernel_from_w` is the weight's spatial shape for convolutions.
SpatialWindow forward_window(LowerContext& ctx, const std::vector<int64_t>* kernel_from_w, bool with_dilations,
                             bool with_ceil);

// A tap of the window: the (clamped) input coordinates and whether they lie
// inside the input (outside = padding).
struct WindowTap {
  std::vector<loop::Expr> at;
  loop::Expr inside;
};

// The input coordinates read by kernel offset `k` at output position `o`
// (both spatial): o * stride - pad_begin + k * dilation.
WindowTap forward_tap(const SpatialWindow& sw, const std::vector<loop::Expr>& o, const std::vector<loop::Expr>& k);

// Kernel extents as index expressions (the reduction extents of a window).
std::vector<loop::Expr> kernel_extents(const SpatialWindow& sw);

// a && b for conditions that may be undefined (= true).
loop::Expr and_all(const loop::Expr& a, const loop::Expr& b);

}  // namespace tessel
