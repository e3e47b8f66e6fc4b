#include "tessel/runtime/ceilings.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <memory>
#include <thread>

#include <time.h>

#include "tessel/runtime/ceiling_kernels.h"
#include "tessel/runtime/thread_pool.h"
#include "tessel/support/error.h"

namespace tessel {

namespace {

using Clock = std::chrono::steady_clock;

// The kernels' results land here, so that no call can be dropped.
volatile float g_sink = 0;

// body(t) returns a kernel's result; each thread keeps its own, summed into
// g_sink after the join (threads writing one variable would race).
std::function<void(int)> keeping_results(std::vector<float>& results, const std::function<float(int)>& body) {
  return [&results, body](int t) { results[size_t(t)] += body(t); };
}

double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double cpu_seconds(clockid_t clock) {
  timespec ts{};
  clock_gettime(clock, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

// A timed sample, and whether its threads held their cores throughout: on
// a shared machine another process may take a core for a few milliseconds,
// which says nothing about the hardware. (Two hardware threads sharing one
// core's units both hold a core: that sharing is measured, as it should be.)
struct Sample {
  double seconds = 0;
  bool clean = true;
};
constexpr double kHeldCore = 0.9;  // CPU time over wall time of a clean sample's threads

// Wall time from a common start until the last of `threads` threads has
// finished body(t). The threads are started, and wait spinning, before the
// clock starts, so thread creation is not timed.
Sample run_together(int threads, const std::function<void(int)>& body) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false}, clean{true};
  std::vector<Clock::time_point> end(static_cast<size_t>(threads));
  Clock::time_point t0;
  // A thread that got its core late, or lost it on the way, ran for less
  // CPU time than the wall time since the common start.
  const auto work = [&](int t) {
    while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
    const double cpu0 = cpu_seconds(CLOCK_THREAD_CPUTIME_ID);
    body(t);
    end[static_cast<size_t>(t)] = Clock::now();
    if (cpu_seconds(CLOCK_THREAD_CPUTIME_ID) - cpu0 < kHeldCore * seconds_since(t0)) clean = false;
  };
  std::vector<std::thread> team;
  for (int t = 1; t < threads; ++t)
    team.emplace_back([&, t] {
      ready.fetch_add(1);
      work(t);
    });
  while (ready.load() < threads - 1) std::this_thread::yield();
  t0 = Clock::now();
  go.store(true, std::memory_order_release);
  work(0);
  for (std::thread& th : team) th.join();
  return {std::chrono::duration<double>(*std::max_element(end.begin(), end.end()) - t0).count(), clean.load()};
}

// A 64-byte aligned buffer of `count` floats, all ones, its pages touched.
struct FloatBuffer {
  std::unique_ptr<float, decltype(&std::free)> data{nullptr, &std::free};
  explicit FloatBuffer(int64_t count) {
    const size_t bytes = (static_cast<size_t>(count) * sizeof(float) + 63) / 64 * 64;
    data.reset(static_cast<float*>(std::aligned_alloc(64, bytes)));
    TS_CHECK(data != nullptr, "ceilings: cannot allocate a buffer of ", bytes, " bytes");
    std::fill(data.get(), data.get() + count, 1.0f);
  }
};

// Floats of one thread's share of `bytes`, a whole number of read rounds.
int64_t share_floats(int64_t bytes, int threads) {
  const int64_t n = bytes / int64_t(sizeof(float)) / threads / kReadBlockFloats * kReadBlockFloats;
  return std::max(n, kReadBlockFloats);
}

// The measurements of one plan, counting the disturbed samples they had to use.
class Measurer {
 public:
  explicit Measurer(const CeilingsPlan& p) : p_(p) {}

  CeilingSet set(int threads) {
    CeilingSet s;
    s.threads = threads;
    s.fma_flops_per_s = fma_peak(threads);
    const auto level = [&](const char* name, int64_t capacity, int64_t buffer_bytes, bool shared) {
      s.levels.push_back({name, capacity, read_bandwidth(threads, share_floats(buffer_bytes, threads), shared)});
    };
    level("L1", p_.l1_bytes * threads, p_.l1_bytes / 2 * threads, false);
    level("L2", p_.l2_bytes * threads, p_.l2_bytes / 2 * threads, false);
    if (p_.llc_bytes > p_.l2_bytes * threads) level("LLC", p_.llc_bytes, p_.llc_bytes / 4, true);
    level("DRAM", 0, p_.dram_bytes, true);
    s.launch_s = launch_seconds(threads);
    return s;
  }
  int disturbed() const { return disturbed_; }

