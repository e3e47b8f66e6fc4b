#include "tessel/runtime/thread_pool.h"

#include <algorithm>
#include <atomic>
#include <exception>

namespace tessel {

ThreadPool::ThreadPool(int threads) {
  for (int i = 1; i < std::max(threads, 1); ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

int ThreadPool::default_threads() { return std::max(1u, std::thread::hardware_concurrency()); }

void ThreadPool::worker_loop() {
  while (true) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and nothing left
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t chunks = std::min<int64_t>(n, threads());
  if (chunks == 1) {
    fn(0, n);
    return;
  }
  // Shared by the chunks; lives on this frame until every chunk has finished.
  struct Join {
    std::mutex mu;
    std::condition_variable cv;
    int64_t pending;
    std::exception_ptr error;
  } join;
  join.pending = chunks;
  auto run_chunk = [&](int64_t c) {
    const int64_t begin = n * c / chunks, end = n * (c + 1) / chunks;
    std::exception_ptr err;
    try {
      fn(begin, end);
    } catch (...) {
      err = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(join.mu);
    if (err && !join.error) join.error = err;
    if (--join.pending == 0) join.cv.notify_all();
  };
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int64_t c = 1; c < chunks; ++c) queue_.emplace_back([&run_chunk, c] { run_chunk(c); });
  }
  cv_.notify_all();
  run_chunk(0);
  // Help with queued work (ours or another caller's) instead of idling.
  while (true) {
    {
      std::unique_lock<std::mutex> lock(join.mu);
      if (join.pending == 0) break;
    }
    std::function<void()> task;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!queue_.empty()) {
        task = std::move(queue_.front());
        queue_.pop_front();
      }
    }
    if (task) {
      task();
      continue;
    }
    std::unique_lock<std::mutex> lock(join.mu);
    join.cv.wait(lock, [&] { return join.pending == 0; });
    break;
  }
  if (join.error) std::rethrow_exception(join.error);
}

}  // namespace tessel
