// Loading the kernels' relocatable object (ELF64, x86-64) into executable
// memory without LLVM: what an artifact needs at run time is this loader, not
// a JIT. The code generator emits position-independent code for the small
// code model (codegen/cpu/target.cpp), so the object's relocations are
// PC-relative references between its own sections and calls to the few
// runtime functions below; both are resolved here.
//
// Layout of one loaded object (one anonymous mapping):
//
//   [ executable sections | call stubs ] [ read-only/data sections | GOT ]
//    read + execute                       read only (read + write if the
//                                         object has writable sections)
//
// A call to a runtime function goes through a stub (`jmp *slot(%rip)`) and
// its address lies in a GOT slot, since the function itself may be more
// than 2 GiB away from the mapping. Memory is never writable and executable
// at once.
//
// Every offset, size, index and relocation is checked: a damaged or foreign
// object is a tessel::Error naming what is wrong, never a crash (the artifact
// fuzz target feeds it arbitrary bytes).
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace tessel {

// The functions generated code may call (memory intrinsics, the libm
// rounding functions, fmod for float Mod) and where they are. Nothing else
// in the process is visible to kernels.
const std::map<std::string, void*>& kernel_runtime_symbols();

class LoadedObject {
 public:
  // Copies and links `elf`; tessel::Error when it is malformed, of another
  // machine, or needs a symbol outside kernel_runtime_symbols().
  explicit LoadedObject(std::string_view elf);
  ~LoadedObject();
  LoadedObject(const LoadedObject&) = delete;
  LoadedObject& operator=(const LoadedObject&) = delete;

  // A global function the object defines, or nullptr.
  void* lookup(const std::string& name) const;
  // Every global function it defines, by name.
  const std::map<std::string, void*>& functions() const { return functions_; }
  // Bytes mapped (code, data, stubs; page-rounded).
  size_t mapped_bytes() const { return size_; }

 private:
  void* base_ = nullptr;
  size_t size_ = 0;
  std::map<std::string, void*> functions_;
};

}  // namespace tessel
