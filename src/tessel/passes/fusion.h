// Fusion: partitions the nodes of a graph into kernel groups.
//
// Each group has one root node whose outputs are written to memory; every
// other member is inlined into the root's loop nest (lower/lower_group.h), so
// its values never touch memory. Rules, applied from the graph outputs
// backwards (reverse topological order):
//   - a node joins the group of its consumers when all its consumers are in
//     one compiled group, it has a compiled form (OpSchema::lower), one output,
//     and none of its outputs is a graph output;
//   - Elementwise and Injective nodes join any group (they are recomputed per
//     use, like XLA's and Inductor's pointwise fusion);
//   - Reduction nodes join consumers too (softmax, layer norm, mean/variance
//     become one kernel; the lowering hoists each reduction to the loop level
//     it depends on, so a row statistic is computed once per row);
//   - Contractions (MatMul, Gemm) join consumers (epilogues), but only
//     Injective producers join a contraction, directly or through other
//     injective members (a GELU behind a Reshape in front of a Gemm stays
//     out): anything else would be recomputed once per output column;
//   - nodes in `roots` start a group of their own (the lowering found that
//     inlining them would recompute them inside another reduction's loop);
//   - a compiled node with several used outputs (Split) is a root, with one
//     group (kernel) per used output;
//   - nodes without a compiled form, nodes with several outputs, nodes with
//     subgraphs, and nodes listed in `opaque` are groups of their own that run
//     on the interpreter.
// The plan does not change the graph. It assumes shape inference has run.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "tessel/ir/graph.h"
#include "tessel/ops/registry.h"

namespace tessel {

struct FusionGroup {
  std::string name;                  // kernel name, e.g. "k3_softmax"
  const Node* root = nullptr;        // its output `root_output` is stored
  size_t root_output = 0;
  std::vector<const Node*> nodes;    // members in topological order (root last)
  std::vector<const Value*> inputs;  // values the group reads from memory, first use first
  bool compiled = false;             // false: the root runs on the interpreter
};

struct FusionPlan {
  std::vector<FusionGroup> groups;  // in topological order
};

// `opaque`: nodes that must run on the interpreter (e.g. lowering failed);
// `roots`: compiled nodes that must not be inlined into their consumers.
FusionPlan plan_fusion(const Graph& g, const OpRegistry& reg, const std::set<const Node*>& opaque = {},
                       const std::set<const Node*>& roots = {});

// The text of `tessel inspect --emit fused`: one block per group.
std::string print_fusion(const FusionPlan& p);

}  // namespace tessel
