// Integer index expressions as affine forms: constant + sum of coef * var.
//
// Index arithmetic from reshapes and transposes often reads
// floordiv(x, d) * (c * d) + floormod(x, d) * c, which is c * x for any x
// (floor division: x = d * floordiv(x, d) + floormod(x, d), d > 0). Such
// pairs fold, so a view of a view that is contiguous again is seen as such
// (the CUDA GEMM's vector loads use this). The simplifier (loop/simplify.h)
// does not fold them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "tessel/loop/ir.h"
#include "tessel/loop/simplify.h"

namespace tessel::loop {

struct Affine {
  int64_t constant = 0;
  std::map<std::string, int64_t> coef;  // variable name -> coefficient (zeros dropped)
};

// The row-major flat element index sum(indices[d] * stride[d]) of an access
// to `b`, not simplified (callers decide: simplifying can change the form
// contiguous_runs recognises); nullopt when a dim that sets a stride (all
// but the leading one) is not constant, the strides overflow, or the index
// count is not b's rank.
std::optional<Expr> constant_flat_index(const Buffer& b, const std::vector<Expr>& indices);

// `e` as an affine form of its variables, or nullopt when it is not one
// (products of variables, divisions that do not pair up, loads, ...).
std::optional<Affine> affine_form(const Expr& e);

// Whether the integer index `e` maps every run of `run` consecutive values
// of `var` that starts at a multiple of `run` to `run` consecutive integers
// that start at a multiple of `run`, whatever the other variables are:
//   e(var = run * w + d) = e(var = run * w) + d  for 0 <= d < run, and
//   run divides e(var = run * w).
// Stronger than affinity in places that matter: a head split out of the
// vectorised dimension (floordiv(k, 64) * 8192 + floormod(k, 64)) keeps runs
// of 8 contiguous though e is not affine in k. Decided by tracking, for
// each subexpression, the form A + c * d with A a multiple of a known m:
// floordiv/floormod by a constant D keep the form when c * (run - 1) is
// below gcd(m, D) (the run cannot cross a multiple of D). Conservative:
// false when it cannot tell.
bool contiguous_runs(const Expr& e, const std::string& var, int64_t run);

// `e` with every integer subexpression that is affine (affine_form) written
// as its canonical sum c0 + c1 * v1 + ..., outermost first, so the floordiv /
// floormod pairs of a reshape vanish; and floordiv / floormod of such a sum
// by a constant d resolved where `bounds` put the part that is not a
// multiple of d within [0, d): floordiv(49 x + j, 49) => x and
// floormod(49 x + j, 49) => j for j in [0, 49).
Expr fold_affine(const Expr& e, const Bounds& bounds = {});

}  // namespace tessel::loop
