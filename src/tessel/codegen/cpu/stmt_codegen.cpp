#include "tessel/codegen/cpu/emitter.h"
#include "tessel/codegen/cpu/llvm_types.h"
#include "tessel/support/error.h"

namespace tessel::cpu::detail {

using loop::ForKind;
using loop::Stmt;
using loop::StmtKind;
using loop::StmtNode;

namespace {

// Bodies of unrolled loops are copied; beyond this a loop stays a loop.
constexpr int64_t kMaxUnroll = 1024;
// Locals live on the stack of whichever thread runs the kernel.
constexpr uint64_t kMaxLocalBytes = uint64_t{1} << 20;

}  // namespace

void KernelEmitter::emit_stmt(const Stmt& s) {
  if (!s.defined()) return;
  switch (s->kind) {
    case StmtKind::For: emit_for(*s); return;
    case StmtKind::Store: emit_store(*s); return;
    case StmtKind::Let: emit_let(*s); return;
    case StmtKind::If: emit_if(*s); return;
    case StmtKind::Seq:
      for (const Stmt& c : s->body) emit_stmt(c);
      return;
    case StmtKind::Allocate: emit_allocate(*s); return;
    case StmtKind::Assert: emit_assert(*s); return;
    case StmtKind::Contract:
      fail("cpu codegen: contract statements are for GPU schedules; the CPU lowers contractions with gemm_nest");
    case StmtKind::Attention:
      fail("cpu codegen: attention statements are for GPU schedules; the CPU keeps the Attention node's own lowering");
  }
  fail("cpu codegen: unknown statement kind");
}

void KernelEmitter::emit_for(const StmtNode& s) {
  switch (s.for_kind) {
    case ForKind::Serial: {
      llvm::Value* min = emit_scalar_expr(s.min, "a loop bound").v;
      llvm::Value* extent = emit_scalar_expr(s.extent, "a loop bound").v;
      emit_counted_loop(s, b_.getInt64(0), extent, min);
      return;
    }
    case ForKind::Parallel: {
      // This call runs iterations [begin, end) of [0, extent).
      llvm::Value* min = emit_scalar_expr(s.min, "a loop bound").v;
      llvm::Value* extent = emit_scalar_expr(s.extent, "a loop bound").v;
      llvm::Value* lo = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smax, begin_, b_.getInt64(0));
      llvm::Value* hi = b_.CreateBinaryIntrinsic(llvm::Intrinsic::smin, end_, extent);
      emit_counted_loop(s, lo, hi, min);
      return;
    }
    case ForKind::Vectorized: emit_vectorized(s); return;
    case ForKind::Unrolled: emit_unrolled(s); return;
    case ForKind::GpuBlockX: case ForKind::GpuBlockY: case ForKind::GpuBlockZ:
    case ForKind::GpuThreadX: case ForKind::GpuThreadY: case ForKind::GpuThreadZ: case ForKind::GpuLanes:
      fail("cpu codegen: loop ", s.var, " is bound to ", loop::for_kind_name(s.for_kind),
           ", which has no meaning on a CPU");
  }
  fail("cpu codegen: unknown loop kind");
}

// for (i = lo; i < hi; ++i) { var = min + i; body }
void KernelEmitter::emit_counted_loop(const StmtNode& s, llvm::Value* lo, llvm::Value* hi, llvm::Value* min) {
  llvm::BasicBlock* pre = b_.GetInsertBlock();
  auto* header = llvm::BasicBlock::Create(ctx_, s.var + ".header", fn_);
  auto* body = llvm::BasicBlock::Create(ctx_, s.var + ".body", fn_);
  auto* exit = llvm::BasicBlock::Create(ctx_, s.var + ".exit", fn_);
  b_.CreateBr(header);

  b_.SetInsertPoint(header);
  llvm::PHINode* i = b_.CreatePHI(b_.getInt64Ty(), 2, s.var + ".i");
  i->addIncoming(lo, pre);
  b_.CreateCondBr(b_.CreateICmpSLT(i, hi), body, exit);

  b_.SetInsertPoint(body);
  llvm::Value* v = b_.CreateAdd(min, i, s.var);
  bind(s.var, Val{v, v, 0, loop::iteration_range(range_of(s.min), range_of(s.extent))});
  emit_stmt(s.body[0]);
  unbind(s.var);
  llvm::Value* next = b_.CreateAdd(i, b_.getInt64(1));
  i->addIncoming(next, b_.GetInsertBlock());
  b_.CreateBr(header);
  b_.SetInsertPoint(exit);
}

// A vectorized loop is one vector iteration: var = min + <0, 1, ..., W-1>.
void KernelEmitter::emit_vectorized(const StmtNode& s) {
  int64_t width = 0;
  TS_CHECK(loop::as_const_int(s.extent, &width), "cpu codegen: vectorized loop ", s.var,
           " needs a constant extent");
  TS_CHECK(width >= 1 && width <= 256, "cpu codegen: vectorized loop ", s.var, " has width ", width,
           " (1 to 256 supported)");
  TS_CHECK(lanes_ == 0, "cpu codegen: vectorized loop ", s.var, " is nested in vectorized loop ", lane_var_);
  llvm::Value* min = emit_scalar_expr(s.min, "a loop bound").v;
  const int lanes = static_cast<int>(width);
  llvm::Value* iota = b_.CreateStepVector(with_lanes(b_.getInt64Ty(), lanes));
  llvm::Value* v = b_.CreateAdd(splat(b_, min, lanes), iota, s.var);

  lanes_ = lanes;
  lane_var_ = s.var;
  bind(s.var, Val{v, min, 1, loop::iteration_range(range_of(s.min), range_of(s.extent))});
  emit_stmt(s.body[0]);
  unbind(s.var);
  lanes_ = 0;
  lane_var_.clear();
}

