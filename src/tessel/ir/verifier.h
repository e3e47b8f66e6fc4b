// The IR verifier: checks the invariants every pass relies on and throws
// tessel::Error describing the first violation (naming the node or value):
//   - every node's operator is registered and its arity is right;
//   - SSA: each value is defined once (graph input, initializer or node
//     output) and used only after its definition in node order;
//   - scoping: a subgraph may use values of its enclosing graphs, never values
//     of a sibling graph or of a graph nested inside it;
//   - every value has a type; where all input shapes are known, the type
//     agrees with what the op's inference derives (dtype equal, ranks equal,
//     constant dims equal);
//   - every graph has outputs and they are defined.
//
// The verifier needs the op registry, so its implementation lives with the
// passes (tessel_passes): link tessel_passes to use it.
#pragma once

#include "tessel/ir/graph.h"

namespace tessel {

class OpRegistry;

void verify_model(const Model& m);
void verify_model(const Model& m, const OpRegistry& reg);
// Checks only structure (SSA, scoping, outputs), no registry: for tests of
// models that use unregistered ops.
void verify_structure(const Model& m);

}  // namespace tessel
