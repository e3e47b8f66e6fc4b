// The GPU tuner (driver/gpu_tuner.h) on device 0: on a small bf16 model it
// finishes within its budget, measures candidates, records at least one
// kernel under the device's fingerprint, and the model compiled with the
// recorded schedules (--tuning-db) computes what the default does. Skips
// where there is no usable GPU or no NVRTC.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "gpu_test_util.h"
#include "tessel/driver/compare.h"
#include "tessel/driver/cuda_compiler.h"
#include "tessel/driver/gpu_tuner.h"
#include "tessel/driver/tuning.h"
#include "tessel/tune/database.h"

namespace tessel {
namespace {

TEST(GpuTuner, TunesASmallModelWithinItsBudgetAndTheTunedModelAgrees) {
  SKIP_WITHOUT_GPU();
  // Computed in bf16 (--precision bf16): a tensor-core GEMM with its
  // epilogue and row reductions, with constant weights as in a real model.
  PassOptions po;
  po.gpu = true;
  po.precision = DType::BF16;
  const std::unique_ptr<Model> m = testing::small_mlp(po, 1024, 1024);
  const std::vector<RtValue> in = {RtValue(testing::random_f32({256, 1024}, 5))};
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tessel_gpu_tuner_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string db = (dir / "tuning.db").string();

  TuneOptions o;
  o.budget_s = 60;
  o.min_weight = 0;
  std::ostringstream log;
  o.log = &log;
  TuningRecorder recorder(db, host_cuda_fingerprint());
  size_t seen = 0;
  const TuneReport r = tune_for_cuda(*m, in, o, [&](const KernelTuning& k) {
    ++seen;
    recorder.record(k);
  });
  EXPECT_LT(r.seconds, o.budget_s + 15) << log.str();
  ASSERT_FALSE(r.kernels.empty());
  EXPECT_EQ(seen, r.kernels.size());
  size_t searched = 0;
  for (const KernelTuning& k : r.kernels) {
    EXPECT_GT(k.default_us, 0) << k.name;
    EXPECT_GT(k.best_us, 0) << k.name;
    EXPECT_EQ(k.wrong, 0) << k.name << "\n" << log.str();
    if (k.improved) EXPECT_LT(k.best_us, k.default_us * (1 - o.min_gain)) << k.name;
    else EXPECT_EQ(k.best, k.default_schedule) << k.name;
    searched += k.trials.size() > 1;
  }
  EXPECT_GE(searched, 1u) << "no kernel was searched\n" << log.str();
  EXPECT_GE(TuningDatabase::open(db).size(), 1u) << "nothing recorded";

  // The model with the recorded schedules computes what the default does.
  DriverOptions def;
  def.target = Target::Cuda;
  DriverOptions tuned = def;
  tuned.tuning_db = db;
  std::ostringstream warnings;
  tuned.log = &warnings;
  const std::vector<RtValue> want = compile_for_cuda(*m, def)->exe->run(in);
  const std::vector<RtValue> got = compile_for_cuda(*m, tuned)->exe->run(in);
  EXPECT_EQ(warnings.str(), "");
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_EQ(compare_values(got[i], want[i], scaled_tolerance(want[i].tensor, 5e-2, 2e-2)), "") << "output " << i;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessel
