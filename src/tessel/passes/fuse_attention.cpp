// fuse_attention: scaled dot-product attention written as separate ops
// becomes one ONNX Attention node (opset 23, ops/attention/attention.cpp), the form a
// fused kernel (flash attention: online softmax, no score matrix in memory)
// can take. Recognised, with every intermediate used only by the next step:
//
//   s = MatMul(Q', Transpose(K', p))    [B, H, Sq, Skv]  (p: K'^T, or K'
//                                       as [B, S, H, D] straight to K^T)
//   s = Mul(s, c)                       (optional, c a scalar constant)
//   s = Add(s, mask)                    (optional, either operand order)
//   p = Softmax(s, axis = last)
//   p = Cast(p, to its own type)        (optional, GPT-2's export has one)
//
// or, as --precision bf16/fp16 leaves it (lower_precision), the softmax in
// f32 between two Casts: Cast(Softmax(Cast(s, to f32)), to the half type)
// (with GPT-2's own Cast in between); the node then gets
// softmax_precision = f32.
//   y = MatMul(p, V)                                            [B, H, Sq, Dv]
//
// where Q' = Mul(Q, cq) and K' = Mul(K, ck) may carry the scale instead
// (ViT's export scales Q and K by the square root of 1/sqrt(d)); the
// Attention node gets scale = c * cq * ck (1 where none). Q, K, V must be
// rank 4 with constant dims. Grouped-query heads expanded by the exporter
// (Llama's Unsqueeze/Expand/Reshape) stay expanded: K and V are what the
// products read. In the pipeline for the CUDA target's flash attention
// (PassOptions::fuse_attention); tests run it on the real transformer models.
#include <unordered_map>

#include "tessel/passes/pass_manager.h"

