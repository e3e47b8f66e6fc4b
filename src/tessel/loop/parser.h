// Reads the loop IR text form written by printer.h back into a Kernel.
// Buffers are resolved by name (kernel params, then enclosing allocates) and
// variables by name (syms, loop variables, let variables), so every Load and
// Store shares the BufferRef of its declaration. Errors are tessel::Error
// with "line:column".
#pragma once

#include <string>

#include "tessel/loop/ir.h"

namespace tessel::loop {

Kernel parse_kernel(const std::string& text);

}  // namespace tessel::loop
