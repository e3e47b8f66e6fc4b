#include "tessel/passes/fusion.h"

#include <algorithm>
#include <map>

#include "tessel/ir/printer.h"
#include "tessel/support/error.h"

namespace tessel {

namespace {

bool has_subgraph(const Node& n) {
  for (const auto& [name, a] : n.attrs)
    if (a.kind == Attribute::Kind::Graph || a.kind == Attribute::Kind::Graphs) return true;
  return false;
}

// A node that can be part of a compiled group at all.
bool compilable(const Node& n, const OpRegistry& reg, const std::set<const Node*>& opaque) {
  if (opaque.count(&n) || has_subgraph(n) || n.outputs.empty() || n.outputs[0] == nullptr) return false;
  const OpSchema* s = reg.find(n.domain, n.op);
  if (!s || !s->lower) return false;
  // One used output, the first (optional outputs such as LayerNormalization's
  // statistics or Dropout's mask are omitted), unless the lowering handles
  // every output (Split).
  for (size_t i = 1; i < n.outputs.size(); ++i)
    if (n.outputs[i] != nullptr && !s->multi_output_lowering) return false;
  for (const Value* v : n.outputs)
    if (v && !v->type.has_shape()) return false;
  for (const Value* v : n.inputs)
    if (v && !v->type.has_shape()) return false;
  return true;
}

size_t used_outputs(const Node& n) {
  size_t k = 0;
  for (const Value* v : n.outputs) k += v != nullptr;
  return k;
}

// Consumers of each value among this graph's nodes; uses inside subgraphs
// count as a consumer that is no group (the value must be materialised).
struct Uses {
  std::map<const Value*, std::vector<const Node*>> consumers;
  std::set<const Value*> escapes;  // graph outputs, and values used by subgraphs
};

void note_subgraph_uses(const Graph& sub, Uses& u) {
  for (const auto& n : sub.nodes()) {
    for (const Value* v : n->inputs)
      if (v) u.escapes.insert(v);
    for (const auto& [name, a] : n->attrs) {
      if (a.kind == Attribute::Kind::Graph && a.g) note_subgraph_uses(*a.g, u);
      if (a.kind == Attribute::Kind::Graphs)
        for (const auto& g : a.graphs)
          if (g) note_subgraph_uses(*g, u);
    }
  }
  for (const Value* v : sub.outputs) u.escapes.insert(v);
}

Uses collect_uses(const Graph& g) {
  Uses u;
  for (const auto& n : g.nodes()) {
    for (const Value* v : n->inputs)
      if (v) u.consumers[v].push_back(n.get());
    for (const auto& [name, a] : n->attrs) {
      if (a.kind == Attribute::Kind::Graph && a.g) note_subgraph_uses(*a.g, u);
      if (a.kind == Attribute::Kind::Graphs)
        for (const auto& sg : a.graphs)
          if (sg) note_subgraph_uses(*sg, u);
    }
  }
  for (const Value* v : g.outputs) u.escapes.insert(v);
  return u;
}

std::string group_name(size_t index, const Node& root) {
  std::string op;
  for (char c : root.op) op += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return str_cat("k", index, "_", op);
}

FusionKind fusion_kind(const Node& n, const OpRegistry& reg) {
  const OpSchema* s = reg.find(n.domain, n.op);
  return s ? s->fusion : FusionKind::Opaque;
}

// Whether a producer in front of a contraction is stored rather than fused
// into the contraction's operand: a Pad (pad_conv_inputs.cpp), whose zero
// test and clamped indices would be evaluated per element of the packing,
// and a Slice with a step other than 1 (subsample_conv_inputs.cpp), whose
// strided positions would be divided and gathered per element; stored,
// the operand reads whole rows.
bool stored_before_contraction(const Node& n) {
  if (!n.domain.empty()) return false;
  if (n.op == "Pad") return true;
  if (n.op != "Slice" || n.inputs.size() < 5 || !n.input(4) || !n.input(4)->is_constant()) return false;
  const Tensor& steps = *n.input(4)->constant;
  for (int64_t i = 0; i < steps.numel(); ++i)
    if (steps.get_i64(i) != 1) return true;
  return false;
}

}  // namespace

FusionPlan plan_fusion(const Graph& g, const OpRegistry& reg, const std::set<const Node*>& opaque,
                       const std::set<const Node*>& forced_roots) {
  const Uses uses = collect_uses(g);
  std::vector<const Node*> order;
  for (const auto& n : g.nodes()) order.push_back(n.get());

  // Group id per node, assigned from the outputs backwards.
  std::map<const Node*, size_t> group_of;
  std::vector<const Node*> roots;
  std::vector<bool> compiled;
  // Members whose value flows into a contraction's operand within their
  // group (through injective members): only injective nodes may join them.
  std::set<const Node*> prologue;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const Node* n = *it;
    const bool can = compilable(*n, reg, opaque);
    if (can && used_outputs(*n) == 1 && !forced_roots.count(n) && !uses.escapes.count(n->outputs[0])) {
      auto c = uses.consumers.find(n->outputs[0]);
      if (c != uses.consumers.end() && !c->second.empty()) {
        const size_t gid = group_of.at(c->second.front());
        const bool injective = fusion_kind(*n, reg) == FusionKind::Injective;
        // An Isolated node joins no consumer and takes movement producers
        // only (an index expression costs nothing to recompute; a value
        // would be computed once per read); a Materialized one takes
        // producers but joins no consumer.
        bool same = compiled[gid] && used_outputs(*roots[gid]) == 1 &&
                    fusion_kind(*n, reg) != FusionKind::Isolated && fusion_kind(*n, reg) != FusionKind::Materialized &&
                    (injective || fusion_kind(*roots[gid], reg) != FusionKind::Isolated);
        bool feeds_contraction = false;
        for (const Node* consumer : c->second) {
          same = same && group_of.at(consumer) == gid;
          feeds_contraction = feeds_contraction || fusion_kind(*consumer, reg) == FusionKind::Contraction ||
                              prologue.count(consumer);
        }
        // A Pad or strided Slice in front of a contraction is stored: the
        // operand then reads whole rows of it.
        const bool stored = feeds_contraction && stored_before_contraction(*n);
        if (same && !stored && (injective || !feeds_contraction)) {
          group_of[n] = gid;
          if (feeds_contraction) prologue.insert(n);
          continue;
        }
        // Its own producers may join it only as a prologue (the node that
        // made its input stays the root of its own kernel).
        if (stored) prologue.insert(n);
      }
    }
    group_of[n] = roots.size();
    roots.push_back(n);
    compiled.push_back(can);
  }

