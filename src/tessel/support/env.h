// Environment switches (TESSEL_CUDA_TMA=0, TESSEL_CUDA_FLASH_WGMMA=1, ...):
// the A/B switches of the code generators, read where their option is set.
#pragma once

#include <cstdlib>
#include <cstring>

namespace tessel {

// Whether environment variable `name` is set to exactly `value`.
inline bool env_is(const char* name, const char* value) {
  const char* v = std::getenv(name);
  return v && std::strcmp(v, value) == 0;
}

}  // namespace tessel
