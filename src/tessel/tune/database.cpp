#include "tessel/tune/database.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string_view>
#include <vector>

#include "tessel/support/cache_file.h"
#include "tessel/support/error.h"
#include "tessel/support/fast_hash.h"

namespace tessel {

namespace fs = std::filesystem;

namespace {

// Bumped when the line layout changes; a file with another header is not read.
constexpr std::string_view kHeader = "tessel-tuning-db 1";
constexpr size_t kMaxLine = 1 << 20;        // a schedule is a few hundred bytes
constexpr uintmax_t kMaxFile = 256u << 20;  // larger is not a database we wrote
constexpr int kFields = 7;

void warn(const std::string& path, const std::string& what) {
  std::fprintf(stderr, "warning: tuning db %s: %s\n", path.c_str(), what.c_str());
}

std::string escape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '\\': out += "\\\\"; break;
      case '\t': out += "\\t"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      default: out += c;
    }
  }
  return out;
}

std::optional<std::string> unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\') {
      out += s[i];
      continue;
    }
    if (++i == s.size()) return std::nullopt;
    switch (s[i]) {
      case '\\': out += '\\'; break;
      case 't': out += '\t'; break;
      case 'n': out += '\n'; break;
      case 'r': out += '\r'; break;
      default: return std::nullopt;
    }
  }
  return out;
}

std::string checksum(std::string_view body) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, fast_hash64(body));
  return buf;
}

// Why `r` cannot be a record, or nullptr. Applied to what is read and to
// what is recorded, so the file only ever holds records a reader accepts.
const char* invalid(const TuningRecord& r) {
  if (r.kernel_hash.empty() || r.fingerprint.empty() || r.version.empty() || r.schedule.empty())
    return "empty kernel hash, fingerprint, version or schedule";
  if (!(r.time_us > 0 && r.time_us < 1e12)) return "time not in (0, 1e12) us";  // NaN fails too
  if (r.trials < 0 || r.trials > int64_t{1} << 50) return "trials out of range";
  return nullptr;
}

std::string format_line(const TuningRecord& r) {
  char time[32];
  const auto end = std::to_chars(time, time + sizeof time, r.time_us).ptr;  // shortest text that reads back equal
  std::string body;
  for (const std::string_view f : {std::string_view(r.kernel_hash), std::string_view(r.fingerprint),
                                   std::string_view(r.version), std::string_view(time, end - time)}) {
    body += escape(f) + '\t';
  }
  body += std::to_string(r.trials) + '\t' + escape(r.kernel_name) + '\t' + escape(r.schedule);
  return body + '\t' + checksum(body) + '\n';
}

template <class T>
bool parse_number(std::string_view s, T* out) {
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

// One line (without its newline), or nullopt with *why.
std::optional<TuningRecord> parse_line(std::string_view line, const char** why) {
  const size_t last_tab = line.rfind('\t');
  if (last_tab == std::string_view::npos || line.substr(last_tab + 1) != checksum(line.substr(0, last_tab))) {
    *why = "checksum mismatch";
    return std::nullopt;
  }
  std::vector<std::string> f;
  for (size_t start = 0; start <= last_tab;) {
    const size_t tab = line.find('\t', start);
    std::optional<std::string> s = unescape(line.substr(start, tab - start));
    if (!s) {
      *why = "bad escape";
      return std::nullopt;
    }
    f.push_back(std::move(*s));
    start = tab + 1;
  }
  TuningRecord r;
  if (f.size() != kFields || !parse_number(f[3], &r.time_us) || !parse_number(f[4], &r.trials)) {
    *why = "malformed fields";
    return std::nullopt;
  }
  r.kernel_hash = std::move(f[0]);
  r.fingerprint = std::move(f[1]);
  r.version = std::move(f[2]);
  r.kernel_name = std::move(f[5]);
  r.schedule = std::move(f[6]);
  if ((*why = invalid(r))) return std::nullopt;
  return r;
}

// Adds `r` unless its key holds one at least as fast; whether it did.
template <class Map>
bool merge(Map* records, TuningRecord r) {
  auto key = std::make_tuple(r.kernel_hash, r.fingerprint, r.version);
  auto [it, fresh] = records->try_emplace(std::move(key), r);
  if (fresh) return true;
  if (it->second.time_us <= r.time_us) return false;
  it->second = std::move(r);
  return true;
}

// An exclusive flock on a sidecar file, released by close. The lock is not
// on the database itself because rename replaces that file's inode.
class FileLock {
 public:
  explicit FileLock(const std::string& path) : fd_(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666)) {
    TS_CHECK(fd_ >= 0, "cannot open lock file ", path, ": ", std::strerror(errno));
    while (::flock(fd_, LOCK_EX) != 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd_);
      fail("cannot lock ", path, ": ", std::strerror(e));
    }
  }
  ~FileLock() { ::close(fd_); }
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

 private:
  int fd_;
};

}  // namespace

