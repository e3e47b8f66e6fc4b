// The on-disk object cache: <dir>/cpu/<key>.o (internal).
//
// Files are support/cache_file.h's with the magic "TSLCPUO1" (payload: the
// object file): a damaged file reads as missing, writes are atomic.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "tessel/codegen/cpu/target.h"
#include "tessel/loop/ir.h"

namespace tessel::cpu::detail {

// Hex SHA-256 over everything the object depends on (computable before
// codegen): the kernels' names and structural hashes, o.cache_key_text, the
// target and the tessel, code generator and LLVM versions.
std::string cache_key(const CodegenOptions& o, const ResolvedTarget& t, const std::vector<loop::Kernel>& kernels);
std::string cache_path(const std::string& dir, const std::string& key);
// The cached object, or nothing when missing or damaged.
std::optional<std::string> cache_read(const std::string& dir, const std::string& key);
// Failure to write is reported on stderr as a warning, never an error.
void cache_write(const std::string& dir, const std::string& key, const std::string& object);

}  // namespace tessel::cpu::detail
