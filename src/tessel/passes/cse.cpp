// Common-subexpression elimination.
//
// Rewrites:
//   - identical constants (same dtype, shape and bits) in a graph or in one
//     of its enclosing graphs: later uses read the first one;
//   - two nodes with the same op, domain, inputs (the same values, in order),
//     identical attributes and the same pattern of present outputs: the
//     second one's outputs are replaced by the first one's, and it is removed.
// Works in node order, so merging a node can make later nodes identical.
//
// Does not fire for: nodes with subgraph attributes, non-deterministic ops,
// and values that are outputs of the main graph (their names are the model's
// interface; merging would rename an output).
//
// Assumes: ops are pure functions of their inputs and attributes. Runs after
// constant folding and dce, so that folded shape computations merge.
#include <unordered_map>
#include <unordered_set>

#include "tessel/ir/printer.h"
#include "tessel/passes/infer_util.h"
#include "tessel/passes/pass_manager.h"
#include "tessel/support/error.h"
#include "tessel/support/fast_hash.h"

namespace tessel {

namespace {

// Weights are hundreds of MB: fast_hash64 runs at several GB/s where a
// byte-wise hash took over a second per pipeline on GPT-2. Equal hashes are
// confirmed bitwise, so the hash only has to spread.
uint64_t tensor_hash(const Tensor& t) {
  std::string head(1, static_cast<char>(t.dtype()));
  for (int64_t d : t.shape()) head.append(reinterpret_cast<const char*>(&d), sizeof d);
  uint64_t h = fast_hash64(head);
  if (t.dtype() == DType::String) {
    for (const auto& s : t.strings()) h = fast_hash64(s.data(), s.size() + 1, h);  // with the terminator
  } else {
    h = fast_hash64(t.raw(), t.nbytes(), h);
  }
  return h;
}

class Cse {
 public:
  explicit Cse(Model& m) : root_(*m.graph) {
    for (const Value* v : root_.outputs) protected_.insert(v);
  }

  bool run() {
    std::vector<Scope> scopes;
    return run_graph(root_, &scopes);
  }

 private:
  struct Scope {
    std::unordered_multimap<uint64_t, Value*> constants;
  };

  Graph& root_;
  std::unordered_set<const Value*> protected_;

  Value* find_constant(const std::vector<Scope>& scopes, const Tensor& t, uint64_t h) {
    for (const Scope& s : scopes) {
      auto [b, e] = s.constants.equal_range(h);
      for (auto it = b; it != e; ++it)
        if (it->second->constant->bitwise_equal(t)) return it->second;
    }
    return nullptr;
  }

  static std::string node_key(const Node& n) {
    std::string k = n.domain + "\x1f" + n.op + "\x1f";
    for (const Value* v : n.inputs) k += str_cat(static_cast<const void*>(v), ",");
    k += "\x1f";
    for (const Value* v : n.outputs) k += v ? "1" : "0";
    for (const auto& [name, a] : n.attrs) k += "\x1f" + name + "=" + print_attribute(a);
    return k;
  }

  bool run_graph(Graph& g, std::vector<Scope>* scopes) {
    bool changed = false;
    scopes->emplace_back();
    // Constants.
    std::vector<Value*> kept;
    for (Value* c : g.initializers) {
      const uint64_t h = tensor_hash(*c->constant);
      Value* same = protected_.count(c) ? nullptr : find_constant(*scopes, *c->constant, h);
      if (same) {
        g.replace_all_uses(c, same);
        changed = true;
        continue;
      }
      scopes->back().constants.emplace(h, c);
      kept.push_back(c);
    }
    if (kept.size() != g.initializers.size()) {
      g.initializers = kept;
      g.remove_unused_values();
    }
    // Nodes.
    std::unordered_map<std::string, Node*> seen;
    std::vector<Node*> dead;
    for (auto& np : g.nodes()) {
      Node* n = np.get();
      if (has_subgraphs(*n)) {
        for (auto& [k, a] : n->attrs) {
          if (a.kind == Attribute::Kind::Graph && a.g) changed |= run_graph(*a.g, scopes);
          for (auto& sg : a.graphs)
            if (sg) changed |= run_graph(*sg, scopes);
        }
        continue;
      }
      if (is_nondeterministic_op(*n)) continue;
      bool is_output = false;
      for (const Value* v : n->outputs) is_output = is_output || (v && protected_.count(v));
      const std::string key = node_key(*n);
      auto [it, inserted] = seen.emplace(key, n);
      if (inserted || is_output) continue;
      Node* first = it->second;
      for (size_t i = 0; i < n->outputs.size(); ++i)
        if (n->outputs[i]) g.replace_all_uses(n->outputs[i], first->outputs[i]);
      dead.push_back(n);
      changed = true;
    }
    for (Node* n : dead) g.remove_node(n);
    if (!dead.empty()) g.remove_unused_values();
    scopes->pop_back();
    return changed;
  }
};

}  // namespace

bool eliminate_common_subexpressions(Model& m) { return Cse(m).run(); }

}  // namespace tessel
