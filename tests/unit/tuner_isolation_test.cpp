// Crash isolation of the CPU tuner (driver/isolated_run.h, driver/tuner.h):
// jobs run in forked children, a job that kills its child is reported as
// crashed with its signal and the jobs after it still run; the tuner counts
// a crashing candidate and goes on searching.
#include <gtest/gtest.h>

#include <csignal>
#include <cstdlib>

#include "pass_test_util.h"
#include "tessel/driver/isolated_run.h"
#include "tessel/driver/tuner.h"
#include "tessel/ir/builder.h"
#include "tessel/passes/pass_manager.h"
#include "tessel/schedule/schedule.h"

namespace tessel {
namespace {

// Jobs 0-5: 2 raises SIGSEGV, 4 aborts; the others report 10 x their index.
TEST(IsolatedRun, AJobThatKillsItsChildIsMarkedAndTheRestStillRun) {
  const std::vector<IsolatedResult> r =
      run_isolated({0, 1, 2, 3, 4, 5}, [](const std::vector<size_t>& todo, const ReportFn& report) {
        for (size_t i : todo) {
          if (i == 2) std::raise(SIGSEGV);
          if (i == 4) std::abort();
          report(i, static_cast<int32_t>(i), 10.0 * static_cast<double>(i));
        }
      });
  ASSERT_EQ(r.size(), 6u);
  for (size_t i : {0u, 1u, 3u, 5u}) {
    EXPECT_TRUE(r[i].reported) << i;
    EXPECT_FALSE(r[i].crashed) << i;
    EXPECT_EQ(r[i].code, static_cast<int32_t>(i));
    EXPECT_EQ(r[i].value, 10.0 * static_cast<double>(i));
  }
  EXPECT_TRUE(r[2].crashed);
  EXPECT_EQ(r[2].signal, SIGSEGV);
  EXPECT_TRUE(r[4].crashed);
  EXPECT_EQ(r[4].signal, SIGABRT);
}

// A child that stops early on its own (exit 0) leaves the rest unreported
// and not crashed; one that throws counts its first unreported job crashed.
TEST(IsolatedRun, StoppingEarlyIsNotACrash) {
  const std::vector<IsolatedResult> r = run_isolated({0, 1, 2}, [](const std::vector<size_t>&, const ReportFn& report) {
    report(0, 0, 1.0);
  });
  EXPECT_TRUE(r[0].reported);
  EXPECT_FALSE(r[1].reported || r[1].crashed || r[2].reported || r[2].crashed);
  const std::vector<IsolatedResult> t = run_isolated({0, 1}, [](const std::vector<size_t>& todo, const ReportFn&) {
    if (todo.front() == 0) throw Error("boom");
  });
  EXPECT_TRUE(t[0].crashed);
  EXPECT_EQ(t[0].signal, 0);
  EXPECT_FALSE(t[1].reported || t[1].crashed);  // the second child returned without reporting
}

#ifdef TESSEL_HAVE_CODEGEN_CPU
// The tuner on one GEMM, with every candidate that packs A crashing where it
// runs: the search finishes, counts them as crashed (and failed), records
// none of them as a trial, and still measures the others.
TEST(TunerIsolation, CrashingCandidatesAreCountedAndSkipped) {
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  std::vector<float> w(128 * 96);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 7) * 0.1f - 0.3f;
  b.output(b.op("MatMul", {b.input("x", DType::F32, {Dim(64), Dim(128)}), b.constant(Tensor::from_f32({128, 96}, w), "w")}));
  PassOptions po;
  po.cpu = true;
  run_pipeline(*m, po);
  TuneOptions o;
  o.budget_s = 20;
  o.max_trials = 24;
  o.threads = 2;
  const auto packs_a = [](const Schedule& s) { return print_schedule(s).find("gemm.pack a=1") != std::string::npos; };
  o.crash_for_test = packs_a;
  const TuneReport r = tune_for_cpu(*m, testing::random_inputs(*m->graph, {}, 2), o);
  ASSERT_EQ(r.kernels.size(), 1u);
  const KernelTuning& k = r.kernels[0];
  EXPECT_GT(k.crashed, 0);
  EXPECT_GE(k.failed, k.crashed);
  EXPECT_EQ(k.wrong, 0);
  ASSERT_GT(k.trials.size(), 1u) << "the other candidates were measured";
  for (size_t i = 1; i < k.trials.size(); ++i) {
    EXPECT_GT(k.trials[i].measured_us, 0);
    EXPECT_EQ(k.trials[i].schedule.find("gemm.pack a=1"), std::string::npos) << k.trials[i].schedule;
  }
  if (k.improved) EXPECT_FALSE(packs_a(k.best));
}
#endif

}  // namespace
}  // namespace tessel
