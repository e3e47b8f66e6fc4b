#include "tessel/driver/isolated_run.h"

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <exception>

#include "tessel/support/error.h"

namespace tessel {

namespace {

// One report on the pipe: fixed size, so a partial one (a child killed in
// the middle of a write) is recognised and dropped.
struct Message {
  uint64_t index;
  int32_t code;
  int32_t pad;
  double value;
};

bool write_all(int fd, const void* p, size_t n) {
  const char* c = static_cast<const char*>(p);
  while (n > 0) {
    const ssize_t w = ::write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    c += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// Reads one message; false at the end of the pipe (or a cut one).
bool read_message(int fd, Message* m) {
  char* c = reinterpret_cast<char*>(m);
  size_t got = 0;
  while (got < sizeof(Message)) {
    const ssize_t r = ::read(fd, c + got, sizeof(Message) - got);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    got += static_cast<size_t>(r);
  }
  return true;
}

[[noreturn]] void child(int fd, const std::vector<size_t>& todo,
                        const std::function<void(const std::vector<size_t>&, const ReportFn&)>& child_main) {
  int rc = 0;
  try {
    child_main(todo, [fd](size_t index, int32_t code, double value) {
      const Message m{index, code, 0, value};
      if (!write_all(fd, &m, sizeof m)) ::_exit(3);
    });
  } catch (...) {
    rc = 2;  // the unreported jobs count as crashed
  }
  ::close(fd);
  ::_exit(rc);
}

}  // namespace

std::vector<IsolatedResult> run_isolated(const std::vector<size_t>& jobs,
                                         const std::function<void(const std::vector<size_t>&, const ReportFn&)>& child_main) {
  size_t size = 0;
  for (size_t j : jobs) size = std::max(size, j + 1);
  std::vector<IsolatedResult> out(size);
  std::vector<size_t> todo = jobs;
  while (!todo.empty()) {
    int fds[2];
    TS_CHECK(::pipe(fds) == 0, "isolated run: pipe failed: ", std::strerror(errno));
    const pid_t pid = ::fork();
    if (pid < 0) {
      ::close(fds[0]);
      ::close(fds[1]);
      fail("isolated run: fork failed: ", std::strerror(errno));
    }
    if (pid == 0) {
      ::close(fds[0]);
      child(fds[1], todo, child_main);
    }
    ::close(fds[1]);
    Message m;
    while (read_message(fds[0], &m))
      if (m.index < out.size()) {
        out[m.index].reported = true;
        out[m.index].code = m.code;
        out[m.index].value = m.value;
      }
    ::close(fds[0]);
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    std::vector<size_t> rest;
    for (size_t j : todo)
      if (!out[j].reported) rest.push_back(j);
    const bool clean = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (rest.empty() || clean) break;  // all reported; or the child chose to stop (the rest were not run)
    out[rest.front()].crashed = true;
    out[rest.front()].signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
    rest.erase(rest.begin());
    todo = std::move(rest);
  }
  return out;
}

}  // namespace tessel
