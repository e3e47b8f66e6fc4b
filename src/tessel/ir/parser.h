// Text form of the graph IR (parser side); see docs/ir.md for the grammar.
#pragma once

#include <memory>
#include <string>

#include "tessel/ir/graph.h"

namespace tessel {

// Parses a model printed by print_model. Throws tessel::Error
// "<line>:<col>: <what>" on malformed text. Does not run the verifier.
std::unique_ptr<Model> parse_model(const std::string& text);

// Parses a type such as `f32[batch,3]` (for tools and tests).
Type parse_type(const std::string& text);

}  // namespace tessel
