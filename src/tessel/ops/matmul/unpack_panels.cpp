// tessel::UnpackPanels: a GEMM weight stored in the CPU micro-kernel's panel
// layout, read back as the plain matrix. The CPU target's prepack_weights
// pass (passes/) stores a constant B [K, N] of a MatMul or Gemm as panels of
// W consecutive columns, each k-major, so that the packed GEMM
// (schedule/gemm.h) reads it where it lies instead of packing it on every
// call:
//
//   P [panels, K, W] -> B [K, N]     B[k, j] = P[j / W, k, j % W]
//
// with panels * W >= N (the pass pads to a multiple of 64 columns, so that
// every tile width of the search space reads whole panels; P holds zeros
// past N). Attribute: columns (N), required.
// Injective: it joins the GEMM's operand as an index expression, which the
// GEMM lowering recognises (lower/contraction.cpp) as already packed.
#include <cstring>

#include "tessel/ops/registry.h"

namespace tessel {

namespace {

int64_t columns_of(const Node& n) {
  const int64_t c = n.attr_int("columns", -1);
  TS_CHECK(c >= 1, n.describe(), ": columns must be a positive integer");
  return c;
}

// P's panel count and width, checked against `columns`.
void check_panels(const Node& n, const Dim& panels, const Dim& width, int64_t columns) {
  TS_CHECK(panels.is_const() && width.is_const() && width.value() >= 1, n.describe(),
           ": panels and panel width must be constant");
  TS_CHECK(panels.value() * width.value() >= columns, n.describe(), ": ", panels.value(), " panels of ",
           width.value(), " columns do not hold ", columns, " columns");
}

void unpack_infer(InferContext& ctx) {
  const DType dt = ctx.input_dtype(0);
  const int64_t columns = columns_of(ctx.node);
  if (!ctx.has_shape(0)) return ctx.set_output_unknown_shape(0, dt);
  const Shape& p = ctx.input_shape(0);
  TS_CHECK(p.size() == 3, ctx.node.describe(), ": input must have rank 3 (panels, K, width)");
  check_panels(ctx.node, p[0], p[2], columns);
  ctx.set_output(0, dt, {p[1], Dim(columns)});
}

void unpack_kernel(KernelContext& ctx) {
  const Tensor& p = ctx.input(0);
  const int64_t columns = columns_of(ctx.node);
  TS_CHECK(p.rank() == 3, ctx.node.describe(), ": input must have rank 3 (panels, K, width)");
  check_panels(ctx.node, Dim(p.dim(0)), Dim(p.dim(2)), columns);
  const int64_t k = p.dim(1), w = p.dim(2);
  Tensor out(p.dtype(), {k, columns});
  const size_t es = static_cast<size_t>(dtype_storage_size(p.dtype()));
  for (int64_t r = 0; r < k; ++r)
    for (int64_t j = 0; j < columns; ++j)
      std::memcpy(out.mutable_raw() + static_cast<size_t>(r * columns + j) * es,
                  p.raw() + static_cast<size_t>(((j / w) * k + r) * w + j % w) * es, es);
  ctx.set_output(0, std::move(out));
}

loop::Expr lower_unpack(LowerContext& ctx, size_t, const std::vector<loop::Expr>& index) {
  const int64_t w = ctx.node.inputs[0]->type.shape->at(2).value();
  return ctx.input(0, {loop::floordiv(index[1], loop::Expr(w)), index[0], loop::floormod(index[1], loop::Expr(w))});
}

}  // namespace

void register_unpack_panels_op(OpRegistry& r) {
  r.add({"UnpackPanels", "tessel", 1, 1, 1, 1, unpack_infer, unpack_kernel, nullptr, 1});
  r.set_lowering("tessel", "UnpackPanels", FusionKind::Injective, lower_unpack);
}

}  // namespace tessel
