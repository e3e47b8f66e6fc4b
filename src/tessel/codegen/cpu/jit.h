// Loading object files into an ORC JIT that resolves only the runtime symbols
// tessel registers (internal).
#pragma once

#include <memory>
#include <string>

#include "tessel/codegen/cpu/cpu_codegen.h"

namespace tessel::cpu::detail {

// Links the object and resolves every function it defines, so that a missing
// symbol is reported here rather than at the first lookup.
std::unique_ptr<KernelLibrary> load_object_file(std::string object_bytes, bool from_cache);

}  // namespace tessel::cpu::detail
