// The LLVM target: one-time initialisation, host detection and target
// machines for a CodegenOptions (internal).
#pragma once

#include <memory>
#include <string>

#include <llvm/Target/TargetMachine.h>

#include "tessel/codegen/cpu/cpu_codegen.h"

namespace tessel::cpu::detail {

// Initialises the native target, its assembly printer and parser (once per process).
void init_llvm();

// The options with "host" replaced by what the host is.
struct ResolvedTarget {
  std::string triple;
  std::string cpu;
  std::string features;
  int opt_level = 3;
};
ResolvedTarget resolve_target(const CodegenOptions& o);

// A fresh target machine (they are not shared between threads).
std::unique_ptr<llvm::TargetMachine> make_target_machine(const ResolvedTarget& t);

}  // namespace tessel::cpu::detail
