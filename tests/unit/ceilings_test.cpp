// The machine's ceilings: the calibrated kernels (runtime/ceiling_kernels.h),
// a short measurement (runtime/ceilings.h; loose checks only, the machine is
// shared), their JSON form and the per-fingerprint cache
// (driver/ceilings_json.h, driver/host_ceilings.h).
#include <gtest/gtest.h>

#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tessel/driver/ceilings_json.h"
#include "tessel/driver/host_ceilings.h"
#include "tessel/runtime/ceiling_kernels.h"
#include "tessel/runtime/ceilings.h"
#include "tessel/support/cache_file.h"
#include "tessel/support/error.h"

namespace tessel {
namespace {

namespace fs = std::filesystem;

TEST(CeilingKernels, TheWidestVectorsTheFeaturesAllow) {
  EXPECT_STREQ(ceiling_kernels_for("+avx,+avx2,+avx512f,+fma,+sse2").isa, "avx512f");
  EXPECT_EQ(ceiling_kernels_for("+avx,+avx2,+avx512f,+fma,+sse2").lanes, 16);
  EXPECT_STREQ(ceiling_kernels_for("+avx,+avx2,-avx512f,+fma,+sse2").isa, "avx2+fma");
  EXPECT_STREQ(ceiling_kernels_for("+avx,+avx2,-avx512f,-fma,+sse2").isa, "sse2");  // AVX2 without FMA
  EXPECT_STREQ(ceiling_kernels_for("").isa, "scalar");
  const CeilingKernels& k = ceiling_kernels_for("+avx2,+fma");
  EXPECT_EQ(k.flops_per_iter(), 2.0 * k.lanes * k.chains);
}

TEST(CeilingKernels, TheHostsKernelsComputeWhatTheySay) {
  const CeilingKernels& k = host_ceiling_kernels();
  std::vector<float> ones(size_t(4 * kReadBlockFloats), 1.0f);
  EXPECT_EQ(k.read(ones.data(), int64_t(ones.size()), 3), 3.0f * float(ones.size()));  // every float, every time
  // Each chain converges to y / (1 - x) = 0.1 from its start: finite, near 0.1 per lane and chain.
  const float s = k.fma(100'000);
  EXPECT_NEAR(s, 0.1 * k.lanes * k.chains, 0.01 * k.lanes * k.chains);
}

TEST(Ceilings, PlanSizesTheDramBufferFromTheLastLevelCache) {
  const CeilingsPlan p = ceilings_plan(2, 32 << 10, 1 << 20, 32 << 20);
  EXPECT_EQ(p.threads, 2);
  EXPECT_EQ(p.dram_bytes, int64_t(128) << 20);                                  // 4 x the LLC
  EXPECT_EQ(ceilings_plan(1, 32 << 10, 1 << 20, 0).dram_bytes, int64_t(64) << 20);  // at least 64 MiB
  EXPECT_EQ(ceilings_plan(1, 32 << 10, 1 << 20, int64_t(1) << 30).dram_bytes, int64_t(1) << 30);  // at most 1 GiB
  EXPECT_THROW(ceilings_plan(0, 32 << 10, 1 << 20, 0), Error);
  EXPECT_THROW(ceilings_plan(1, 0, 1 << 20, 0), Error);
}

// One short measurement: positive, ordered L1 > L2 > DRAM, and both thread
// counts there. Not a speed test: exact figures vary with the load, and
// when other processes disturbed the samples (a build on this 2-core
// machine), the order is not checked.
TEST(Ceilings, MeasuredCeilingsArePlausibleAndOrdered) {
  CeilingsPlan p = host_ceilings_plan(2);
  p.sample_seconds = 0.002;
  p.samples = 3;
  p.dram_bytes = std::max<int64_t>(p.dram_bytes / 2, int64_t(64) << 20);
  const auto t0 = std::chrono::steady_clock::now();
  const auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(); };
  CpuCeilings c = measure_cpu_ceilings(p);
  while (c.disturbed_samples > 0 && elapsed() < 0.6) c = measure_cpu_ceilings(p);
  EXPECT_EQ(c.isa, std::string(host_ceiling_kernels().isa));
  ASSERT_EQ(c.sets.size(), 2u);
  EXPECT_EQ(c.for_threads(1).threads, 1);
  EXPECT_EQ(c.for_threads(2).threads, 2);
  EXPECT_THROW(c.for_threads(3), Error);
  for (const CeilingSet& s : c.sets) {
    SCOPED_TRACE(s.threads);
    EXPECT_GT(s.fma_flops_per_s, 0);
    EXPECT_GE(s.launch_s, 0);
    ASSERT_GE(s.levels.size(), 3u);
    EXPECT_EQ(s.levels.front().name, "L1");
    EXPECT_EQ(s.levels.back().name, "DRAM");
    EXPECT_EQ(s.levels.back().capacity, 0);
    for (size_t i = 0; i + 2 < s.levels.size(); ++i) EXPECT_LT(s.levels[i].capacity, s.levels[i + 1].capacity);
    for (const MemoryLevel& lv : s.levels) EXPECT_GT(lv.read_bytes_per_s, 0) << lv.name;
  }
  if (c.disturbed_samples > 0)
    GTEST_SKIP() << "other processes disturbed " << c.disturbed_samples << " samples: the order is not checked";
  for (const CeilingSet& s : c.sets) {
    SCOPED_TRACE(s.threads);
    EXPECT_GT(s.fma_flops_per_s, 1e9);  // any CPU with vectors does a GFLOP/s
    EXPECT_GT(s.levels[0].read_bytes_per_s, s.levels[1].read_bytes_per_s);      // L1 > L2
    EXPECT_GT(s.levels[1].read_bytes_per_s, s.levels.back().read_bytes_per_s);  // L2 > DRAM
  }
  // Two threads do not lose half the FMA throughput of one. (Not "twice":
  // where the two hardware threads share one core's FMA units, as the two
  // vCPUs of this project's virtual machine do, they reach about the same.)
  EXPECT_GT(c.sets[1].fma_flops_per_s, 0.5 * c.sets[0].fma_flops_per_s);
}

CpuCeilings made_up_ceilings() {
  CpuCeilings c;
  c.isa = "avx512f";
  c.lanes = 16;
  for (int t : {1, 2}) {
    CeilingSet s;
    s.threads = t;
    s.fma_flops_per_s = 116e9 * t;
    s.levels = {{"L1", 32768 * t, 190e9 * t}, {"L2", (1 << 20) * t, 100e9 * t}, {"DRAM", 0, 17e9}};
    s.launch_s = t == 1 ? 5e-8 : 1.5e-6;
    c.sets.push_back(s);
  }
  return c;
}

void expect_same(const CpuCeilings& a, const CpuCeilings& b) {
  EXPECT_EQ(ceilings_to_json(a), ceilings_to_json(b));
}

TEST(CeilingsJson, RoundTripsAndNamesWhatIsWrong) {
  CpuCeilings c = made_up_ceilings();
  c.fingerprint = "cpu|x|f|t2";
  c.measured_at = "2026-12-07T18:00:00Z";
  c.load_average = 0.25;
  const CpuCeilings back = ceilings_from_json(Json::parse(json_line(ceilings_to_json(c))));
  expect_same(back, c);
  EXPECT_EQ(back.for_threads(2).levels[1].name, "L2");

  const auto error_of = [&](const std::function<void(Json&)>& damage) {
    Json j = ceilings_to_json(c);
    damage(j);
    try {
      ceilings_from_json(j);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_EQ(error_of([](Json& j) { j.erase("isa"); }), "ceilings: no field 'isa'");
  EXPECT_EQ(error_of([](Json& j) { j["lanes"] = "sixteen"; }), "ceilings: field 'lanes' has the wrong type");
  EXPECT_EQ(error_of([](Json& j) { j["format"] = 99; }), "ceilings: format 99 (this tessel reads 1)");
  EXPECT_EQ(error_of([](Json& j) { j["sets"][0]["fma_flops_per_s"] = -1.0; }),
            "ceilings: field 'fma_flops_per_s' must be positive, got -1");
  EXPECT_EQ(error_of([](Json& j) { j["sets"] = Json::array(); }), "ceilings: 'sets' must be a non-empty array");
  EXPECT_EQ(error_of([](Json& j) { j["sets"][0]["levels"][2]["capacity"] = 5; }),
            "ceilings: the last level (DRAM) must be unbounded (capacity 0)");
  EXPECT_EQ(error_of([](Json& j) { j = Json::array(); }), "ceilings: not a JSON object");
}

class CeilingsCache : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("tessel_ceilings_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    path_ = (dir_ / "ceilings" / "x.ceilings").string();
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Loads through the cache, counting the measurements.
  LoadedCeilings load(bool refresh = false, const std::string& fingerprint = "cpu|test|f|t2") {
    return load_or_measure_ceilings(path_, fingerprint, refresh, [&] {
      ++measured_;
      return made_up_ceilings();
    }, log_);
  }
  void overwrite(const std::string& bytes) {
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << bytes;
  }

  fs::path dir_;
  std::string path_;
  int measured_ = 0;
  std::ostringstream log_;
};

TEST_F(CeilingsCache, MeasuresOnceThenReadsTheFile) {
  const LoadedCeilings first = load();
  EXPECT_FALSE(first.cached);
  EXPECT_EQ(measured_, 1);
  EXPECT_TRUE(fs::exists(path_));
  EXPECT_EQ(first.ceilings.fingerprint, "cpu|test|f|t2");
  EXPECT_FALSE(first.ceilings.measured_at.empty());
  const LoadedCeilings second = load();
  EXPECT_TRUE(second.cached);
  EXPECT_EQ(measured_, 1);
  expect_same(second.ceilings, first.ceilings);
  EXPECT_FALSE(load(/*refresh=*/true).cached);  // --refresh
  EXPECT_EQ(measured_, 2);
  EXPECT_EQ(log_.str(), "");
}

TEST_F(CeilingsCache, ADamagedFileIsMeasuredAgainWithOneWarning) {
  load();
  overwrite("garbage, not a ceilings file");
  const LoadedCeilings l = load();
  EXPECT_FALSE(l.cached);
  EXPECT_EQ(measured_, 2);
  EXPECT_EQ(log_.str(), "warning: ceilings cache " + path_ + ": damaged (not a whole ceilings file); measuring again\n");
  EXPECT_TRUE(load().cached);  // rewritten whole
  EXPECT_EQ(measured_, 2);
}

TEST_F(CeilingsCache, AWholeFileWithBadContentsIsMeasuredAgain) {
  load();
  write_cache_file(path_, "TSLCEIL1", "{not json");
  EXPECT_FALSE(load().cached);
  EXPECT_NE(log_.str().find(": not JSON; measuring again"), std::string::npos) << log_.str();
  log_.str("");
  write_cache_file(path_, "TSLCEIL1", R"({"format": 99})");
  EXPECT_FALSE(load().cached);
  EXPECT_NE(log_.str().find(": ceilings: format 99 (this tessel reads 1); measuring again"), std::string::npos)
      << log_.str();
  EXPECT_EQ(measured_, 3);
}

TEST_F(CeilingsCache, AnotherMachinesFileIsMeasuredAgain) {
  load(false, "cpu|other|f|t2");
  EXPECT_FALSE(load(false, "cpu|test|f|t2").cached);
  EXPECT_EQ(measured_, 2);
  EXPECT_EQ(log_.str(), "");  // not damage: a name collision, or a file moved between machines
}

TEST_F(CeilingsCache, NoCacheFolderStillMeasures) {
  path_ = "";
  EXPECT_FALSE(load().cached);
  EXPECT_FALSE(load().cached);
  EXPECT_EQ(measured_, 2);
}

TEST(CeilingsCachePath, TheFingerprintNamesTheThreadsTheCpuAndItsCaches) {
  const CeilingsPlan p = ceilings_plan(2, 32 << 10, 1 << 20, 32 << 20);
  const std::string f = host_ceilings_fingerprint(2, p);
  EXPECT_NE(f.find("|t2|"), std::string::npos) << f;
  EXPECT_NE(f.find("|cpuid:"), std::string::npos) << f;  // also without LLVM, where the CPU name is "unknown"
  EXPECT_NE(f.find("|caches:32768,1048576,33554432"), std::string::npos) << f;
  EXPECT_NE(host_ceilings_fingerprint(1, p), f);
  EXPECT_NE(host_ceilings_fingerprint(2, ceilings_plan(2, 48 << 10, 1 << 20, 32 << 20)), f);
}

TEST(CeilingsCachePath, KeyedByTheFingerprint) {
  EXPECT_NE(ceilings_cache_path("cpu|a|f|t1"), ceilings_cache_path("cpu|a|f|t2"));
  EXPECT_EQ(ceilings_cache_path("cpu|a|f|t1"), ceilings_cache_path("cpu|a|f|t1"));
  EXPECT_EQ(fs::path(ceilings_cache_path("cpu|a|f|t1")).parent_path().filename(), "ceilings");
}

}  // namespace
}  // namespace tessel
