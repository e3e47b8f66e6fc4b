// SHA-256 (FIPS 180-4) for cache keys and file checksums, without LLVM, so
// that code built with TESSEL_WITH_LLVM=OFF (the CUDA backend) can use it.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace tessel {

class Sha256 {
 public:
  Sha256();
  void update(std::string_view data);
  // Hashes the length (u64, little endian) before the bytes, so that field
  // boundaries cannot shift between two keys built from several fields.
  void update_field(std::string_view field);
  std::array<uint8_t, 32> digest();  // finishes; the object is spent afterwards

 private:
  void block(const uint8_t* p);
  std::array<uint32_t, 8> h_;
  uint8_t buf_[64];
  size_t buffered_ = 0;
  uint64_t total_ = 0;
};

std::array<uint8_t, 32> sha256(std::string_view data);
std::string to_hex(const std::array<uint8_t, 32>& digest);

}  // namespace tessel
