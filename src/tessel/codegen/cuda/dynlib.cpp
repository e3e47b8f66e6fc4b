#include "tessel/codegen/cuda/dynlib.h"

#include <dlfcn.h>

#include <cstdlib>

#include "tessel/support/error.h"
#include "tessel/support/env.h"

namespace tessel::cuda::detail {

void* DynamicLibrary::symbol(const char* name) const {
  void* p = ::dlsym(handle, name);
  TS_CHECK(p != nullptr, path, " has no symbol ", name);
  return p;
}

DynamicLibrary open_first(const std::vector<std::string>& candidates, std::string* errors) {
  DynamicLibrary lib;
  for (const std::string& c : candidates) {
    if (void* h = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL)) {
      lib.handle = h;
      lib.path = c;
      return lib;
    }
    const char* e = ::dlerror();
    if (errors) *errors += str_cat(errors->empty() ? "" : "; ", e ? e : c + ": cannot open");
  }
  return lib;
}

std::vector<std::string> cuda_library_candidates(const char* env_override, const std::vector<std::string>& names,
                                                 bool toolkit_folders) {
  if (auto p = env(env_override)) return {*p};
  std::vector<std::string> out = names;
  if (!toolkit_folders) return out;
  std::vector<std::string> roots;
  for (const char* v : {"CUDA_HOME", "CUDA_PATH"})
    if (auto r = env(v)) roots.push_back(*r);
  roots.push_back("/usr/local/cuda");
  for (const std::string& root : roots)
    for (const char* sub : {"/lib64/", "/lib/", "/targets/x86_64-linux/lib/"})
      for (const std::string& n : names) out.push_back(root + sub + n);
  return out;
}

}  // namespace tessel::cuda::detail
