// One compiled Executable run from 8 threads x 1000 runs at once (issue 27):
// Executable::run is const and thread-safe (driver/api.h), so every result
// must be bitwise identical to the same input's single-threaded run. Each
// thread runs its own input, so that runs that shared an arena or a scratch
// buffer would mix values and fail. Also run under TSan
// (scripts/test.sh --sanitize=thread).
#include <gtest/gtest.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "pass_test_util.h"
#include "tessel/ir/builder.h"
#include "runtime_test_util.h"
#include "tessel/driver/api.h"

namespace tessel {
namespace {

#ifdef TESSEL_HAVE_CODEGEN_CPU
constexpr int kThreads = 8;
constexpr int kRuns = 1000;

std::vector<Tensor> input_for(const Executable& exe, unsigned seed) {
  std::vector<Tensor> out;
  for (const RtValue& v : testing::random_inputs(*exe.model().graph, {{"batch", 8}}, seed)) out.push_back(v.tensor);
  return out;
}

// Runs `exe` from kThreads threads, kRuns times each, thread t on input t,
// and counts results that differ in any bit from the single-threaded ones.
void expect_runs_from_eight_threads_identical(const Executable& exe) {
  std::vector<std::vector<Tensor>> in, want;
  for (int t = 0; t < kThreads; ++t) {
    in.push_back(input_for(exe, 100 + t));
    want.push_back(exe.run_tensors(in.back()));
    ASSERT_FALSE(want.back().empty());
  }
  ASSERT_FALSE(want[0][0].bitwise_equal(want[1][0])) << "the threads' inputs should give different outputs";
  std::atomic<int> mismatches{0}, errors{0};
  std::vector<std::string> first_error(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < kRuns; ++i) {
        try {
          const std::vector<Tensor> got = exe.run_tensors(in[t]);
          bool same = got.size() == want[t].size();
          for (size_t o = 0; same && o < got.size(); ++o) same = got[o].bitwise_equal(want[t][o]);
          if (!same) ++mismatches;
        } catch (const Error& e) {
          if (errors++ == 0) first_error[t] = e.what();
        }
      }
    });
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0) << "of " << kThreads * kRuns << " runs";
  EXPECT_EQ(errors.load(), 0);
  for (const std::string& e : first_error) EXPECT_EQ(e, "");
}

// Compiled kernels only (MatMul+Add, Relu, Softmax), the intermediates in
// one arena per run, parallel loops on a pool of 2 shared by the runs.
TEST(ConcurrencyExecutable, CompiledKernelsFromEightThreads) {
  Options o;
  o.threads = 2;
  expect_runs_from_eight_threads_identical(*compile(testing::mlp_softmax_model(), o));
}

// x: f32[batch, 24] -> Exp -> MatMul -> TopK (the interpreter: two
// outputs) -> Sigmoid(v) * v on the values: kernels on both sides of an
// interpreter node, with the memory planner's in-place reuse.
std::unique_ptr<Model> kernels_around_topk() {
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::F32, {Dim::sym("batch"), 24});
  Value* p = b.op("MatMul", {b.op("Exp", {x}), b.constant(testing::seeded_weights({24, 24}, 7), "w")});
  auto top = b.ops("TopK", {p, b.const_i64({4}, "k")}, 2, {{"axis", Attribute::of_int(-1)}});
  b.output(b.op("Mul", {b.op("Sigmoid", {top[0]}), top[0]}));
  return m;
}

// Each run's pool of one thread: the runs' own threads alone.
TEST(ConcurrencyExecutable, KernelsAndInterpreterNodesFromEightThreads) {
  Options o;
  o.threads = 1;
  expect_runs_from_eight_threads_identical(*compile(kernels_around_topk(), o));
}
#endif

}  // namespace
}  // namespace tessel
