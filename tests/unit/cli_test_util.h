// Running this build's `tessel` binary from a unit test, and the environment it reads.
#pragma once

#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>

namespace tessel::testing {

// Runs TESSEL_BINARY_DIR/bin/tessel ARGS with the environment assignments
// `env` ("A=1 B=2") in front; returns the exit status (-1 when it did not
// exit normally) and appends stdout and stderr to *out.
inline int run_tessel(const std::string& env, const std::string& args, std::string* out) {
  const std::string cmd = env + " " + TESSEL_BINARY_DIR + "/bin/tessel " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out->append(buf, n);
  const int status = ::pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

// Points TESSEL_CACHE_DIR at `d` for a scope (the caches tessel keeps
// there: a fresh folder makes a compile miss them).
class ScopedCacheDir {
 public:
  explicit ScopedCacheDir(const std::string& d) {
    if (const char* old = std::getenv("TESSEL_CACHE_DIR")) old_ = old;
    ::setenv("TESSEL_CACHE_DIR", d.c_str(), 1);
  }
  ~ScopedCacheDir() {
    if (old_) ::setenv("TESSEL_CACHE_DIR", old_->c_str(), 1);
    else ::unsetenv("TESSEL_CACHE_DIR");
  }

 private:
  std::optional<std::string> old_;
};

}  // namespace tessel::testing
