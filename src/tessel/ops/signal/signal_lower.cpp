// Compiled forms of the Blackman, Hamming and Hann windows: generators whose
// size is the (static) output size; the kernel checks that the size operand
// agrees. Computed in f64 like the reference, then converted.
#include <numbers>

#include "tessel/ops/lowering.h"
#include "tessel/ops/registry.h"

namespace tessel {
namespace {

using namespace lower_expr;

enum class Window { Blackman, Hamming, Hann };

Expr cos_(const Expr& x) { return intrinsic("cos", x); }

template <Window W>
Expr lower_window(LowerContext& ctx, size_t, const Idx& index) {
  const Dim& n = (*ctx.node.outputs[0]->type.shape)[0];
  if (!n.is_const()) ctx.unsupported("the size is only known at run time");
  const int64_t size = n.value();
  const Expr given = loop::cast(DType::I64, ctx.input(0, Idx(ctx.in_rank(0), Expr(0))));
  ctx.check(eq(given, Expr(size)), str_cat(ctx.node.describe(), ": size differs from ", size));
  // A periodic window is one period of a window of size+1 with the last
  // sample dropped; a symmetric one spans size-1 intervals.
  const int64_t denom = ctx.node.attr_int("periodic", 1) ? size : size - 1;
  if (denom == 0) return constant(ctx.out_dtype(), 1);
  const Expr x = div(f64(2 * std::numbers::pi) * loop::cast(DType::F64, index[0]),
                              f64(static_cast<double>(denom)));
  Expr v;
  switch (W) {
    case Window::Blackman: v = f64(0.42) - f64(0.5) * cos_(x) + f64(0.08) * cos_(f64(2) * x); break;
    case Window::Hamming: v = f64(25.0 / 46.0) - f64(21.0 / 46.0) * cos_(x); break;
    case Window::Hann: v = f64(0.5) - f64(0.5) * cos_(x); break;
  }
  return loop::cast(ctx.out_dtype(), v);
}

}  // namespace

void register_signal_lowerings(OpRegistry& r) {
  r.set_lowering("", "BlackmanWindow", FusionKind::Elementwise, lower_window<Window::Blackman>);
  r.set_lowering("", "HammingWindow", FusionKind::Elementwise, lower_window<Window::Hamming>);
  r.set_lowering("", "HannWindow", FusionKind::Elementwise, lower_window<Window::Hann>);
}

}  // namespace tessel
