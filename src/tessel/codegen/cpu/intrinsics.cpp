#include "tessel/codegen/cpu/intrinsics.h"

#include <algorithm>

#include <llvm/IR/Intrinsics.h>

#include "tessel/codegen/cpu/arith.h"
#include "tessel/codegen/cpu/llvm_types.h"
#include "tessel/support/error.h"

namespace tessel::cpu::detail {

namespace {

struct IntrinsicInfo {
  const char* name;
  llvm::Intrinsic::ID id;  // not_intrinsic: open-coded (isnan, isinf)
  size_t arity;
  bool needs_rounding;     // inexact in f32 for f16/bf16 values
};

constexpr IntrinsicInfo kIntrinsics[] = {
    {"sqrt", llvm::Intrinsic::sqrt, 1, true},
    {"fabs", llvm::Intrinsic::fabs, 1, false},
    {"floor", llvm::Intrinsic::floor, 1, false},
    {"ceil", llvm::Intrinsic::ceil, 1, false},
    {"trunc", llvm::Intrinsic::trunc, 1, false},
    {"rint", llvm::Intrinsic::rint, 1, false},
    {"fma", llvm::Intrinsic::fma, 3, true},
    {"copysign", llvm::Intrinsic::copysign, 2, false},
    {"isnan", llvm::Intrinsic::not_intrinsic, 1, false},
    {"isinf", llvm::Intrinsic::not_intrinsic, 1, false},
};

const IntrinsicInfo& find(const std::string& name) {
  for (const IntrinsicInfo& i : kIntrinsics)
    if (name == i.name) return i;
  fail("cpu codegen: call to '", name, "' is not a primitive intrinsic (run math expansion first)");
}

void same_shape(llvm::IRBuilder<>& b, std::vector<llvm::Value*>& args) {
  int lanes = 0;
  for (llvm::Value* a : args) lanes = std::max(lanes, lanes_of(a));
  for (llvm::Value*& a : args) a = splat(b, a, lanes);
}

}  // namespace

llvm::Value* emit_intrinsic(llvm::IRBuilder<>& b, const std::string& name, DType result, DType arg_type,
                            std::vector<llvm::Value*> args) {
  const IntrinsicInfo& info = find(name);
  TS_CHECK(args.size() == info.arity, "cpu codegen: ", name, " takes ", info.arity, " arguments, got ", args.size());
  TS_CHECK(is_float(arg_type), "cpu codegen: ", name, " needs float arguments, got ", dtype_name(arg_type));
  same_shape(b, args);
  llvm::Value* x = args[0];
  if (info.id == llvm::Intrinsic::not_intrinsic) {
    TS_CHECK(result == DType::Bool, "cpu codegen: ", name, " returns bool");
    if (name == "isnan") return b.CreateFCmpUNO(x, x);
    llvm::Value* magnitude = b.CreateUnaryIntrinsic(llvm::Intrinsic::fabs, x);
    return b.CreateFCmpOEQ(magnitude, llvm::ConstantFP::getInfinity(x->getType()));
  }
  TS_CHECK(result == arg_type, "cpu codegen: ", name, " returns its argument type");
  llvm::Value* r = b.CreateIntrinsic(info.id, {x->getType()}, args);
  return info.needs_rounding ? round_narrow(b, result, r) : r;
}

}  // namespace tessel::cpu::detail
