#include "tessel/support/env.h"

#include <algorithm>
#include <cstdlib>

#include "tessel/support/error.h"

namespace tessel {

const std::vector<EnvSetting>& env_settings() {
  static const std::vector<EnvSetting> s = {
      {"TESSEL_CACHE_DIR", "folder of the kernel, cubin and model caches (default ~/.cache/tessel)"},
      {"HOME", "the default cache folder's parent when TESSEL_CACHE_DIR is unset"},
      {"TESSEL_MODEL_CACHE_MAX_BYTES", "size bound of the whole-model cache in bytes (default 8 GiB)"},
      {"TESSEL_TIMINGS", "1: print the compiler's phase timings on stderr"},
      {"TESSEL_NVRTC", "path of libnvrtc to load instead of searching the CUDA toolkit"},
      {"TESSEL_LIBCUDA", "path of the CUDA driver library to load instead of libcuda.so.1"},
      {"CUDA_HOME", "CUDA toolkit root searched for NVRTC and its headers"},
      {"CUDA_PATH", "CUDA toolkit root searched after CUDA_HOME"},
  };
  return s;
}

std::optional<std::string> env(std::string_view name) {
  const auto& s = env_settings();
  TS_CHECK(std::any_of(s.begin(), s.end(), [&](const EnvSetting& e) { return name == e.name; }),
           "internal: environment variable ", name, " is not in support/env.cpp's list");
  // The only getenv in tessel.
  const char* v = std::getenv(std::string(name).c_str());
  if (v == nullptr || *v == '\0') return std::nullopt;
  return std::string(v);
}

}  // namespace tessel
