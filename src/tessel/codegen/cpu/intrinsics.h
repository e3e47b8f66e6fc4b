// The primitive intrinsics a loop IR Call may name (internal). Anything else
// is an error: transcendental calls are expanded into polynomials by the
// math-expansion pass before code generation.
#pragma once

#include <string>
#include <vector>

#include <llvm/IR/IRBuilder.h>

#include "tessel/ir/dtype.h"

namespace tessel::cpu::detail {

// `args` are register values of type `arg_type` (scalars or vectors; they
// are brought to one shape here). `result` is the Call's loop IR type.
llvm::Value* emit_intrinsic(llvm::IRBuilder<>& b, const std::string& name, DType result, DType arg_type,
                            std::vector<llvm::Value*> args);

}  // namespace tessel::cpu::detail
