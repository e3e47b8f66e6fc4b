// The C API (include/tessel/tessel.h, libtessel_runtime): an artifact with a
// symbolic batch runs at several batches bitwise like the in-process
// compile, from several threads at once; every bad call is a status and a
// message, never a crash; an output buffer too small still gets its shape.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

#include "runtime_test_util.h"
#include "tessel/driver/artifact.h"
#include "tessel/driver/compiler.h"
#include "tessel/tessel.h"

namespace tessel {
namespace {

#ifdef TESSEL_HAVE_CODEGEN_CPU
class CApi : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("tessel_capi_" + std::to_string(::getpid()) + "_" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name() + ".tsl"))
                .string();
    model_ = testing::mlp_softmax_model();  // x: f32[batch, 16] -> f32[batch, 10]
    compiled_ = compile_for_cpu(*model_, DriverOptions{});
    write_file_atomically(path_, encode_artifact(make_artifact(*model_, *compiled_)));
    ASSERT_EQ(tessel_load(path_.c_str(), nullptr, &m_), TESSEL_OK) << tessel_last_error();
  }
  void TearDown() override {
    tessel_free(m_);
    std::filesystem::remove(path_);
  }

  // Runs batch `b` through the C API; the output and its shape.
  tessel_status run(int64_t b, std::vector<float>& x, std::vector<float>& y, std::vector<int64_t>& shape,
                    size_t room_floats) {
    int64_t in_shape[2] = {b, 16};
    tessel_tensor in{TESSEL_F32, 2, in_shape, x.data(), x.size() * sizeof(float)};
    shape.assign(TESSEL_MAX_RANK, -7);
    y.assign(room_floats, 0.0f);
    tessel_tensor out{TESSEL_F32, 0, shape.data(), y.data(), room_floats * sizeof(float)};
    const tessel_status s = tessel_run(m_, &in, 1, &out, 1);
    shape.resize(out.rank);
    return s;
  }

  std::string path_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<CompiledModel> compiled_;
  tessel_model* m_ = nullptr;
};

TEST_F(CApi, DescribesInputsAndOutputs) {
  ASSERT_EQ(tessel_num_inputs(m_), 1u);
  ASSERT_EQ(tessel_num_outputs(m_), 1u);
  tessel_value_info in{};
  ASSERT_EQ(tessel_input_info(m_, 0, &in), TESSEL_OK);
  EXPECT_STREQ(in.name, "x");
  EXPECT_EQ(in.dtype, TESSEL_F32);
  ASSERT_EQ(in.rank, 2);
  EXPECT_EQ(in.dims[0], -1);
  EXPECT_STREQ(in.dim_names[0], "batch");
  EXPECT_EQ(in.dims[1], 16);
  EXPECT_EQ(in.dim_names[1], nullptr);
  EXPECT_EQ(tessel_input_info(m_, 1, &in), TESSEL_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tessel_last_error()).find("input index 1 of 1"), std::string::npos) << tessel_last_error();
  EXPECT_EQ(tessel_api_version(), uint32_t(TESSEL_C_API_VERSION));
  EXPECT_EQ(tessel_dtype_size(TESSEL_BF16), 2u);
  EXPECT_EQ(tessel_dtype_size(static_cast<tessel_dtype>(8)), 0u);  // strings are not carried
}

TEST_F(CApi, RunsEveryBatchBitwiseLikeTheInProcessCompile) {
  for (int64_t b : {1, 5, 33}) {
    const Tensor xt = testing::seeded_weights({b, 16}, unsigned(b));
    std::vector<float> x(xt.data<float>(), xt.data<float>() + xt.numel()), y;
    std::vector<int64_t> shape;
    int64_t want_shape[TESSEL_MAX_RANK];
    size_t rank = 0;
    int64_t in_shape[2] = {b, 16};
    tessel_tensor in{TESSEL_F32, 2, in_shape, x.data(), x.size() * sizeof(float)};
    ASSERT_EQ(tessel_output_shape(m_, &in, 1, 0, want_shape, &rank), TESSEL_OK) << tessel_last_error();
    ASSERT_EQ(rank, 2u);
    EXPECT_EQ(want_shape[0], b);
    EXPECT_EQ(want_shape[1], 10);
    ASSERT_EQ(run(b, x, y, shape, size_t(b) * 10), TESSEL_OK) << tessel_last_error();
    EXPECT_EQ(shape, (std::vector<int64_t>{b, 10}));
    const Tensor want = compiled_->exe->run_tensors({xt})[0];
    EXPECT_EQ(std::memcmp(y.data(), want.raw(), want.nbytes()), 0) << "batch " << b;
  }
}

