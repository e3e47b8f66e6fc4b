// bind_shape_inputs: folds graph inputs whose given values only steer shapes
// (Reduce* axes, Reshape/Expand shapes, Slice starts/ends, Pad amounts...)
// into constants, at bind time, when the caller knows their values (tessel
// run/test-onnx with --input). The compiled path needs those operands
// constant to know its output sizes; the interpreter does not care.
//
// Rewrites: an input all of whose uses sit at a shape-operand position (the
// table below) and whose value is small (<= 64 elements, integer) becomes an
// initializer holding that value; it is removed from the graph inputs.
// Assumes nothing; run before the pass pipeline so that shape inference and
// constant folding see the constants.
#include <map>
#include <set>

#include "tessel/passes/pass_manager.h"

namespace tessel {

namespace {

// Operand positions that only determine shapes or axes.
const std::map<std::string, std::set<size_t>>& shape_operands() {
  static const std::map<std::string, std::set<size_t>> table = {
      {"ReduceSum", {1}},  {"ReduceMean", {1}},     {"ReduceMax", {1}},       {"ReduceMin", {1}},
      {"ReduceProd", {1}}, {"ReduceL1", {1}},       {"ReduceL2", {1}},        {"ReduceLogSum", {1}},
      {"ReduceLogSumExp", {1}}, {"ReduceSumSquare", {1}}, {"Reshape", {1}},   {"Expand", {1}},
      {"Squeeze", {1}},    {"Unsqueeze", {1}},      {"Slice", {1, 2, 3, 4}},  {"Pad", {1, 3}},
      {"Tile", {1}},       {"Split", {1}},          {"TopK", {1}},            {"ConstantOfShape", {0}},
      {"CumProd", {1}},
      {"Resize", {2, 3}},  {"OneHot", {1}},         {"CumSum", {1}},          {"Trilu", {1}},
      {"Range", {0, 1, 2}}, {"CenterCropPad", {1, 2}},
  };
  return table;
}

bool only_shape_uses(const Graph& g, const Value* v) {
  bool used = false;
  for (const auto& n : g.nodes()) {
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      if (n->inputs[i] != v) continue;
      auto it = shape_operands().find(n->op);
      if (!n->domain.empty() || it == shape_operands().end() || !it->second.count(i)) return false;
      used = true;
    }
    for (const auto& [name, a] : n->attrs)
      if (a.kind == Attribute::Kind::Graph || a.kind == Attribute::Kind::Graphs) return false;  // may read v
  }
  for (const Value* o : g.outputs)
    if (o == v) return false;
  return used;
}

}  // namespace

bool bind_shape_inputs(Model& m, const std::map<std::string, Tensor>& values) {
  Graph& g = *m.graph;
  bool changed = false;
  for (size_t i = 0; i < g.inputs.size();) {
    Value* v = g.inputs[i];
    auto it = values.find(v->name);
    if (it == values.end() || !is_int(it->second.dtype()) || it->second.numel() > 64 || !only_shape_uses(g, v)) {
      ++i;
      continue;
    }
    v->constant = it->second;
    g.initializers.push_back(v);
    g.inputs.erase(g.inputs.begin() + static_cast<long>(i));
    changed = true;
  }
  return changed;
}

}  // namespace tessel
