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
  const Shape& in = *ctx.node.input(i)->type.shape;
  const Shape& out = *ctx.node.outputs[0]->type.shape;
  TS_CHECK(in.size() <= index.size() && out.size() == index.size(),
           ctx.node.describe(), ": broadcast of input ", i, " of rank ", in.size(), " to rank ", index.size());
  std::vector<loop::Expr> in_shape = ctx.in_shape(i);
  std::vector<loop::Expr> r;
  const size_t off = index.size() - in.size();
  for (size_t d = 0; d < in.size(); ++d) {
    const Dim& id = in[d];
    const Dim& od = out[d + off];
    if (id == Dim(1))
      r.push_back(loop::Expr(0));
    else if (id == od)
      r.push_back(index[d + off]);
    else  // symbolic: may be 1 at run time
      r.push_back(loop::select(loop::binary(loop::BinaryOp::Eq, in_shape[d], loop::Expr(1)), loop::Expr(0),
                               index[d + off]));
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
  return loop::binary(loop::BinaryOp::And, loop::binary(loop::BinaryOp::Ge, x, lo),
                      loop::binary(loop::BinaryOp::Lt, x, hi));
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

}  // namespace tessel