TuningDatabase TuningDatabase::open(const std::string& path, const std::string& version) {
  TuningDatabase db;
  db.path_ = path;
  db.version_ = version.empty() ? TESSEL_VERSION : version;
  db.load();
  return db;
}

void TuningDatabase::load() {
  records_.clear();
  damaged_ = 0;
  std::error_code ec;
  const uintmax_t size = fs::file_size(path_, ec);
  if (ec) {
    if (ec != std::errc::no_such_file_or_directory) warn(path_, "cannot read: " + ec.message());
    return;
  }
  if (size > kMaxFile) {
    damaged_ = 1;
    return warn(path_, str_cat("ignored: ", size, " bytes is too large for a tuning database"));
  }
  std::ifstream in(path_, std::ios::binary);
  if (!in) return warn(path_, str_cat("cannot read: ", std::strerror(errno)));
  std::ostringstream buf;
  buf << in.rdbuf();
  const std::string text = buf.str();
  const std::string_view all(text);
  size_t at = all.find('\n');
  if (at == std::string_view::npos || all.substr(0, at) != kHeader) {
    damaged_ = 1;
    return warn(path_, str_cat("ignored: not a tuning database of this format (the first line is not '", kHeader, "')"));
  }
  std::string first_problem;
  for (size_t line_no = 2; ++at < all.size(); ++line_no) {
    const size_t nl = all.find('\n', at);
    const char* why = nullptr;
    std::optional<TuningRecord> r;
    if (nl == std::string_view::npos) {
      why = "cut short (no newline)";
    } else if (nl - at > kMaxLine) {
      why = "line too long";
    } else {
      r = parse_line(all.substr(at, nl - at), &why);
    }
    if (r) {
      merge(&records_, std::move(*r));
    } else if (damaged_++ == 0) {
      first_problem = str_cat("line ", line_no, ": ", why);
    }
    if (nl == std::string_view::npos) break;
    at = nl;
  }
  if (damaged_ > 0) warn(path_, str_cat("ignored ", damaged_, " damaged line(s), the first at ", first_problem));
}

std::optional<TuningRecord> TuningDatabase::lookup(const std::string& kernel_hash,
                                                   const std::string& fingerprint) const {
  const auto it = records_.find(Key{kernel_hash, fingerprint, version_});
  if (it == records_.end()) return std::nullopt;
  return it->second;
}

void TuningDatabase::record(const TuningRecord& rec) {
  TuningRecord r = rec;
  r.version = version_;
  if (const char* why = invalid(r)) fail("tuning db ", path_, ": cannot record kernel '", r.kernel_hash, "': ", why);
  try {
    const fs::path parent = fs::path(path_).parent_path();
    std::error_code ec;
    if (!parent.empty()) fs::create_directories(parent, ec);  // for the lock file
    TS_CHECK(!ec, "cannot create ", parent.string(), ": ", ec.message());
    FileLock lock(path_ + ".lock");
    load();  // what other processes wrote since we read
    if (!merge(&records_, std::move(r))) return;
    std::string text = std::string(kHeader) + '\n';
    for (const auto& [key, v] : records_) text += format_line(v);
    write_file_atomic(path_, text);
  } catch (const Error& e) {
    fail("tuning db ", path_, ": ", e.what());
  }
}

size_t TuningDatabase::other_version_count() const {
  size_t n = 0;
  for (const auto& [key, r] : records_) n += r.version != version_;
  return n;
}

std::vector<TuningRecord> TuningDatabase::records() const {
  std::vector<TuningRecord> out;
  for (const auto& [key, r] : records_) out.push_back(r);
  return out;
}

}  // namespace tessel
