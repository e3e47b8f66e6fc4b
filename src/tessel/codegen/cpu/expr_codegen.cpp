#include <cstdint>

#include "tessel/codegen/cpu/arith.h"
#include "tessel/codegen/cpu/cast.h"
#include "tessel/codegen/cpu/emitter.h"
#include "tessel/codegen/cpu/intrinsics.h"
#include "tessel/codegen/cpu/llvm_types.h"
#include "tessel/support/error.h"

namespace tessel::cpu::detail {

using loop::BinaryOp;
using loop::Expr;
using loop::ExprKind;
using loop::ExprNode;

namespace {

// The loop IR FloatImm in its register form (f16/bf16 rounded like a store).
llvm::Value* float_imm(llvm::LLVMContext& ctx, DType t, double v) {
  llvm::Type* ty = value_type(ctx, t);
  switch (t) {
    case DType::F64: return llvm::ConstantFP::get(ty, v);
    case DType::F16: return llvm::ConstantFP::get(ty, f16_bits_to_f32(f32_to_f16_bits(static_cast<float>(v))));
    case DType::BF16: return llvm::ConstantFP::get(ty, bf16_bits_to_f32(f32_to_bf16_bits(static_cast<float>(v))));
    default: return llvm::ConstantFP::get(ty, static_cast<float>(v));
  }
}

}  // namespace

Val varying(llvm::Value* v) { return lanes_of(v) == 0 ? scalar(v) : Val{v, nullptr, 0, std::nullopt}; }

Val KernelEmitter::emit_scalar_expr(const Expr& e, const char* what) {
  Val v = emit_expr(e);
  TS_CHECK(lanes_of(v.v) == 0, "cpu codegen: ", what, " varies across the lanes of vectorized loop ", lane_var_);
  return v;
}

Val KernelEmitter::emit_expr(const Expr& e) {
  TS_CHECK(e.defined(), "cpu codegen: undefined expression in kernel ", kernel_.name);
  const ExprNode& n = *e;
  switch (n.kind) {
    case ExprKind::IntImm:
      return scalar(int_const(value_type(ctx_, n.dtype), static_cast<uint64_t>(n.int_value)));
    case ExprKind::FloatImm: return scalar(float_imm(ctx_, n.dtype, n.float_value));
    case ExprKind::Var: {
      Val v = lookup(n.name);
      TS_CHECK(v.v->getType()->getScalarType() == value_type(ctx_, n.dtype), "cpu codegen: variable ", n.name,
               " is used as ", dtype_name(n.dtype), " but bound to another type");
      return v;
    }
    case ExprKind::Unary: {
      Val a = emit_expr(n.args[0]);
      if (n.unary == loop::UnaryOp::Neg && n.dtype == DType::I64) return index_neg(a);
      return varying(emit_unary(b_, n.unary, n.dtype, a.v));
    }
    case ExprKind::Binary: return emit_binary_expr(e);
    case ExprKind::Select: {
      llvm::Value* c = emit_expr(n.args[0]).v;
      // A lane-varying select runs each arm that loads under its lanes'
      // mask (arm_mask_, see emit_load): the loads of the lanes the other
      // arm takes do not touch memory (a depthwise convolution's border
      // taps read past the row unclamped).
      llvm::Value* t = nullptr;
      llvm::Value* f = nullptr;
      if (lanes_of(c) != 0) {
        llvm::Value* outer = arm_mask_;
        if (loads_memory(n.args[1])) arm_mask_ = outer ? b_.CreateAnd(outer, c) : c;
        t = emit_expr(n.args[1]).v;
        arm_mask_ = outer;
        if (loads_memory(n.args[2])) {
          llvm::Value* not_c = b_.CreateNot(c);
          arm_mask_ = outer ? b_.CreateAnd(outer, not_c) : not_c;
        }
        f = emit_expr(n.args[2]).v;
        arm_mask_ = outer;
      } else {
        t = emit_expr(n.args[1]).v;
        f = emit_expr(n.args[2]).v;
      }
      match_lanes(b_, t, f);
      if (lanes_of(c) != 0) {
        t = splat(b_, t, lanes_of(c));
        f = splat(b_, f, lanes_of(c));
      }
      return varying(b_.CreateSelect(c, t, f));
    }
    case ExprKind::Cast:
      return varying(emit_cast(b_, n.args[0].dtype(), n.dtype, emit_expr(n.args[0]).v));
    case ExprKind::Bitcast:
      return varying(emit_bitcast(b_, n.args[0].dtype(), n.dtype, emit_expr(n.args[0]).v));
    case ExprKind::Load: return emit_load(n);
    case ExprKind::Call: return emit_call_expr(n);
  }
  fail("cpu codegen: unknown expression kind");
}

Val KernelEmitter::emit_binary_expr(const Expr& e) {
  const ExprNode& n = *e;
  const DType t = n.args[0].dtype();
  if (t == DType::I64 && lanes_ != 0) {
    // Divisions, remainders and clamps of lane-varying indices, and
    // comparisons of them (a padded convolution's bounds checks), in i32
    // where they fit; affine arithmetic keeps its base + stride form.
    const bool compare = n.dtype == DType::Bool;
    const bool nonaffine = n.binary == BinaryOp::FloorDiv || n.binary == BinaryOp::FloorMod ||
                           n.binary == BinaryOp::Min || n.binary == BinaryOp::Max;
    if ((compare || nonaffine) && lane_varying(e)) {
      if (compare && fits_i32(n.args[0]) && fits_i32(n.args[1]))
        return varying(emit_binary(b_, n.binary, DType::I32, emit_i32(n.args[0]), emit_i32(n.args[1])));
      if (nonaffine && fits_i32(e)) return narrow_index(e);
    }
  }
  Val x = emit_expr(n.args[0]);
  Val y = emit_expr(n.args[1]);
  if (t == DType::I64) {
    // Index arithmetic keeps the base + stride * lane form where it can.
    if (n.binary == BinaryOp::Add) return index_add(x, y, false);
    if (n.binary == BinaryOp::Sub) return index_add(x, y, true);
    if (n.binary == BinaryOp::Mul) return index_mul(x, y);
  }
  return varying(emit_binary(b_, n.binary, t, x.v, y.v));
}

Val KernelEmitter::emit_call_expr(const ExprNode& n) {
  TS_CHECK(!n.args.empty(), "cpu codegen: call to ", n.name, " without arguments");
  const DType arg_type = n.args[0].dtype();
  std::vector<llvm::Value*> args;
  for (const Expr& a : n.args) {
    TS_CHECK(a.dtype() == arg_type, "cpu codegen: arguments of ", n.name, " differ in type");
    args.push_back(emit_expr(a).v);
  }
  return varying(emit_intrinsic(b_, n.name, n.dtype, arg_type, std::move(args)));
}

bool KernelEmitter::loads_memory(const Expr& e) const {
  if (e->kind == ExprKind::Load) return true;
  for (const Expr& a : e->args)
    if (loads_memory(a)) return true;
  return false;
}

// ---- 32-bit index arithmetic ------------------------------------------------------

std::optional<loop::Interval> KernelEmitter::range_of(const Expr& e) const { return loop::bounds_of(e, bounds_); }

bool KernelEmitter::fits_i32(const Expr& e) const { return loop::fits_int32(e, bounds_); }

// Whether `e` differs between the lanes of the vectorized loop: it reads a
// variable bound to a vector.
bool KernelEmitter::lane_varying(const Expr& e) const {
  if (e->kind == ExprKind::Var) return lanes_of(lookup(e->name).v) != 0;
  for (const Expr& a : e->args)
    if (lane_varying(a)) return true;
  return false;
}

// `e` (fits_i32) in i32: a vector where it varies across the lanes. The
// operators const_bounds bounds; anything else is emitted in i64 and
// truncated (it fits).
llvm::Value* KernelEmitter::emit_i32(const Expr& e) {
  int64_t c = 0;
  if (loop::as_const_int(e, &c)) return b_.getInt32(static_cast<uint32_t>(c));
  const bool bounded_op = e->kind == ExprKind::Binary &&
                          (e->binary == BinaryOp::Add || e->binary == BinaryOp::Sub || e->binary == BinaryOp::Mul ||
                           e->binary == BinaryOp::FloorDiv || e->binary == BinaryOp::FloorMod ||
                           e->binary == BinaryOp::Min || e->binary == BinaryOp::Max);
  if (!bounded_op) {
    llvm::Value* v = emit_expr(e).v;
    return b_.CreateTrunc(v, with_lanes(b_.getInt32Ty(), lanes_of(v)));
  }
  llvm::Value* x = emit_i32(e->args[0]);
  llvm::Value* y = emit_i32(e->args[1]);
  match_lanes(b_, x, y);
  switch (e->binary) {
    case BinaryOp::Add: return b_.CreateNSWAdd(x, y);
    case BinaryOp::Sub: return b_.CreateNSWSub(x, y);
    case BinaryOp::Mul: return b_.CreateNSWMul(x, y);
    case BinaryOp::FloorDiv: case BinaryOp::FloorMod: {
      // Floor and truncation agree on a non-negative dividend and a
      // positive divisor (const_bounds bounds only constant divisors).
      const std::optional<loop::Interval> a = range_of(e->args[0]), d = range_of(e->args[1]);
      if (a->lo >= 0 && d->lo > 0) return e->binary == BinaryOp::FloorDiv ? b_.CreateUDiv(x, y) : b_.CreateURem(x, y);
      return emit_binary(b_, e->binary, DType::I32, x, y);
    }
    default: return emit_binary(b_, e->binary, DType::I32, x, y);
  }
}

Val KernelEmitter::narrow_index(const Expr& e) {
  llvm::Value* v = emit_i32(e);
  return varying(b_.CreateSExt(v, with_lanes(b_.getInt64Ty(), lanes_of(v))));
}

// ---- index arithmetic on base + stride * lane values ---------------------------

Val KernelEmitter::index_const(int64_t v) { return scalar(b_.getInt64(static_cast<uint64_t>(v))); }

Val KernelEmitter::index_add(const Val& x, const Val& y, bool subtract) {
  llvm::Value* a = x.v;
  llvm::Value* c = y.v;
  match_lanes(b_, a, c);
  Val r = varying(subtract ? b_.CreateSub(a, c) : b_.CreateAdd(a, c));
  if (x.base && y.base && lanes_of(r.v) != 0) {
    r.base = subtract ? b_.CreateSub(x.base, y.base) : b_.CreateAdd(x.base, y.base);
    r.stride = static_cast<int64_t>(subtract ? static_cast<uint64_t>(x.stride) - static_cast<uint64_t>(y.stride)
                                             : static_cast<uint64_t>(x.stride) + static_cast<uint64_t>(y.stride));
  }
  return r;
}

Val KernelEmitter::index_mul(const Val& x, const Val& y) {
  llvm::Value* a = x.v;
  llvm::Value* c = y.v;
  match_lanes(b_, a, c);
  Val r = varying(b_.CreateMul(a, c));
  if (lanes_of(r.v) == 0 || !x.base || !y.base) return r;
  // (base + s * lane) * k stays affine only for a constant k.
  auto* kx = llvm::dyn_cast<llvm::ConstantInt>(x.base);
  auto* ky = llvm::dyn_cast<llvm::ConstantInt>(y.base);
  if (x.stride == 0 && kx) {
    r.base = b_.CreateMul(x.base, y.base);
    r.stride = static_cast<int64_t>(static_cast<uint64_t>(y.stride) * kx->getZExtValue());
  } else if (y.stride == 0 && ky) {
    r.base = b_.CreateMul(x.base, y.base);
    r.stride = static_cast<int64_t>(static_cast<uint64_t>(x.stride) * ky->getZExtValue());
  }
  return r;
}

Val KernelEmitter::index_neg(const Val& x) {
  Val r = varying(b_.CreateNeg(x.v));
  if (x.base && lanes_of(r.v) != 0) {
    r.base = b_.CreateNeg(x.base);
    r.stride = static_cast<int64_t>(0 - static_cast<uint64_t>(x.stride));
  }
  return r;
}

}  // namespace tessel::cpu::detail
