// Kernel libraries: an object file from the code generator (or the kernel
// cache) loaded by the runtime's object loader (internal).
#pragma once

#include <memory>
#include <string>

#include "tessel/codegen/cpu/cpu_codegen.h"

namespace tessel::cpu::detail {

// Loads the object and resolves every function it defines, so that a
// missing runtime symbol is reported here rather than at the first lookup.
std::unique_ptr<KernelLibrary> load_object_file(std::string object_bytes, bool from_cache);

}  // namespace tessel::cpu::detail
