// A fixed pool of worker threads for the parallel loops of compiled kernels.
//
// `threads` counts the calling thread: a pool of N runs N-1 workers and the
// caller takes part in every parallel_for, so N threads never oversubscribe N
// cores. Several threads may call parallel_for at once (one Executable run
// from several threads); their chunks share the workers.
//
// A parallel_for is cut into a few chunks per thread that the threads take
// in turn, so that a worker that wakes late costs the others one chunk, not
// half the loop. Between loops the workers spin for a moment before they
// sleep (a model runs its kernels back to back; waking a sleeping thread
// costs tens of microseconds on a virtual machine), and so does the caller
// waiting for the last chunk. No spinning when the pool has more threads
// than the machine has cores.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
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
  // Calls fn(begin, end) over disjoint ranges covering [0, n) (a few per
  // thread, in any order and on any thread); returns when all are done. The
  // first exception thrown by fn is rethrown here.
  void parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn);

  // Threads to use when the user gives none: the machine's cores.
  static int default_threads();

 private:
  struct Job;
  void worker_loop();
  // The oldest job with chunks left, after spinning and then sleeping
  // until there is one; null when the pool stops.
  std::shared_ptr<Job> next_job();
  void retire(const std::shared_ptr<Job>& job);

  std::vector<std::thread> workers_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;  // jobs whose chunks may not all be taken
  std::atomic<size_t> queued_{0};           // queue_.size(), read while spinning
  std::atomic<bool> stop_{false};
  bool spin_ = false;
};

}  // namespace tessel
