#include "tessel/driver/model_cache.h"

#include <fcntl.h>
#include <link.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "tessel/driver/artifact.h"
#include "tessel/driver/options.h"
#include "tessel/driver/tuning.h"
#include "tessel/support/env.h"
#include "tessel/support/error.h"
#include "tessel/support/fast_hash.h"
#ifdef TESSEL_HAVE_LLVM
#include "tessel/codegen/cpu/cpu_codegen.h"
#endif

namespace tessel {

namespace fs = std::filesystem;

namespace {

// Bumped when what a key covers changes meaning.
constexpr const char* kModelCacheRevision = "model-cache-1";

// 128 bits over a sequence of fields, each prefixed by its length so that
// field boundaries cannot shift between two keys.
class KeyHash {
 public:
  void field(std::string_view s) {
    const uint64_t n = s.size();
    bytes(&n, sizeof n);
    bytes(s.data(), s.size());
  }
  // Large data in L2-sized pieces, each hashed into both lanes while cached.
  void bytes(const void* p, size_t n) {
    const auto* c = static_cast<const char*>(p);
    size_t at = 0;
    do {
      const size_t len = std::min(kPiece, n - at);
      h1_ = fast_hash64(c + at, len, h1_);
      h2_ = fast_hash64(c + at, len, h2_ ^ 0x5bd1e9955bd1e995ull);
      at += len;
    } while (at < n);
  }
  std::string hex() const {
    char buf[33];
    std::snprintf(buf, sizeof buf, "%016" PRIx64 "%016" PRIx64, h1_, h2_);
    return buf;
  }

 private:
  static constexpr size_t kPiece = 256 * 1024;
  uint64_t h1_ = 0x243f6a8885a308d3ull, h2_ = 0x13198a2e03707344ull;
};

// Hashes a file's bytes, then its length. Mapped rather than read: read()
// copied the 650 MB of GPT-2 once more only to hash it.
void hash_file(KeyHash* h, const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  TS_CHECK(fd >= 0, path, ": cannot open: ", std::strerror(errno));
  struct stat st {};
  const bool ok = ::fstat(fd, &st) == 0;
  const size_t n = ok ? static_cast<size_t>(st.st_size) : 0;
  void* p = n > 0 ? ::mmap(nullptr, n, PROT_READ, MAP_PRIVATE, fd, 0) : nullptr;
  ::close(fd);
  TS_CHECK(ok && p != MAP_FAILED, path, ": cannot map: ", std::strerror(errno));
  if (p) ::madvise(p, n, MADV_SEQUENTIAL);
  h->bytes(p, n);
  if (p) ::munmap(p, n);
  h->field(std::to_string(n));
}

// Given inputs steer the compiled model through their shapes and dtypes
// (symbol bindings) and, when small, their values (bind_shape_inputs folds
// integer inputs of at most 64 elements, so at most 512 data bytes). Larger
// inputs are keyed by their .npy header only: a run with new data but the
// same shapes must hit, not add an entry the size of the model.
void hash_input_file(KeyHash* h, const std::string& path) {
  constexpr size_t kFoldableDataBytes = 64 * 8;
  std::string head(16, '\0');
  std::FILE* f = std::fopen(path.c_str(), "rb");
  TS_CHECK(f, path, ": cannot open: ", std::strerror(errno));
  head.resize(std::fread(head.data(), 1, head.size(), f));
  std::fseek(f, 0, SEEK_END);
  const long size = std::ftell(f);
  size_t header_end = 0;  // 0: not an .npy file we understand; hash it all
  if (head.size() >= 12 && head.compare(0, 6, "\x93NUMPY") == 0) {
    const auto byte = [&](size_t i) { return static_cast<size_t>(static_cast<unsigned char>(head[i])); };
    header_end = head[6] == 1 ? 10 + (byte(8) | byte(9) << 8)
                              : 12 + (byte(8) | byte(9) << 8 | byte(10) << 16 | byte(11) << 24);
  }
  const bool values_matter = header_end == 0 || size < 0 || static_cast<size_t>(size) <= header_end ||
                             static_cast<size_t>(size) - header_end <= kFoldableDataBytes;
  if (values_matter) {
    std::fclose(f);
    return hash_file(h, path);
  }
  std::string header(header_end, '\0');
  std::fseek(f, 0, SEEK_SET);
  header.resize(std::fread(header.data(), 1, header.size(), f));
  std::fclose(f);
  h->field(header);
  h->field(std::to_string(size));
}

// The NT_GNU_BUILD_ID note of the main program, as hex ("" when absent).
int find_build_id(dl_phdr_info* info, size_t, void* out) {
  auto* id = static_cast<std::string*>(out);
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* nh = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const char* name = p + sizeof(ElfW(Nhdr));
      const char* desc = name + ((nh->n_namesz + 3) & ~3u);
      if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        for (uint32_t k = 0; k < nh->n_descsz; ++k) {
          char b[3];
          std::snprintf(b, sizeof b, "%02x", static_cast<unsigned char>(desc[k]));
          *id += b;
        }
        return 1;
      }
      p = desc + ((nh->n_descsz + 3) & ~3u);
    }
  }
  return 1;  // only the first object (the main program) is of interest
}

