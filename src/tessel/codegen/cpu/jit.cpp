#include "tessel/codegen/cpu/jit.h"

#include <cmath>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/Object/ObjectFile.h>
#include <llvm/Support/MemoryBuffer.h>

#include "tessel/codegen/cpu/target.h"
#include "tessel/support/error.h"

namespace tessel::cpu {

struct KernelLibrary::Impl {
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::string object;
  bool from_cache = false;
  std::unordered_map<std::string, KernelFn> kernels;
};

KernelLibrary::KernelLibrary(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
KernelLibrary::~KernelLibrary() = default;

KernelFn KernelLibrary::lookup(const std::string& kernel_name) const {
  auto it = impl_->kernels.find(kernel_name);
  TS_CHECK(it != impl_->kernels.end(), "cpu codegen: no kernel named ", kernel_name, " in this library");
  return it->second;
}

bool KernelLibrary::loaded_from_cache() const { return impl_->from_cache; }
const std::string& KernelLibrary::object_file_bytes() const { return impl_->object; }

namespace detail {

namespace {

template <class T>
void check(llvm::Expected<T>& e, const char* what) {
  if (!e) fail("cpu codegen: ", what, ": ", llvm::toString(e.takeError()));
}

void check(llvm::Error e, const char* what) {
  if (e) fail("cpu codegen: ", what, ": ", llvm::toString(std::move(e)));
}

// What LLVM may call from generated code: memory intrinsics, fmod for float
// Mod, and the libm rounding functions a CPU without SSE4.1/FMA needs.
// Nothing else in the process is visible to kernels.
llvm::orc::SymbolMap runtime_symbols(llvm::orc::LLJIT& jit) {
  const std::pair<const char*, void*> table[] = {
      {"memset", reinterpret_cast<void*>(&::memset)},
      {"memcpy", reinterpret_cast<void*>(&::memcpy)},
      {"memmove", reinterpret_cast<void*>(&::memmove)},
      {"fmod", reinterpret_cast<void*>(static_cast<double (*)(double, double)>(&::fmod))},
      {"fmodf", reinterpret_cast<void*>(static_cast<float (*)(float, float)>(&::fmodf))},
      {"floor", reinterpret_cast<void*>(static_cast<double (*)(double)>(&::floor))},
      {"floorf", reinterpret_cast<void*>(static_cast<float (*)(float)>(&::floorf))},
      {"ceil", reinterpret_cast<void*>(static_cast<double (*)(double)>(&::ceil))},
      {"ceilf", reinterpret_cast<void*>(static_cast<float (*)(float)>(&::ceilf))},
      {"trunc", reinterpret_cast<void*>(static_cast<double (*)(double)>(&::trunc))},
      {"truncf", reinterpret_cast<void*>(static_cast<float (*)(float)>(&::truncf))},
      {"rint", reinterpret_cast<void*>(static_cast<double (*)(double)>(&::rint))},
      {"rintf", reinterpret_cast<void*>(static_cast<float (*)(float)>(&::rintf))},
      {"fma", reinterpret_cast<void*>(static_cast<double (*)(double, double, double)>(&::fma))},
      {"fmaf", reinterpret_cast<void*>(static_cast<float (*)(float, float, float)>(&::fmaf))},
  };
  llvm::orc::SymbolMap map;
  for (const auto& [name, addr] : table)
    map[jit.mangleAndIntern(name)] = {llvm::orc::ExecutorAddr::fromPtr(addr), llvm::JITSymbolFlags::Exported};
  return map;
}

// ORC reports some failures (e.g. which symbols were missing) only to the
// session's error reporter; they are collected here for the tessel::Error.
// The reporter is an LLVM callback, so it must not throw.
struct SessionErrors {
  std::mutex mutex;
  std::string text;
};

void watch_session_errors(llvm::orc::LLJIT& jit, const std::shared_ptr<SessionErrors>& errors) {
  jit.getExecutionSession().setErrorReporter([errors](llvm::Error e) {
    std::string msg = llvm::toString(std::move(e));
    try {
      std::lock_guard<std::mutex> lock(errors->mutex);
      errors->text += (errors->text.empty() ? "" : "; ") + msg;
    } catch (...) {
      // Losing the detail is better than unwinding through LLVM.
    }
  });
}

std::unique_ptr<llvm::orc::LLJIT> make_jit() {
  init_llvm();
  auto jtmb = llvm::orc::JITTargetMachineBuilder::detectHost();
  check(jtmb, "host detection");
  auto jit = llvm::orc::LLJITBuilder()
                 .setJITTargetMachineBuilder(std::move(*jtmb))
                 .setLinkProcessSymbolsByDefault(false)
                 // Kernels have no static initialisers, so no platform (which
                 // would want the process' symbols) is needed.
                 .setPlatformSetUp(llvm::orc::setUpInactivePlatform)
                 .create();
  check(jit, "creating the JIT");
  std::unique_ptr<llvm::orc::LLJIT> j = std::move(*jit);
  check(j->getMainJITDylib().define(llvm::orc::absoluteSymbols(runtime_symbols(*j))), "registering runtime symbols");
  return j;
}

std::vector<std::string> defined_functions(const std::string& bytes) {
  auto obj = llvm::object::ObjectFile::createObjectFile(llvm::MemoryBufferRef(bytes, "tessel_kernels.o"));
  check(obj, "reading the kernel object");
  std::vector<std::string> names;
  for (const llvm::object::SymbolRef& sym : (*obj)->symbols()) {
    auto flags = sym.getFlags();
    auto type = sym.getType();
    auto name = sym.getName();
    if (!flags || !type || !name) {
      if (!flags) llvm::consumeError(flags.takeError());
      if (!type) llvm::consumeError(type.takeError());
      if (!name) llvm::consumeError(name.takeError());
      continue;
    }
    const bool exported = (*flags & llvm::object::SymbolRef::SF_Global) && !(*flags & llvm::object::SymbolRef::SF_Undefined);
    if (exported && *type == llvm::object::SymbolRef::ST_Function) names.push_back(name->str());
  }
  return names;
}

}  // namespace

std::unique_ptr<KernelLibrary> load_object_file(std::string object_bytes, bool from_cache) {
  auto impl = std::make_unique<KernelLibrary::Impl>();
  impl->jit = make_jit();
  impl->from_cache = from_cache;
  auto errors = std::make_shared<SessionErrors>();
  watch_session_errors(*impl->jit, errors);
  const std::vector<std::string> names = defined_functions(object_bytes);
  check(impl->jit->addObjectFile(llvm::MemoryBuffer::getMemBufferCopy(object_bytes, "tessel_kernels.o")),
        "adding the kernel object to the JIT");
  for (const std::string& name : names) {
    auto addr = impl->jit->lookup(name);
    if (!addr) {
      const std::string what = llvm::toString(addr.takeError());
      std::lock_guard<std::mutex> lock(errors->mutex);
      fail("cpu codegen: linking the kernels: ", errors->text.empty() ? what : errors->text,
           " (the JIT resolves only the runtime symbols tessel registers)");
    }
    impl->kernels[name] = addr->toPtr<KernelFn>();
  }
  impl->object = std::move(object_bytes);
  return std::make_unique<KernelLibrary>(std::move(impl));
}

}  // namespace detail
}  // namespace tessel::cpu
