// sink_transposes: Mul/Div(Transpose(x), s) -> Transpose(Mul/Div(x, s)) for a
// scalar constant s, when the Transpose has no other use.
//
// Why: fusion stores a group's root and inlines injective producers into a
// GEMM's operand, but not elementwise ones. Attention that scales K by a
// constant after transposing it (torch's MultiheadAttention export: q * s,
// k^T * s) made the Mul a group root that wrote K^T, [heads, 64, 197]: the
// Q K^T GEMM then read rows of 197 elements, which no 16-byte load fits.
// With the Transpose below the Mul, the Mul's kernel writes K as it is and
// the Transpose becomes a view of the GEMM's operand (k-contiguous). A scalar
// commutes with any permutation, so the values are the same.
#include "tessel/passes/pass_manager.h"

namespace tessel {

namespace {

bool scalar_constant(const Value* v) { return v && v->is_constant() && v->constant->numel() == 1; }

// The Transpose operand of `n` that can move below it (its only use), and
// its position; nullptr when there is none.
Node* sinkable(const Graph& g, const Node& n, size_t* pos) {
  if (!n.domain.empty() || (n.op != "Mul" && n.op != "Div") || n.inputs.size() != 2 || !n.outputs[0]) return nullptr;
  if (g.is_output(n.outputs[0]) || !n.outputs[0]->type.has_shape()) return nullptr;
  for (size_t i = 0; i < 2; ++i) {
    const Value* t = n.input(i);
    if (!t || !t->producer || t->producer->op != "Transpose" || !t->producer->domain.empty()) continue;
    const Value* x = t->producer->input(0);
    if (!scalar_constant(n.input(1 - i)) || !x || !x->type.has_shape() || g.is_output(t)) continue;
    size_t uses = 0;
    for (const auto& m : g.nodes())
      for (const Value* in : m->inputs) uses += in == t;
    if (uses != 1) continue;
    *pos = i;
    return t->producer;
  }
  return nullptr;
}

}  // namespace

bool sink_transposes(Model& m) {
  Graph& g = *m.graph;
  bool changed = false;
  std::vector<Node*> nodes;
  for (const auto& n : g.nodes()) nodes.push_back(n.get());
  for (Node* n : nodes) {
    size_t pos = 0;
    Node* t = sinkable(g, *n, &pos);
    if (!t) continue;
    Value* x = t->input(0);
    std::vector<Value*> ins = n->inputs;
    ins[pos] = x;
    Node* scaled = g.insert_node_before(n, n->op, ins, 1);
    scaled->outputs[0]->type = Type::tensor(n->outputs[0]->type.dtype, *x->type.shape);
    Node* moved = g.insert_node_before(n, "Transpose", {scaled->outputs[0]}, 1, t->attrs);
    moved->outputs[0]->type = n->outputs[0]->type;
    g.replace_all_uses(n->outputs[0], moved->outputs[0]);
    g.remove_node(n);
    g.remove_node(t);  // before n in node order: the loop has passed it
    changed = true;
  }
  if (changed) g.remove_unused_values();
  return changed;
}

}  // namespace tessel
