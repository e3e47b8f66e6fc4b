// Running one node's inference outside the shape-inference pass (constant
// folding evaluates symbolic values this way) and the list of operators that
// must never be evaluated at compile time.
#pragma once

#include <functional>
#include <unordered_map>
#include <vector>

#include "tessel/ops/registry.h"

namespace tessel {

// Symbolic values of small integer tensors (Shape(x) = [batch,3,...]) by value.
using SymTable = std::unordered_map<const Value*, SymValue>;

// Fills ctx's inputs from the node's input values: types, constants and the
// symbolic values known in `syms`.
void fill_infer_inputs(InferContext& ctx, const SymTable& syms);

// Random* / Bernoulli / Multinomial: different results on every run.
bool is_nondeterministic_op(const Node& n);

// True when the node holds a graph or graphs attribute.
bool has_subgraphs(const Node& n);

// The dims of `v` when its shape is known and constant (false otherwise).
bool static_dims_of(const Value* v, std::vector<int64_t>* out);

}  // namespace tessel
