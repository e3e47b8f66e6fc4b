// Compiled forms of QuantizeLinear and DequantizeLinear with integer
// quantized types (float8/float4/int4 are not loop-IR types; such nodes stay
// on the interpreter). Scales and zero points are per tensor, per axis or
// blocked along the axis. Arithmetic follows the reference kernels: the
// quotient is formed in the precision type, rounded half to even, shifted by
// the zero point and saturated; dequantization is (x - zp) * scale in f32.
#include "tessel/ops/lowering.h"
#include "tessel/ops/registry.h"

namespace tessel {
namespace {

using namespace lower_expr;

// Index of the scale / zero point for element `index` of x.
Idx scale_index(LowerContext& ctx, const Idx& index) {
  const Shape& scale = *ctx.node.input(1)->type.shape;
  const int64_t block = ctx.node.attr_int("block_size", 0);
  int64_t numel = 1;
  for (const Dim& d : scale) {
    if (!d.is_const()) ctx.unsupported("symbolic scale shape");
    numel *= d.value();
  }
  if (scale.empty() || (scale.size() == 1 && numel == 1 && block == 0)) return Idx(scale.size(), Expr(0));
  const int64_t rank = static_cast<int64_t>(index.size());
  const size_t axis = static_cast<size_t>(normalize_axis(ctx.node.attr_int("axis", 1), rank, ctx.node));
  if (block == 0) return {index[axis]};
  Idx at = index;
  at[axis] = loop::floordiv(index[axis], Expr(block));
  return at;
}

DType attr_dtype(LowerContext& ctx, const char* name) {
  const int64_t code = ctx.node.attr_int(name, 0);
  DType t = DType::Undefined;
  if (code != 0 && !dtype_from_onnx(static_cast<int>(code), &t)) ctx.unsupported(str_cat(name, " ", code));
  return t;
}

// The type the division is carried out in (the reference's rule).
DType division_type(LowerContext& ctx) {
  const DType p = attr_dtype(ctx, "precision");
  if (p != DType::Undefined) return p;
  const DType x = ctx.in_dtype(0), s = ctx.in_dtype(1);
  if (x == s && x != DType::I32) return x;
  if (x == DType::I32 || s == DType::I32) return DType::F64;
  return DType::F32;
}

Expr lower_quantize(LowerContext& ctx, size_t, const Idx& index) {
  const DType out = ctx.out_dtype();
  if (!is_int(out)) ctx.unsupported(str_cat("output type ", dtype_name(out)));
  const DType prec = division_type(ctx);
  const Idx si = scale_index(ctx, index);
  const Expr x = loop::cast(prec, ctx.input(0, index)), s = loop::cast(prec, ctx.input(1, si));
  const DType wide = compute_type(prec);  // f16/bf16 quotients are rounded, then widened
  const Expr q = loop::cast(wide, div(x, s));
  Expr v = loop::cast(DType::I64, intrinsic("rint", q));  // NaN -> 0, saturating
  if (ctx.has_input(2)) v = v + loop::cast(DType::I64, ctx.input(2, si));
  const Expr lo = loop::cast(DType::I64, lowest(out)), hi = loop::cast(DType::I64, highest(out));
  return loop::cast(out, clamp_index(v, lo, hi));
}

Expr lower_dequantize(LowerContext& ctx, size_t, const Idx& index) {
  const Idx si = scale_index(ctx, index);
  Expr dx = loop::cast(DType::F32, ctx.input(0, index));
  if (ctx.has_input(2)) dx = dx - loop::cast(DType::F32, ctx.input(2, si));
  return loop::cast(ctx.out_dtype(), dx * loop::cast(DType::F32, ctx.input(1, si)));
}

}  // namespace

void register_quantize_lowerings(OpRegistry& r) {
  r.set_lowering("", "QuantizeLinear", FusionKind::Elementwise, lower_quantize);
  r.set_lowering("", "DequantizeLinear", FusionKind::Elementwise, lower_dequantize);
}

}  // namespace tessel
