#include "tessel/passes/infer_util.h"

namespace tessel {

void fill_infer_inputs(InferContext& ctx, const SymTable& syms) {
  const Node& n = ctx.node;
  ctx.in_types.clear();
  ctx.in_consts.clear();
  ctx.in_syms.clear();
  for (const Value* v : n.inputs) {
    ctx.in_types.push_back(v ? &v->type : nullptr);
    ctx.in_consts.push_back(v && v->constant ? &*v->constant : nullptr);
    const SymValue* s = nullptr;
    if (v) {
      auto it = syms.find(v);
      if (it != syms.end()) s = &it->second;
    }
    ctx.in_syms.push_back(s);
  }
}

bool is_nondeterministic_op(const Node& n) {
  if (!n.domain.empty() && n.domain != "ai.onnx") return false;
  return n.op == "RandomNormal" || n.op == "RandomUniform" || n.op == "RandomNormalLike" ||
         n.op == "RandomUniformLike" || n.op == "Bernoulli" || n.op == "Multinomial";
}

bool has_subgraphs(const Node& n) {
  for (const auto& [k, a] : n.attrs)
    if (a.kind == Attribute::Kind::Graph || a.kind == Attribute::Kind::Graphs) return true;
  return false;
}

bool static_dims_of(const Value* v, std::vector<int64_t>* out) {
  if (!v || !v->type.has_shape() || !is_static(*v->type.shape)) return false;
  *out = static_dims(*v->type.shape);
  return true;
}

}  // namespace tessel
