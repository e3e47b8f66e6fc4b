// check_on_whole_model and choose_records_on_whole_model (driver/tuning.h):
// `tessel tune` records a run's improved kernels only as far as the whole
// model, compiled with them, is no slower than before. Here a "winner" that
// is far slower than the default (a 1 x 16 register tile, serial, packing
// both operands per call; 7-10x the default's time here) must be refused,
// the default offered as a winner is checked (the same kernel both ways), a
// run with no
// improved kernel has nothing to check, and of two winners, a neutral one
// with the larger estimated saving and the slow one, the prefix search
// keeps the first and drops the second.
#include <gtest/gtest.h>

#include "pass_test_util.h"
#include "tessel/driver/compiler.h"
#include "tessel/driver/tuning.h"
#include "tessel/ir/builder.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

#ifdef TESSEL_HAVE_CODEGEN_CPU
// A GEMM schedule many times slower than the default.
constexpr const char* kSlow =
    "schedule gemm {\n  gemm.tile mr=1 nr=16 lanes=16\n  gemm.block mc=1 kc=256 nc=16\n"
    "  gemm.parallel mode=serial\n  gemm.pack a=1 b=1\n}\n";

// y = Relu(x [128, 256] @ W [256, 256]), then with `layers` = 2 Relu(y @
// W2 [256, 128]): one GEMM kernel each (another shape, another kernel).
std::unique_ptr<Model> gemm_model(int layers = 1) {
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* y = b.input("x", DType::F32, {Dim(128), Dim(256)});
  for (int l = 0; l < layers; ++l) {
    const int64_t n = 256 >> l;
    std::vector<float> w(static_cast<size_t>(256 * n));
    for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 13) * 0.01f - 0.06f;
    y = b.op("Relu", {b.op("MatMul", {y, b.constant(Tensor::from_f32({256, n}, w), "w" + std::to_string(l))})});
  }
  b.output(y);
  PassOptions o;
  o.cpu = true;
  run_pipeline(*m, o);
  return m;
}

// The `which`-th GEMM kernel of `m` as a tuning result whose best is
// `schedule` (the default when empty).
KernelTuning gemm_tuning(const Model& m, const DriverOptions& o, const std::string& schedule, int which = 0) {
  const std::unique_ptr<CompiledModel> c = compile_for_cpu(m, o);
  for (const LoweredGroup& lg : c->lowered)
    if (lg.sched.kind == "gemm" && which-- == 0) {
      KernelTuning k;
      k.name = lg.kernel.name;
      k.hash = lg.default_hash;
      k.kind = lg.sched.kind;
      k.default_schedule = lg.sched;
      k.best = schedule.empty() ? lg.sched : parse_schedule(schedule);
      k.improved = true;
      return k;
    }
  ADD_FAILURE() << "no GEMM kernel";
  return {};
}

TEST(WholeModelCheck, RefusesAWinnerThatSlowsTheModelAndKeepsATie) {
  auto m = gemm_model();
  DriverOptions o;
  o.threads = 2;
  const std::vector<RtValue> in = testing::random_inputs(*m->graph, {}, 1);
  const KernelTuning slow = gemm_tuning(*m, o, kSlow);
  const WholeModelCheck bad = check_on_whole_model(*m, in, o, {}, {slow}, 1.0);
  ASSERT_TRUE(bad.ran);
  EXPECT_GT(bad.runs, 0);
  EXPECT_GT(bad.tuned_ms, bad.before_ms);
  EXPECT_FALSE(bad.keep);

  // The default as the "winner": the same kernel both ways. Which of the
  // two times lower is noise (a test asserts no timing that close), but the
  // check runs and, with a tolerance wider than any noise, keeps it.
  const KernelTuning same = gemm_tuning(*m, o, "");
  const WholeModelCheck tie = check_on_whole_model(*m, in, o, {}, {same}, 0.5, 3.0);
  EXPECT_TRUE(tie.ran);
  EXPECT_GT(tie.runs, 0);
  EXPECT_TRUE(tie.keep) << tie.tuned_ms << " ms against " << tie.before_ms;

  // Nothing improved: nothing to check (and nothing compiled).
  KernelTuning none = same;
  none.improved = false;
  EXPECT_FALSE(check_on_whole_model(*m, in, o, {}, {none}, 1.0).ran);
}

TEST(WholeModelCheck, TheLargestPrefixThatIsNoSlowerIsKept) {
  auto m = gemm_model(2);
  DriverOptions o;
  o.threads = 2;
  const std::vector<RtValue> in = testing::random_inputs(*m->graph, {}, 1);
  // The slow schedule on the larger GEMM: the model takes about 5x as long.
  KernelTuning neutral = gemm_tuning(*m, o, "", 1), slow = gemm_tuning(*m, o, kSlow, 0);
  ASSERT_NE(neutral.hash, slow.hash);
  neutral.default_us = 100, neutral.best_us = 50;  // the larger estimated saving: first in line
  slow.default_us = 100, slow.best_us = 90;
  // A tolerance of 100%: the neutral kernel's timing noise (up to 1.6x seen
  // on a loaded machine) is not a loss; the slow one costs far more.
  const RecordChoice c = choose_records_on_whole_model(*m, in, o, {}, {slow, neutral}, 1.0, 1.0);
  EXPECT_EQ(c.improved, 2u);
  EXPECT_EQ(c.kept, std::vector<std::string>{neutral.hash});
  EXPECT_EQ(c.checks, 2);  // both, then the first
  EXPECT_TRUE(c.check.keep);
}
#endif

}  // namespace
}  // namespace tessel
