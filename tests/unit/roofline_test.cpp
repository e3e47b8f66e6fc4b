// The roofline of `tessel bench --profile` (runtime/roofline.h) on hand-made
// step costs and ceilings, whose bound, % of bound and limiter are known.
#include "tessel/runtime/roofline.h"

#include <gtest/gtest.h>

#include "tessel/support/error.h"

namespace tessel {
namespace {

constexpr int64_t kKiB = 1024, kMiB = 1024 * 1024;

// 100 GFLOP/s; reads at 200 / 100 / 50 / 10 GB/s; a launch costs 2 us.
CeilingSet test_ceilings() {
  CeilingSet c;
  c.threads = 2;
  c.fma_flops_per_s = 100e9;
  c.levels = {{"L1", 64 * kKiB, 200e9}, {"L2", 2 * kMiB, 100e9}, {"LLC", 32 * kMiB, 50e9}, {"DRAM", 0, 10e9}};
  c.launch_s = 2e-6;
  return c;
}

StepCost cost(double flops, int64_t bytes) {
  StepCost c;
  c.flops = flops;
  c.bytes = bytes;
  return c;
}

TEST(Roofline, BytesAreReadAtTheFastestLevelThatHoldsThem) {
  const CeilingSet c = test_ceilings();
  EXPECT_EQ(level_for(c, 1000).name, "L1");
  EXPECT_EQ(level_for(c, 64 * kKiB).name, "L1");  // exactly full still fits
  EXPECT_EQ(level_for(c, 64 * kKiB + 1).name, "L2");
  EXPECT_EQ(level_for(c, 3 * kMiB).name, "LLC");
  EXPECT_EQ(level_for(c, 100.0 * kMiB).name, "DRAM");  // the last level holds anything
  CeilingSet none = c;
  none.levels.clear();
  EXPECT_THROW(level_for(none, 1), Error);
}

TEST(Roofline, LargeGemmIsComputeBound) {
  // 512^3 GEMM: 2 x 512^3 flops over A, B and C (3 MiB, in the LLC).
  const double flops = 2.0 * 512 * 512 * 512;
  const int64_t bytes = 3 * 512 * 512 * 4;
  const RooflinePoint p = roofline_point(cost(flops, bytes), 3e-3, test_ceilings());
  EXPECT_EQ(p.level, "LLC");
  EXPECT_DOUBLE_EQ(p.intensity, flops / double(bytes));  // 85.3 FLOP/B, past the LLC's ridge of 2
  EXPECT_DOUBLE_EQ(p.compute_s, flops / 100e9);
  EXPECT_DOUBLE_EQ(p.memory_s, double(bytes) / 50e9);
  EXPECT_DOUBLE_EQ(p.bound_s, 2e-6 + flops / 100e9);
  EXPECT_DOUBLE_EQ(p.attainable_flops_per_s, 100e9);  // min(peak, intensity x bandwidth)
  EXPECT_NEAR(p.of_bound, (2e-6 + flops / 100e9) / 3e-3, 1e-12);  // 0.8954
  EXPECT_EQ(p.limiter, Limiter::Compute);
  EXPECT_EQ(p.why, "85.3 FLOP/B >= ridge 2 (LLC)");
}

TEST(Roofline, LargeCopyIsMemoryBound) {
  // 64 MiB read and 64 MiB written: past the LLC, from DRAM at 10 GB/s.
  const int64_t bytes = 2 * 64 * kMiB;
  const RooflinePoint p = roofline_point(cost(0, bytes), 0.016, test_ceilings());
  EXPECT_EQ(p.level, "DRAM");
  EXPECT_EQ(p.intensity, 0);
  EXPECT_EQ(p.attainable_flops_per_s, 0);  // no flops to attain
  EXPECT_DOUBLE_EQ(p.bound_s, 2e-6 + double(bytes) / 10e9);
  EXPECT_NEAR(p.of_bound, (2e-6 + double(bytes) / 10e9) / 0.016, 1e-12);  // 0.839
  EXPECT_EQ(p.limiter, Limiter::Memory);
  EXPECT_EQ(p.why, "no FLOPs: 134 MB from DRAM at 10 GB/s");
}

TEST(Roofline, LowIntensityContractionIsMemoryBound) {
  // A matrix-vector product 4096 x 4096: 0.5 FLOP/B, under DRAM's ridge of 10.
  const double flops = 2.0 * 4096 * 4096;
  const int64_t bytes = (4096 * 4096 + 2 * 4096) * 4;
  const RooflinePoint p = roofline_point(cost(flops, bytes), 0.01, test_ceilings());
  EXPECT_EQ(p.level, "DRAM");
  EXPECT_EQ(p.limiter, Limiter::Memory);
  EXPECT_DOUBLE_EQ(p.attainable_flops_per_s, p.intensity * 10e9);
  EXPECT_DOUBLE_EQ(p.bound_s, 2e-6 + double(bytes) / 10e9);
  EXPECT_EQ(p.why, "0.5 FLOP/B < ridge 10 (DRAM) at 10 GB/s");
}

TEST(Roofline, StepsShorterThanTwoLaunchesAreLaunchBound) {
  // 4 KiB from L1: 20 ns of reads after a 2 us launch, done in 3 us.
  const RooflinePoint p = roofline_point(cost(0, 4096), 3e-6, test_ceilings());
  EXPECT_EQ(p.level, "L1");
  EXPECT_EQ(p.limiter, Limiter::Launch);
  EXPECT_DOUBLE_EQ(p.bound_s, 2e-6 + 4096 / 200e9);
  EXPECT_NEAR(p.of_bound, (2e-6 + 4096 / 200e9) / 3e-6, 1e-12);
  EXPECT_EQ(p.why, "took 3 us < 2 x launch 2 us");
  // The same work taking 10 us: not the launch's doing (under half of it); its kernel is slow.
  const RooflinePoint slow = roofline_point(cost(0, 4096), 1e-5, test_ceilings());
  EXPECT_EQ(slow.limiter, Limiter::Memory);
  EXPECT_NEAR(slow.of_bound, 0.202048, 1e-9);
  EXPECT_EQ(slow.why, "no FLOPs: 0.0041 MB from L1 at 200 GB/s");
}

TEST(Roofline, TiesGoToComputeAndNoFlopsIsNeverCompute) {
  CeilingSet c = test_ceilings();
  c.launch_s = 0;
  // 5000 flops at 100 GFLOP/s and 10 kB from L1 at 200 GB/s: 50 ns each.
  const RooflinePoint eq = roofline_point(cost(5000, 10'000), 1e-6, c);
  EXPECT_DOUBLE_EQ(eq.compute_s, eq.memory_s);
  EXPECT_EQ(eq.limiter, Limiter::Compute);
  // Nothing to compute or move, in a long step: memory (the flops are 0), not compute.
  EXPECT_EQ(roofline_point(cost(0, 0), 1e-3, c).limiter, Limiter::Memory);
  // A step of no work in no time is the launch's; a zero time gives 0, not a division by zero.
  const RooflinePoint empty = roofline_point(cost(0, 0), 0, test_ceilings());
  EXPECT_EQ(empty.limiter, Limiter::Launch);
  EXPECT_EQ(empty.of_bound, 0);
}

TEST(Roofline, CeilingsMustBePositive) {
  CeilingSet c = test_ceilings();
  c.fma_flops_per_s = 0;
  EXPECT_THROW(roofline_point(cost(1, 1), 1, c), Error);
  c = test_ceilings();
  c.levels[0].read_bytes_per_s = 0;
  EXPECT_THROW(roofline_point(cost(1, 1), 1, c), Error);
}

TEST(Roofline, SummaryAddsTimeAndBoundsByLimiter) {
  const CeilingSet c = test_ceilings();
  const std::vector<RooflinePoint> points = {
      roofline_point(cost(2.0 * 512 * 512 * 512, 3 * 512 * 512 * 4), 3e-3, c),  // compute
      roofline_point(cost(0, 2 * 64 * kMiB), 0.016, c),                          // memory
      roofline_point(cost(0, 4096), 3e-6, c),                                    // launch
      roofline_point(cost(0, 8192), 3.5e-6, c),                                  // launch
  };
  const RooflineSummary s = summarize_roofline(points);
  const auto& launch = s.by_limiter[size_t(Limiter::Launch)];
  EXPECT_EQ(s.by_limiter[size_t(Limiter::Compute)].steps, 1);
  EXPECT_EQ(s.by_limiter[size_t(Limiter::Memory)].steps, 1);
  EXPECT_EQ(launch.steps, 2);
  EXPECT_DOUBLE_EQ(launch.seconds, 6.5e-6);
  EXPECT_DOUBLE_EQ(launch.bound_s, points[2].bound_s + points[3].bound_s);
  EXPECT_DOUBLE_EQ(s.seconds, 3e-3 + 0.016 + 6.5e-6);
  EXPECT_DOUBLE_EQ(s.bound_s, points[0].bound_s + points[1].bound_s + points[2].bound_s + points[3].bound_s);
  EXPECT_STREQ(limiter_name(Limiter::Compute), "compute");
  EXPECT_STREQ(limiter_name(Limiter::Memory), "memory");
  EXPECT_STREQ(limiter_name(Limiter::Launch), "launch");
}

}  // namespace
}  // namespace tessel
