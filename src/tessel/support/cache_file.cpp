#include "tessel/support/cache_file.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "tessel/support/error.h"
#include "tessel/support/sha256.h"

namespace tessel {

namespace fs = std::filesystem;

namespace {

constexpr size_t kMagicSize = 8;
constexpr size_t kHeaderSize = kMagicSize + 8 + 32;

std::string header_for(const std::string& magic, const std::string& payload) {
  TS_CHECK(magic.size() == kMagicSize, "cache file magic must be ", kMagicSize, " characters, got '", magic, "'");
  std::string h = magic;
  const uint64_t n = payload.size();
  for (int i = 0; i < 8; ++i) h.push_back(static_cast<char>((n >> (8 * i)) & 0xFF));
  const std::array<uint8_t, 32> digest = sha256(payload);
  h.append(reinterpret_cast<const char*>(digest.data()), digest.size());
  return h;
}

void warn(const std::string& what) { std::fprintf(stderr, "warning: kernel cache: %s\n", what.c_str()); }

}  // namespace

std::optional<std::string> read_cache_file(const std::string& path, const std::string& magic) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string file = buf.str();
  if (file.size() < kHeaderSize || file.compare(0, kMagicSize, magic) != 0) return std::nullopt;
  std::string payload = file.substr(kHeaderSize);
  if (file.compare(0, kHeaderSize, header_for(magic, payload)) != 0) return std::nullopt;
  return payload;
}

void write_cache_file(const std::string& path, const std::string& magic, const std::string& payload) {
  try {
    write_file_atomic(path, header_for(magic, payload) + payload);
  } catch (const Error& e) {
    warn(e.what());
  }
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  const fs::path target(path);
  std::error_code ec;
  fs::create_directories(target.parent_path(), ec);
  TS_CHECK(!ec, "cannot create ", target.parent_path().string(), ": ", ec.message());
  std::random_device rd;
  fs::path tmp = target;
  tmp += ".tmp." + std::to_string(::getpid()) + "." + std::to_string(rd());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      fs::remove(tmp, ec);
      fail("cannot write ", tmp.string());
    }
  }
  fs::rename(tmp, target, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove(tmp, ec);
    fail("cannot rename ", tmp.string(), ": ", why);
  }
}

}  // namespace tessel
