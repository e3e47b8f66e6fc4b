// From loop IR kernels to LLVM module, optimised module and machine code
// (internal).
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include "tessel/codegen/cpu/target.h"
#include "tessel/loop/ir.h"

namespace tessel::cpu::detail {

// One module with one function per kernel, verified.
std::unique_ptr<llvm::Module> build_module(llvm::LLVMContext& ctx, const std::vector<loop::Kernel>& kernels,
                                           llvm::TargetMachine& tm);
// Prepares a module for `tm` (triple, data layout, function target attributes).
void set_target(llvm::Module& m, llvm::TargetMachine& tm);
// The new pass manager's default pipeline of the target's opt level.
// `on_function`, when set, is called as each function ends its
// simplification ("llvm simplify", the inliner's walk over the functions)
// and as it reaches the vectorizer ("llvm vectorize", the per-function
// optimisation after that walk), with that name.
void optimize_module(llvm::Module& m, llvm::TargetMachine& tm, int opt_level,
                     const std::function<void(const char* step)>& on_function = {});
// Object file or assembly text. `on_function`, when set, is called as each
// function's machine code is done.
std::string emit_machine_code(llvm::Module& m, llvm::TargetMachine& tm, llvm::CodeGenFileType type,
                              const std::function<void()>& on_function = {});
std::string module_text(const llvm::Module& m);

}  // namespace tessel::cpu::detail