std::string cache_file(const std::string& key) { return (fs::path(cache_dir()) / "model" / (key + ".tsx")).string(); }

void warn(const std::string& what) { std::fprintf(stderr, "warning: model cache: %s\n", what.c_str()); }

}  // namespace

std::string compiler_build_id() {
  static const std::string id = [] {
    std::string s;
    dl_iterate_phdr(find_build_id, &s);
    if (!s.empty()) return "build-id:" + s;
    KeyHash h;  // no build id: the executable's bytes identify it
    hash_file(&h, "/proc/self/exe");
    return "exe:" + h.hex();
  }();
  return id;
}

std::string model_cache_mode(const std::string& what, const DriverOptions& o) {
  std::string mode = what;
  for (const std::string& p : o.disabled_passes) mode += " -" + p;
  if (o.precision != Precision::FP32) mode += str_cat(" --precision ", precision_name(o.precision));
  // The schedules a tuning database gives change the kernels: its records
  // for this machine are part of the key.
  if (!o.tuning_db.empty())
    mode += " --tuning-db " + tuning_db_digest(o.tuning_db, host_fingerprint(o.target, o.threads));
  for (const Primitive& k : o.knobs) mode += " --knob " + print_knob(k);
  if (o.cpu != "host") mode += " --cpu " + o.cpu;
  return mode;
}

std::string model_cache_key(const std::string& model_path, const std::string& mode,
                            const std::map<std::string, int64_t>& dims,
                            const std::vector<std::pair<std::string, std::string>>& input_files) {
#ifndef TESSEL_HAVE_LLVM
  return "";  // nothing to cache: the CPU target needs LLVM
#else
  if (cache_dir().empty()) return "";
  KeyHash h;
  h.field(kModelCacheRevision);
  h.field(compiler_build_id());
  h.field(cpu::host_cpu_name());
  h.field(cpu::host_cpu_features());
  h.field(mode);
  for (const auto& [sym, n] : dims) {
    h.field(sym);
    h.field(std::to_string(n));
  }
  h.field("inputs");
  for (const auto& [name, file] : input_files) {
    h.field(name);
    hash_input_file(&h, file);
  }
  h.field("model");
  hash_file(&h, model_path);
  return h.hex();
#endif
}

uint64_t model_cache_budget_bytes() {
  if (auto v = env("TESSEL_MODEL_CACHE_MAX_BYTES")) {
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v->c_str(), &end, 10);
    if (end && *end == '\0') return n;
    warn(str_cat("TESSEL_MODEL_CACHE_MAX_BYTES='", *v, "' is not a byte count; using 8 GiB"));
  }
  return uint64_t{8} << 30;
}

std::optional<std::string> model_cache_lookup(const std::string& key) {
  if (key.empty()) return std::nullopt;
  const std::string path = cache_file(key);
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return std::nullopt;
  fs::last_write_time(path, fs::file_time_type::clock::now(), ec);  // recently used
  return path;
}

namespace {

// Removes the least recently used entries of `folder` (except `keep`) until
// the .tsx files there fit `budget`. Entries another process removes first
// are skipped: errors only mean less was freed.
void evict(const fs::path& folder, const fs::path& keep, uint64_t budget) {
  struct Entry {
    fs::file_time_type used;
    uint64_t bytes;
    fs::path path;
  };
  std::vector<Entry> entries;
  uint64_t total = 0;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(folder, ec)) {
    if (e.path().extension() != ".tsx") continue;
    std::error_code ec2;
    const uint64_t bytes = e.file_size(ec2);
    const fs::file_time_type used = e.last_write_time(ec2);
    if (ec2) continue;
    total += bytes;
    if (e.path() != keep) entries.push_back({used, bytes, e.path()});
  }
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.used < b.used; });
  for (const Entry& e : entries) {
    if (total <= budget) break;
    std::error_code ec2;
    if (fs::remove(e.path, ec2)) total -= e.bytes;
  }
}

}  // namespace

void model_cache_store(const std::string& key, const std::string& artifact_bytes) {
  if (key.empty()) return;
  const uint64_t budget = model_cache_budget_bytes();
  if (artifact_bytes.size() > budget) return;  // would evict everything and itself
  const fs::path folder = fs::path(cache_file(key)).parent_path();
  std::error_code ec;
  fs::create_directories(folder, ec);
  if (ec) return warn("cannot create " + folder.string() + ": " + ec.message());
  try {
    write_file_atomically(cache_file(key), artifact_bytes);
  } catch (const Error& e) {
    warn(e.what());
    return;
  }
  evict(folder, cache_file(key), budget);
}

void model_cache_reject(const std::string& key, const std::string& why) {
  warn(cache_file(key) + " unusable, compiling again: " + why);
  std::error_code ec;
  fs::remove(cache_file(key), ec);
}

}  // namespace tessel
