// The LLVM code generator for CPUs: loop IR kernels -> LLVM IR -> O3 -> one
// object file -> the runtime's object loader (runtime/object_loader.h). This header is free of LLVM includes so that the
// rest of tessel does not see LLVM.
//
// Kernels follow the calling convention of loop/ir.h:
//   int32_t kernel(void* const* buffers, const int64_t* syms, int64_t begin, int64_t end);
// All kernels passed to one compile_kernels() call go into one LLVM module and
// one object file (one compile per model). Errors are tessel::Error.
//
// Thread safety: compile_kernels/load_object may run on several threads at
// once; a KernelLibrary's functions may be called concurrently.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "tessel/loop/ir.h"

namespace tessel::cpu {

using KernelFn = int32_t (*)(void* const* buffers, const int64_t* syms, int64_t begin, int64_t end);

struct CodegenOptions {
  std::string cpu = "host";       // an LLVM CPU name, or "host"
  std::string features = "host";  // "+avx2,-avx512f,...", or "host"
  int opt_level = 3;              // 0..3
  // On-disk object cache: used when cache_dir is set. The key hashes the
  // kernels (their names and loop::structural_hash), cpu, features, opt
  // level, the tessel, code generator and LLVM versions, and
  // cache_key_text: anything else the caller wants the object keyed on.
  std::string cache_dir;
  std::string cache_key_text;
  // Progress of a compile (not of a cache hit), on the compiling thread:
  // on_step when a step over all the kernels starts ("llvm simplify",
  // "llvm vectorize", "llvm emit"), then on_kernel as each kernel gets
  // through it. Neither is part of the cache key.
  std::function<void(const char* step, size_t kernels)> on_step;
  std::function<void()> on_kernel;
};

// Owns the loaded object that holds the kernels' code: a KernelFn stays valid as long
// as its library lives.
class KernelLibrary {
 public:
  struct Impl;
  explicit KernelLibrary(std::unique_ptr<Impl> impl);
  ~KernelLibrary();
  KernelLibrary(const KernelLibrary&) = delete;
  KernelLibrary& operator=(const KernelLibrary&) = delete;

  // The kernel's entry point; tessel::Error when the object has no such kernel.
  KernelFn lookup(const std::string& kernel_name) const;
  bool loaded_from_cache() const;
  // The relocatable object the kernels were loaded from (for artifacts).
  const std::string& object_file_bytes() const;

 private:
  std::unique_ptr<Impl> impl_;
};

std::unique_ptr<KernelLibrary> compile_kernels(const std::vector<loop::Kernel>& kernels, const CodegenOptions& o);

// Loads an object produced by compile_kernels (object_file_bytes()) for this
// process. The loader resolves only the few runtime symbols tessel provides
// (kernel_runtime_symbols()).
std::unique_ptr<KernelLibrary> load_object(const std::string& object_bytes);

// Text forms for `tessel inspect`: the module after the optimisation pipeline
// of o.opt_level (0: as generated), and the target assembly.
std::string emit_llvm_ir(const std::vector<loop::Kernel>& kernels, const CodegenOptions& o);
std::string emit_asm(const std::vector<loop::Kernel>& kernels, const CodegenOptions& o);

// For tests and debugging: optimises, emits and loads textual LLVM IR.
std::unique_ptr<KernelLibrary> compile_llvm_ir_text(const std::string& ir_text, const CodegenOptions& o);

// The host, as LLVM names it: "znver3"; "+avx,+avx2,-avx512f,..." (sorted).
std::string host_cpu_name();
std::string host_cpu_features();
// The features an LLVM CPU name implies ("+avx2,+fma,..." as host_cpu_features;
// "host": host_cpu_features()). tessel::Error for a name that is not an
// x86-64 CPU.
std::string cpu_features_for(const std::string& cpu);

}  // namespace tessel::cpu
