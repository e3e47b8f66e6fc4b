// Scalar/vector arithmetic with loop IR semantics (internal). Operands have
// the same LLVM shape (see match_lanes); `t` is the operands' loop IR type.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include "tessel/loop/ir.h"

namespace tessel::cpu::detail {

llvm::Value* emit_unary(llvm::IRBuilder<>& b, loop::UnaryOp op, DType t, llvm::Value* a);
llvm::Value* emit_binary(llvm::IRBuilder<>& b, loop::BinaryOp op, DType t, llvm::Value* x, llvm::Value* y);

// Rounds an f32 register value to the nearest f16/bf16 value (ties to even,
// bit-exact with f32_to_f16_bits / f32_to_bf16_bits); identity for other types.
llvm::Value* round_narrow(llvm::IRBuilder<>& b, DType t, llvm::Value* v);

}  // namespace tessel::cpu::detail
