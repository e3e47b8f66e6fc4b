// A fixed pool of worker threads for the parallel loops of compiled kernels.
//
// `threads` counts the calling thread: a pool of N runs N-1 workers and the
// caller takes part in every parallel_for, so N threads never oversubscribe N
// cores. Several threads may call parallel_for at once (one Executable run
// from several threads); their chunks share the workers.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace tessel {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()) + 1; }
  // Calls fn(begin, end) over disjoint ranges covering [0, n), at most one
  // range per thread; returns when all are done. The first exception thrown by
  // fn is rethrown here.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

  // Threads to use when the user gives none: the machine's cores.
  static int default_threads();

 private:
  void worker_loop();
  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
};

}  // namespace tessel
