// Text form of the graph IR (printer side). The grammar is documented in
// docs/ir.md; parse_model (parser.h) reads everything print_model writes, and
// print(parse(print(m))) == print(m).
#pragma once

#include <string>
#include <vector>

#include "tessel/ir/graph.h"

namespace tessel {

struct PrintOptions {
  // Show constants with more than 16 elements as `dense<...>`: readable, but
  // the result can no longer be parsed.
  bool elide_large_constants = false;
  // When set, constants with more than 16 elements (not strings) print as
  // `dense<ext:N>` and are appended here, N their index: artifacts store
  // their bytes raw beside the text (parse_model takes them back).
  std::vector<const Tensor*>* external_constants = nullptr;
};

// The whole model: header with ir_version/opsets/metadata and the main graph.
std::string print_model(const Model& m, const PrintOptions& o = {});
// One graph (with its nested subgraphs), as it appears inside a model.
std::string print_graph(const Graph& g, const PrintOptions& o = {});

// Pieces, also used by error messages and other printers.
std::string print_type(const Type& t);            // f32[batch,3], seq<f32[*]>, opt<i64[]>
std::string print_value_name(const std::string& name);  // %x or %"odd name"
std::string print_attribute(const Attribute& a, const PrintOptions& o = {});
std::string print_tensor_literal(const Tensor& t, const PrintOptions& o = {});  // f32[2] dense<[1, 2]>
// A double-quoted string literal with \", \\, \n, \t, \r and \xHH escapes.
std::string quote_string(const std::string& s);

}  // namespace tessel
