#include "tessel/codegen/cpu/cache.h"

#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <llvm/ADT/StringExtras.h>
#include <llvm/Config/llvm-config.h>
#include <llvm/Support/SHA256.h>

namespace tessel::cpu::detail {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'T', 'S', 'L', 'C', 'P', 'U', 'O', '1'};
constexpr size_t kHeaderSize = 8 + 8 + 32;
// Bumped whenever the generated code changes for the same input.
constexpr const char* kCodegenRevision = "cpu-codegen-1";

std::array<uint8_t, 32> sha256(const std::string& s) {
  return llvm::SHA256::hash(llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t*>(s.data()), s.size()));
}

// Length-prefixed so that field boundaries cannot shift between keys.
void add_field(llvm::SHA256& h, const std::string& s) {
  const uint64_t n = s.size();
  h.update(llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t*>(&n), sizeof n));
  h.update(s);
}

std::string header_for(const std::string& payload) {
  std::string h(kMagic, sizeof kMagic);
  const uint64_t n = payload.size();
  for (int i = 0; i < 8; ++i) h.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  const std::array<uint8_t, 32> digest = sha256(payload);
  h.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  return h;
}

void warn(const std::string& what) { std::fprintf(stderr, "warning: kernel cache: %s\n", what.c_str()); }

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
  for (const loop::Kernel& k : kernels) add_field(h, k.name);
  add_field(h, o.cache_key_text);
  const std::array<uint8_t, 32> digest = h.final();
  return llvm::toHex(llvm::ArrayRef<uint8_t>(digest), /*LowerCase=*/true);
}

std::string cache_path(const std::string& dir, const std::string& key) {
  return (fs::path(dir) / "cpu" / (key + ".o")).string();
}

std::optional<std::string> cache_read(const std::string& dir, const std::string& key) {
  std::ifstream in(cache_path(dir, key), std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string file = buf.str();
  if (file.size() < kHeaderSize || file.compare(0, sizeof kMagic, kMagic, sizeof kMagic) != 0) return std::nullopt;
  std::string payload = file.substr(kHeaderSize);
  if (file.compare(0, kHeaderSize, header_for(payload)) != 0) return std::nullopt;
  return payload;
}

void cache_write(const std::string& dir, const std::string& key, const std::string& object) {
  const fs::path folder = fs::path(dir) / "cpu";
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) return warn("cannot create " + folder.string() + ": " + ec.message());
  std::random_device rd;
  const fs::path tmp = folder / (key + ".o.tmp." + std::to_string(::getpid()) + "." + std::to_string(rd()));
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << header_for(object) << object;
    out.flush();
    if (!out) {
      fs::remove(tmp, ec);
      return warn("cannot write " + tmp.string());
    }
  }
  fs::rename(tmp, folder / (key + ".o"), ec);
  if (ec) {
    warn("cannot rename " + tmp.string() + ": " + ec.message());
    fs::remove(tmp, ec);
  }
}

}  // namespace tessel::cpu::detail
