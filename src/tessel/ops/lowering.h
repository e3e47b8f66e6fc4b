// How an operator describes its compiled form: the value of each output
// element as a loop-IR expression of the output index (Halide's and TVM's
// "compute definition"). The lowering engine (lower/) implements the context:
// an input element may be a load from a buffer or the producer's own
// definition inlined (when both are in one fused group), and a reduction
// becomes an accumulator loop hoisted to the outermost loop level its value
// depends on, so that e.g. a softmax row maximum is computed once per row.
//
// Op lowerings live beside their reference kernels in ops/*.cpp and register
// through OpSchema::lower and OpSchema::fusion.
#pragma once

#include <functional>
#include <vector>

#include "tessel/ir/graph.h"
#include "tessel/loop/ir.h"
#include "tessel/support/error.h"

namespace tessel {

// How the fusion pass may group an op with its neighbours.
enum class FusionKind {
  Opaque,       // no lowering: runs on the interpreter
  Elementwise,  // out[i] = f(in_k[broadcast(i)]): fuses with anything
  Injective,    // out[i] = in[g(i)] (transpose, slice, concat, gather...): fuses like elementwise
  Reduction,    // reduces some axes: fuses with producers and with consumers
  Contraction,  // MatMul/Gemm: fuses with consumers (epilogues) and movement producers only
  Materialized, // injective, but stored: producers join it; it joins no consumer (tessel::Im2Col, ToBlocked)
  Isolated,     // a kernel of its own: takes movement (injective) producers only, joins no consumer
                // (tessel::TileTransform, whose elements each read several input elements a fused
                // producer would recompute)
};

enum class ReduceOp { Sum, Prod, Max, Min };

// Thrown by LowerContext::unsupported: the node (and so its fused group) has
// no compiled form for these operands; the driver runs it on the interpreter.
class LoweringUnsupported : public Error {
 public:
  using Error::Error;
  const Node* node = nullptr;  // the node whose lowering gave up (set by the lowering engine)
};

// Thrown by the lowering engine when fusing `node` into its consumers would
// recompute it inside another reduction's loop; the node becomes a group
// root of its own (still compiled).
class FusionRejected : public Error {
 public:
  FusionRejected(const std::string& what, const Node* n) : Error(what), node(n) {}
  const Node* node;
};

class LowerContext {
 public:
  explicit LowerContext(const Node& n) : node(n) {}
  virtual ~LowerContext() = default;
  const Node& node;

