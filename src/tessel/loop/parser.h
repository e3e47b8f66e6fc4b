// Reads the loop IR text form written by printer.h back into a Kernel.
// Buffers are resolved by name (kernel params, then enclosing allocates) and
// variables by name (syms, loop variables, let variables), so every Load and
// Store shares the BufferRef of its declaration. Errors are tessel::Error
// with "line:column".
#pragma once

#include <string>
#include <vector>

#include "tessel/loop/ir.h"

namespace tessel::loop {

Kernel parse_kernel(const std::string& text);

// One expression in the text form of print(const Expr&), whose variables are
// among `i64_vars` (a kernel's syms: launch geometry, tensor map dims).
Expr parse_expr(const std::string& text, const std::vector<std::string>& i64_vars);

}  // namespace tessel::loop
