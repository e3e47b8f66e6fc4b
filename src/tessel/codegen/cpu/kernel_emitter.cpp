#include "tessel/codegen/cpu/emitter.h"
#include "tessel/codegen/cpu/llvm_types.h"
#include "tessel/support/error.h"

namespace tessel::cpu::detail {

using loop::ForKind;
using loop::Stmt;
using loop::StmtKind;

KernelEmitter::KernelEmitter(llvm::Module& m, const loop::Kernel& k)
    : module_(m), ctx_(m.getContext()), kernel_(k), b_(m.getContext()) {}

void KernelEmitter::emit() {
  TS_CHECK(kernel_.body.defined(), "cpu codegen: kernel ", kernel_.name, " has no body");
  int parallel_loops = 0;
  check_loop_structure(kernel_.body, 0, &parallel_loops);
  TS_CHECK(parallel_loops <= 1, "cpu codegen: kernel ", kernel_.name, " has ", parallel_loops,
           " parallel loops; the calling convention splits only one");

  llvm::Type* ptr = b_.getPtrTy();
  llvm::Type* i64 = b_.getInt64Ty();
  auto* type = llvm::FunctionType::get(b_.getInt32Ty(), {ptr, ptr, i64, i64}, false);
  TS_CHECK(module_.getFunction(kernel_.name) == nullptr, "cpu codegen: two kernels are named ", kernel_.name);
  fn_ = llvm::Function::Create(type, llvm::Function::ExternalLinkage, kernel_.name, module_);
  TS_CHECK(fn_->getName() == kernel_.name, "cpu codegen: kernel name ", kernel_.name, " is taken");
  fn_->addFnAttr(llvm::Attribute::NoUnwind);
  const char* arg_names[] = {"buffers", "syms", "begin", "end"};
  for (unsigned i = 0; i < 4; ++i) fn_->getArg(i)->setName(arg_names[i]);
  begin_ = fn_->getArg(2);
  end_ = fn_->getArg(3);

  entry_ = llvm::BasicBlock::Create(ctx_, "entry", fn_);
  b_.SetInsertPoint(entry_);
  emit_prologue();
  emit_stmt(kernel_.body);
  b_.CreateRet(b_.getInt32(0));
}

// Binds the symbol parameters and the parameter buffers (pointer and strides).
void KernelEmitter::emit_prologue() {
  llvm::Value* syms = fn_->getArg(1);
  for (size_t i = 0; i < kernel_.syms.size(); ++i) {
    llvm::Value* p = b_.CreateConstGEP1_64(b_.getInt64Ty(), syms, i);
    llvm::Value* v = b_.CreateLoad(b_.getInt64Ty(), p, kernel_.syms[i]);
    bind(kernel_.syms[i], scalar(v));
  }
  llvm::Value* buffers = fn_->getArg(0);
  for (size_t i = 0; i < kernel_.params.size(); ++i) {
    const loop::Buffer& buf = *kernel_.params[i];
    TS_CHECK(buf.scope == loop::BufferScope::Param, "cpu codegen: kernel parameter ", buf.name, " is not a Param buffer");
    TS_CHECK(!buffers_.count(&buf), "cpu codegen: buffer ", buf.name, " is passed twice");
    llvm::Value* p = b_.CreateConstGEP1_64(b_.getPtrTy(), buffers, i);
    llvm::Value* base = b_.CreateLoad(b_.getPtrTy(), p, buf.name);
    buffers_[&buf] = make_buffer_info(buf, base);
  }
}

// The calling convention splits the kernel's one Parallel loop, so it must
// not be nested in another loop; GPU loop kinds have no CPU meaning.
void KernelEmitter::check_loop_structure(const Stmt& s, int depth, int* parallel_loops) const {
  if (!s.defined()) return;
  int inner = depth;
  if (s->kind == StmtKind::For) {
    if (s->for_kind == ForKind::Parallel) {
      TS_CHECK(depth == 0, "cpu codegen: parallel loop ", s->var, " is nested in another loop");
      ++*parallel_loops;
    }
    ++inner;
  }
  for (const Stmt& c : s->body) check_loop_structure(c, inner, parallel_loops);
}

KernelEmitter::BufferInfo KernelEmitter::make_buffer_info(const loop::Buffer& buf, llvm::Value* base) {
  storage_type(ctx_, buf.dtype);  // rejects types without a CPU representation
  BufferInfo info;
  info.base = base;
  info.strides.resize(buf.shape.size());
  llvm::Value* stride = b_.getInt64(1);
  for (size_t d = buf.shape.size(); d-- > 0;) {
    info.strides[d] = stride;
    stride = b_.CreateMul(stride, emit_scalar_expr(buf.shape[d], "a buffer shape").v);
  }
  return info;
}

const KernelEmitter::BufferInfo& KernelEmitter::buffer(const loop::Buffer& buf) const {
  auto it = buffers_.find(&buf);
  TS_CHECK(it != buffers_.end(), "cpu codegen: buffer ", buf.name, " is neither a parameter nor allocated here");
  return it->second;
}

namespace {

void set_bound(loop::Bounds& bounds, const std::string& name, const std::optional<loop::Interval>& range) {
  if (range) {
    bounds[name] = *range;
  } else {
    bounds.erase(name);
  }
}

}  // namespace

void KernelEmitter::bind(const std::string& name, Val v) {
  set_bound(bounds_, name, v.range);
  vars_[name].push_back(std::move(v));
}

void KernelEmitter::unbind(const std::string& name) {
  auto it = vars_.find(name);
  it->second.pop_back();
  if (it->second.empty()) {
    vars_.erase(it);
    bounds_.erase(name);
  } else {
    set_bound(bounds_, name, it->second.back().range);
  }
}

Val KernelEmitter::lookup(const std::string& name) const {
  auto it = vars_.find(name);
  TS_CHECK(it != vars_.end(), "cpu codegen: variable ", name, " is not bound in kernel ", kernel_.name);
  return it->second.back();
}

// Locals live in the entry block so that a loop around an Allocate does not
// grow the stack; 64-byte alignment suits full-width vector access.
llvm::AllocaInst* KernelEmitter::entry_alloca(llvm::Type* elem, uint64_t count) {
  llvm::IRBuilder<> eb(entry_, entry_->getFirstInsertionPt());
  llvm::AllocaInst* a = eb.CreateAlloca(llvm::ArrayType::get(elem, count));
  a->setAlignment(llvm::Align(64));
  return a;
}

}  // namespace tessel::cpu::detail
