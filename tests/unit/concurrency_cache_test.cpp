// Several processes compiling the same model into one kernel cache folder at
// once (issue 27): each process's result is correct, and afterwards every
// cache entry is whole: each object reads back through its checksum and
// loads, each whole-model artifact loads and gives the same outputs, and no
// temporary file is left behind. Then the same processes again, all hitting
// the warm cache.
#include <gtest/gtest.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "pass_test_util.h"
#include "runtime_test_util.h"
#include "tessel/driver/api.h"
#include "tessel/driver/npy.h"
#include "tessel/interp/interpreter.h"
#include "tessel/ir/printer.h"
#include "tessel/runtime/object_loader.h"
#include "tessel/support/cache_file.h"

extern char** environ;

namespace tessel {
namespace {

#ifdef TESSEL_HAVE_CODEGEN_CPU
namespace fs = std::filesystem;

constexpr int kProcesses = 4;

// Starts `tessel run` on the model with TESSEL_CACHE_DIR=cache, its outputs
// saved into `out`; returns the child's pid.
pid_t start_tessel_run(const fs::path& dir, const fs::path& cache, const fs::path& out) {
  const std::string tessel = std::string(TESSEL_BINARY_DIR) + "/bin/tessel";
  std::vector<std::string> args = {tessel, "run", (dir / "model.tir").string(), "--input", "x=" + (dir / "x.npy").string(),
                                   "--save-outputs", out.string(), "--threads", "1", "--quiet"};
  std::vector<std::string> env = {"TESSEL_CACHE_DIR=" + cache.string()};
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("TESSEL_CACHE_DIR=", 0) != 0) env.push_back(*e);
  std::vector<char*> argv, envp;
  for (std::string& a : args) argv.push_back(a.data());
  for (std::string& e : env) envp.push_back(e.data());
  argv.push_back(nullptr);
  envp.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, tessel.c_str(), &fa, nullptr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  return rc == 0 ? pid : -1;
}

// Runs kProcesses `tessel run` at once and returns their first outputs.
std::vector<Tensor> run_processes_at_once(const fs::path& dir, const fs::path& cache, const std::string& round) {
  std::vector<pid_t> pids;
  for (int p = 0; p < kProcesses; ++p) pids.push_back(start_tessel_run(dir, cache, dir / (round + std::to_string(p))));
  std::vector<Tensor> outs;
  for (int p = 0; p < kProcesses; ++p) {
    EXPECT_GT(pids[p], 0) << "could not start tessel";
    int status = 0;
    if (pids[p] > 0) waitpid(pids[p], &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << round << " process " << p << " status " << status;
    const fs::path out = dir / (round + std::to_string(p)) / "output_0.npy";
    if (fs::exists(out)) outs.push_back(read_npy_file(out.string()));
  }
  EXPECT_EQ(outs.size(), static_cast<size_t>(kProcesses));
  return outs;
}

void expect_close(const Tensor& got, const Tensor& want) {
  ASSERT_EQ(got.shape(), want.shape());
  for (int64_t i = 0; i < want.numel(); ++i)
    ASSERT_NEAR(got.get_f64(i), want.get_f64(i), 1e-5 + 1e-5 * std::fabs(want.get_f64(i))) << "element " << i;
}

TEST(ConcurrencyCache, ProcessesCompilingOneModelIntoOneCache) {
  const fs::path dir = fs::path(::testing::TempDir()) / ("tessel_concurrency_cache_" + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path cache = dir / "cache";
  std::unique_ptr<Model> model = testing::mlp_softmax_model();
  std::ofstream(dir / "model.tir") << print_model(*model);
  const std::vector<RtValue> in = testing::random_inputs(*model->graph, {{"batch", 7}}, 3);
  write_npy_file((dir / "x.npy").string(), in[0].tensor);
  const Tensor want = Interpreter().run(*model->graph, in)[0].tensor;

  for (const std::string round : {"cold", "warm"}) {
    const std::vector<Tensor> outs = run_processes_at_once(dir, cache, round);
    for (const Tensor& t : outs) {
      expect_close(t, want);
      EXPECT_TRUE(t.bitwise_equal(outs[0])) << round << ": the processes' outputs differ";
    }
  }

  // Every entry whole, and nothing but entries.
  int objects = 0, artifacts = 0;
  for (const auto& e : fs::recursive_directory_iterator(cache)) {
    if (!e.is_regular_file()) continue;
    const fs::path p = e.path();
    const std::string folder = p.parent_path().filename().string();
    if (folder == "cpu" && p.extension() == ".o") {
      ++objects;
      std::optional<std::string> object = read_cache_file(p.string(), "TSLCPUO1");
      ASSERT_TRUE(object.has_value()) << p << " is damaged";
      EXPECT_NO_THROW(LoadedObject{*object}) << p;
    } else if (folder == "model" && p.extension() == ".tsx") {
      ++artifacts;
      std::unique_ptr<Executable> exe = compile(p.string());
      const std::vector<Tensor> got = exe->run_tensors({in[0].tensor});
      ASSERT_EQ(got.size(), 1u);
      expect_close(got[0], want);
    } else {
      ADD_FAILURE() << "unexpected file in the cache: " << p;
    }
  }
  EXPECT_GE(objects + artifacts, 1);
  fs::remove_all(dir);
}
#endif

}  // namespace
}  // namespace tessel
