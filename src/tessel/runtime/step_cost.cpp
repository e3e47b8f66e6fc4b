#include "tessel/runtime/step_cost.h"

#include "tessel/runtime/memory_plan.h"

#include <algorithm>
#include <optional>
#include <set>
#include <vector>

namespace tessel {

namespace {

std::optional<std::vector<int64_t>> dims_of(const Value* v, const std::map<std::string, int64_t>& bindings) {
  if (!v || !v->type.is_tensor() || !v->type.has_shape()) return std::nullopt;
  std::vector<int64_t> dims;
  for (const Dim& d : *v->type.shape) {
    const std::optional<int64_t> n = d.eval(bindings);
    if (!n) return std::nullopt;
    dims.push_back(*n);
  }
  return dims;
}

double product(const std::vector<int64_t>& d, size_t from = 0) {
  double p = 1;
  for (size_t i = from; i < d.size(); ++i) p *= static_cast<double>(d[i]);
  return p;
}

// 2 x outputs x the length of each output's dot product; Attention: its
// two products, Q K^T and P V, over every key (a causal mask's half
// included, as the kernels compute it; the softmax not counted), i.e. 2 N
// (|Q| + |O|) for N keys in K's second-to-last dimension (3-d [B, N, H d]
// and 4-d [B, H, N, d] alike).
double node_flops(const Node& n, const std::map<std::string, int64_t>& bindings) {
  if (!n.domain.empty() || n.outputs.empty() || n.inputs.size() < 2) return 0;
  const auto out = dims_of(n.outputs[0], bindings), a = dims_of(n.inputs[0], bindings),
             w = dims_of(n.inputs[1], bindings);
  if (!out || !a || !w || a->empty()) return 0;
  if (n.op == "Attention" && w->size() >= 3)
    return 2 * static_cast<double>((*w)[w->size() - 2]) * (product(*a) + product(*out));
  if (n.op == "MatMul") return 2 * product(*out) * static_cast<double>(a->back());
  if (n.op == "Gemm" && a->size() == 2)
    return 2 * product(*out) * static_cast<double>(n.attr_int("transA", 0) ? (*a)[0] : (*a)[1]);
  if (n.op == "Conv" && w->size() >= 2) return 2 * product(*out) * product(*w, 1);
  return 0;
}

// The bytes the step reads of `v`: all of them, except for a table its
// nodes only Gather rows from (an embedding): the rows gathered, each
// Gather's output, at most the table.
int64_t read_bytes(const Value* v, const std::vector<const Node*>& nodes,
                   const std::map<std::string, int64_t>& bindings) {
  const int64_t all = value_bytes(v, bindings).value_or(0);
  int64_t gathered = 0;
  bool used = false;
  for (const Node* n : nodes)
    for (size_t i = 0; i < n->inputs.size(); ++i) {
      if (n->inputs[i] != v) continue;
      if (n->op != "Gather" || !n->domain.empty() || i != 0 || n->outputs.empty() || !n->outputs[0]) return all;
      gathered += value_bytes(n->outputs[0], bindings).value_or(all);
      used = true;
    }
  return used ? std::min(all, gathered) : all;
}

}  // namespace

StepCost step_cost(const Step& s, const std::map<std::string, int64_t>& bindings) {
  StepCost c;
  const std::vector<const Node*> nodes = s.kernel ? s.kernel->nodes : std::vector<const Node*>{s.interp};
  std::set<const Value*> seen;  // a value read twice moves once
  for (const Value* v : step_reads(s))
    if (seen.insert(v).second) c.bytes += read_bytes(v, nodes, bindings);
  for (const Value* v : step_writes(s))
    if (seen.insert(v).second) c.bytes += value_bytes(v, bindings).value_or(0);
  if (s.kernel) {
    for (const Node* n : s.kernel->nodes) c.flops += node_flops(*n, bindings);
  } else if (s.interp) {
    c.flops = node_flops(*s.interp, bindings);
  }
  return c;
}

}  // namespace tessel