namespace tessel {

namespace {

using Users = std::unordered_map<const Value*, int>;

// The node producing `v` when it is `op` in the default domain and `v` has one use.
const Node* single_use(const Value* v, const char* op, const Users& users) {
  if (!v || !v->producer || v->producer->op != op || !v->producer->domain.empty()) return nullptr;
  auto it = users.find(v);
  return it != users.end() && it->second == 1 ? v->producer : nullptr;
}

// A scalar float constant's value.
std::optional<double> scalar(const Value* v) {
  if (!v || !v->is_constant() || v->constant->numel() != 1 || !is_float(v->constant->dtype())) return std::nullopt;
  return v->constant->get_f64(0);
}

bool rank4_const(const Value* v) {
  if (!v || !v->type.has_shape() || v->type.shape->size() != 4) return false;
  for (const Dim& d : *v->type.shape)
    if (!d.is_const()) return false;
  return true;
}

// x, or its unscaled operand (with the scale multiplied into *scale) when x
// is a single-use Mul by a scalar constant.
Value* unscaled(Value* x, const Users& users, double* scale) {
  if (const Node* m = single_use(x, "Mul", users)) {
    for (int i = 0; i < 2; ++i) {
      if (auto c = scalar(m->input(1 - i))) {
        *scale *= *c;
        return m->inputs[static_cast<size_t>(i)];
      }
    }
  }
  return x;
}

struct Match {
  Value *q = nullptr, *k = nullptr, *v = nullptr, *mask = nullptr;
  double scale = 1;
  bool softmax_f32 = false;     // half scores, the softmax in f32
  std::vector<int64_t> k_perm;  // K = Transpose(k, k_perm)
  Node* out = nullptr;          // the MatMul with V
};

// The attention ending at `pv` (a MatMul(p, V)), or nullopt.
std::optional<Match> match(Node& pv, const Users& users) {
  if (pv.op != "MatMul" || !pv.domain.empty() || pv.inputs.size() != 2) return std::nullopt;
  Match m;
  m.out = &pv;
  m.v = pv.inputs[1];
  const Value* p = pv.inputs[0];
  const DType half = p->type.dtype;
  // Casts after the softmax: to its own type (GPT-2's export), and one from
  // f32 to the half type (--precision), in either order.
  for (const Node* cast; (cast = single_use(p, "Cast", users)) && cast->input(0);) {
    const DType from = cast->input(0)->type.dtype, to = p->type.dtype;
    const bool narrowing = !m.softmax_f32 && from == DType::F32 && to == half &&
                           (half == DType::BF16 || half == DType::F16);
    if (from != to && !narrowing) break;
    m.softmax_f32 = m.softmax_f32 || narrowing;
    p = cast->input(0);
  }
  const Node* softmax = single_use(p, "Softmax", users);
  if (!softmax || !rank4_const(p)) return std::nullopt;
  const int64_t axis = softmax->attr_int("axis", -1);
  if (axis != -1 && axis != 3) return std::nullopt;
  Value* s = softmax->inputs[0];
  if (m.softmax_f32) {
    // The widening Cast of the half scores.
    const Node* widen = single_use(s, "Cast", users);
    if (!widen || !widen->input(0) || widen->input(0)->type.dtype != half) return std::nullopt;
    s = widen->inputs[0];
  }
  if (const Node* add = single_use(s, "Add", users)) {
    // The scores are the operand that is a product; the other is the mask.
    for (int i = 0; i < 2; ++i) {
      Value* a = add->inputs[static_cast<size_t>(i)];
      if (a && a->producer && (a->producer->op == "Mul" || a->producer->op == "MatMul") && a->type == s->type) {
        m.mask = add->inputs[static_cast<size_t>(1 - i)];
        s = a;
        break;
      }
    }
    if (!m.mask) return std::nullopt;
  }
  s = unscaled(s, users, &m.scale);
  const Node* qk = single_use(s, "MatMul", users);
  if (!qk) return std::nullopt;
  // K^T = Transpose(X, p) is K = Transpose(X, p with its last two entries
  // swapped): X itself for p = (0, 1, 3, 2); BERT's export transposes the
  // [B, S, H, D] projection with p = (0, 2, 3, 1) directly.
  const Node* kt = single_use(qk->input(1), "Transpose", users);
  const std::vector<int64_t> p_kt = kt ? kt->attr_ints("perm", {}) : std::vector<int64_t>{};
  if (p_kt.size() != 4 || p_kt[0] != 0) return std::nullopt;
  m.k_perm = {p_kt[0], p_kt[1], p_kt[3], p_kt[2]};
  m.q = unscaled(qk->inputs[0], users, &m.scale);
  m.k = unscaled(kt->inputs[0], users, &m.scale);
  if (!rank4_const(m.q) || !rank4_const(m.k) || !rank4_const(m.v) || !rank4_const(pv.outputs[0])) return std::nullopt;
  const DType t = m.q->type.dtype;
  // An additive mask of the same type; a positive scale (the op's default
  // is 1/sqrt(d), so 0 cannot be passed on, and the reference scales Q and
  // K by its square root).
  if (!is_float(t) || m.k->type.dtype != t || m.v->type.dtype != t || (m.mask && m.mask->type.dtype != t) ||
      !(m.scale > 0))
    return std::nullopt;
  return m;
}

}  // namespace

bool fuse_attention(Model& m) {
  Graph& g = *m.graph;
  Users users;
  count_uses(g, &users);
  std::vector<Match> found;
  for (const auto& n : g.nodes())
    if (auto mt = match(*n, users)) found.push_back(*mt);
  for (const Match& mt : found) {
    Value* k = mt.k;
    if (mt.k_perm != std::vector<int64_t>{0, 1, 2, 3}) {
      Node* t = g.insert_node_before(mt.out, "Transpose", {k}, 1, {{"perm", Attribute::of_ints(mt.k_perm)}});
      std::vector<Dim> dims;
      for (int64_t d : mt.k_perm) dims.push_back((*k->type.shape)[static_cast<size_t>(d)]);
      t->outputs[0]->type = Type::tensor(k->type.dtype, dims);
      k = t->outputs[0];
    }
    std::vector<Value*> in = {mt.q, k, mt.v};
    if (mt.mask) in.push_back(mt.mask);
    std::map<std::string, Attribute> attrs = {{"scale", Attribute::of_float(static_cast<float>(mt.scale))}};
    if (mt.softmax_f32) attrs["softmax_precision"] = Attribute::of_int(1);  // TensorProto FLOAT
    Node* a = g.insert_node_before(mt.out, "Attention", in, 1, attrs);
    a->outputs[0]->type = mt.out->outputs[0]->type;
    g.replace_all_uses(mt.out->outputs[0], a->outputs[0]);
    g.remove_node(mt.out);
  }
  if (found.empty()) return false;
  eliminate_dead_code(m);
  return true;
}

}  // namespace tessel
