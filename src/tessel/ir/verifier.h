// The IR verifier: checks the invariants every pass relies on and throws
// tessel::Error describing the first violation (naming the node or value):
//   - every node's operator is registered and its arity is right;
//   - SSA: each value is defined once (graph input, initializer or node
//     output) and used only after its definition in node order;
//   - scoping: a subgraph may use values of its enclosing graphs, never values
//     of a sibling graph or of a graph nested inside it;
//   - every value's type agrees with what the op's inference derives from
//     the input types (dtype equal, ranks equal, constant dims equal); with
//     VerifyOptions::require_types, a value must have a type wherever
//     inference derives one;
//   - constants' types equal their tensors' dtype and shape;
//   - every graph has outputs and they are defined.
//
// The verifier needs the op registry, so its implementation lives with the
// passes (tessel_passes): link tessel_passes to use it.
#pragma once

#include "tessel/ir/graph.h"

namespace tessel {

class OpRegistry;

struct VerifyOptions {
  // Also reject a value without a type (or without an element type) when
  // inference derives one. Right after import, before shape inference, most
  // intermediate values have no type yet, so this is off by default; the
  // pass pipeline turns it on once shape inference has run.
  bool require_types = false;
};

void verify_model(const Model& m, const VerifyOptions& o = {});
void verify_model(const Model& m, const OpRegistry& reg, const VerifyOptions& o = {});
// Checks only structure (SSA, scoping, outputs), no registry: for tests of
// models that use unregistered ops.
void verify_structure(const Model& m);

}  // namespace tessel
