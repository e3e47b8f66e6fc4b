#include "tessel/codegen/cpu/arith.h"

#include "tessel/codegen/cpu/llvm_types.h"
#include "tessel/support/error.h"

namespace tessel::cpu::detail {

using loop::BinaryOp;
using loop::UnaryOp;

namespace {

llvm::Value* round_bf16(llvm::IRBuilder<>& b, llvm::Value* v) {
  llvm::Type* i32 = with_lanes(b.getInt32Ty(), lanes_of(v));
  llvm::Value* u = b.CreateBitCast(v, i32);
  // Round to nearest even: add 0x7FFF plus the lowest kept bit, drop 16 bits.
  llvm::Value* lsb = b.CreateAnd(b.CreateLShr(u, int_const(i32, 16)), int_const(i32, 1));
  llvm::Value* rounded = b.CreateAdd(u, b.CreateAdd(lsb, int_const(i32, 0x7FFF)));
  rounded = b.CreateAnd(rounded, int_const(i32, 0xFFFF0000u));
  // A NaN keeps its high bits and becomes quiet, so it cannot round to inf.
  llvm::Value* nan = b.CreateOr(b.CreateAnd(u, int_const(i32, 0xFFFF0000u)), int_const(i32, 0x00400000u));
  llvm::Value* bits = b.CreateSelect(b.CreateFCmpUNO(v, v), nan, rounded);
  return b.CreateBitCast(bits, v->getType());
}

// Integer division and remainder with the divisor made safe: x / 0 is 0 and
// x % 0 is 0 (loop IR defines them instead of trapping), INT_MIN / -1 wraps
// to INT_MIN and INT_MIN % -1 is 0.
struct DivRem {
  llvm::Value* quot;
  llvm::Value* rem;
};

DivRem safe_divrem(llvm::IRBuilder<>& b, bool is_signed, llvm::Value* x, llvm::Value* y) {
  llvm::Type* ty = x->getType();
  llvm::Value* zero = int_const(ty, 0);
  llvm::Value* one = int_const(ty, 1);
  llvm::Value* by_zero = b.CreateICmpEQ(y, zero);
  if (!is_signed || ty->getScalarSizeInBits() == 1) {
    llvm::Value* safe = b.CreateSelect(by_zero, one, y);
    return {b.CreateSelect(by_zero, zero, b.CreateUDiv(x, safe)), b.CreateURem(x, safe)};
  }
  llvm::Value* by_minus_one = b.CreateICmpEQ(y, int_const(ty, ~uint64_t{0}));
  llvm::Value* safe = b.CreateSelect(b.CreateOr(by_zero, by_minus_one), one, y);
  llvm::Value* quot = b.CreateSDiv(x, safe);  // x when the divisor was replaced
  quot = b.CreateSelect(by_minus_one, b.CreateSub(zero, x), quot);
  quot = b.CreateSelect(by_zero, zero, quot);
  return {quot, b.CreateSRem(x, safe)};  // x % 1 == 0 covers both special divisors
}

// Floor division/modulo: step the truncated result when the remainder is
// non-zero and its sign differs from the divisor's.
DivRem floor_divrem(llvm::IRBuilder<>& b, bool is_signed, llvm::Value* x, llvm::Value* y) {
  DivRem d = safe_divrem(b, is_signed, x, y);
  if (!is_signed) return d;
  llvm::Value* zero = int_const(x->getType(), 0);
  llvm::Value* adjust =
      b.CreateAnd(b.CreateICmpNE(d.rem, zero), b.CreateICmpSLT(b.CreateXor(d.rem, y), zero));
  return {b.CreateSelect(adjust, b.CreateSub(d.quot, int_const(x->getType(), 1)), d.quot),
          b.CreateSelect(adjust, b.CreateAdd(d.rem, y), d.rem)};
}

// Shift amounts outside [0, bits) give what the sign fill alone gives (as
// the reference BitShift): 0, or -1 for a negative value shifted right.
llvm::Value* emit_shift(llvm::IRBuilder<>& b, bool left, bool is_signed, llvm::Value* x, llvm::Value* y) {
  llvm::Type* ty = x->getType();
  llvm::Value* zero = int_const(ty, 0);
  llvm::Value* out_of_range = b.CreateICmpUGE(y, int_const(ty, ty->getScalarSizeInBits()));
  llvm::Value* amount = b.CreateSelect(out_of_range, zero, y);
  if (left) return b.CreateSelect(out_of_range, zero, b.CreateShl(x, amount));
  if (!is_signed) return b.CreateSelect(out_of_range, zero, b.CreateLShr(x, amount));
  llvm::Value* fill = b.CreateAShr(x, int_const(ty, ty->getScalarSizeInBits() - 1));
  return b.CreateSelect(out_of_range, fill, b.CreateAShr(x, amount));
}

llvm::Value* float_binary(llvm::IRBuilder<>& b, BinaryOp op, DType t, llvm::Value* x, llvm::Value* y) {
  switch (op) {
    case BinaryOp::Add: return round_narrow(b, t, b.CreateFAdd(x, y));
    case BinaryOp::Sub: return round_narrow(b, t, b.CreateFSub(x, y));
    case BinaryOp::Mul: return round_narrow(b, t, b.CreateFMul(x, y));
    case BinaryOp::Div: return round_narrow(b, t, b.CreateFDiv(x, y));
    case BinaryOp::Mod: return b.CreateFRem(x, y);  // fmod is exact
    case BinaryOp::Min: return b.CreateMinimum(x, y);
    case BinaryOp::Max: return b.CreateMaximum(x, y);
    case BinaryOp::Eq: return b.CreateFCmpOEQ(x, y);
    case BinaryOp::Ne: return b.CreateFCmpUNE(x, y);
    case BinaryOp::Lt: return b.CreateFCmpOLT(x, y);
    case BinaryOp::Le: return b.CreateFCmpOLE(x, y);
    case BinaryOp::Gt: return b.CreateFCmpOGT(x, y);
    case BinaryOp::Ge: return b.CreateFCmpOGE(x, y);
    case BinaryOp::FloorDiv: case BinaryOp::FloorMod:
    case BinaryOp::And: case BinaryOp::Or: case BinaryOp::Xor:
    case BinaryOp::Shl: case BinaryOp::Shr:
      break;  // the loop IR constructors refuse these for floats
  }
  fail("cpu codegen: integer-only binary op on ", dtype_name(t));
}

llvm::Value* int_binary(llvm::IRBuilder<>& b, BinaryOp op, DType t, llvm::Value* x, llvm::Value* y) {
  const bool s = is_signed_int(t);
  switch (op) {
    case BinaryOp::Add: return b.CreateAdd(x, y);
    case BinaryOp::Sub: return b.CreateSub(x, y);
    case BinaryOp::Mul: return b.CreateMul(x, y);
    case BinaryOp::Div: return safe_divrem(b, s, x, y).quot;
    case BinaryOp::Mod: return safe_divrem(b, s, x, y).rem;
    case BinaryOp::FloorDiv: return floor_divrem(b, s, x, y).quot;
    case BinaryOp::FloorMod: return floor_divrem(b, s, x, y).rem;
    case BinaryOp::Min:
      return b.CreateBinaryIntrinsic(s ? llvm::Intrinsic::smin : llvm::Intrinsic::umin, x, y);
    case BinaryOp::Max:
      return b.CreateBinaryIntrinsic(s ? llvm::Intrinsic::smax : llvm::Intrinsic::umax, x, y);
    case BinaryOp::And: return b.CreateAnd(x, y);
    case BinaryOp::Or: return b.CreateOr(x, y);
    case BinaryOp::Xor: return b.CreateXor(x, y);
    case BinaryOp::Shl: return emit_shift(b, true, s, x, y);
    case BinaryOp::Shr: return emit_shift(b, false, s, x, y);
    case BinaryOp::Eq: return b.CreateICmpEQ(x, y);
    case BinaryOp::Ne: return b.CreateICmpNE(x, y);
    case BinaryOp::Lt: return s ? b.CreateICmpSLT(x, y) : b.CreateICmpULT(x, y);
    case BinaryOp::Le: return s ? b.CreateICmpSLE(x, y) : b.CreateICmpULE(x, y);
    case BinaryOp::Gt: return s ? b.CreateICmpSGT(x, y) : b.CreateICmpUGT(x, y);
    case BinaryOp::Ge: return s ? b.CreateICmpSGE(x, y) : b.CreateICmpUGE(x, y);
  }
  fail("cpu codegen: unknown binary op");
}

}  // namespace

llvm::Value* round_narrow(llvm::IRBuilder<>& b, DType t, llvm::Value* v) {
  if (t == DType::BF16) return round_bf16(b, v);
  if (t != DType::F16) return v;
  // f32 -> f16 -> f32: the conversion instructions round to nearest even.
  llvm::Type* half = with_lanes(b.getHalfTy(), lanes_of(v));
  return b.CreateFPExt(b.CreateFPTrunc(v, half), v->getType());
}

llvm::Value* emit_unary(llvm::IRBuilder<>& b, loop::UnaryOp op, DType t, llvm::Value* a) {
  switch (op) {
    case UnaryOp::Neg: return is_float(t) ? b.CreateFNeg(a) : b.CreateNeg(a);
    case UnaryOp::Not: return b.CreateNot(a);
  }
  fail("cpu codegen: unknown unary op");
}

llvm::Value* emit_binary(llvm::IRBuilder<>& b, loop::BinaryOp op, DType t, llvm::Value* x, llvm::Value* y) {
  match_lanes(b, x, y);
  return is_float(t) ? float_binary(b, op, t, x, y) : int_binary(b, op, t, x, y);
}

}  // namespace tessel::cpu::detail