TEST_F(CApi, OneModelRunsFromSeveralThreads) {
  const Tensor xt = testing::seeded_weights({8, 16}, 9);
  const Tensor want = compiled_->exe->run_tensors({xt})[0];
  std::vector<int> ok(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        std::vector<float> x(xt.data<float>(), xt.data<float>() + xt.numel()), y;
        std::vector<int64_t> shape;
        if (run(8, x, y, shape, 80) == TESSEL_OK && std::memcmp(y.data(), want.raw(), want.nbytes()) == 0) ++ok[t];
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(ok, std::vector<int>(4, 50));
}

TEST_F(CApi, BadInputsAreStatusesWithMessages) {
  std::vector<float> x(2 * 16, 0.5f);
  int64_t shape2[2] = {2, 16}, shape_wrong[2] = {2, 15}, shape_neg[2] = {-2, 16};
  float y[20];
  int64_t out_shape[TESSEL_MAX_RANK];
  tessel_tensor out{TESSEL_F32, 0, out_shape, y, sizeof y};
  auto status = [&](tessel_tensor in, const char* expect) {
    const tessel_status s = tessel_run(m_, &in, 1, &out, 1);
    EXPECT_NE(std::string(tessel_last_error()).find(expect), std::string::npos) << tessel_last_error();
    return s;
  };
  const size_t nbytes = x.size() * sizeof(float);
  EXPECT_EQ(status({TESSEL_I32, 2, shape2, x.data(), nbytes}, "input 0 ('x'): expected dtype f32, got i32"), TESSEL_ERROR_INPUT);
  EXPECT_EQ(status({TESSEL_F32, 1, shape2, x.data(), nbytes}, "expected shape [batch,16], got [2]"), TESSEL_ERROR_INPUT);
  EXPECT_EQ(status({TESSEL_F32, 2, shape_wrong, x.data(), nbytes}, "expected shape [batch,16], got [2,15]"), TESSEL_ERROR_INPUT);
  EXPECT_EQ(status({TESSEL_F32, 2, shape_neg, x.data(), nbytes}, "negative dim -2"), TESSEL_ERROR_INPUT);
  EXPECT_EQ(status({TESSEL_F32, 2, shape2, x.data(), nbytes - 4}, "nbytes 124, its shape and dtype make 128"), TESSEL_ERROR_INPUT);
  EXPECT_EQ(status({TESSEL_F32, 2, shape2, nullptr, nbytes}, "no data"), TESSEL_ERROR_INPUT);
  EXPECT_EQ(status({static_cast<tessel_dtype>(99), 2, shape2, x.data(), nbytes}, "unknown dtype 99"), TESSEL_ERROR_INPUT);
  EXPECT_EQ(tessel_run(m_, nullptr, 0, &out, 1), TESSEL_ERROR_INPUT);
  EXPECT_NE(std::string(tessel_last_error()).find("takes 1 inputs, got 0"), std::string::npos);
  EXPECT_EQ(status({TESSEL_F32, 2, shape2, x.data(), nbytes}, ""), TESSEL_OK);  // and the model still runs
}

TEST_F(CApi, ACpuModelHasNoDeviceRuns) {
  EXPECT_EQ(tessel_model_device(m_), TESSEL_DEVICE_CPU);
  EXPECT_EQ(tessel_synchronize(m_), TESSEL_OK);
  int64_t in_shape[2] = {1, 16}, out_shape[TESSEL_MAX_RANK];
  float x[16] = {}, y[10];
  tessel_tensor in{TESSEL_F32, 2, in_shape, x, sizeof x};
  tessel_tensor out{TESSEL_F32, 0, out_shape, y, sizeof y};
  EXPECT_EQ(tessel_run_device(m_, &in, 1, &out, 1, nullptr), TESSEL_ERROR_UNSUPPORTED);
  // Asking for a CUDA model refuses a CPU artifact, saying what it is for.
  tessel_model* other = nullptr;
  tessel_load_options o{sizeof o, 0, TESSEL_DEVICE_CUDA};
  EXPECT_EQ(tessel_load(path_.c_str(), &o, &other), TESSEL_ERROR_LOAD);
  EXPECT_EQ(other, nullptr);
  EXPECT_NE(std::string(tessel_last_error()).find("is an artifact for cpu ("), std::string::npos) << tessel_last_error();
}

TEST_F(CApi, TooSmallOutputStillGetsItsShape) {
  std::vector<float> x(3 * 16, 0.25f), y;
  std::vector<int64_t> shape;
  EXPECT_EQ(run(3, x, y, shape, 29), TESSEL_ERROR_OUTPUT);
  EXPECT_NE(std::string(tessel_last_error()).find("buffer of 116 bytes, the result needs 120"), std::string::npos)
      << tessel_last_error();
  EXPECT_EQ(shape, (std::vector<int64_t>{3, 10}));
  int64_t in_shape[2] = {3, 16}, out_shape[TESSEL_MAX_RANK];
  tessel_tensor in{TESSEL_F32, 2, in_shape, x.data(), x.size() * sizeof(float)};
  float z[30];
  tessel_tensor out{TESSEL_I64, 0, out_shape, z, sizeof z};
  EXPECT_EQ(tessel_run(m_, &in, 1, &out, 1), TESSEL_ERROR_OUTPUT);
  EXPECT_NE(std::string(tessel_last_error()).find("buffer dtype i64, the result is f32"), std::string::npos)
      << tessel_last_error();
  // No shape array, or room without data: refused before anything runs.
  tessel_tensor no_shape{TESSEL_F32, 0, nullptr, z, sizeof z};
  EXPECT_EQ(tessel_run(m_, &in, 1, &no_shape, 1), TESSEL_ERROR_OUTPUT);
  EXPECT_STREQ(tessel_last_error(), "tessel_run: output 0 has no shape or data array");
  tessel_tensor no_data{TESSEL_F32, 0, out_shape, nullptr, sizeof z};
  EXPECT_EQ(tessel_run(m_, &in, 1, &no_data, 1), TESSEL_ERROR_OUTPUT);
}
#endif

TEST(CApiCalls, NullsAndMissingFilesAreStatuses) {
  tessel_model* m = reinterpret_cast<tessel_model*>(0x1);
  EXPECT_EQ(tessel_load(nullptr, nullptr, &m), TESSEL_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tessel_load("x.tsl", nullptr, nullptr), TESSEL_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tessel_load("/nonexistent/tessel/model.tsl", nullptr, &m), TESSEL_ERROR_LOAD);
  EXPECT_EQ(m, nullptr);
  EXPECT_NE(std::string(tessel_last_error()).find("no such file"), std::string::npos) << tessel_last_error();
  tessel_load_options o{0, 0, TESSEL_DEVICE_CPU};
  EXPECT_EQ(tessel_load("x.tsl", &o, &m), TESSEL_ERROR_INVALID_ARGUMENT);
  o = {sizeof o, 0, static_cast<tessel_device>(7)};
  EXPECT_EQ(tessel_load("x.tsl", &o, &m), TESSEL_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tessel_run_device(nullptr, nullptr, 0, nullptr, 0, nullptr), TESSEL_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tessel_synchronize(nullptr), TESSEL_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tessel_model_device(nullptr), TESSEL_DEVICE_CPU);
  EXPECT_EQ(tessel_run(nullptr, nullptr, 0, nullptr, 0), TESSEL_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tessel_num_inputs(nullptr), 0u);
  tessel_value_info info;
  EXPECT_EQ(tessel_output_info(nullptr, 0, &info), TESSEL_ERROR_INVALID_ARGUMENT);
  tessel_free(nullptr);
  EXPECT_STREQ(tessel_status_name(TESSEL_ERROR_OUTPUT), "output error");
}

}  // namespace
}  // namespace tessel
