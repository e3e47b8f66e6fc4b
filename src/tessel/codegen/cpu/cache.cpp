#include "tessel/codegen/cpu/cache.h"

#include <array>
#include <filesystem>

#include <llvm/ADT/StringExtras.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/Support/SHA256.h>

#include "tessel/loop/hash.h"
#include "tessel/support/cache_file.h"

namespace tessel::cpu::detail {

namespace fs = std::filesystem;

namespace {

constexpr const char* kMagic = "TSLCPUO1";
// Bumped whenever the generated code changes for the same input.
constexpr const char* kCodegenRevision = "cpu-codegen-1";

// Length-prefixed so that field boundaries cannot shift between keys.
void add_field(llvm::SHA256& h, const std::string& s) {
  const uint64_t n = s.size();
  h.update(llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t*>(&n), sizeof n));
  h.update(s);
}

}  // namespace

std::string cache_key(const CodegenOptions& o, const ResolvedTarget& t, const std::vector<loop::Kernel>& kernels) {
  llvm::SHA256 h;
  add_field(h, kCodegenRevision);
  add_field(h, TESSEL_VERSION);
  add_field(h, LLVM_VERSION_STRING);
  add_field(h, t.triple);
  add_field(h, t.cpu);
  add_field(h, t.features);
  add_field(h, std::to_string(t.opt_level));
  // Each kernel by its entry symbol and its structural hash (loop/hash.h),
  // which covers everything the code depends on but the names of buffers and
  // variables (and costs less than printing the kernels, which this did).
  for (const loop::Kernel& k : kernels) {
    add_field(h, k.name);
    add_field(h, loop::structural_hash(k).hex());
  }
  add_field(h, o.cache_key_text);
  const std::array<uint8_t, 32> digest = h.final();
  return llvm::toHex(llvm::ArrayRef<uint8_t>(digest), /*LowerCase=*/true);
}

std::string cache_path(const std::string& dir, const std::string& key) {
  return (fs::path(dir) / "cpu" / (key + ".o")).string();
}

std::optional<std::string> cache_read(const std::string& dir, const std::string& key) {
  return read_cache_file(cache_path(dir, key), kMagic);
}

void cache_write(const std::string& dir, const std::string& key, const std::string& object) {
  write_cache_file(cache_path(dir, key), kMagic, object);
}

}  // namespace tessel::cpu::detail
