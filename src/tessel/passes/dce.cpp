// Dead-code elimination.
//
// Rewrites: removes nodes none of whose outputs is used, initializers that
// nothing uses, and the values they leave dangling, in every graph. A use is
// an input of any node (including nodes inside subgraphs, which is how a
// subgraph keeps an outer value alive) or an output of any graph. Graph
// inputs are never removed (they are the signature).
//
// Assumes: ops have no side effects (true of the ONNX operator set), so a
// node whose results nobody reads can go. Runs after constant folding, which
// leaves the folded nodes' inputs unused.
#include <unordered_map>
#include <unordered_set>

#include "tessel/passes/pass_manager.h"

namespace tessel {

void count_uses(Graph& g, std::unordered_map<const Value*, int>* uses) {
  for_each_graph(g, [&](Graph& sg) {
    for (const auto& n : sg.nodes())
      for (const Value* v : n->inputs)
        if (v) ++(*uses)[v];
    for (const Value* v : sg.outputs)
      if (v) ++(*uses)[v];
  });
}

namespace {

void drop_uses(Node& n, std::unordered_map<const Value*, int>* uses) {
  for (const Value* v : n.inputs)
    if (v) --(*uses)[v];
  for (auto& [k, a] : n.attrs) {
    std::vector<Graph*> gs;
    if (a.kind == Attribute::Kind::Graph && a.g) gs.push_back(a.g.get());
    for (auto& sg : a.graphs)
      if (sg) gs.push_back(sg.get());
    for (Graph* sg : gs)
      for_each_graph(*sg, [&](Graph& inner) {
        for (const auto& m : inner.nodes())
          for (const Value* v : m->inputs)
            if (v) --(*uses)[v];
        for (const Value* v : inner.outputs)
          if (v) --(*uses)[v];
      });
  }
}

// Removes dead nodes of `g` and of its subgraphs, last node first so that a
// dead chain goes in one sweep.
bool sweep(Graph& g, std::unordered_map<const Value*, int>* uses) {
  bool changed = false;
  auto& nodes = g.nodes();
  for (auto it = nodes.end(); it != nodes.begin();) {
    --it;
    Node* n = it->get();
    bool live = false;
    for (const Value* v : n->outputs)
      if (v && (*uses)[v] > 0) live = true;
    if (!live) {
      drop_uses(*n, uses);
      for (Value* v : n->outputs)
        if (v) {
          v->producer = nullptr;
          v->producer_output = -1;
        }
      it = nodes.erase(it);
      changed = true;
      continue;
    }
    for (auto& [k, a] : n->attrs) {
      if (a.kind == Attribute::Kind::Graph && a.g) changed |= sweep(*a.g, uses);
      for (auto& sg : a.graphs)
        if (sg) changed |= sweep(*sg, uses);
    }
  }
  return changed;
}

bool drop_unused_initializers(Graph& g, const std::unordered_map<const Value*, int>& uses) {
  bool changed = false;
  for_each_graph(g, [&](Graph& sg) {
    std::unordered_set<const Value*> inputs(sg.inputs.begin(), sg.inputs.end());
    const size_t before = sg.initializers.size();
    std::erase_if(sg.initializers, [&](Value* v) {
      auto it = uses.find(v);
      return !inputs.count(v) && (it == uses.end() || it->second <= 0);
    });
    changed |= sg.initializers.size() != before;
    sg.remove_unused_values();
  });
  return changed;
}

}  // namespace

bool eliminate_dead_code(Model& m) {
  bool changed = false;
  for (;;) {
    std::unordered_map<const Value*, int> uses;
    count_uses(*m.graph, &uses);
    bool round = sweep(*m.graph, &uses);
    round |= drop_unused_initializers(*m.graph, uses);
    changed |= round;
    if (!round) return changed;
  }
}

}  // namespace tessel
