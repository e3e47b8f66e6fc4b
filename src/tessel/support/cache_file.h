// Files of the on-disk kernel caches (CPU objects, CUDA cubins).
//
// Layout: magic (8 bytes) | payload length (u64, little endian) |
// SHA-256 of the payload (32 bytes) | payload. A file that does not match its
// header (truncated, damaged, another format) reads as missing. Files are
// written to a unique temporary name in the same folder and renamed into
// place, so processes sharing a cache folder see a whole file or none.
#pragma once

#include <optional>
#include <string>

namespace tessel {

// The payload, or nothing when the file is missing or damaged. `magic` is 8 characters.
std::optional<std::string> read_cache_file(const std::string& path, const std::string& magic);

// Creates the parent folder as needed. Failing to write is a warning on
// stderr ("warning: kernel cache: ..."), never an error: a cache is optional.
void write_cache_file(const std::string& path, const std::string& magic, const std::string& payload);

}  // namespace tessel