void KernelEmitter::emit_unrolled(const StmtNode& s) {
  int64_t extent = 0;
  TS_CHECK(loop::as_const_int(s.extent, &extent), "cpu codegen: unrolled loop ", s.var, " needs a constant extent");
  if (extent > kMaxUnroll) {
    llvm::Value* min = emit_scalar_expr(s.min, "a loop bound").v;
    emit_counted_loop(s, b_.getInt64(0), b_.getInt64(static_cast<uint64_t>(extent)), min);
    return;
  }
  llvm::Value* min = emit_scalar_expr(s.min, "a loop bound").v;
  // Every copy numbers its Asserts like the one body it copies.
  loop::Kernel body_only;
  body_only.body = s.body[0];
  const int first_assert = next_assert_;
  const int body_asserts = static_cast<int>(body_only.assert_messages().size());
  const std::optional<loop::Interval> range = loop::iteration_range(range_of(s.min), range_of(s.extent));
  for (int64_t k = 0; k < extent; ++k) {
    next_assert_ = first_assert;
    llvm::Value* v = b_.CreateAdd(min, b_.getInt64(static_cast<uint64_t>(k)), s.var);
    bind(s.var, Val{v, v, 0, range});
    emit_stmt(s.body[0]);
    unbind(s.var);
  }
  next_assert_ = first_assert + body_asserts;
}

void KernelEmitter::emit_if(const StmtNode& s) {
  llvm::Value* cond = emit_expr(s.value).v;
  if (lanes_of(cond) != 0) {
    emit_masked_if(s, cond);
    return;
  }
  auto* then_bb = llvm::BasicBlock::Create(ctx_, "then", fn_);
  auto* else_bb = llvm::BasicBlock::Create(ctx_, "else", fn_);
  auto* join = llvm::BasicBlock::Create(ctx_, "endif", fn_);
  b_.CreateCondBr(cond, then_bb, else_bb);
  b_.SetInsertPoint(then_bb);
  emit_stmt(s.body[0]);
  b_.CreateBr(join);
  b_.SetInsertPoint(else_bb);
  if (s.body.size() > 1) emit_stmt(s.body[1]);
  b_.CreateBr(join);
  b_.SetInsertPoint(join);
}

// A lane-varying condition runs both branches, each under its lane mask:
// stores are masked and loads do not touch memory for inactive lanes.
void KernelEmitter::emit_masked_if(const StmtNode& s, llvm::Value* cond) {
  llvm::Value* outer = mask_;
  mask_ = outer ? b_.CreateAnd(outer, cond) : cond;
  emit_stmt(s.body[0]);
  if (s.body.size() > 1) {
    llvm::Value* not_cond = b_.CreateNot(cond);
    mask_ = outer ? b_.CreateAnd(outer, not_cond) : not_cond;
    emit_stmt(s.body[1]);
  }
  mask_ = outer;
}

void KernelEmitter::emit_let(const StmtNode& s) {
  Val value = emit_expr(s.value);
  value.range = s.value.dtype() == DType::I64 ? range_of(s.value) : std::nullopt;
  bind(s.var, std::move(value));
  emit_stmt(s.body[0]);
  unbind(s.var);
}

void KernelEmitter::emit_allocate(const StmtNode& s) {
  const loop::Buffer& buf = *s.buffer;
  TS_CHECK(buf.scope == loop::BufferScope::Local, "cpu codegen: buffer ", buf.name,
           " is in GPU shared memory, which a CPU does not have");
  uint64_t count = 1;
  for (const loop::Expr& d : buf.shape) {
    int64_t n = 0;
    TS_CHECK(loop::as_const_int(d, &n) && n >= 0, "cpu codegen: local buffer ", buf.name, " needs a constant shape");
    count = static_cast<uint64_t>(checked_mul(static_cast<int64_t>(count), n));
  }
  llvm::Type* st = storage_type(ctx_, buf.dtype);
  const uint64_t bytes = count * module_.getDataLayout().getTypeAllocSize(st);
  TS_CHECK(bytes <= kMaxLocalBytes, "cpu codegen: local buffer ", buf.name, " needs ", bytes,
           " bytes, more than the ", kMaxLocalBytes, " a kernel may keep on the stack");
  TS_CHECK(!buffers_.count(&buf), "cpu codegen: buffer ", buf.name, " is allocated twice");
  buffers_[&buf] = make_buffer_info(buf, entry_alloca(st, count));
  emit_stmt(s.body[0]);
  buffers_.erase(&buf);
}

// A failed Assert returns 1 + its pre-order number. In a vectorized loop it
// fails when any active lane fails.
void KernelEmitter::emit_assert(const StmtNode& s) {
  const int index = next_assert_++;
  llvm::Value* ok = emit_expr(s.value).v;
  llvm::Value* failed = b_.CreateNot(ok);
  if (lanes_ != 0) {
    if (lanes_of(failed) == 0) failed = splat(b_, failed, lanes_);
    if (mask_) failed = b_.CreateAnd(failed, mask_);
    failed = b_.CreateOrReduce(failed);
  }
  auto* fail_bb = llvm::BasicBlock::Create(ctx_, "assert.fail", fn_);
  auto* cont = llvm::BasicBlock::Create(ctx_, "assert.ok", fn_);
  b_.CreateCondBr(failed, fail_bb, cont);
  b_.SetInsertPoint(fail_bb);
  b_.CreateRet(b_.getInt32(static_cast<uint32_t>(index + 1)));
  b_.SetInsertPoint(cont);
}

}  // namespace tessel::cpu::detail