  // Groups in topological order of their roots; members in node order.
  std::vector<size_t> gids(roots.size());
  for (size_t i = 0; i < gids.size(); ++i) gids[i] = i;
  std::map<const Node*, size_t> position;
  for (size_t i = 0; i < order.size(); ++i) position[order[i]] = i;
  std::sort(gids.begin(), gids.end(), [&](size_t a, size_t b) { return position[roots[a]] < position[roots[b]]; });

  FusionPlan plan;
  std::map<size_t, size_t> slot;  // first group of each id
  for (size_t gid : gids) {
    slot[gid] = plan.groups.size();
    const Node* root = roots[gid];
    // A compiled root with several used outputs: one kernel per output.
    const size_t n_out = compiled[gid] ? root->outputs.size() : 1;
    for (size_t k = 0; k < n_out; ++k) {
      if (compiled[gid] && !root->outputs[k]) continue;
      FusionGroup fg;
      fg.root = root;
      fg.root_output = k;
      fg.compiled = compiled[gid];
      fg.name = group_name(plan.groups.size(), *fg.root);
      plan.groups.push_back(std::move(fg));
    }
  }
  for (const Node* n : order) {
    const size_t first = slot[group_of[n]];
    for (size_t i = first; i < plan.groups.size() && plan.groups[i].root == roots[group_of[n]]; ++i)
      plan.groups[i].nodes.push_back(n);
  }
  for (FusionGroup& fg : plan.groups) {
    std::set<const Node*> members(fg.nodes.begin(), fg.nodes.end());
    std::set<const Value*> seen;
    for (const Node* n : fg.nodes)
      for (const Value* v : n->inputs)
        if (v && !(v->producer && members.count(v->producer)) && seen.insert(v).second) fg.inputs.push_back(v);
  }
  return plan;
}

std::string print_fusion(const FusionPlan& p) {
  std::string out;
  for (const FusionGroup& fg : p.groups) {
    const Value* out_v = fg.root_output < fg.root->outputs.size() ? fg.root->outputs[fg.root_output] : nullptr;
    out += str_cat("group ", fg.name, fg.compiled ? "" : " (interpreter)", " -> %", out_v ? out_v->name : "?", "\n");
    for (const Node* n : fg.nodes) {
      std::string outs;
      for (const Value* v : n->outputs) outs += str_cat(outs.empty() ? "" : ", ", v ? "%" + v->name : "_");
      out += str_cat("  ", outs, " = ", n->op, n == fg.root ? "  (root)" : "", "\n");
    }
  }
  return out;
}

}  // namespace tessel
