// How loop IR types live in LLVM (internal to the code generator).
//
// Register (value) types: bool -> i1, integers -> iN, f32 -> float,
// f64 -> double, and f16/bf16 -> float holding a value that is exactly
// representable in the narrow type (every arithmetic result is rounded back,
// see round_narrow), so one f32 path serves all three and no soft-float
// library call is ever emitted.
// Storage (memory) types: bool -> i8 (0/1), f16 -> half, bf16 -> i16 bits.
#pragma once

#include <llvm/IR/IRBuilder.h>

#include "tessel/ir/dtype.h"

namespace tessel::cpu::detail {

llvm::Type* value_type(llvm::LLVMContext& ctx, DType t);
llvm::Type* storage_type(llvm::LLVMContext& ctx, DType t);
bool is_narrow_float(DType t);  // f16, bf16

// The type with `lanes` lanes of `scalar` (lanes == 0: the scalar itself).
llvm::Type* with_lanes(llvm::Type* scalar, int lanes);
// 0 for a scalar value, else the number of vector lanes.
int lanes_of(const llvm::Value* v);
// Broadcasts a scalar to `lanes` lanes (vectors and lanes == 0 pass through).
llvm::Value* splat(llvm::IRBuilder<>& b, llvm::Value* v, int lanes);
// Brings two operands to the same shape (splatting the scalar one).
void match_lanes(llvm::IRBuilder<>& b, llvm::Value*& x, llvm::Value*& y);

// An integer constant of v's type (splatted for vectors).
llvm::Value* int_const(llvm::Type* ty, uint64_t v);

// Register value <-> memory representation.
llvm::Value* from_storage(llvm::IRBuilder<>& b, DType t, llvm::Value* stored);
llvm::Value* to_storage(llvm::IRBuilder<>& b, DType t, llvm::Value* v);

}  // namespace tessel::cpu::detail
