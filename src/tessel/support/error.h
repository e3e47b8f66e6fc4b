// Error reporting for the whole compiler. tessel reports bad input by throwing
// tessel::Error; the CLI catches it at the top and prints one line
// ("error: <file>: <what>") with exit status 1. Internal invariants use the
// same mechanism so that a fuzzed model can never abort the process.
#pragma once

#include <cstdint>
#include <sstream>
#include <stdexcept>
#include <string>

namespace tessel {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
inline void append(std::ostringstream&) {}
template <class T, class... Rest>
void append(std::ostringstream& os, const T& v, const Rest&... rest) {
  os << v;
  append(os, rest...);
}
}  // namespace detail

// Concatenates its arguments with operator<< into a string.
template <class... Args>
std::string str_cat(const Args&... args) {
  std::ostringstream os;
  detail::append(os, args...);
  return os.str();
}

template <class... Args>
[[noreturn]] void fail(const Args&... args) {
  throw Error(str_cat(args...));
}

// Checked 64-bit arithmetic: every size tessel computes goes through these so
// that hostile dims give an error instead of a wrapped value.
int64_t checked_add(int64_t a, int64_t b);
int64_t checked_mul(int64_t a, int64_t b);

}  // namespace tessel

#define TS_CHECK(cond, ...)                  \
  do {                                       \
    if (!(cond)) ::tessel::fail(__VA_ARGS__); \
  } while (0)
