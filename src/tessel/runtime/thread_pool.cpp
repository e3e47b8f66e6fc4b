#include "tessel/runtime/thread_pool.h"

#include <algorithm>
#include <chrono>
#include <exception>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

namespace tessel {

namespace {

constexpr int64_t kChunksPerThread = 4;
constexpr auto kSpin = std::chrono::microseconds(200);

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Spins until done() holds or kSpin has passed; whether it holds.
template <class F>
bool spin_until(F done) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (done()) return true;
    cpu_relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > until) return done();
  }
}

}  // namespace

// One parallel_for: chunk c covers [n c / chunks, n (c + 1) / chunks). Held
// by shared_ptr, so that a worker that finds it late (every chunk taken,
// the caller gone) still reads valid counters.
struct ThreadPool::Job {
  int64_t n = 0, chunks = 0;
  const std::function<void(int64_t, int64_t)>* fn = nullptr;  // valid until done == chunks
  std::atomic<int64_t> next{0}, done{0};
  std::mutex mu;  // guards error; with cv, the caller's sleep until done
  std::condition_variable cv;
  std::exception_ptr error;

  // Takes and runs chunks until none is left.
  void run_chunks() {
    for (int64_t c; (c = next.fetch_add(1)) < chunks;) {
      try {
        (*fn)(n * c / chunks, n * (c + 1) / chunks);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mu);
        if (!error) error = std::current_exception();
      }
      if (done.fetch_add(1) + 1 == chunks) {
        std::lock_guard<std::mutex> lock(mu);  // the caller is waiting or has not checked yet
        cv.notify_all();
      }
    }
  }
  bool finished() const { return done.load() == chunks; }
};

ThreadPool::ThreadPool(int threads) {
  const int n = std::max(threads, 1);
  spin_ = n <= default_threads();
  for (int i = 1; i < n; ++i) workers_.emplace_back([this] { worker_loop(); });
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

std::shared_ptr<ThreadPool::Job> ThreadPool::next_job() {
  if (spin_) spin_until([this] { return stop_.load() || queued_.load() > 0; });
  std::unique_lock<std::mutex> lock(mu_);
  cv_.wait(lock, [this] { return stop_.load() || !queue_.empty(); });
  if (queue_.empty()) return nullptr;  // stopping, nothing left
  return queue_.front();
}

void ThreadPool::retire(const std::shared_ptr<Job>& job) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = std::find(queue_.begin(), queue_.end(), job);
  if (it != queue_.end()) {
    queue_.erase(it);
    queued_.store(queue_.size());
  }
}

void ThreadPool::worker_loop() {
  while (std::shared_ptr<Job> job = next_job()) {
    job->run_chunks();
    retire(job);  // every chunk is taken: nothing more to find in it
  }
}

void ThreadPool::parallel_for(int64_t n, const std::function<void(int64_t, int64_t)>& fn) {
  if (n <= 0) return;
  const int64_t chunks = std::min<int64_t>(n, threads() * kChunksPerThread);
  if (workers_.empty() || chunks == 1) {
    fn(0, n);
    return;
  }
  auto job = std::make_shared<Job>();
  job->n = n;
  job->chunks = chunks;
  job->fn = &fn;
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(job);
    queued_.store(queue_.size());
  }
  cv_.notify_all();
  job->run_chunks();
  retire(job);
  // The chunks other threads took: spin a moment, then sleep.
  if (!(spin_ && spin_until([&] { return job->finished(); }))) {
    std::unique_lock<std::mutex> lock(job->mu);
    job->cv.wait(lock, [&] { return job->finished(); });
  }
  std::lock_guard<std::mutex> lock(job->mu);
  if (job->error) std::rethrow_exception(job->error);
}

}  // namespace tessel
