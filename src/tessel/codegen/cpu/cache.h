// The on-disk object cache: <dir>/cpu/<key>.o (internal).
//
// File layout: "TSLCPUO1" | payload length (u64, little endian) |
// SHA-256 of the payload (32 bytes) | payload (the object file). A file that
// does not match its header is treated as missing. Files are written to a
// unique temporary name in the same folder and renamed into place, so
// processes sharing the cache see a whole file or none.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessel/codegen/cpu/target.h"
#include "tessel/loop/ir.h"

namespace tessel::cpu::detail {

// Hex SHA-256 over everything the object depends on (computable before codegen).
std::string cache_key(const CodegenOptions& o, const ResolvedTarget& t, const std::vector<loop::Kernel>& kernels);
std::string cache_path(const std::string& dir, const std::string& key);
// The cached object, or nothing when missing or damaged.
std::optional<std::string> cache_read(const std::string& dir, const std::string& key);
// Failure to write is reported on stderr as a warning, never an error.
void cache_write(const std::string& dir, const std::string& key, const std::string& object);

}  // namespace tessel::cpu::detail
