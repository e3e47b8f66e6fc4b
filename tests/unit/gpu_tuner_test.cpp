// The GPU tuner's parts that need no GPU (driver/gpu_tuner.h): the distinct
// kernels of a model with their uses and spaces, the rounds (each searched
// kernel one candidate a round, never a code it has measured, the whole
// model lowered with them), the mapping of profiled step times to kernels,
// and the one clear error of `tune_for_cuda` without a GPU. Running the
// search itself is tests/gpu/gpu_tuner_test.cpp.
#include <gtest/gtest.h>

#include <set>

#include "tessel/codegen/cuda/cuda_source.h"
#include "tessel/codegen/cuda/driver_api.h"
#include "tessel/codegen/cuda/mma_gemm.h"
#include "tessel/driver/cuda_compiler.h"
#include "tessel/driver/gpu_tuner.h"
#include "tessel/ir/builder.h"
#include "tessel/passes/pass_manager.h"
#include "tessel/support/error.h"

namespace tessel {
namespace {

// Two bf16 layers sharing one GEMM shape (one kernel, two uses), a row
// softmax, another GEMM and an elementwise tail: four kinds of kernel.
std::unique_ptr<Model> small_model() {
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::BF16, {Dim(256), Dim(512)});
  Value* y = b.input("y", DType::BF16, {Dim(256), Dim(512)});
  Value* w = b.input("w", DType::BF16, {Dim(512), Dim(512)});
  Value* v = b.input("v", DType::BF16, {Dim(512), Dim(384)});
  Value* h = b.op("Add", {b.op("MatMul", {x, w}), b.op("MatMul", {y, w})});
  Value* s = b.op("Softmax", {h}, {{"axis", Attribute::of_int(-1)}});
  b.output(b.op("Relu", {b.op("Mul", {b.op("MatMul", {s, v}), b.op("MatMul", {s, v})})}));
  run_pipeline(*m, PassOptions{});
  return m;
}

// The CUDA source of one kernel as the code generator writes it for sm_90a.
std::string code_of(const LoweredGroup& lg) {
  return cuda::emit_cuda_source({lg.kernel}, cuda::gemm_target_for("sm_90a", kernel_knobs(lg.sched, {}))).code;
}

std::vector<GpuTuneKernel> searched_kernels(const CompiledModel& c, uint64_t seed = 1) {
  std::vector<GpuTuneKernel> ks = gpu_tune_kernels(c, GpuDevice{}, seed);
  for (GpuTuneKernel& k : ks) k.searched = true;
  return ks;
}

TEST(GpuTuner, DistinctKernelsHaveTheirUsesSpacesAndOrder) {
  const std::unique_ptr<Model> m = small_model();
  const CompiledModel c = lower_for_cuda(*m);
  const std::vector<GpuTuneKernel> ks = gpu_tune_kernels(c, GpuDevice{}, 1);
  std::set<std::string> hashes, kinds;
  int uses = 0;
  for (const GpuTuneKernel& k : ks) {
    EXPECT_TRUE(hashes.insert(k.lowered.default_hash).second) << "a kernel twice";
    kinds.insert(k.lowered.schedule);
    uses += k.uses;
    ASSERT_FALSE(k.space.empty());
    EXPECT_EQ(k.space.front(), k.lowered.sched);
    std::vector<size_t> sorted = k.order;
    std::sort(sorted.begin(), sorted.end());
    for (size_t i = 0; i < sorted.size(); ++i) EXPECT_EQ(sorted[i], i + 1) << "the order is not the space's candidates";
    // The first few in the space's order (one knob changed first).
    for (size_t i = 0; i < std::min<size_t>(k.order.size(), 8); ++i) EXPECT_EQ(k.order[i], i + 1);
    EXPECT_EQ(k.codes.size(), 1u);  // the default's code
    EXPECT_FALSE(k.searched);
  }
  EXPECT_EQ(static_cast<size_t>(uses), c.lowered.size());
  EXPECT_LT(ks.size(), c.lowered.size()) << "the shared GEMM should be one kernel of two uses";
  EXPECT_TRUE(kinds.count("gpu_mma") && kinds.count("gpu")) << kinds.size();
  // The seed shuffles the rest of a long space, the same way each time.
  for (size_t i = 0; i < ks.size(); ++i) {
    if (ks[i].order.size() <= 12) continue;
    EXPECT_EQ(gpu_tune_kernels(c, GpuDevice{}, 1)[i].order, ks[i].order);
    EXPECT_NE(gpu_tune_kernels(c, GpuDevice{}, 2)[i].order, ks[i].order);
  }
}

TEST(GpuTuner, EachRoundGivesEachSearchedKernelOneNewCandidate) {
  const std::unique_ptr<Model> m = small_model();
  const CompiledModel c = lower_for_cuda(*m);
  std::vector<GpuTuneKernel> ks = searched_kernels(c);
  ks.back().searched = false;  // not searched: never in a round
  std::map<std::string, std::set<std::string>> sources;  // per kernel, every code of its rounds
  size_t rounds = 0, max_space = 0;
  for (const GpuTuneKernel& k : ks) max_space = std::max(max_space, k.space.size());
  for (;; ++rounds) {
    const std::map<std::string, Schedule> picks = next_gpu_round(ks, "sm_90a", 1000);
    if (picks.empty()) break;
    ASSERT_LE(rounds, max_space) << "rounds never end";
    EXPECT_FALSE(picks.count(ks.back().lowered.default_hash));
    // The whole model lowered with the round's lookup: every group of a
    // picked kernel has its candidate, the others their defaults.
    LowerOptions lo;
    lo.schedules = schedule_picks(picks);
    const CompiledModel tuned = lower_for_cuda(*m, lo);
    ASSERT_EQ(tuned.lowered.size(), c.lowered.size());
    for (size_t i = 0; i < tuned.lowered.size(); ++i) {
      const LoweredGroup& lg = tuned.lowered[i];
      EXPECT_EQ(lg.default_hash, c.lowered[i].default_hash);
      auto p = picks.find(lg.default_hash);
      EXPECT_EQ(lg.sched, p == picks.end() ? c.lowered[i].sched : p->second);
    }
    for (const auto& [hash, s] : picks) {
      const GpuTuneKernel& k = *std::find_if(ks.begin(), ks.end(), [&](auto& x) { return x.lowered.default_hash == hash; });
      EXPECT_NE(s, k.lowered.sched);
      EXPECT_NE(std::find(k.space.begin(), k.space.end(), s), k.space.end());
      if (sources[hash].empty()) sources[hash].insert(code_of(k.lowered));
      for (const LoweredGroup& lg : tuned.lowered)
        if (lg.default_hash == hash) {
          EXPECT_TRUE(sources[hash].insert(code_of(lg)).second) << "a code measured twice: " << print_schedule(s);
          break;
        }
    }
  }
  EXPECT_GE(rounds, 2u);
  for (const GpuTuneKernel& k : ks) {
    if (!k.searched) continue;
    EXPECT_EQ(k.cursor, k.order.size()) << "rounds ended before the space did";
    EXPECT_EQ(static_cast<size_t>(k.tried) + 1, k.codes.size());
  }
  // A cap on the candidates a kernel tries ends its rounds.
  std::vector<GpuTuneKernel> capped = searched_kernels(c);
  for (int r = 0; r < 2; ++r) EXPECT_FALSE(next_gpu_round(capped, "sm_90a", 2).empty());
  EXPECT_TRUE(next_gpu_round(capped, "sm_90a", 2).empty());
}

TEST(GpuTuner, ALookupOfPicksGivesOnlyItsKernelsAndKinds) {
  Schedule s{"gpu_mma", {}};
  s.get("gpu.gemm").set("tma", 0);
  const ScheduleLookup look = schedule_picks({{"h1", s}});
  EXPECT_EQ(look("h1", "gpu_mma"), s);
  EXPECT_EQ(look("h1", "gpu"), std::nullopt);
  EXPECT_EQ(look("h2", "gpu_mma"), std::nullopt);
}

TEST(GpuTuner, StepTimesAddUpPerKernel) {
  // Det has no GPU kernel: its step is the interpreter's, between two kernels.
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  b.output(b.op("Neg", {b.op("Det", {b.op("Abs", {b.input("x", DType::F32, {5, 3, 3})})})}));
  run_pipeline(*m, PassOptions{});
  const CompiledModel c = lower_for_cuda(*m);
  const std::vector<std::string> steps = step_kernel_hashes(c);
  ASSERT_EQ(steps.size(), c.plan.groups.size());
  size_t interp = 0, next = 0;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (!c.plan.groups[i].compiled) {
      ++interp;
      EXPECT_EQ(steps[i], "");
    } else {
      EXPECT_EQ(steps[i], c.lowered.at(next++).default_hash);
    }
  }
  EXPECT_EQ(interp, 1u);
  EXPECT_EQ(c.lowered.size(), 2u);

  // Three runs of four steps: kernel a runs twice, b once, one interpreter step.
  const std::vector<std::string> hashes = {"a", "", "b", "a"};
  const std::vector<RunProfile> runs = {{{1e-6, 9.0, 4e-6, 2e-6}}, {{3e-6, 9.0, 5e-6, 2e-6}}, {{2e-6, 9.0, 6e-6, 9e-6}}};
  const std::map<std::string, double> us = kernel_times_us(hashes, runs);
  ASSERT_EQ(us.size(), 2u);
  EXPECT_NEAR(us.at("a"), 2.0 + 2.0, 1e-9);  // the median of each step, summed
  EXPECT_NEAR(us.at("b"), 5.0, 1e-9);
  EXPECT_THROW(kernel_times_us({"a", "b"}, runs), Error);
}

TEST(GpuTuner, WithoutAGpuTuningIsOneClearError) {
  if (cuda::cuda_available()) GTEST_SKIP() << "a GPU is here: tests/gpu runs the tuner";
  const std::unique_ptr<Model> m = small_model();
  TuneOptions o;
  o.budget_s = 5;
  try {
    tune_for_cuda(*m, {}, o);
    ADD_FAILURE() << "tuned without a GPU";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no usable NVIDIA GPU"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessel
