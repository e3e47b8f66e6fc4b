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

namespace tessel::loop {

struct Affine {
  int64_t constant = 0;
  std::map<std::string, int64_t> coef;  // variable name -> coefficient (zeros dropped)
};

// `e` as an affine form of its variables, or nullopt when it is not one
// (products of variables, divisions that do not pair up, loads, ...).
std::optional<Affine> affine_form(const Expr& e);

}  // namespace tessel::loop
