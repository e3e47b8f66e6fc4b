// The loop IR simplifier. Rules read like rules (Halide style); the
// expression rules live in simplify_expr.cpp, the statement rules in
// simplify.cpp. Constant folding uses scalar.h, so folded values are exactly
// what the evaluator and generated code compute.
//
// What it assumes:
//   - index arithmetic (i64) does not overflow, so i64 rules may reassociate
//     and cancel ((x * c) floordiv c => x); narrower integers, which wrap in
//     practice, get only the rules that hold in modular arithmetic;
//   - floats are never reassociated: only exact identities (x * 1.0 => x,
//     x - 0.0 => x, x + -0.0 => x) and folding of constant operands;
//   - expressions are pure, so an unused let or a dead select arm can go.
// Loop variables with constant bounds give ranges that decide comparisons
// and remove floordiv/floormod (i floormod 8 => i when 0 <= i < 8).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "tessel/loop/ir.h"

namespace tessel::loop {

// Inclusive bounds of an i64 expression, where known.
struct Interval {
  int64_t lo, hi;
};
using Bounds = std::map<std::string, Interval>;

Expr simplify(const Expr& e, const Bounds& bounds = {});
Stmt simplify(const Stmt& s, const Bounds& bounds = {});
// The kernel with its body simplified.
Kernel simplify(const Kernel& k);

// Bounds of an i64 expression under `bounds`, if it can tell.
bool const_bounds(const Expr& e, const Bounds& bounds, Interval* out);
std::optional<Interval> bounds_of(const Expr& e, const Bounds& bounds);
// Whether the i64 expression `e` and, recursively, the operands of its
// arithmetic lie in int32's range under `bounds`: the code generators then
// compute it in 32 bits.
bool fits_int32(const Expr& e, const Bounds& bounds);
// The range of a loop variable, min + i for i in [0, extent), from the
// bounds of min and extent (nullopt where either is unknown or it overflows).
std::optional<Interval> iteration_range(std::optional<Interval> min, std::optional<Interval> extent);

}  // namespace tessel::loop
