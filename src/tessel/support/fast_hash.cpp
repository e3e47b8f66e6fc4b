#include "tessel/support/fast_hash.h"

#include <cstring>

namespace tessel {

namespace {

constexpr uint64_t kPrime1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kPrime2 = 0xC2B2AE3D27D4EB4Full;

uint64_t load64(const unsigned char* p) {
  uint64_t w;
  std::memcpy(&w, p, 8);  // little-endian hosts only, like the rest of tessel's file formats
  return w;
}

// One lane step: every input bit reaches the high bits through the multiply
// and comes back down through the shift.
uint64_t mix(uint64_t h, uint64_t w) {
  h = (h ^ w) * kPrime1;
  return h ^ (h >> 31);
}

uint64_t finish(uint64_t h) {
  h ^= h >> 33;
  h *= kPrime2;
  h ^= h >> 29;
  h *= kPrime1;
  return h ^ (h >> 32);
}

}  // namespace

uint64_t fast_hash64(const void* data, size_t n, uint64_t seed) {
  const auto* p = static_cast<const unsigned char*>(data);
  uint64_t lane[4] = {seed + kPrime1, seed ^ kPrime2, seed - kPrime1, ~seed};
  size_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int k = 0; k < 4; ++k) lane[k] = mix(lane[k], load64(p + i + 8 * k));
  uint64_t h = n * kPrime2;
  for (int k = 0; k < 4; ++k) h = mix(h, lane[k]);
  for (; i + 8 <= n; i += 8) h = mix(h, load64(p + i));
  uint64_t tail = 0;
  for (size_t k = 0; i + k < n; ++k) tail |= static_cast<uint64_t>(p[i + k]) << (8 * k);
  return finish(mix(h, tail ^ (n - i)));
}

}  // namespace tessel
