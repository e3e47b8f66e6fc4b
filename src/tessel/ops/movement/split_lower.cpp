// Compiled form of Split: output k reads the input shifted by the sizes of
// the outputs before it along the axis. Each used output is its own kernel
// (OpSchema::multi_output_lowering; passes/fusion.h).
#include "tessel/ops/lowering.h"
#include "tessel/ops/registry.h"

namespace tessel {
namespace {

using namespace lower_expr;

Expr lower_split(LowerContext& ctx, size_t output, const Idx& index) {
  const size_t rank = ctx.in_rank(0);
  const size_t axis = static_cast<size_t>(normalize_axis(ctx.node.attr_int("axis", 0), static_cast<int64_t>(rank), ctx.node));
  Expr offset = Expr(0);
  for (size_t k = 0; k < output; ++k) {
    if (!ctx.node.outputs[k]) ctx.unsupported("an omitted output before the one lowered");
    offset = offset + ctx.out_shape(k)[axis];
  }
  Idx at = index;
  at[axis] = index[axis] + offset;
  return ctx.input(0, at);
}

}  // namespace

void register_split_lowerings(OpRegistry& r) {
  r.set_lowering("", "Split", FusionKind::Injective, lower_split);
  r.set_multi_output_lowering("", "Split");
}

}  // namespace tessel
