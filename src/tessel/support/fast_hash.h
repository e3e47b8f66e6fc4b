// A fast 64-bit hash of bytes for checksums and cache keys over large data
// (model weights: hundreds of MB). Not cryptographic: it detects damage and
// tells different inputs apart, it does not resist a forger. Four
// independent multiply-xor lanes over 8-byte words keep the multiplier busy,
// so it runs at several GB/s where byte-wise FNV-1a runs at about one byte
// per cycle.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace tessel {

uint64_t fast_hash64(const void* data, size_t n, uint64_t seed = 0);
inline uint64_t fast_hash64(std::string_view s, uint64_t seed = 0) { return fast_hash64(s.data(), s.size(), seed); }

}  // namespace tessel
