// Progress of a compile (support/progress.h) as the CPU path reports it: the
// groups lowered, each LLVM step over the kernels, a final line; nothing
// from the code generator on a cache hit. And the tuner's progress line.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "cli_test_util.h"
#include "tessel/driver/compiler.h"
#include "tessel/driver/demo.h"
#include "tessel/driver/session.h"
#include "tessel/driver/tuner.h"
#ifdef TESSEL_HAVE_CODEGEN_CPU
#include "tessel/codegen/cpu/cpu_codegen.h"
#endif

namespace tessel {
namespace {

std::unique_ptr<Model> demo_after_passes() {
  std::unique_ptr<Model> m = build_demo_model();
  compile_model(*m, {}, DriverOptions{});
  return m;
}

// Every line in a log, as a fake clock that never moves would have it
// written: line_s 0, so each tenth of each step is a line.
ProgressOptions every_tenth(std::ostream* out) {
  ProgressOptions p;
  p.out = out;
  p.line_s = 0;
  p.clock = [] { return 0.0; };
  return p;
}

TEST(CompileProgress, LoweringCountsTheGroupsOfThePlan) {
  const auto m = demo_after_passes();
  std::ostringstream out;
  Progress p(every_tenth(&out), "compile");
  LowerOptions lo;
  lo.progress = &p;
  const CompiledModel c = lower_for_cpu(*m, lo);
  const std::string n = std::to_string(c.lowered.size());
  EXPECT_NE(out.str().find("compile: lower " + n + "/" + n + " groups"), std::string::npos) << out.str();
}

TEST(TuneProgress, ShowsKernelsDoneTrialsKernelTimeAndTheBudgetLeft) {
  std::ostringstream out;
  Progress p(every_tenth(&out), "tune");
  p.start("search", "kernels", 2);
  std::vector<KernelTuning> ks(2);
  ks[0].uses = 2;
  ks[0].default_us = 100;
  ks[0].best_us = 80;
  ks[0].improved = true;
  ks[0].trials.resize(5);  // the default and four candidates
  ks[1].default_us = ks[1].best_us = 50;  // not searched: no trials
  out.str("");
  tune_progress(p, 1, ks, 90);
  EXPECT_EQ(out.str(), "tune: search 1/2 kernels  0.0s  ETA 1m30s  trials 4  kernel time 250 -> 210 us (1.19x)\n");
  EXPECT_EQ(tune_summary(ks), "2 kernels, 1 improved, 4 trials");
}

#ifdef TESSEL_HAVE_CODEGEN_CPU
TEST(CompileProgress, CodegenCallsBackForEachKernelInEachStep) {
  const auto m = demo_after_passes();
  const CompiledModel c = lower_for_cpu(*m);
  const size_t n = c.unique_kernels.size();
  ASSERT_GE(n, 2u);
  std::vector<std::string> steps;
  std::vector<size_t> ticks;
  cpu::CodegenOptions co;
  co.on_step = [&](const char* step, size_t kernels) {
    EXPECT_EQ(kernels, n);
    steps.push_back(step);
    ticks.push_back(0);
  };
  co.on_kernel = [&] { ++ticks.back(); };
  const auto dir = std::filesystem::temp_directory_path() / ("tessel_progress_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  co.cache_dir = dir.string();
  const std::string object = cpu::compile_kernels(c.unique_kernels, co)->object_file_bytes();
  EXPECT_EQ(steps, (std::vector<std::string>{"llvm simplify", "llvm vectorize", "llvm emit"}));
  EXPECT_EQ(ticks, (std::vector<size_t>{n, n, n}));
  // The counting passes change no code (the cache key leaves them out).
  EXPECT_EQ(cpu::compile_kernels(c.unique_kernels, {})->object_file_bytes(), object);
  steps.clear();
  cpu::compile_kernels(c.unique_kernels, co);  // from the cache: no step runs
  EXPECT_TRUE(steps.empty());
  std::filesystem::remove_all(dir);
}

TEST(CompileProgress, CompileForCpuWritesTheStepsAndAFinalLine) {
  const auto m = demo_after_passes();
  const auto dir = std::filesystem::temp_directory_path() / ("tessel_progress_cpu_" + std::to_string(::getpid()));
  std::filesystem::remove_all(dir);
  testing::ScopedCacheDir cache(dir.string());
  std::ostringstream out;
  DriverOptions o;
  o.progress = every_tenth(&out);
  const auto c = compile_for_cpu(*m, o);
  const std::string groups = std::to_string(c->lowered.size()), kernels = std::to_string(c->unique_kernels.size());
  const std::string log = out.str();
  for (const std::string& line : {"compile: lower " + groups + "/" + groups + " groups",
                                  "compile: llvm simplify " + kernels + "/" + kernels + " kernels",
                                  "compile: llvm vectorize " + kernels + "/" + kernels + " kernels",
                                  "compile: llvm emit " + kernels + "/" + kernels + " kernels"})
    EXPECT_NE(log.find(line + "  0.0s\n"), std::string::npos) << line << "\n" << log;
  const std::string last = "compile: " + groups + " groups, " + kernels + " distinct kernels in 0.0s\n";
  ASSERT_GE(log.size(), last.size());
  EXPECT_EQ(log.substr(log.size() - last.size()), last);
  EXPECT_EQ(log.find('\r'), std::string::npos);  // not a terminal: lines only

  // Compiled again: the code comes from the cache, and the final line says so.
  out.str("");
  compile_for_cpu(*m, o);
  EXPECT_EQ(out.str().find("llvm"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("distinct kernels (code from the cache) in"), std::string::npos) << out.str();
  std::filesystem::remove_all(dir);
}
#endif

}  // namespace
}  // namespace tessel
