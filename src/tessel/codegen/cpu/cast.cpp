#include "tessel/codegen/cpu/cast.h"

#include "tessel/codegen/cpu/arith.h"
#include "tessel/codegen/cpu/llvm_types.h"

namespace tessel::cpu::detail {

namespace {

llvm::Type* shaped(llvm::IRBuilder<>& b, llvm::Type* scalar, llvm::Value* like) {
  return with_lanes(scalar, lanes_of(like));
}

// A float register value (float or double) to a float type. The interpreter
// goes through double and narrows to f32 before rounding to f16/bf16, so a
// double is narrowed in the same two steps.
llvm::Value* float_to_float(llvm::IRBuilder<>& b, DType to, llvm::Value* v) {
  llvm::Type* f32 = shaped(b, b.getFloatTy(), v);
  const bool is_double = v->getType()->getScalarType()->isDoubleTy();
  if (to == DType::F64) return is_double ? v : b.CreateFPExt(v, shaped(b, b.getDoubleTy(), v));
  llvm::Value* single = is_double ? b.CreateFPTrunc(v, f32) : v;
  return round_narrow(b, to, single);
}

// Float -> integer: truncate, NaN -> 0, saturate to the i64 range, then wrap
// to the width; u64 saturates to its own range. The saturating LLVM
// conversions are exactly that (they work on the f32 value directly, which
// is exact in double).
llvm::Value* float_to_int(llvm::IRBuilder<>& b, DType to, llvm::Value* v) {
  llvm::Type* i64 = shaped(b, b.getInt64Ty(), v);
  if (to == DType::U64) return b.CreateIntrinsic(llvm::Intrinsic::fptoui_sat, {i64, v->getType()}, {v});
  llvm::Value* wide = b.CreateIntrinsic(llvm::Intrinsic::fptosi_sat, {i64, v->getType()}, {v});
  return b.CreateTrunc(wide, shaped(b, value_type(b.getContext(), to), v));
}

// Integer -> float: exact into double first (as the interpreter), then narrowed.
llvm::Value* int_to_float(llvm::IRBuilder<>& b, DType from, DType to, llvm::Value* v) {
  llvm::Type* f64 = shaped(b, b.getDoubleTy(), v);
  llvm::Value* d = is_signed_int(from) ? b.CreateSIToFP(v, f64) : b.CreateUIToFP(v, f64);
  return float_to_float(b, to, d);
}

// Integer -> integer: extend by the source's signedness, wrap to the width.
llvm::Value* int_to_int(llvm::IRBuilder<>& b, DType from, DType to, llvm::Value* v) {
  llvm::Type* ty = shaped(b, value_type(b.getContext(), to), v);
  return is_signed_int(from) ? b.CreateSExtOrTrunc(v, ty) : b.CreateZExtOrTrunc(v, ty);
}

// The bit pattern of a register value, as an integer of the storage size.
llvm::Value* to_bits(llvm::IRBuilder<>& b, DType from, llvm::Value* v) {
  llvm::Value* stored = to_storage(b, from, v);
  if (!stored->getType()->isFPOrFPVectorTy()) return stored;
  const unsigned bits = stored->getType()->getScalarSizeInBits();
  return b.CreateBitCast(stored, shaped(b, b.getIntNTy(bits), v));
}

llvm::Value* from_bits(llvm::IRBuilder<>& b, DType to, llvm::Value* bits) {
  llvm::Type* st = shaped(b, storage_type(b.getContext(), to), bits);
  return from_storage(b, to, b.CreateBitCast(bits, st));
}

}  // namespace

llvm::Value* emit_cast(llvm::IRBuilder<>& b, DType from, DType to, llvm::Value* v) {
  if (from == to) return v;
  if (to == DType::Bool) {
    // `a != 0`; a NaN is non-zero.
    if (is_float(from)) return b.CreateFCmpUNE(v, llvm::ConstantFP::get(v->getType(), 0.0));
    return b.CreateICmpNE(v, int_const(v->getType(), 0));
  }
  if (is_float(from)) return is_float(to) ? float_to_float(b, to, v) : float_to_int(b, to, v);
  return is_float(to) ? int_to_float(b, from, to, v) : int_to_int(b, from, to, v);
}

llvm::Value* emit_bitcast(llvm::IRBuilder<>& b, DType from, DType to, llvm::Value* v) {
  if (from == to) return v;
  return from_bits(b, to, to_bits(b, from, v));
}

}  // namespace tessel::cpu::detail
