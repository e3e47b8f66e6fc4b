// Value conversions with the reference interpreter's semantics (Tensor::cast)
// and same-size reinterpretations (internal).
#pragma once

#include <llvm/IR/IRBuilder.h>

#include "tessel/ir/dtype.h"

namespace tessel::cpu::detail {

llvm::Value* emit_cast(llvm::IRBuilder<>& b, DType from, DType to, llvm::Value* v);
llvm::Value* emit_bitcast(llvm::IRBuilder<>& b, DType from, DType to, llvm::Value* v);

}  // namespace tessel::cpu::detail
