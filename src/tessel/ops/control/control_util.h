// Helpers shared by the control-flow, sequence and recurrent operators:
// moving slices of tensors along an axis (any dtype, strings included) and
// merging the types that different branches or iterations produce.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tessel/ops/registry.h"

namespace tessel::ctl {

// The sub-tensor at `index` along `axis`, with that axis removed.
Tensor slice_at(const Tensor& t, int64_t axis, int64_t index);
// Elements [begin, end) along `axis`, the axis kept.
Tensor slice_range(const Tensor& t, int64_t axis, int64_t begin, int64_t end);
// Stacks equally shaped tensors along a new axis `axis` (0..rank). `parts`
// must not be empty; a shape or dtype mismatch is an Error naming `n`.
Tensor stack(const std::vector<Tensor>& parts, int64_t axis, const Node& n);
// Concatenates tensors along an existing axis; other dims must agree.
Tensor concat(const std::vector<Tensor>& parts, int64_t axis, const Node& n);

// A scalar bool tensor.
Tensor scalar_bool(bool v);
// Reads a one-element tensor as a bool / int64; Errors name the node and what.
bool read_bool_scalar(const Tensor& t, const Node& n, const char* what);
int64_t read_int_scalar(const Tensor& t, const Node& n, const char* what);

// A symbol for a size only known at run time, named after output `out` of the
// node so that it is deterministic and unique in the model.
Dim fresh_dim(const Node& n, size_t out, const std::string& what);

// The type two producers of one value can have: dims that agree stay, dims
// that differ become fresh symbols, a rank mismatch gives an unknown shape.
// Different dtypes or kinds are an Error.
Type merge_types(const Type& a, const Type& b, const Node& n, size_t out);

// Output types of subgraph `g` given its input types: through the inference
// callback when the shape-inference pass provides one, else the subgraph's
// declared output types.
std::vector<Type> subgraph_output_types(InferContext& ctx, Graph& g, const std::vector<Type>& in_types);

// A tensor type from an RtValue-independent Type: the declared element type
// of a subgraph output, used to build empty results of zero-trip loops.
Tensor empty_like_type(const Type& t, int64_t leading, const Node& n);

}  // namespace tessel::ctl
