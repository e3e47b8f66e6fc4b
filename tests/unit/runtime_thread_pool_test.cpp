// The runtime's thread pool (runtime/thread_pool.h): every index of a
// parallel_for runs exactly once, in disjoint non-empty ranges, for any n
// and thread count; errors come back to the caller; several callers at once
// each get their whole loop; the pool keeps working after all of it.
#include "tessel/runtime/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

namespace tessel {
namespace {

// Runs a parallel_for of n and checks the coverage.
void expect_each_index_once(ThreadPool& pool, int64_t n) {
  std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
  std::atomic<int64_t> empty_ranges{0};
  pool.parallel_for(n, [&](int64_t begin, int64_t end) {
    if (begin >= end) ++empty_ranges;
    for (int64_t i = begin; i < end; ++i) ++hits[static_cast<size_t>(i)];
  });
  EXPECT_EQ(empty_ranges.load(), 0);
  for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << "index " << i << " of " << n;
}

TEST(ThreadPool, EveryIndexOnceForAnySizeAndThreadCount) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.threads(), threads);
    for (int64_t n : {0, 1, 2, 3, 7, 8, 33, 1000, 100003}) {
      SCOPED_TRACE(testing::Message() << threads << " threads, n = " << n);
      expect_each_index_once(pool, n);
    }
  }
}

// Back to back, as a model's kernels run: the workers go from spinning to
// sleeping and back without losing a loop.
TEST(ThreadPool, ManyLoopsBackToBackAndAfterAPause) {
  ThreadPool pool(2);
  for (int r = 0; r < 2000; ++r) expect_each_index_once(pool, 16);
  std::this_thread::sleep_for(std::chrono::milliseconds(5));  // workers asleep now
  expect_each_index_once(pool, 16);
}

TEST(ThreadPool, TheFirstErrorReachesTheCallerAndThePoolGoesOn) {
  ThreadPool pool(2);
  std::atomic<int64_t> ran{0};
  EXPECT_THROW(pool.parallel_for(64,
                                 [&](int64_t begin, int64_t end) {
                                   ran += end - begin;
                                   if (begin == 0) throw std::runtime_error("chunk 0 failed");
                                 }),
               std::runtime_error);
  EXPECT_EQ(ran.load(), 64) << "the other chunks still ran";
  expect_each_index_once(pool, 100);
}

// Several threads share one pool (one executable run from several Python
// threads): each caller's loop is whole.
TEST(ThreadPool, ConcurrentCallersEachGetTheirWholeLoop) {
  ThreadPool pool(3);
  std::vector<std::thread> callers;
  std::atomic<int> failures{0};
  for (int t = 0; t < 4; ++t)
    callers.emplace_back([&, t] {
      for (int r = 0; r < 200; ++r) {
        const int64_t n = 10 + t * 7 + r % 5;
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.parallel_for(n, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) ++hits[static_cast<size_t>(i)];
        });
        for (auto& h : hits) failures += h.load() != 1;
      }
    });
  for (std::thread& c : callers) c.join();
  EXPECT_EQ(failures.load(), 0);
}

}  // namespace
}  // namespace tessel
