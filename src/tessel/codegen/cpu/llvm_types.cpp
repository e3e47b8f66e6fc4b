#include "tessel/codegen/cpu/llvm_types.h"

#include "tessel/support/error.h"

namespace tessel::cpu::detail {

llvm::Type* value_type(llvm::LLVMContext& ctx, DType t) {
  switch (t) {
    case DType::Bool: return llvm::Type::getInt1Ty(ctx);
    case DType::I8: case DType::U8: return llvm::Type::getInt8Ty(ctx);
    case DType::I16: case DType::U16: return llvm::Type::getInt16Ty(ctx);
    case DType::I32: case DType::U32: return llvm::Type::getInt32Ty(ctx);
    case DType::I64: case DType::U64: return llvm::Type::getInt64Ty(ctx);
    case DType::F16: case DType::BF16: case DType::F32: return llvm::Type::getFloatTy(ctx);
    case DType::F64: return llvm::Type::getDoubleTy(ctx);
    default: fail("cpu codegen: type ", dtype_name(t), " is not supported");
  }
}

llvm::Type* storage_type(llvm::LLVMContext& ctx, DType t) {
  switch (t) {
    case DType::Bool: return llvm::Type::getInt8Ty(ctx);
    case DType::F16: return llvm::Type::getHalfTy(ctx);
    case DType::BF16: return llvm::Type::getInt16Ty(ctx);
    default: return value_type(ctx, t);
  }
}

bool is_narrow_float(DType t) { return t == DType::F16 || t == DType::BF16; }

llvm::Type* with_lanes(llvm::Type* scalar, int lanes) {
  if (lanes == 0) return scalar;
  return llvm::FixedVectorType::get(scalar, static_cast<unsigned>(lanes));
}

int lanes_of(const llvm::Value* v) {
  if (auto* vt = llvm::dyn_cast<llvm::FixedVectorType>(v->getType())) return static_cast<int>(vt->getNumElements());
  return 0;
}

llvm::Value* splat(llvm::IRBuilder<>& b, llvm::Value* v, int lanes) {
  if (lanes == 0 || lanes_of(v) != 0) return v;
  return b.CreateVectorSplat(static_cast<unsigned>(lanes), v);
}

void match_lanes(llvm::IRBuilder<>& b, llvm::Value*& x, llvm::Value*& y) {
  const int lanes = std::max(lanes_of(x), lanes_of(y));
  x = splat(b, x, lanes);
  y = splat(b, y, lanes);
}

llvm::Value* int_const(llvm::Type* ty, uint64_t v) {
  const unsigned bits = ty->getScalarSizeInBits();
  if (bits < 64) v &= (uint64_t{1} << bits) - 1;  // APInt wants the value to fit
  return llvm::ConstantInt::get(ty, v, /*isSigned=*/false);
}

llvm::Value* from_storage(llvm::IRBuilder<>& b, DType t, llvm::Value* stored) {
  llvm::Type* vt = with_lanes(value_type(b.getContext(), t), lanes_of(stored));
  switch (t) {
    case DType::Bool: return b.CreateICmpNE(stored, int_const(stored->getType(), 0));
    case DType::F16: return b.CreateFPExt(stored, vt);
    case DType::BF16: {
      // bf16 is the high half of an f32: widening is exact.
      llvm::Type* i32 = with_lanes(b.getInt32Ty(), lanes_of(stored));
      llvm::Value* wide = b.CreateShl(b.CreateZExt(stored, i32), int_const(i32, 16));
      return b.CreateBitCast(wide, vt);
    }
    default: return stored;
  }
}

llvm::Value* to_storage(llvm::IRBuilder<>& b, DType t, llvm::Value* v) {
  const int lanes = lanes_of(v);
  llvm::Type* st = with_lanes(storage_type(b.getContext(), t), lanes);
  switch (t) {
    case DType::Bool: return b.CreateZExt(v, st);
    // Narrow values are kept exactly representable, so these narrowings are exact.
    case DType::F16: return b.CreateFPTrunc(v, st);
    case DType::BF16: {
      llvm::Type* i32 = with_lanes(b.getInt32Ty(), lanes);
      return b.CreateTrunc(b.CreateLShr(b.CreateBitCast(v, i32), int_const(i32, 16)), st);
    }
    default: return v;
  }
}

}  // namespace tessel::cpu::detail
