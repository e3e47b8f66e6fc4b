// Translation of one loop IR kernel into an LLVM function (internal).
//
// The emitter walks statements in order with an IRBuilder. Inside a
// Vectorized loop of width W (`lanes_ == W`) it widens: a value that depends
// on the loop variable becomes a <W x T> vector, everything else stays
// scalar and is splatted where it meets a vector. Index values additionally
// track the form `base + stride * lane` (Val::base/stride) so that memory
// accesses can pick a vector load, a gather or a scalar access.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Module.h>

#include "tessel/loop/ir.h"
#include "tessel/loop/simplify.h"

namespace tessel::cpu::detail {

struct Val {
  llvm::Value* v = nullptr;  // scalar, or a vector of lanes_ lanes
  // When set: v equals base + stride * lane for every lane (base is scalar).
  llvm::Value* base = nullptr;
  int64_t stride = 0;
  // Where the value is a bound variable's: its inclusive range, if known
  // (32-bit index arithmetic, below).
  std::optional<loop::Interval> range;
  bool uniform() const { return base != nullptr && stride == 0; }
};

// A scalar value (its own base, stride 0).
inline Val scalar(llvm::Value* v) { return Val{v, v, 0, std::nullopt}; }
// A value of unknown form across the lanes (or a scalar).
Val varying(llvm::Value* v);

class KernelEmitter {
 public:
  KernelEmitter(llvm::Module& m, const loop::Kernel& k);
  // Emits the kernel's function (named after the kernel) into the module.
  void emit();

 private:
  struct BufferInfo {
    llvm::Value* base = nullptr;         // pointer to element 0
    std::vector<llvm::Value*> strides;  // row-major element strides (i64)
  };

  // ---- kernel_emitter.cpp: function frame, scopes
  void emit_prologue();
  void check_loop_structure(const loop::Stmt& s, int depth, int* parallel_loops) const;
  BufferInfo make_buffer_info(const loop::Buffer& buf, llvm::Value* base);
  const BufferInfo& buffer(const loop::Buffer& buf) const;
  // Binds `v` (its range, if any, goes into bounds_ while it is innermost).
  void bind(const std::string& name, Val v);
  void unbind(const std::string& name);
  Val lookup(const std::string& name) const;
  llvm::AllocaInst* entry_alloca(llvm::Type* elem, uint64_t count);

  // ---- expr_codegen.cpp
  Val emit_expr(const loop::Expr& e);
  Val emit_scalar_expr(const loop::Expr& e, const char* what);
  Val emit_binary_expr(const loop::Expr& e);
  Val emit_call_expr(const loop::ExprNode& n);
  Val index_add(const Val& x, const Val& y, bool subtract);
  Val index_mul(const Val& x, const Val& y);
  Val index_neg(const Val& x);
  Val index_const(int64_t v);
  // 32-bit index arithmetic in vectorized loops: a lane-varying i64
  // expression whose every subexpression the bound variables keep within
  // int32 is computed in i32 lanes (twice the lanes a vector instruction,
  // and x86 has no 64-bit vector division by a constant nor 64-bit
  // multiply-high) and sign-extended where i64 is needed.
  std::optional<loop::Interval> range_of(const loop::Expr& e) const;
  bool fits_i32(const loop::Expr& e) const;
  bool lane_varying(const loop::Expr& e) const;
  bool loads_memory(const loop::Expr& e) const;
  llvm::Value* emit_i32(const loop::Expr& e);
  Val narrow_index(const loop::Expr& e);

  // ---- memory.cpp
  Val flat_index(const loop::Buffer& buf, const std::vector<loop::Expr>& indices);
  llvm::Value* lane_pointers(const loop::Buffer& buf, const std::vector<loop::Expr>& indices, const Val& idx);
  Val emit_load(const loop::ExprNode& n);
  void emit_store(const loop::StmtNode& s);
  llvm::Value* all_lanes_mask() const;

  // ---- stmt_codegen.cpp
  void emit_stmt(const loop::Stmt& s);
  void emit_for(const loop::StmtNode& s);
  void emit_counted_loop(const loop::StmtNode& s, llvm::Value* lo, llvm::Value* hi, llvm::Value* min);
  void emit_vectorized(const loop::StmtNode& s);
  void emit_unrolled(const loop::StmtNode& s);
  void emit_if(const loop::StmtNode& s);
  void emit_let(const loop::StmtNode& s);
  void emit_allocate(const loop::StmtNode& s);
  void emit_assert(const loop::StmtNode& s);
  void emit_masked_if(const loop::StmtNode& s, llvm::Value* cond);

  llvm::Module& module_;
  llvm::LLVMContext& ctx_;
  const loop::Kernel& kernel_;
  llvm::IRBuilder<> b_;
  llvm::Function* fn_ = nullptr;
  llvm::BasicBlock* entry_ = nullptr;
  llvm::Value* begin_ = nullptr;  // the calling convention's [begin, end)
  llvm::Value* end_ = nullptr;

  std::unordered_map<std::string, std::vector<Val>> vars_;  // a stack per name (shadowing)
  loop::Bounds bounds_;  // the innermost binding's range of each variable that has one
  std::unordered_map<const loop::Buffer*, BufferInfo> buffers_;
  int next_assert_ = 0;  // pre-order number of the next Assert

  // Widening state: lanes_ == 0 outside Vectorized loops; mask_ (a <lanes x i1>,
  // or null for all lanes) is the set of lanes a lane-varying If lets through.
  int lanes_ = 0;
  std::string lane_var_;
  llvm::Value* mask_ = nullptr;
  // The lanes of the select arms being emitted (null: all), which loads
  // with unclamped indices honour (emit_load).
  llvm::Value* arm_mask_ = nullptr;
};

}  // namespace tessel::cpu::detail
