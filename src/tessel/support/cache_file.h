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
#include <string_view>

namespace tessel {

// The payload, or nothing when the file is missing or damaged. `magic` is 8 characters.
std::optional<std::string> read_cache_file(const std::string& path, const std::string& magic);

// Creates the parent folder as needed. Failing to write is a warning on
// stderr ("warning: kernel cache: ..."), never an error: a cache is optional.
void write_cache_file(const std::string& path, const std::string& magic, const std::string& payload);

// The write underneath: `bytes` to a unique temporary name beside `path`
// (creating the parent folder), renamed into place, so a reader sees the old
// file or the new one, never half of one. Throws tessel::Error saying what
// failed, for files that are not optional (the tuning database).
void write_file_atomic(const std::string& path, std::string_view bytes);

}  // namespace tessel
