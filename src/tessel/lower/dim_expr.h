// Symbolic graph dims (ir/dim.h) as loop-IR index expressions: symbols become
// i64 variables of the same name, which kernels take as parameters.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "tessel/ir/dim.h"
#include "tessel/loop/ir.h"

namespace tessel {

// `syms` (optional) collects the symbol names the expression mentions.
loop::Expr dim_to_expr(const Dim& d, std::set<std::string>* syms = nullptr);
std::vector<loop::Expr> shape_to_exprs(const Shape& s, std::set<std::string>* syms = nullptr);

}  // namespace tessel
