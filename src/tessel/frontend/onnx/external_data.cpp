// External tensor data (TensorProto.data_location == EXTERNAL).
//
// A model may only read files inside its own folder: the location must be a
// relative path without `..` components, no component on the way may be a
// symlink (checked with lstat, and the final open uses O_NOFOLLOW), the
// resolved real path must stay under the folder's real path, and the file
// must be a regular file. offset + length must lie within the file.
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "tessel/frontend/onnx/onnx_internal.h"
#include "tessel/support/error.h"

namespace tessel::onnx_import {
namespace {

int64_t parse_int_key(const std::string& key, const std::string& v, const std::string& what) {
  TS_CHECK(!v.empty() && v.size() <= 19, what, ": external data ", key, " '", v, "' is not a valid number");
  int64_t r = 0;
  for (char c : v) {
    TS_CHECK(c >= '0' && c <= '9', what, ": external data ", key, " '", v, "' is not a valid number");
    r = checked_add(checked_mul(r, 10), c - '0');
  }
  return r;
}

std::string real_path(const std::string& p, const std::string& what) {
  char buf[PATH_MAX];
  TS_CHECK(::realpath(p.c_str(), buf) != nullptr, what, ": cannot resolve external data path '", p,
           "': ", std::strerror(errno));
  return buf;
}

struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

ExternalRef parse_external_ref(const onnx::TensorProto& tp, const std::string& what) {
  ExternalRef r;
  bool have_location = false;
  for (const auto& kv : tp.external_data()) {
    const std::string& k = kv.key();
    if (k == "location") {
      r.location = kv.value();
      have_location = true;
    } else if (k == "offset") {
      r.offset = parse_int_key(k, kv.value(), what);
    } else if (k == "length") {
      r.length = parse_int_key(k, kv.value(), what);
    }
    // "checksum" and unknown keys are ignored.
  }
  TS_CHECK(have_location && !r.location.empty(), what, ": external data without a location");
  return r;
}

std::vector<uint8_t> read_external(const ExternalDataContext& ctx, const ExternalRef& ref, int64_t expected,
                                   const std::string& what) {
  TS_CHECK(!ctx.base_dir.empty(), what, ": external data '", ref.location,
           "' is not allowed here (the model was not loaded from a file)");
  const std::string& loc = ref.location;
  TS_CHECK(loc.find('\0') == std::string::npos, what, ": external data location contains a NUL byte");
  TS_CHECK(loc[0] != '/', what, ": external data location '", loc, "' is an absolute path");
  for (size_t p = 0; p <= loc.size();) {
    size_t e = loc.find('/', p);
    if (e == std::string::npos) e = loc.size();
    TS_CHECK(loc.compare(p, e - p, "..") != 0, what, ": external data location '", loc, "' contains '..'");
    p = e + 1;
  }
  // Walk the components: no symlinks, directories on the way.
  std::string path = ctx.base_dir;
  size_t start = 0;
  bool any = false;
  while (start <= loc.size()) {
    size_t end = loc.find('/', start);
    if (end == std::string::npos) end = loc.size();
    std::string comp = loc.substr(start, end - start);
    start = end + 1;
    if (comp.empty() || comp == ".") continue;
    TS_CHECK(comp != "..", what, ": external data location '", loc, "' contains '..'");
    path += "/" + comp;
    any = true;
    struct stat st;
    TS_CHECK(::lstat(path.c_str(), &st) == 0, what, ": external data file '", loc, "' not found (",
             std::strerror(errno), ")");
    TS_CHECK(!S_ISLNK(st.st_mode), what, ": external data location '", loc, "' goes through a symlink");
    const bool last = end >= loc.size();
    if (!last) TS_CHECK(S_ISDIR(st.st_mode), what, ": external data location '", loc, "' is not a path to a file");
  }
  TS_CHECK(any, what, ": external data location '", loc, "' names no file");
  // Defence in depth: the real path must stay under the folder's real path.
  const std::string base_real = real_path(ctx.base_dir, what);
  const std::string file_real = real_path(path, what);
  TS_CHECK(file_real.size() > base_real.size() && file_real.compare(0, base_real.size(), base_real) == 0 &&
               (base_real == "/" || file_real[base_real.size()] == '/'),
           what, ": external data location '", loc, "' leaves the model's folder");

  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
  TS_CHECK(f.fd >= 0, what, ": cannot open external data file '", loc, "': ", std::strerror(errno));
  struct stat st;
  TS_CHECK(::fstat(f.fd, &st) == 0, what, ": cannot stat external data file '", loc, "'");
  TS_CHECK(S_ISREG(st.st_mode), what, ": external data '", loc, "' is not a regular file");
  const int64_t size = st.st_size;
  TS_CHECK(ref.offset >= 0 && ref.offset <= size, what, ": external data offset ", ref.offset,
           " is past the end of '", loc, "' (", size, " bytes)");
  const int64_t length = ref.length >= 0 ? ref.length : size - ref.offset;
  TS_CHECK(checked_add(ref.offset, length) <= size, what, ": external data offset ", ref.offset, " + length ",
           length, " is past the end of '", loc, "' (", size, " bytes)");
  TS_CHECK(expected < 0 || length == expected, what, ": external data has ", length, " bytes but the tensor needs ",
           expected);
  std::vector<uint8_t> out(static_cast<size_t>(length));
  int64_t done = 0;
  while (done < length) {
    ssize_t r = ::pread(f.fd, out.data() + done, static_cast<size_t>(length - done), ref.offset + done);
    if (r < 0 && errno == EINTR) continue;
    TS_CHECK(r > 0, what, ": reading external data '", loc, "' failed",
             r < 0 ? str_cat(": ", std::strerror(errno)) : std::string(" (file shrank)"));
    done += r;
  }
  return out;
}

}  // namespace tessel::onnx_import
