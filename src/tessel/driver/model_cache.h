// The whole-model compile cache: <cache_dir>/model/<key>.tsx holds the
// artifact (driver/artifact.h) of a model compiled on this machine, so that
// compiling it again (a warm run) is one artifact load: no ONNX import, no
// pass pipeline, no lowering, no LLVM.
//
// The key is a hash of everything the artifact depends on:
//   - the model file's bytes (fast_hash64 with two seeds: 128 bits);
//   - what was asked: a mode ("bench" binds every symbol, "compile" only
//     --dim; with the disabled passes and the --precision), the --dim
//     bindings, and each --input file's name and bytes (given inputs that
//     steer shapes are folded into the model);
//   - the compiler: the running executable's GNU build id (else a hash of its
//     file), so that any change to tessel or its LLVM linkage misses;
//   - the CPU: LLVM's name for it and its feature list;
//   - with --tuning-db, a digest of the database's records for the machine
//     the kernels are for (this CPU, or device 0 with --target cuda): the
//     schedules they give change the kernels.
// A hit is still checked like any artifact (checksum, format version, CPU
// features); one that fails to load is reported and compiled again.
//
// Why key by the model bytes rather than by the kernels (the object cache in
// codegen/cpu, which stays in place for misses): reaching the kernels needs
// the import, the pipeline and the lowering, 2-8 s on the transformer
// models; hashing the file takes about 0.1 s per 500 MB.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "tessel/driver/options.h"

namespace tessel {

// "" when there is no cache folder (cache_dir() is empty).
std::string model_cache_key(const std::string& model_path, const std::string& mode,
                            const std::map<std::string, int64_t>& dims,
                            const std::vector<std::pair<std::string, std::string>>& input_files);

// The mode for a key: `what` ("prepare", "compile") and the options that
// change the artifact: disabled passes and the precision.
std::string model_cache_mode(const std::string& what, const DriverOptions& o);

// The artifact file for a key, when one is there.
std::optional<std::string> model_cache_lookup(const std::string& key);

// Stores an artifact under the key (atomically: a temporary file renamed into
// place). Failing to write is a warning on stderr: the cache is optional.
// Entries are the size of the model's weights, so the folder is kept under
// model_cache_budget_bytes(): the least recently used entries (by mtime;
// a lookup hit refreshes it) are removed after each store, and an artifact
// larger than the whole budget is not stored.
void model_cache_store(const std::string& key, const std::string& artifact_bytes);

// $TESSEL_MODEL_CACHE_MAX_BYTES, else 8 GiB.
uint64_t model_cache_budget_bytes();

// A cache file that did not load: warns and removes it.
void model_cache_reject(const std::string& key, const std::string& why);

// The identity of the running tessel build (for keys).
std::string compiler_build_id();

}  // namespace tessel
