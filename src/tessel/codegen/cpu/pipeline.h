// From loop IR kernels to LLVM module, optimised module and machine code
// (internal).
#pragma once

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
void optimize_module(llvm::Module& m, llvm::TargetMachine& tm, int opt_level);
// Object file or assembly text.
std::string emit_machine_code(llvm::Module& m, llvm::TargetMachine& tm, llvm::CodeGenFileType type);
std::string module_text(const llvm::Module& m);

}  // namespace tessel::cpu::detail
