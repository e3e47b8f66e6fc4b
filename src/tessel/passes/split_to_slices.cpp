// split_to_slices: a Split becomes one Slice per used output.
//
// A Split has several outputs, so fusion cannot take it into its consumers
// (a member of a group has one used output): each output became a kernel of
// its own that copies its part, and the consumers read the copies. GPT-2's
// attention splits its [B, S, 3 * 768] projection into query, key and value
// this way: three copy kernels a layer. A Slice has one output and is
// injective, so each joins its consumers' group as a view (the flash
// attention kernel reads query, key and value from the projection itself).
// Where a Slice cannot join (consumers in different groups, a graph
// output), it is a copy kernel as the Split's output was.
//
// Only Splits whose axis and output sizes are known constants (the inferred
// output types say them, whichever of the split input, the `split` attribute
// or `num_outputs` gave them), and none of whose outputs is a graph output
// (its name must not change).
#include <unordered_map>

#include "tessel/passes/pass_manager.h"
#include "tessel/support/error.h"

namespace tessel {

namespace {

// The output sizes along the axis of a Split this pass rewrites, else empty.
std::vector<int64_t> split_sizes(const Graph& g, const Node& n, int64_t* axis) {
  if (!n.domain.empty() || n.op != "Split") return {};
  const Value* x = n.input(0);
  if (!x || !x->type.has_shape()) return {};
  const int64_t rank = static_cast<int64_t>(x->type.shape->size());
  *axis = n.attr_int("axis", 0);
  if (*axis < 0) *axis += rank;
  if (*axis < 0 || *axis >= rank) return {};
  std::vector<int64_t> sizes;
  for (const Value* y : n.outputs) {
    if (!y || g.is_output(y) || !y->type.has_shape() || y->type.shape->size() != x->type.shape->size()) return {};
    const Dim& d = (*y->type.shape)[static_cast<size_t>(*axis)];
    if (!d.is_const()) return {};
    sizes.push_back(d.value());
  }
  return sizes;
}

// One Slice for each output that is used (an unused one would still be a
// kernel: dead-code elimination ran before this pass).
void rewrite(Graph& g, Node* n, int64_t axis, const std::vector<int64_t>& sizes,
             const std::unordered_map<const Value*, int>& uses) {
  Value* axes = g.add_initializer(g.fresh_name(n->name + "_axis"), Tensor::from_i64({axis}));
  int64_t offset = 0;
  for (size_t i = 0; i < sizes.size(); ++i) {
    Value* y = n->outputs[i];
    const auto u = uses.find(y);
    if (u == uses.end() || u->second == 0) {
      offset += sizes[i];
      continue;
    }
    Value* starts = g.add_initializer(g.fresh_name(n->name + "_start"), Tensor::from_i64({offset}));
    Value* ends = g.add_initializer(g.fresh_name(n->name + "_end"), Tensor::from_i64({offset + sizes[i]}));
    offset += sizes[i];
    Node* s = g.insert_node_before(n, "Slice", {n->input(0), starts, ends, axes}, 1);
    s->name = str_cat(n->name, "_", i);
    s->outputs[0]->type = y->type;
    g.replace_all_uses(y, s->outputs[0]);
  }
  g.remove_node(n);
}

}  // namespace

bool split_to_slices(Model& m) {
  Graph& g = *m.graph;
  std::unordered_map<const Value*, int> uses;
  count_uses(g, &uses);
  std::vector<std::pair<Node*, std::pair<int64_t, std::vector<int64_t>>>> todo;
  for (const auto& n : g.nodes()) {
    int64_t axis = 0;
    std::vector<int64_t> sizes = split_sizes(g, *n, &axis);
    if (!sizes.empty()) todo.push_back({n.get(), {axis, std::move(sizes)}});
  }
  for (auto& [n, s] : todo) rewrite(g, n, s.first, s.second, uses);
  if (!todo.empty()) g.remove_unused_values();
  return !todo.empty();
}

}  // namespace tessel
