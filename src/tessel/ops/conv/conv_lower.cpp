// Compiled forms of Conv and ConvTranspose as contractions: one reduction
// per output element over (input channels of the group, kernel offsets).
// Conv reads the input at o * stride - pad + k * dilation; ConvTranspose is
// the adjoint, gathering the input positions i with
// i * stride - pad + k * dilation = o (so o + pad - k * dilation must be a
// non-negative multiple of the stride below in * stride). Taps outside the
// input read a clamped element and contribute zero.
#include "tessel/ops/registry.h"
#include "tessel/ops/conv/window_lower.h"

namespace tessel {
namespace {

using loop::BinaryOp;
using loop::Expr;
using Idx = std::vector<Expr>;

struct ConvFrame {
  int64_t group = 1;
  int64_t cg = 0;  // input channels per group
  int64_t mg = 0;  // output channels per group
  DType t = DType::F32;
};

ConvFrame conv_frame(LowerContext& ctx, bool transpose) {
  ConvFrame f;
  f.t = compute_type(ctx.in_dtype(0));
  if (!is_float(f.t)) ctx.unsupported(str_cat("dtype ", dtype_name(f.t)));
  f.group = ctx.node.attr_int("group", 1);
  const std::vector<int64_t> c = const_in_dims(ctx, 0, 1), w = const_in_dims(ctx, 1, 0);
  if (f.group < 1 || c[0] % f.group != 0) ctx.unsupported("channels not divisible by group");
  f.cg = c[0] / f.group;
  f.mg = transpose ? w[1] : w[0] / f.group;
  return f;
}

// acc + bias[m], rounded to the output type.
Expr add_bias(LowerContext& ctx, const Expr& acc, const Expr& m) {
  const Expr y = ctx.has_input(2) ? acc + input_as_compute(ctx, 2, {m}) : acc;
  return loop::cast(ctx.out_dtype(), y);
}

Expr lower_conv(LowerContext& ctx, size_t, const Idx& index) {
  const ConvFrame f = conv_frame(ctx, false);
  const std::vector<int64_t> kernel = const_in_dims(ctx, 1, 2);
  const SpatialWindow sw = forward_window(ctx, &kernel, true, false);
  const Expr m = index[1];
  const Expr g = loop::floordiv(m, Expr(f.mg));
  const Idx o(index.begin() + 2, index.end());
  Idx extents{Expr(f.cg)};
  for (int64_t k : kernel) extents.push_back(Expr(k));
  const Expr acc = ctx.reduce(ReduceOp::Sum, constant(f.t, 0), extents, [&](const Idx& r) {
    const Idx k(r.begin() + 1, r.end());
    const WindowTap tap = forward_tap(sw, o, k);
    Idx xi{index[0], g * Expr(f.cg) + r[0]};
    xi.insert(xi.end(), tap.at.begin(), tap.at.end());
    Idx wi{m, r[0]};
    wi.insert(wi.end(), k.begin(), k.end());
    const Expr prod = input_as_compute(ctx, 0, xi) * input_as_compute(ctx, 1, wi);
    return loop::select(tap.inside, prod, constant(f.t, 0));
  });
  return add_bias(ctx, acc, m);
}

// ConvTranspose's pads (and so its input positions) for the output size the
// graph gives, following the reference's rule for output_shape / SAME_*.
convutil::Window transpose_window(LowerContext& ctx, const std::vector<int64_t>& in, const std::vector<int64_t>& kernel,
                                  const std::vector<int64_t>& out) {
  const size_t nsp = in.size();
  convutil::Window w = convutil::read_window(ctx.node, nsp, &kernel, true, false);
  const std::vector<int64_t> op = ctx.node.attr_ints("output_padding", std::vector<int64_t>(nsp, 0));
  if (op.size() != nsp) ctx.unsupported("output_padding length");
  const bool same = w.auto_pad == convutil::AutoPad::SameUpper || w.auto_pad == convutil::AutoPad::SameLower;
  const bool fixed = ctx.node.has_attr("output_shape");
  for (size_t i = 0; i < nsp; ++i) {
    const int64_t full = w.strides[i] * (in[i] - 1) + op[i] + w.extent(i);
    if (fixed || same) {
      const int64_t total = full - out[i];
      const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);
      w.pads[i] = total < 0 ? 0 : w.auto_pad == convutil::AutoPad::SameUpper ? half : total - half;
      w.pads[nsp + i] = total - w.pads[i];
    } else if (w.auto_pad == convutil::AutoPad::Valid) {
      w.pads[i] = w.pads[nsp + i] = 0;
    }
  }
  return w;
}

Expr lower_conv_transpose(LowerContext& ctx, size_t, const Idx& index) {
  const ConvFrame f = conv_frame(ctx, true);
  const std::vector<int64_t> kernel = const_in_dims(ctx, 1, 2), in = const_in_dims(ctx, 0, 2);
  std::vector<int64_t> out;
  for (const Dim& d : *ctx.node.outputs[0]->type.shape) {
    if (!d.is_const()) ctx.unsupported("symbolic output size");
    out.push_back(d.value());
  }
  out.erase(out.begin(), out.begin() + 2);
  const convutil::Window w = transpose_window(ctx, in, kernel, out);
  const Expr m = index[1];
  const Expr g = loop::floordiv(m, Expr(f.mg));
  Idx extents{Expr(f.cg)};
  for (int64_t k : kernel) extents.push_back(Expr(k));
  const Expr acc = ctx.reduce(ReduceOp::Sum, constant(f.t, 0), extents, [&](const Idx& r) {
    const Expr c = g * Expr(f.cg) + r[0];
    Idx xi{index[0], c};
    Idx wi{c, loop::floormod(m, Expr(f.mg))};
    Expr inside = loop::bool_imm(true);
    for (size_t d = 0; d < in.size(); ++d) {
      const Expr s = Expr(w.strides[d]);
      const Expr num = index[2 + d] + Expr(w.pads[d]) - r[1 + d] * Expr(w.dilations[d]);
      const Expr i = loop::floordiv(num, s);
      inside = and_all(inside, loop::binary(BinaryOp::Eq, loop::floormod(num, s), Expr(0)));
      inside = and_all(inside, in_range(i, Expr(0), Expr(in[d])));
      xi.push_back(clamp_index(i, Expr(0), Expr(in[d] - 1)));
      wi.push_back(r[1 + d]);
    }
    const Expr prod = input_as_compute(ctx, 0, xi) * input_as_compute(ctx, 1, wi);
    return loop::select(inside, prod, constant(f.t, 0));
  });
  return add_bias(ctx, acc, m);
}

}  // namespace

void register_conv_lowerings(OpRegistry& r) {
  r.set_lowering("", "Conv", FusionKind::Contraction, lower_conv);
  r.set_lowering("", "ConvTranspose", FusionKind::Contraction, lower_conv_transpose);
}

}  // namespace tessel
