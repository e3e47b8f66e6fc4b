// Compiled forms of data movement: each output element reads one input
// element at a remapped index (Injective ops), so they fuse into their
// consumers and cost no memory pass of their own. Indices that select
// between inputs (Concat) are clamped, because both arms of a select are
// evaluated; indices read from tensors (Gather) are checked at run time.
#include "tessel/ops/lowering.h"
#include "tessel/ops/registry.h"

namespace tessel {
namespace {

using namespace lower_expr;

const Shape& in_dims(LowerContext& ctx, size_t i) { return *ctx.node.input(i)->type.shape; }
const Shape& out_dims(LowerContext& ctx) { return *ctx.node.outputs[0]->type.shape; }

// Reshape, Flatten, Squeeze, Unsqueeze: trailing dims that agree map
// directly (and size-1 dims drop out); the rest goes through the flat index.
Expr lower_reshape(LowerContext& ctx, size_t, const Idx& index) {
  // A shape computed at run time would leave the output size unknown
  // before the kernel runs.
  if ((ctx.node.op == "Reshape" || ctx.node.op == "Unsqueeze" || ctx.node.op == "Squeeze") && ctx.has_input(1) &&
      !ctx.input_const(1))
    ctx.unsupported("the shape operand is not constant");
  const Shape& in = in_dims(ctx, 0);
  const Shape& out = out_dims(ctx);
  const Idx in_e = ctx.in_shape(0), out_e = ctx.out_shape(0);
  Idx r(in.size());
  int64_t i = static_cast<int64_t>(in.size()) - 1, j = static_cast<int64_t>(out.size()) - 1;
  while (i >= 0 && j >= 0) {
    if (in[i] == out[j]) {
      r[i--] = index[j--];
    } else if (in[i] == Dim(1)) {
      r[i--] = Expr(0);
    } else if (out[j] == Dim(1)) {
      --j;
    } else {
      break;
    }
  }
  while (i >= 0 && in[i] == Dim(1)) r[i--] = Expr(0);
  if (i >= 0) {
    Expr flat = Expr(0);
    for (int64_t k = 0; k <= j; ++k) flat = flat * out_e[k] + index[k];
    for (int64_t k = i; k > 0; --k) {
      r[k] = loop::floormod(flat, in_e[k]);
      flat = loop::floordiv(flat, in_e[k]);
    }
    r[0] = flat;
  }
  return ctx.input(0, r);
}

Expr lower_transpose(LowerContext& ctx, size_t, const Idx& index) {
  const size_t rank = ctx.in_rank(0);
  std::vector<int64_t> perm = ctx.node.attr_ints("perm");
  if (perm.empty())
    for (size_t d = rank; d-- > 0;) perm.push_back(static_cast<int64_t>(d));
  TS_CHECK(perm.size() == rank, ctx.node.describe(), ": perm of length ", perm.size(), " for rank ", rank);
  Idx r(rank);
  for (size_t j = 0; j < rank; ++j) r[static_cast<size_t>(perm[j])] = index[j];
  return ctx.input(0, r);
}

Expr lower_expand(LowerContext& ctx, size_t, const Idx& index) {
  if (!ctx.input_const(1)) ctx.unsupported("the shape operand is not constant");
  return ctx.input(0, broadcast_index(ctx, 0, index));
}

// Slice with constant starts/ends/axes/steps: in = start + out * step, with
// start clamped as ONNX specifies (done on expressions, so symbolic dims work).
Expr lower_slice(LowerContext& ctx, size_t, const Idx& index) {
  const size_t rank = ctx.in_rank(0);
  const std::vector<int64_t> starts = const_input_ints(ctx, 1, "starts");
  std::vector<int64_t> axes, steps;
  if (ctx.has_input(3)) axes = const_input_ints(ctx, 3, "axes");
  if (ctx.has_input(4)) steps = const_input_ints(ctx, 4, "steps");
  if (axes.empty())
    for (size_t a = 0; a < starts.size(); ++a) axes.push_back(static_cast<int64_t>(a));
  const Idx shape = ctx.in_shape(0);
  Idx r = index;
  for (size_t s = 0; s < starts.size(); ++s) {
    const size_t a = static_cast<size_t>(normalize_axis(axes[s], static_cast<int64_t>(rank), ctx.node));
    const int64_t step = steps.empty() ? 1 : steps[s];
    if (step == 0) ctx.unsupported("zero step");
    const int64_t st = starts[s];
    const Expr dim = shape[a];
    Expr start;
    if (step > 0)
      start = st < 0 ? loop::max(Expr(0), dim + Expr(st)) : loop::min(Expr(st), dim);
    else
      start = st < 0 ? loop::max(Expr(-1), dim + Expr(st)) : loop::min(Expr(st), dim - Expr(1));
    r[a] = start + index[a] * Expr(step);
  }
  return ctx.input(0, r);
}

Expr lower_concat(LowerContext& ctx, size_t, const Idx& index) {
  const size_t rank = ctx.in_rank(0);
  const size_t axis = static_cast<size_t>(normalize_axis(ctx.node.attr_int("axis", 0), static_cast<int64_t>(rank), ctx.node));
  struct Part {
    size_t input;
    Expr offset, size;
  };
  std::vector<Part> parts;
  Expr offset = Expr(0);
  for (size_t i = 0; i < ctx.num_inputs(); ++i) {
    const Dim& d = in_dims(ctx, i)[axis];
    const Expr size = ctx.in_shape(i)[axis];
    if (d != Dim(0)) parts.push_back({i, offset, size});
    offset = offset + size;
  }
  if (parts.empty()) ctx.unsupported("every input is empty");
  const Expr& j = index[axis];
  Expr value;
  for (size_t p = parts.size(); p-- > 0;) {
    Idx at = index;
    at[axis] = clamp_index(j - parts[p].offset, Expr(0), parts[p].size - Expr(1));
    Expr v = ctx.input(parts[p].input, at);
    value = value.defined() ? loop::select(lt(j, parts[p].offset + parts[p].size), v, value) : v;
  }
  return value;
}

Expr lower_gather(LowerContext& ctx, size_t, const Idx& index) {
  const size_t r = ctx.in_rank(0), q = ctx.in_rank(1);
  const size_t axis = static_cast<size_t>(normalize_axis(ctx.node.attr_int("axis", 0), static_cast<int64_t>(r), ctx.node));
  const Expr dim = ctx.in_shape(0)[axis];
  Idx ind_index(index.begin() + static_cast<long>(axis), index.begin() + static_cast<long>(axis + q));
  Expr n = loop::cast(DType::I64, ctx.input(1, ind_index));
  n = loop::select(lt(n, Expr(0)), n + dim, n);
  ctx.check(and_(ge(n, Expr(0)), lt(n, dim)),
            str_cat(ctx.node.describe(), ": index out of range for an axis of size ", in_dims(ctx, 0)[axis].str()));
  Idx at(index.begin(), index.begin() + static_cast<long>(axis));
  at.push_back(clamp_index(n, Expr(0), dim - Expr(1)));
  for (size_t d = axis + q; d < index.size(); ++d) at.push_back(index[d]);
  return ctx.input(0, at);
}

// GatherND: out[batch, tuple, rest] = data[batch, indices[batch, tuple, :], rest].
Expr lower_gather_nd(LowerContext& ctx, size_t, const Idx& index) {
  const size_t b = static_cast<size_t>(ctx.node.attr_int("batch_dims", 0));
  const std::vector<int64_t> is = const_in_dims(ctx, 1);
  const size_t q = is.size(), m = static_cast<size_t>(is.back());
  const Idx ds = ctx.in_shape(0);
  Idx at(index.begin(), index.begin() + static_cast<long>(b));
  for (size_t j = 0; j < m; ++j) {
    Idx ii(index.begin(), index.begin() + static_cast<long>(q - 1));
    ii.push_back(Expr(static_cast<int64_t>(j)));
    const Expr dim = ds[b + j];
    Expr n = loop::cast(DType::I64, ctx.input(1, ii));
    n = loop::select(lt(n, Expr(0)), n + dim, n);
    ctx.check(in_range(n, Expr(0), dim), str_cat(ctx.node.describe(), ": index out of range"));
    at.push_back(clamp_index(n, Expr(0), dim - Expr(1)));
  }
  for (size_t d = q - 1; d < index.size(); ++d) at.push_back(index[d]);
  return ctx.input(0, at);
}

// Trilu: keeps x[.., r, c] where c - r >= k (upper) or c - r <= k (lower).
Expr lower_trilu(LowerContext& ctx, size_t, const Idx& index) {
  int64_t k = 0;
  if (ctx.has_input(1)) {
    const Tensor* t = ctx.input_const(1);
    if (!t) ctx.unsupported("k is not constant");
    k = t->get_i64(0);
  }
  const size_t r = index.size();
  if (r < 2) ctx.unsupported("rank below 2");
  const Expr diff = index[r - 1] - index[r - 2];
  const bool upper = ctx.node.attr_int("upper", 1) != 0;
  const Expr keep = loop::binary(upper ? BinaryOp::Ge : BinaryOp::Le, diff, Expr(k));
  return loop::select(keep, ctx.input(0, index), constant(ctx.out_dtype(), 0));
}

// GatherElements: out[i] = data[i with i[axis] = indices[i]], checked.
Expr lower_gather_elements(LowerContext& ctx, size_t, const Idx& index) {
  const size_t r = ctx.in_rank(0);
  const size_t axis = static_cast<size_t>(normalize_axis(ctx.node.attr_int("axis", 0), static_cast<int64_t>(r), ctx.node));
  const Expr dim = ctx.in_shape(0)[axis];
  Expr n = loop::cast(DType::I64, ctx.input(1, index));
  n = loop::select(lt(n, Expr(0)), n + dim, n);
  ctx.check(and_(ge(n, Expr(0)), lt(n, dim)),
            str_cat(ctx.node.describe(), ": index out of range for an axis of size ", in_dims(ctx, 0)[axis].str()));
  Idx at = index;
  at[axis] = clamp_index(n, Expr(0), dim - Expr(1));
  return ctx.input(0, at);
}

}  // namespace

void register_movement_lowerings(OpRegistry& r) {
  const auto inj = [&](const char* name, LowerFn f) { r.set_lowering("", name, FusionKind::Injective, f); };
  inj("Reshape", lower_reshape);
  inj("Flatten", lower_reshape);
  inj("Squeeze", lower_reshape);
  inj("Unsqueeze", lower_reshape);
  inj("Transpose", lower_transpose);
  inj("Expand", lower_expand);
  inj("Slice", lower_slice);
  inj("Concat", lower_concat);
  inj("Gather", lower_gather);
  inj("GatherElements", lower_gather_elements);
  inj("GatherND", lower_gather_nd);
  inj("Trilu", lower_trilu);
}

}  // namespace tessel
