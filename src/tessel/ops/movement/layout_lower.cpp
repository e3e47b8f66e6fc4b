// Compiled forms of the layout ops that remap indices: Pad (all modes),
// Tile, DepthToSpace, SpaceToDepth, CenterCropPad, ReverseSequence, OneHot,
// and the generators ConstantOfShape, Range and EyeLike. Each output
// element reads at most one input element; padded positions read a clamped
// in-bounds element and select the pad value, because both arms of a select
// are evaluated.
#include "tessel/ops/lowering.h"
#include "tessel/ops/registry.h"

namespace tessel {
namespace {

using namespace lower_expr;


// ---- Pad ---------------------------------------------------------------------------

// Per-axis begin pads over all axes (the pads input lists begins then ends
// for `axes`, or for every axis).
std::vector<int64_t> begin_pads(LowerContext& ctx) {
  const size_t rank = ctx.in_rank(0);
  const std::vector<int64_t> pads = const_input_ints(ctx, 1, "pads");
  std::vector<int64_t> axes;
  if (ctx.has_input(3)) {
    for (int64_t a : const_input_ints(ctx, 3, "axes"))
      axes.push_back(normalize_axis(a, static_cast<int64_t>(rank), ctx.node));
  } else {
    for (size_t a = 0; a < rank; ++a) axes.push_back(static_cast<int64_t>(a));
  }
  if (pads.size() != 2 * axes.size()) ctx.unsupported("pads length");
  std::vector<int64_t> begin(rank, 0);
  for (size_t i = 0; i < axes.size(); ++i) begin[static_cast<size_t>(axes[i])] = pads[i];
  return begin;
}

// Source coordinate along an axis of size n for i = o - begin outside [0, n).
Expr pad_source(const std::string& mode, const Expr& i, const Expr& n) {
  if (mode == "edge") return clamp_index(i, Expr(0), n - Expr(1));
  if (mode == "wrap") return loop::floormod(i, n);
  // reflect: period 2(n-1), folded; n == 1 reads element 0.
  const Expr period = loop::max(Expr(1), Expr(2) * (n - Expr(1)));
  const Expr r = loop::floormod(i, period);
  return clamp_index(loop::select(lt(r, n), r, period - r), Expr(0), n - Expr(1));
}

Expr lower_pad(LowerContext& ctx, size_t, const Idx& index) {
  const std::string mode = ctx.node.attr_string("mode", "constant");
  if (mode != "constant" && mode != "edge" && mode != "wrap" && mode != "reflect") ctx.unsupported("mode " + mode);
  const std::vector<int64_t> begin = begin_pads(ctx);
  const Idx shape = ctx.in_shape(0);
  Idx at;
  Expr inside = loop::bool_imm(true);
  for (size_t d = 0; d < index.size(); ++d) {
    const Expr i = index[d] - Expr(begin[d]);
    const Expr n = shape[d];
    if (begin[d] == 0 && (*ctx.node.input(0)->type.shape)[d] == (*ctx.node.outputs[0]->type.shape)[d]) {
      at.push_back(i);
      continue;
    }
    const Expr in = in_range(i, Expr(0), n);
    if (mode == "constant") {
      inside = and_(inside, in);
      at.push_back(clamp_index(i, Expr(0), n - Expr(1)));
    } else {
      at.push_back(loop::select(in, i, pad_source(mode, i, n)));
    }
  }
  const Expr x = ctx.input(0, at);
  if (mode != "constant") return x;
  const Expr value = ctx.has_input(2) ? loop::cast(x.dtype(), ctx.input(2, Idx(ctx.in_rank(2), Expr(0))))
                                      : constant(x.dtype(), 0);
  return loop::select(inside, x, value);
}

// ---- Tile, DepthToSpace, SpaceToDepth ---------------------------------------------

Expr lower_tile(LowerContext& ctx, size_t, const Idx& index) {
  if (!ctx.input_const(1)) ctx.unsupported("repeats are not constant");
  const Idx shape = ctx.in_shape(0);
  Idx at;
  for (size_t d = 0; d < index.size(); ++d) at.push_back(loop::floormod(index[d], shape[d]));
  return ctx.input(0, at);
}

bool crd(const Node& n) { return n.attr_string("mode", "DCR") == "CRD"; }

// out[n, c, y, x] = in[n, channel(c, y % b, x % b), y / b, x / b].
Expr lower_depth_to_space(LowerContext& ctx, size_t, const Idx& index) {
  const int64_t b = ctx.node.attr_int("blocksize", 1);
  const Expr oc = ctx.out_shape(0)[1];
  const Expr by = loop::floormod(index[2], Expr(b)), bx = loop::floormod(index[3], Expr(b));
  const Expr block = by * Expr(b) + bx;
  const Expr channel = crd(ctx.node) ? index[1] * Expr(b * b) + block : block * oc + index[1];
  return ctx.input(0, {index[0], channel, loop::floordiv(index[2], Expr(b)), loop::floordiv(index[3], Expr(b))});
}

// out[n, channel(c, by, bx), h, w] = in[n, c, h * b + by, w * b + bx].
Expr lower_space_to_depth(LowerContext& ctx, size_t, const Idx& index) {
  const int64_t b = ctx.node.attr_int("blocksize", 1);
  const Expr ic = ctx.in_shape(0)[1];
  Expr c, block;
  if (crd(ctx.node)) {
    c = loop::floordiv(index[1], Expr(b * b));
    block = loop::floormod(index[1], Expr(b * b));
  } else {
    c = loop::floormod(index[1], ic);
    block = loop::floordiv(index[1], ic);
  }
  const Expr by = loop::floordiv(block, Expr(b)), bx = loop::floormod(block, Expr(b));
  return ctx.input(0, {index[0], c, index[2] * Expr(b) + by, index[3] * Expr(b) + bx});
}

// CenterCropPad: a crop takes the centre (the extra element dropped at the
// end); a pad centres the input (the extra zero at the end).
Expr lower_center_crop_pad(LowerContext& ctx, size_t, const Idx& index) {
  const std::vector<int64_t> in = const_in_dims(ctx, 0);
  const Shape& out = *ctx.node.outputs[0]->type.shape;
  Idx at;
  Expr inside = loop::bool_imm(true);
  for (size_t d = 0; d < in.size(); ++d) {
    if (!out[d].is_const()) ctx.unsupported("symbolic output size");
    const int64_t n = in[d], t = out[d].value();
    const Expr i = index[d] + Expr(t <= n ? (n - t) / 2 : -((t - n) / 2));
    inside = and_(inside, in_range(i, Expr(0), Expr(n)));
    at.push_back(clamp_index(i, Expr(0), Expr(n - 1)));
  }
  const Expr x = ctx.input(0, at);
  return loop::select(inside, x, constant(x.dtype(), 0));
}

// ReverseSequence: the first seq_len[b] steps along the time axis reversed.
Expr lower_reverse_sequence(LowerContext& ctx, size_t, const Idx& index) {
  const size_t ba = static_cast<size_t>(ctx.node.attr_int("batch_axis", 1));
  const size_t ta = static_cast<size_t>(ctx.node.attr_int("time_axis", 0));
  const Expr time = ctx.in_shape(0)[ta];
  const Expr len = loop::cast(DType::I64, ctx.input(1, {index[ba]}));
  ctx.check(in_range(len, Expr(0), time + Expr(1)), str_cat(ctx.node.describe(), ": sequence length out of range"));
  const Expr t = index[ta];
  Idx at = index;
  at[ta] = loop::select(lt(t, len), clamp_index(len - Expr(1) - t, Expr(0), time - Expr(1)), t);
  return ctx.input(0, at);
}

// EyeLike: ones on the k-th diagonal.
Expr lower_eye_like(LowerContext& ctx, size_t, const Idx& index) {
  const int64_t k = ctx.node.attr_int("k", 0);
  const DType t = ctx.out_dtype();
  const Expr on = eq(index[1] - index[0], Expr(k));
  return t == DType::Bool ? on : loop::select(on, constant(t, 1), constant(t, 0));
}

// ---- OneHot, ConstantOfShape -----------------------------------------------------------

// out[.., k, ..] = values[1] where k == indices[..] (negative indices count
// from depth; out-of-range rows stay off), else values[0].
Expr lower_onehot(LowerContext& ctx, size_t, const Idx& index) {
  const int64_t r = static_cast<int64_t>(ctx.in_rank(0));
  int64_t a = ctx.node.attr_int("axis", -1);
  if (a < 0) a += r + 1;
  const size_t axis = static_cast<size_t>(a);
  // The depth is the output's size along the axis (shape inference took it
  // from the depth operand, or the model declared it).
  if (!(*ctx.node.outputs[0]->type.shape)[axis].is_const() && !ctx.input_const(1))
    ctx.unsupported("the depth is only known at run time");
  const Expr depth = ctx.out_shape(0)[axis];
  Idx at = index;
  const Expr k = at[axis];
  at.erase(at.begin() + static_cast<long>(axis));
  Expr i = loop::cast(DType::I64, ctx.input(0, at));  // float indices truncate, as in the interpreter
  i = loop::select(lt(i, Expr(0)), i + depth, i);
  return loop::select(eq(i, k), ctx.input(2, {Expr(1)}), ctx.input(2, {Expr(0)}));
}

Expr lower_constant_of_shape(LowerContext& ctx, size_t, const Idx&) {
  if (!ctx.input_const(0)) ctx.unsupported("the shape is not constant");
  if (!ctx.node.has_attr("value")) return constant(ctx.out_dtype(), 0);
  const Tensor& t = ctx.node.attr_tensor("value");
  if (t.numel() != 1) ctx.unsupported("value is not a scalar");
  if (is_float(t.dtype())) return loop::float_imm(t.dtype(), t.get_f64(0));
  if (t.dtype() == DType::Bool) return loop::bool_imm(t.get_i64(0) != 0);
  if (t.dtype() == DType::U64) return loop::int_imm(t.dtype(), static_cast<int64_t>(t.get_u64(0)));
  return loop::int_imm(t.dtype(), t.get_i64(0));
}

// Range: start + i * delta in f64 (integers in i64), rounded as the
// reference does (f16/bf16 through f32 unless stash_type is double). The
// output size must be static; the kernel checks that the operands give it.
Expr lower_range(LowerContext& ctx, size_t, const Idx& index) {
  const Dim& n = (*ctx.node.outputs[0]->type.shape)[0];
  if (!n.is_const()) ctx.unsupported("the output size is only known at run time");
  const DType out = ctx.out_dtype();
  const DType t = is_float(out) ? DType::F64 : DType::I64;
  const Expr start = loop::cast(t, ctx.input(0, Idx(ctx.in_rank(0), Expr(0))));
  const Expr limit = loop::cast(t, ctx.input(1, Idx(ctx.in_rank(1), Expr(0))));
  const Expr delta = loop::cast(t, ctx.input(2, Idx(ctx.in_rank(2), Expr(0))));
  const Expr f64_0 = loop::float_imm(DType::F64, 0);
  const Expr span = div(loop::cast(DType::F64, limit - start), loop::cast(DType::F64, delta));
  const Expr count = loop::max(f64_0, intrinsic("ceil", span));
  ctx.check(eq(count, loop::float_imm(DType::F64, static_cast<double>(n.value()))),
            str_cat(ctx.node.describe(), ": start, limit and delta do not give ", n.value(), " elements"));
  Expr v = start + loop::cast(t, index[0]) * delta;
  const bool low = out == DType::F16 || out == DType::BF16;
  if (low && ctx.node.attr_int("stash_type", 1) == 1) v = loop::cast(DType::F32, v);
  return loop::cast(out, v);
}

}  // namespace

void register_layout_lowerings(OpRegistry& r) {
  const auto inj = [&](const char* name, LowerFn f) { r.set_lowering("", name, FusionKind::Injective, f); };
  inj("Pad", lower_pad);
  inj("Tile", lower_tile);
  inj("DepthToSpace", lower_depth_to_space);
  inj("SpaceToDepth", lower_space_to_depth);
  inj("OneHot", lower_onehot);
  inj("ConstantOfShape", lower_constant_of_shape);
  inj("Range", lower_range);
  inj("CenterCropPad", lower_center_crop_pad);
  inj("ReverseSequence", lower_reverse_sequence);
  inj("EyeLike", lower_eye_like);
}

}  // namespace tessel
