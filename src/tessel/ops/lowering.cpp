#include "tessel/ops/lowering.h"

#include <limits>

namespace tessel {

namespace {
const Type& value_type(const Value* v, const Node& n, const char* what) {
  TS_CHECK(v != nullptr, n.describe(), ": lowering reads an omitted ", what);
  return v->type;
}

size_t rank_of(const Value* v, const Node& n, const char* what) {
  const Type& t = value_type(v, n, what);
  if (!t.has_shape()) throw LoweringUnsupported(str_cat(n.describe(), ": ", what, " has an unknown rank"));
  return t.shape->size();
}
}  // namespace

DType LowerContext::in_dtype(size_t i) const { return value_type(node.input(i), node, "input").dtype; }

DType LowerContext::out_dtype(size_t i) const {
  return value_type(i < node.outputs.size() ? node.outputs[i] : nullptr, node, "output").dtype;
}

size_t LowerContext::in_rank(size_t i) const { return rank_of(node.input(i), node, "input"); }

size_t LowerContext::out_rank(size_t i) const {
  return rank_of(i < node.outputs.size() ? node.outputs[i] : nullptr, node, "output");
}

void LowerContext::unsupported(const std::string& why) const {
  throw LoweringUnsupported(str_cat(node.describe(), ": no compiled form: ", why));
}

DType compute_type(DType t) {
  return t == DType::F16 || t == DType::BF16 ? DType::F32 : t;
}

loop::Expr input_as_compute(LowerContext& ctx, size_t i, const std::vector<loop::Expr>& index) {
  loop::Expr v = ctx.input(i, index);
  return loop::cast(compute_type(v.dtype()), v);
}

std::vector<loop::Expr> broadcast_index(LowerContext& ctx, size_t i, const std::vector<loop::Expr>& index) {
  TS_CHECK(ctx.out_rank() == index.size(), ctx.node.describe(), ": index of rank ", index.size(), " for an output of rank ",
           ctx.out_rank());
  return broadcast_leading(ctx, i, ctx.in_rank(i), index);
}

std::vector<loop::Expr> broadcast_leading(LowerContext& ctx, size_t i, size_t dims,
                                          const std::vector<loop::Expr>& out_lead) {
  const Shape& in = *ctx.node.input(i)->type.shape;
  const Shape& out = *ctx.node.outputs[0]->type.shape;
  TS_CHECK(dims <= in.size() && dims <= out_lead.size() && out_lead.size() <= out.size(), ctx.node.describe(),
           ": broadcast of ", dims, " dims of input ", i, " to ", out_lead.size(), " output dims");
  const std::vector<loop::Expr> in_shape = ctx.in_shape(i);
  std::vector<loop::Expr> r;
  const size_t off = out_lead.size() - dims;
  for (size_t d = 0; d < dims; ++d) {
    if (in[d] == Dim(1))
      r.push_back(loop::Expr(0));
    else if (in[d] == out[d + off])
      r.push_back(out_lead[d + off]);
    else  // symbolic: may be 1 at run time
      r.push_back(loop::select(lower_expr::eq(in_shape[d], loop::Expr(1)), loop::Expr(0), out_lead[d + off]));
  }
  return r;
}

loop::Expr constant(DType t, double v) {
  if (is_float(t)) return loop::float_imm(t, v);
  return loop::int_imm(t, static_cast<int64_t>(v));
}

std::vector<int64_t> const_input_ints(LowerContext& ctx, size_t i, const char* what) {
  const Tensor* t = ctx.input_const(i);
  if (!t) ctx.unsupported(str_cat(what, " are not constant"));
  std::vector<int64_t> v;
  for (int64_t k = 0; k < t->numel(); ++k) v.push_back(t->get_i64(k));
  return v;
}

std::vector<int64_t> const_in_dims(LowerContext& ctx, size_t i, size_t from) {
  const Shape& s = *ctx.node.input(i)->type.shape;
  std::vector<int64_t> v;
  for (size_t d = from; d < s.size(); ++d) {
    if (!s[d].is_const()) ctx.unsupported(str_cat("dim ", d, " of input ", i, " is symbolic"));
    v.push_back(s[d].value());
  }
  return v;
}

loop::Expr clamp_index(const loop::Expr& x, const loop::Expr& lo, const loop::Expr& hi) {
  return loop::max(lo, loop::min(x, hi));
}

loop::Expr in_range(const loop::Expr& x, const loop::Expr& lo, const loop::Expr& hi) {
  return lower_expr::and_(lower_expr::ge(x, lo), lower_expr::lt(x, hi));
}

loop::Expr lowest(DType t) {
  if (is_float(t)) return loop::float_imm(t, -std::numeric_limits<double>::infinity());
  if (is_unsigned_int(t)) return loop::int_imm(t, 0);
  return loop::int_imm(t, int_bits(t) == 64 ? std::numeric_limits<int64_t>::min() : -(int64_t{1} << (int_bits(t) - 1)));
}

loop::Expr highest(DType t) {
  if (is_float(t)) return loop::float_imm(t, std::numeric_limits<double>::infinity());
  if (is_unsigned_int(t)) return loop::int_imm(t, int_bits(t) == 64 ? -1 : (int64_t{1} << int_bits(t)) - 1);
  return loop::int_imm(t, int_bits(t) == 64 ? std::numeric_limits<int64_t>::max() : (int64_t{1} << (int_bits(t) - 1)) - 1);
}

loop::Expr same_or_both_nan(const loop::Expr& x, const loop::Expr& best) {
  using namespace lower_expr;
  if (!is_float(x.dtype())) return eq(x, best);
  return or_(eq(x, best), and_(is_nan(x), is_nan(best)));
}

loop::Expr flatten_index(const std::vector<loop::Expr>& at, const std::vector<loop::Expr>& dims) {
  loop::Expr flat = loop::Expr(0);
  for (size_t d = 0; d < at.size(); ++d) flat = flat * dims[d] + at[d];
  return flat;
}

std::vector<loop::Expr> unflatten_index(const loop::Expr& flat, const std::vector<loop::Expr>& dims) {
  std::vector<loop::Expr> at(dims.size());
  loop::Expr rest = flat;
  for (size_t d = dims.size(); d-- > 0;) {
    at[d] = d == 0 ? rest : loop::floormod(rest, dims[d]);
    rest = loop::floordiv(rest, dims[d]);
  }
  return at;
}

loop::Expr cubic_weight(const loop::Expr& t0, double a) {
  using namespace lower_expr;
  const Expr t = intrinsic("fabs", t0);
  const Expr near = ((f64(a + 2) * t - f64(a + 3)) * t) * t + f64(1);
  const Expr far = ((f64(a) * t - f64(5 * a)) * t + f64(8 * a)) * t - f64(4 * a);
  return loop::select(le(t, f64(1)), near, loop::select(lt(t, f64(2)), far, f64(0)));
}

}  // namespace tessel
