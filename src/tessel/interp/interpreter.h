// The reference interpreter: runs any graph op by op with each operator's
// reference kernel. It is the oracle that compiled kernels and passes are
// tested against, so it favours being obviously right over being fast.
#pragma once

#include <functional>
#include <vector>

#include "tessel/ir/graph.h"
#include "tessel/ops/registry.h"

namespace tessel {

class Interpreter {
 public:
  explicit Interpreter(const OpRegistry& reg = OpRegistry::global()) : reg_(reg) {}

  // Runs `g` with `inputs` bound to g.inputs in order; returns the values of
  // g.outputs. Throws tessel::Error on a missing kernel, a kernel error or an
  // input that does not match the graph's declared type.
  std::vector<RtValue> run(const Graph& g, const std::vector<RtValue>& inputs) const;

  // Runs one node; `lookup` gives the value of each value it reads (inputs,
  // and outer-scope values its subgraphs read), or nullptr for constants.
  std::vector<RtValue> run_node(const Node& n, const std::function<const RtValue*(const Value*)>& lookup) const;

  // Called after each node with the node and its outputs (for tracing/tests).
  std::function<void(const Node&, const std::vector<RtValue>&)> on_node;

 private:
  struct Env;
  std::vector<RtValue> exec_node(const Node& n, Env& env) const;
  std::vector<RtValue> run_in(const Graph& g, const std::vector<RtValue>& inputs, const Env* outer) const;
  const OpRegistry& reg_;
};

// Checks that a run-time value fits a declared type (dtype and every constant
// dim; symbolic dims must be consistent across the inputs via `bindings`).
// Throws tessel::Error with `what` in the message.
void check_value_matches(const RtValue& v, const Type& t, const std::string& what,
                         std::map<std::string, int64_t>* bindings);
// The same for a tensor known by its dtype and dims (one on a device).
void check_dims_match(DType dtype, const std::vector<int64_t>& dims, const Type& t, const std::string& what,
                      std::map<std::string, int64_t>* bindings);

}  // namespace tessel