  size_t num_inputs() const { return node.inputs.size(); }
  bool has_input(size_t i) const { return node.has_input(i); }
  DType in_dtype(size_t i) const;
  DType out_dtype(size_t i = 0) const;
  size_t in_rank(size_t i) const;
  size_t out_rank(size_t i = 0) const;
  // Shapes as i64 index expressions (symbols become kernel parameters).
  virtual std::vector<loop::Expr> in_shape(size_t i) = 0;
  virtual std::vector<loop::Expr> out_shape(size_t i = 0) = 0;
  // The element of input i at `index` (as stored: f16 stays f16).
  virtual loop::Expr input(size_t i, const std::vector<loop::Expr>& index) = 0;
  // The constant value of input i, or nullptr (shape/axes operands).
  virtual const Tensor* input_const(size_t i) = 0;
  // combine(init, body(k) for k over `extents`): each k is a fresh loop var.
  virtual loop::Expr reduce(ReduceOp op, loop::Expr init, const std::vector<loop::Expr>& extents,
                            const std::function<loop::Expr(const std::vector<loop::Expr>&)>& body) = 0;
  // A run-time check: the kernel stops with `message` when cond is false
  // (e.g. integer division by zero, an index out of range).
  virtual void check(loop::Expr cond, const std::string& message) = 0;
  // Fails lowering of this node (the group falls back to the interpreter).
  [[noreturn]] void unsupported(const std::string& why) const;
};

// Lowers output `output` of ctx.node at `index` (one i64 expression per output
// dim). The result has the output's dtype.
using LowerFn = loop::Expr (*)(LowerContext& ctx, size_t output, const std::vector<loop::Expr>& index);

// ---- helpers shared by op lowerings -----------------------------------------------

// The type elementwise arithmetic is done in: f32 for f16/bf16/f32, else the type.
DType compute_type(DType t);
// Input i at `index` converted to compute_type.
loop::Expr input_as_compute(LowerContext& ctx, size_t i, const std::vector<loop::Expr>& index);
// Numpy broadcasting: the index of input i for output `index` (aligned from the
// right; a dim of 1 reads element 0).
std::vector<loop::Expr> broadcast_index(LowerContext& ctx, size_t i, const std::vector<loop::Expr>& index);
// The same for the leading `dims` dims of input i against `out_lead`, the
// output index's leading dims (a matmul operand's batch dims against the
// output's batch dims).
std::vector<loop::Expr> broadcast_leading(LowerContext& ctx, size_t i, size_t dims,
                                          const std::vector<loop::Expr>& out_lead);
// Immediate of type t with value v.
loop::Expr constant(DType t, double v);
// The values of a constant integer input (axes, pads, shapes); unsupported
// when the input is computed at run time.
std::vector<int64_t> const_input_ints(LowerContext& ctx, size_t i, const char* what);
// The sizes of input i's dims [from, rank); unsupported when one is symbolic.
std::vector<int64_t> const_in_dims(LowerContext& ctx, size_t i, size_t from = 0);
// max(lo, min(x, hi)): an index that is safe to load even when the select
// around the load discards it.
loop::Expr clamp_index(const loop::Expr& x, const loop::Expr& lo, const loop::Expr& hi);
// lo <= x && x < hi.
loop::Expr in_range(const loop::Expr& x, const loop::Expr& lo, const loop::Expr& hi);
// The smallest / largest value of type t (-inf / +inf for floats).
loop::Expr lowest(DType t);
loop::Expr highest(DType t);
// x == best where NaN equals NaN: the position of a maximum or minimum that
// a NaN-propagating reduction found (ArgMax, Hardmax, MaxPool's Indices).
loop::Expr same_or_both_nan(const loop::Expr& x, const loop::Expr& best);
// The row-major offset of `at` in a box of sizes `dims`, and back.
loop::Expr flatten_index(const std::vector<loop::Expr>& at, const std::vector<loop::Expr>& dims);
std::vector<loop::Expr> unflatten_index(const loop::Expr& flat, const std::vector<loop::Expr>& dims);
// Keys' cubic convolution weight for an f64 tap distance t with coefficient
// a (Resize's cubic_coeff_a; GridSample uses -0.75), in the reference's form.
loop::Expr cubic_weight(const loop::Expr& t, double a);

}  // namespace tessel

// Shorthands for writing compute definitions; an op lowering file says
// `using namespace lower_expr;`. They live in their own namespace because
// registry.h (and so every op file) includes this header, and names as short
// as `lt` or `f64` would otherwise collide with local helpers elsewhere.
namespace tessel::lower_expr {

using loop::BinaryOp;
using loop::Expr;
using Idx = std::vector<Expr>;

inline Expr lt(const Expr& a, const Expr& b) { return loop::binary(BinaryOp::Lt, a, b); }
inline Expr le(const Expr& a, const Expr& b) { return loop::binary(BinaryOp::Le, a, b); }
inline Expr gt(const Expr& a, const Expr& b) { return loop::binary(BinaryOp::Gt, a, b); }
inline Expr ge(const Expr& a, const Expr& b) { return loop::binary(BinaryOp::Ge, a, b); }
inline Expr eq(const Expr& a, const Expr& b) { return loop::binary(BinaryOp::Eq, a, b); }
inline Expr ne(const Expr& a, const Expr& b) { return loop::binary(BinaryOp::Ne, a, b); }
inline Expr div(const Expr& a, const Expr& b) { return loop::binary(BinaryOp::Div, a, b); }
inline Expr and_(const Expr& a, const Expr& b) { return loop::binary(BinaryOp::And, a, b); }
inline Expr or_(const Expr& a, const Expr& b) { return loop::binary(BinaryOp::Or, a, b); }

// An f64 immediate (coordinate and weight arithmetic done like the reference, in double).
inline Expr f64(double v) { return loop::float_imm(DType::F64, v); }
// An intrinsic (loop/ir.h lists them) whose result has its first argument's type.
inline Expr intrinsic(const char* name, const Expr& x) { return loop::call(name, x.dtype(), {x}); }
inline Expr intrinsic(const char* name, const Expr& x, const Expr& y) { return loop::call(name, x.dtype(), {x, y}); }
inline Expr is_nan(const Expr& x) { return loop::call("isnan", DType::Bool, {x}); }

}  // namespace tessel::lower_expr
