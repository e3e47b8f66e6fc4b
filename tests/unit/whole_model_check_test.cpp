// check_on_whole_model (driver/tuning.h): `tessel tune` keeps a run's
// records only when the whole model, compiled with them, is no slower than
// before. Here a "winner" that is far slower than the default (a 1 x 16
// register tile, serial, packing both operands per call) must be refused,
// the default offered as a winner must be kept (the same kernel both
// ways: within noise, and ties keep), and a run with no improved kernel has
// nothing to check.
#include <gtest/gtest.h>

#include "pass_test_util.h"
#include "tessel/driver/compiler.h"
#include "tessel/driver/tuning.h"
#include "tessel/ir/builder.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

#ifdef TESSEL_HAVE_CODEGEN_CPU
// y = Relu(x [128, 256] @ W [256, 256]): one GEMM kernel.
std::unique_ptr<Model> gemm_model() {
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  std::vector<float> w(256 * 256);
  for (size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 13) * 0.01f - 0.06f;
  Value* x = b.input("x", DType::F32, {Dim(128), Dim(256)});
  b.output(b.op("Relu", {b.op("MatMul", {x, b.constant(Tensor::from_f32({256, 256}, w), "w")})}));
  PassOptions o;
  o.cpu = true;
  run_pipeline(*m, o);
  return m;
}

// The GEMM kernel of `m` as a tuning result whose best is `schedule`.
KernelTuning gemm_tuning(const Model& m, const DriverOptions& o, const std::string& schedule) {
  const std::unique_ptr<CompiledModel> c = compile_for_cpu(m, o);
  for (const LoweredGroup& lg : c->lowered)
    if (lg.sched.kind == "gemm") {
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
  const KernelTuning slow = gemm_tuning(*m, o,
                                        "schedule gemm {\n  gemm.tile mr=1 nr=16 lanes=16\n"
                                        "  gemm.block mc=1 kc=256 nc=16\n  gemm.parallel mode=serial\n"
                                        "  gemm.pack a=1 b=1\n}\n");
  const WholeModelCheck bad = check_on_whole_model(*m, in, o, {}, {slow}, 1.0);
  ASSERT_TRUE(bad.ran);
  EXPECT_GT(bad.runs, 0);
  EXPECT_GT(bad.tuned_ms, bad.before_ms);
  EXPECT_FALSE(bad.keep);

  // The default as the "winner": the same kernel both ways, kept unless
  // noise makes it slower (allow one retry for a disturbed machine).
  const KernelTuning same = gemm_tuning(*m, o, "");
  WholeModelCheck tie = check_on_whole_model(*m, in, o, {}, {same}, 1.0);
  if (!tie.keep) tie = check_on_whole_model(*m, in, o, {}, {same}, 1.0);
  EXPECT_TRUE(tie.ran);
  EXPECT_NEAR(tie.tuned_ms, tie.before_ms, 0.5 * tie.before_ms);

  // Nothing improved: nothing to check (and nothing compiled).
  KernelTuning none = same;
  none.improved = false;
  EXPECT_FALSE(check_on_whole_model(*m, in, o, {}, {none}, 1.0).ran);
}
#endif

}  // namespace
}  // namespace tessel
