#include "tessel/ops/lowering.h"

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

}  // namespace tessel
