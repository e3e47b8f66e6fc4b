// The in-process C++ API (driver/api.h): compile once, then one
// Executable run from 4 threads x 100 runs gives outputs bitwise identical to
// a single-threaded run.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <thread>

#include "pass_test_util.h"
#include "runtime_test_util.h"
#include "tessel/driver/api.h"

namespace tessel {
namespace {

#ifdef TESSEL_HAVE_CODEGEN_CPU
std::vector<Tensor> tensors(const std::vector<RtValue>& vs) {
  std::vector<Tensor> out;
  for (const RtValue& v : vs) out.push_back(v.tensor);
  return out;
}

// Runs `exe` on `in` from 4 threads, 100 times each, and checks every result
// against `want` bit for bit.
void expect_concurrent_runs_identical(const Executable& exe, const std::vector<Tensor>& in,
                                      const std::vector<Tensor>& want) {
  std::atomic<int> mismatches{0}, errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 100; ++i) {
        try {
          const std::vector<Tensor> got = exe.run_tensors(in);
          for (size_t o = 0; o < want.size(); ++o)
            if (o >= got.size() || !got[o].bitwise_equal(want[o])) ++mismatches;
        } catch (const Error&) {
          ++errors;
        }
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
  EXPECT_EQ(errors.load(), 0);
}

TEST(RuntimeApi, FusedMlpSoftmaxFromFourThreads) {
  Options o;
  o.threads = 2;  // the runs' parallel loops share one pool of 2
  std::unique_ptr<Executable> exe = compile(testing::mlp_softmax_model(), o);
  const std::vector<Tensor> in = tensors(testing::random_inputs(*exe->model().graph, {{"batch", 33}}, 5));
  const std::vector<Tensor> want = exe->run_tensors(in);
  ASSERT_EQ(want.size(), 1u);
  EXPECT_EQ(want[0].shape(), (std::vector<int64_t>{33, 10}));
  expect_concurrent_runs_identical(*exe, in, want);
}

TEST(RuntimeApi, NodeTestModelFromFourThreads) {
  const char* env = std::getenv("TESSEL_NODE_TESTS_DIR");
  const std::string dir = env ? env : std::string(TESSEL_SOURCE_DIR) + "/build/node_tests";
  const std::string model = dir + "/test_layer_normalization_2d_axis1/model.onnx";
  if (!std::filesystem::exists(model)) GTEST_SKIP() << "no node-test cases in " << dir;
  std::unique_ptr<Executable> exe = compile(model, Options{});
  const std::vector<Tensor> in = tensors(testing::random_inputs(*exe->model().graph, {}, 9));
  expect_concurrent_runs_identical(*exe, in, exe->run_tensors(in));
}

TEST(RuntimeApi, ErrorsAreTesselErrorsNamingTheFile) {
  try {
    compile("/nonexistent/model.onnx");
    FAIL() << "compiled a missing file";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.onnx: no such file"), std::string::npos) << e.what();
  }
  std::unique_ptr<Executable> exe = compile(testing::mlp_softmax_model());
  EXPECT_THROW(exe->run_tensors({Tensor(DType::F32, {2, 15})}), Error);  // wrong inner dim
  EXPECT_THROW(exe->run_tensors({}), Error);
}
#endif

}  // namespace
}  // namespace tessel
