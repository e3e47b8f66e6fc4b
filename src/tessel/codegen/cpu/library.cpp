#include "tessel/codegen/cpu/library.h"

#include <unordered_map>

#include "tessel/runtime/object_loader.h"
#include "tessel/support/error.h"

namespace tessel::cpu {

// The code lives in the runtime's LoadedObject (no LLVM JIT): the same
// loader runs freshly compiled kernels and artifacts on a machine without
// LLVM, so both take one path.
struct KernelLibrary::Impl {
  std::unique_ptr<LoadedObject> code;
  std::string object;
  bool from_cache = false;
};

KernelLibrary::KernelLibrary(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KernelLibrary::~KernelLibrary() = default;

KernelFn KernelLibrary::lookup(const std::string& kernel_name) const {
  void* fn = impl_->code->lookup(kernel_name);
  TS_CHECK(fn != nullptr, "cpu codegen: no kernel named ", kernel_name, " in this library");
  return reinterpret_cast<KernelFn>(fn);
}

bool KernelLibrary::loaded_from_cache() const { return impl_->from_cache; }
const std::string& KernelLibrary::object_file_bytes() const { return impl_->object; }

namespace detail {

std::unique_ptr<KernelLibrary> load_object_file(std::string object_bytes, bool from_cache) {
  auto impl = std::make_unique<KernelLibrary::Impl>();
  impl->code = std::make_unique<LoadedObject>(object_bytes);
  impl->from_cache = from_cache;
  impl->object = std::move(object_bytes);
  return std::make_unique<KernelLibrary>(std::move(impl));
}

}  // namespace detail
}  // namespace tessel::cpu