 private:
  // Work per second of `timed(reps)` (a sample of reps x work_per_rep
  // units): one call sizes `reps` to about a sample's length and warms up,
  // a second warms up at that size, then the median of `samples` clean
  // samples. A disturbed sample is taken again, up to 4 x samples tries;
  // when too few come clean, the least disturbed fill in, counted (a busy
  // machine gives low figures: measure again when it is quiet).
  double median_rate(double work_per_rep, const std::function<Sample(int64_t)>& timed) {
    const double once = std::max(timed(1).seconds, 1e-9);
    const int64_t reps = std::max<int64_t>(1, std::llround(p_.sample_seconds / once));
    timed(reps);
    const size_t want = size_t(std::max(p_.samples, 1));
    std::vector<double> clean, disturbed;
    for (size_t tries = 0; clean.size() < want && tries < 4 * want; ++tries) {
      const Sample s = timed(reps);
      (s.clean ? clean : disturbed).push_back(work_per_rep * double(reps) / s.seconds);
    }
    std::sort(disturbed.rbegin(), disturbed.rend());  // fastest, so least disturbed, first
    for (size_t i = 0; clean.size() < want && i < disturbed.size(); ++i, ++disturbed_) clean.push_back(disturbed[i]);
    return median(clean);
  }

  double fma_peak(int threads) {
    const CeilingKernels& k = host_ceiling_kernels();
    constexpr int64_t kIters = 10'000;  // about 50 us a thread at 100 GFLOP/s
    std::vector<float> results(size_t(threads), 0.0f);
    const double rate = median_rate(k.flops_per_iter() * kIters * threads, [&](int64_t reps) {
      return run_together(threads, keeping_results(results, [&](int) { return k.fma(kIters * reps); }));
    });
    for (float r : results) g_sink = g_sink + r;
    return rate;
  }

  // Bytes per second of `threads` threads each reading its own `floats`
  // floats over and over (private: one buffer per thread; shared: one
  // buffer cut in parts, for the LLC and DRAM).
  double read_bandwidth(int threads, int64_t floats, bool shared) {
    const CeilingKernels& k = host_ceiling_kernels();
    std::vector<FloatBuffer> bufs;
    for (int t = 0; t < (shared ? 1 : threads); ++t) bufs.emplace_back(shared ? floats * threads : floats);
    const auto part = [&](int t) { return shared ? bufs[0].data.get() + floats * t : bufs[size_t(t)].data.get(); };
    std::vector<float> results(size_t(threads), 0.0f);
    const double rate = median_rate(double(floats) * sizeof(float) * threads, [&](int64_t reps) {
      return run_together(threads, keeping_results(results, [&](int t) { return k.read(part(t), floats, reps); }));
    });
    for (float r : results) g_sink = g_sink + r;
    return rate;
  }

  // One parallel_for of a 2 us chunk per thread on the runtime's pool, less
  // the 2 us: the pool's cost to start its threads on a step and join them.
  // (Chunks of no work would all be taken by the caller before a worker
  // woke, and time nothing.)
  double launch_seconds(int threads) {
    constexpr double kChunk = 2e-6;
    ThreadPool pool(threads);
    const std::function<void(int64_t, int64_t)> chunk = [&](int64_t begin, int64_t end) {
      const Clock::time_point t0 = Clock::now();
      while (seconds_since(t0) < kChunk * double(end - begin)) {
      }
    };
    // Between back-to-back steps the pool's threads spin: a clean sample keeps them all busy.
    const double calls_per_s = median_rate(1.0, [&](int64_t reps) {
      const Clock::time_point t0 = Clock::now();
      const double cpu0 = cpu_seconds(CLOCK_PROCESS_CPUTIME_ID);
      for (int64_t r = 0; r < reps; ++r) pool.parallel_for(threads, chunk);
      const double wall = seconds_since(t0);
      return Sample{wall, cpu_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0 >= kHeldCore * threads * wall};
    });
    return std::max(1.0 / calls_per_s - kChunk, 0.0);
  }

  const CeilingsPlan& p_;
  int disturbed_ = 0;
};

}  // namespace

const CeilingSet& CpuCeilings::for_threads(int threads) const {
  for (const CeilingSet& s : sets)
    if (s.threads == threads) return s;
  fail("ceilings: none measured for ", threads, " threads (tessel ceilings --threads ", threads, ")");
}

CeilingsPlan ceilings_plan(int threads, int64_t l1_bytes, int64_t l2_bytes, int64_t llc_bytes) {
  TS_CHECK(threads >= 1, "ceilings: threads must be at least 1, got ", threads);
  TS_CHECK(l1_bytes > 0 && l2_bytes > 0 && llc_bytes >= 0, "ceilings: cache sizes must be positive");
  constexpr int64_t kMiB = 1 << 20;
  CeilingsPlan p;
  p.threads = threads;
  p.l1_bytes = l1_bytes;
  p.l2_bytes = l2_bytes;
  p.llc_bytes = llc_bytes;
  p.dram_bytes = std::clamp<int64_t>(4 * llc_bytes, 64 * kMiB, 1024 * kMiB);
  return p;
}

CpuCeilings measure_cpu_ceilings(const CeilingsPlan& p) {
  TS_CHECK(p.threads >= 1, "ceilings: threads must be at least 1, got ", p.threads);
  const CeilingKernels& k = host_ceiling_kernels();
  CpuCeilings c;
  c.isa = k.isa;
  c.lanes = k.lanes;
  Measurer m(p);
  c.sets.push_back(m.set(1));
  if (p.threads > 1) c.sets.push_back(m.set(p.threads));
  c.disturbed_samples = m.disturbed();
  return c;
}

}  // namespace tessel
