// Text form of the graph IR (parser side); see docs/ir.md for the grammar.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "tessel/ir/graph.h"

namespace tessel {

// Parses a model printed by print_model. Throws tessel::Error
// "<line>:<col>: <what>" on malformed text. Does not run the verifier.
// `external_constants`: the bytes of the constants printed as `dense<ext:N>`
// (PrintOptions::external_constants); without them such text is an error.
// With an `owner` that keeps those bytes alive (an artifact's mapping),
// constants whose bytes are 64-byte aligned borrow them instead of copying
// (Tensor::borrow: a write copies first).
std::unique_ptr<Model> parse_model(const std::string& text,
                                   const std::vector<std::string_view>* external_constants = nullptr,
                                   std::shared_ptr<const void> owner = nullptr);

// Parses a type such as `f32[batch,3]` (for tools and tests).
Type parse_type(const std::string& text);

namespace detail {
// Stores the float element written as `text` (decimal, nan, inf, -inf) into
// t[i] for any floating dtype; false when the text is not such a number.
// Shared with the printer, which uses it to check that a decimal form
// reproduces the stored bits.
bool set_float_element(Tensor* t, int64_t i, const std::string& text);
}  // namespace detail

}  // namespace tessel
