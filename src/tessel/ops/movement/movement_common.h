// Helpers shared by the data-movement operators (shape ops, layout ops,
// gather/scatter). These ops only move elements, so the helpers copy storage
// generically: by element size for every numeric dtype, by std::string for
// strings. Private to the movement family; shared helpers live in common.h.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "tessel/ops/common.h"
#include "tessel/ops/registry.h"

namespace tessel::movement {

// Symbolic values (out_syms) are only propagated for small integer tensors:
// shape vectors and the like, not large index constants.
constexpr size_t kMaxSymElements = 256;

// Registration of the three files of the family (called by movement.cpp).
void register_shape_ops(OpRegistry& r);
void register_layout_ops(OpRegistry& r);
void register_gather_scatter_ops(OpRegistry& r);

// Registers one op of the default domain.
struct OpDef {
  const char* name;
  int min_inputs, max_inputs;
  InferFn infer;
  KernelFn kernel;
  UpgradeFn upgrade = nullptr;
  int since_version = 1;
  int min_outputs = 1, max_outputs = 1;
};
void add_op(OpRegistry& r, const OpDef& d);

// ---- element copies ---------------------------------------------------------

// Copies n elements src[si..si+n) to dst[di..di+n). Both tensors must have the
// same dtype; dst must already be allocated (Tensor(dtype, shape)).
void copy_elems(const Tensor& src, int64_t si, Tensor& dst, int64_t di, int64_t n);

// Generic strided copy over a box of `shape`:
//   dst[sum_d dst_tab[d][o_d]] = src[sum_d src_tab[d][o_d]]  for every o in shape.
// Each table has shape[d] entries (flat-offset contributions of that axis), so
// transposes, slices with steps, broadcasts (stride 0), tiles (modulo) and
// padding maps are all expressed by their tables. The caller guarantees that
// every offset is in range. An empty dst_tab means "dst is the contiguous
// row-major layout of shape" (the common case).
using AxisTables = std::vector<std::vector<int64_t>>;
void copy_box(const Tensor& src, const AxisTables& src_tab, Tensor& dst, const AxisTables& dst_tab,
              const std::vector<int64_t>& shape);

// Tables for reading a tensor of `in_shape` with unit step along every axis,
// starting at `start` (per axis), i.e. table[d][o] = (start[d] + o) * stride[d].
AxisTables box_tables(const std::vector<int64_t>& in_shape, const std::vector<int64_t>& start,
                      const std::vector<int64_t>& count);

// Fills every element of t with element `si` of `value` (same dtype).
void fill_with(Tensor& t, const Tensor& value, int64_t si);

// Converts a scalar tensor to dtype `dt` (bit copy when the dtype matches;
// numeric conversion otherwise, strings only to strings).
Tensor convert_scalar(const Tensor& v, DType dt, const Node& n, const char* what);

// ---- integer inputs ----------------------------------------------------------

bool is_index_dtype(DType t);  // int32 or int64
// Values of an integer tensor of rank 0 or 1 (any integer dtype), checked.
std::vector<int64_t> int_values(const Tensor& t, const Node& n, const char* what);
// The same, but requiring int32/int64 ("Tind") or int64 only.
std::vector<int64_t> index_values(const Tensor& t, const Node& n, const char* what);
// An integer scalar (rank 0, or rank 1 with one element).
int64_t int_scalar(const Tensor& t, const Node& n, const char* what);

// Normalises axes into [0, rank) and rejects repeats.
std::vector<int64_t> normalize_axes(const std::vector<int64_t>& axes, int64_t rank, const Node& n);

// ---- inference helpers -------------------------------------------------------

// A fresh symbolic dim for a size only known at run time (data-dependent
// sizes, or values inference cannot see). Named after the output value so that
// repeated inference gives the same symbol.
Dim fresh_dim(const InferContext& ctx, size_t out, size_t d);
Shape fresh_shape(const InferContext& ctx, size_t out, size_t rank);

// Sets out_syms[i] when the value is small enough to be worth tracking.
void maybe_set_sym(InferContext& ctx, size_t i, SymValue v);

// Integer contents of input i when every entry is a known constant.
std::optional<std::vector<int64_t>> const_ints(const InferContext& ctx, size_t i);

// Rank of a 1-D input (its length) when its shape is known and constant.
std::optional<int64_t> known_length(const InferContext& ctx, size_t i);

// True when d is known to be >= 0 / < 0 (symbols are >= 1).
bool known_nonneg(const Dim& d);
bool known_negative(const Dim& d);

// Checks an index input's dtype in infer ("Tind" = int32/int64).
void check_index_input(const InferContext& ctx, size_t i, bool int64_only);

// ---- upgrade helpers ---------------------------------------------------------

// Moves an ints attribute `attr` of `node` into a new int64 initializer bound
// to input slot `slot` (extending the input list with nullptr as needed).
// Does nothing when the attribute is absent.
void attr_to_input(Node& node, const std::string& attr, size_t slot);
// Binds a tensor as a new initializer at input slot `slot`.
void bind_const_input(Node& node, size_t slot, Tensor t, const std::string& hint);

}  // namespace tessel::movement
