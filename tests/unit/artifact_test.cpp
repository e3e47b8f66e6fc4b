// Compiled artifacts (driver/artifact.h, runtime/artifact_format.h): a loaded
// artifact runs bitwise like the in-process compile at several bindings;
// truncated, damaged and foreign files give one clear error; a host lacking a
// recorded CPU feature is refused before any code is loaded.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "pass_test_util.h"
#include "runtime_test_util.h"
#include "tessel/driver/artifact.h"
#include "tessel/driver/compiler.h"
#include "tessel/runtime/cpu_features.h"

namespace tessel {
namespace {

#ifdef TESSEL_HAVE_CODEGEN_CPU
class ArtifactTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("tessel_artifact_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
    model_ = testing::mlp_softmax_model();
    compiled_ = compile_for_cpu(*model_, DriverOptions{});
    bytes_ = encode_artifact(make_artifact(*model_, *compiled_));
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string write(const std::string& name, const std::string& bytes) {
    const std::string p = (dir_ / name).string();
    write_file_atomically(p, bytes);
    return p;
  }
  // The message of the Error load_artifact throws ("" when it loads).
  std::string load_error(const std::string& bytes) {
    try {
      load_artifact(write("bad.tsx", bytes), DriverOptions{});
    } catch (const Error& e) {
      return e.what();
    }
    return "";
  }

  std::filesystem::path dir_;
  std::unique_ptr<Model> model_;
  std::unique_ptr<CompiledModel> compiled_;
  std::string bytes_;
};

TEST_F(ArtifactTest, RoundTripRunsBitwiseLikeTheInProcessCompile) {
  const std::string path = write("mlp.tsx", bytes_);
  EXPECT_TRUE(is_artifact_file(path));
  EXPECT_FALSE(is_cuda_artifact_file(path));  // its cuda section is empty
  std::unique_ptr<Executable> loaded = load_artifact(path, DriverOptions{});
  for (int64_t batch : {1, 3, 40}) {  // compiled without --dim: valid at every binding
    const std::vector<RtValue> in = testing::random_inputs(*model_->graph, {{"batch", batch}}, 2);
    const std::vector<RtValue> want = compiled_->exe->run(in), got = loaded->run(in);
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(got[i].tensor.bitwise_equal(want[i].tensor)) << batch;
  }
}

// Format 3 aligns each constant, so the loaded model's weights are views of
// the file's mapping; bytes decoded from memory (no owner) are copied.
TEST_F(ArtifactTest, LoadedWeightsBorrowTheFileMapping) {
  const ArtifactContents a = read_artifact(write("mlp.tsx", bytes_));
  const std::unique_ptr<Model> m = artifact_model(a);
  const auto inside = [&](const void* p) {
    const char* c = static_cast<const char*>(p);
    return c >= a.encoded.data() && c < a.encoded.data() + a.encoded.size();
  };
  int borrowed = 0;
  for (const Value* v : m->graph->initializers)
    if (v->constant->nbytes() > 0) borrowed += inside(v->constant->raw()) ? 1 : 0;
  // Every constant stored beside the IR text (small ones are printed inline).
  ASSERT_FALSE(a.constants.empty());
  EXPECT_EQ(borrowed, static_cast<int>(a.constants.size()));
  ArtifactContents in_memory = decode_artifact(bytes_);
  const std::unique_ptr<Model> copied = artifact_model(in_memory);
  for (const Value* v : copied->graph->initializers)
    if (v->constant->nbytes() > 0) {
      EXPECT_FALSE(inside(v->constant->raw())) << v->name;
    }
}

TEST_F(ArtifactTest, TruncatedFilesGiveOneClearError) {
  for (size_t n : {size_t{0}, size_t{3}, size_t{8}, size_t{11}, size_t{20}, size_t{40}, bytes_.size() / 2,
                   bytes_.size() - 1}) {
    const std::string why = load_error(bytes_.substr(0, n));
    EXPECT_TRUE(why.find("truncated artifact") != std::string::npos || why == "not a tessel artifact")
        << n << ": " << why;
  }
}

TEST_F(ArtifactTest, DamagedAndForeignFilesAreRefused) {
  std::string flipped = bytes_;
  flipped[flipped.size() / 2] ^= 0x5a;
  EXPECT_NE(load_error(flipped).find("corrupt artifact"), std::string::npos);
  std::string other = bytes_;
  other[7] = '9';
  EXPECT_NE(load_error(other).find("is not the one this tessel reads"), std::string::npos);
  std::string version = bytes_;
  version[8] = 7;
  EXPECT_NE(load_error(version).find("format version 7"), std::string::npos);
  EXPECT_EQ(load_error("PK\x03\x04 a zip file, say"), "not a tessel artifact");
  EXPECT_NE(load_error(bytes_ + "x").find("after the payload"), std::string::npos);
  // Damage is named by its section: the header's third checksum is the
  // constants', the fourth the cuda section's (a CPU artifact's holds its
  // empty list of cubins: the file's last 8 bytes).
  std::string weights = bytes_;
  size_t last_weight = weights.size() - 9;
  while (weights[last_weight] == 0) --last_weight;  // skip the padding in front of the cuda section
  weights[last_weight] ^= 0x01;
  EXPECT_NE(load_error(weights).find("checksum mismatch in its constants section"), std::string::npos)
      << load_error(weights);
  std::string cuda = bytes_;
  cuda[cuda.size() - 8] ^= 0x01;
  EXPECT_NE(load_error(cuda).find("checksum mismatch in its cuda section"), std::string::npos) << load_error(cuda);
  std::string code = bytes_;
  const size_t elf = code.find("\x7f" "ELF");
  ASSERT_NE(elf, std::string::npos);
  code[elf + 100] ^= 0x01;
  EXPECT_NE(load_error(code).find("checksum mismatch in its code section"), std::string::npos) << load_error(code);
}

TEST_F(ArtifactTest, DecodingRandomDamageNeverCrashes) {
  EXPECT_NO_THROW(decode_artifact(reseal_artifact(bytes_)));
  std::mt19937 rng(1);
  int refused = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string b = bytes_.substr(0, 65 + rng() % (bytes_.size() - 65));  // cut anywhere after the header
    for (int k = 0; k < 3; ++k) b[64 + rng() % (b.size() - 64)] = static_cast<char>(rng());
    try {
      decode_artifact(reseal_artifact(b));
    } catch (const Error&) {
      ++refused;
    }
  }
  EXPECT_GT(refused, 1900);  // a cut payload cannot decode completely
}

TEST_F(ArtifactTest, MissingCpuFeatureIsRefusedBeforeLoadingCode) {
  // A feature CPUID reports off on this machine (an AVX-512 extension on
  // most): the artifact claims its code needs it.
  const std::string host = detected_cpu_features();
  const size_t off = host.find('-');
  if (off == std::string::npos) GTEST_SKIP() << "this CPU has every feature the loader detects: " << host;
  const std::string lacking = "+" + host.substr(off + 1, host.find(',', off) - off - 1);
  ArtifactContents a = decode_artifact(bytes_);
  ASSERT_FALSE(a.cpu_features.empty());
  a.cpu_features.push_back(lacking);
  a.object = "not an object file: loading it would fail differently";
  const std::string why = load_error(encode_artifact(a));
  EXPECT_NE(why.find("compiled for CPU features " + lacking + " which this CPU lacks"), std::string::npos) << why;
}

TEST(ArtifactFormat, OnlyDetectableFeaturesAreChecked) {
  ArtifactContents a;
  a.cpu_name = "znver4";
  a.cpu_features = {"+avx2", "+avx512f", "+tessel-imaginary-feature"};
  try {
    check_artifact_cpu(a, "+avx,+avx2,-avx512f");
    ADD_FAILURE() << "a host without avx512f accepted code that needs it";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("CPU features +avx512f which this CPU lacks"), std::string::npos) << e.what();
  }
  // A feature CPUID detection does not know is recorded but not checked.
  a.cpu_features = {"+avx2", "+tessel-imaginary-feature"};
  EXPECT_NO_THROW(check_artifact_cpu(a, "+avx,+avx2,-avx512f"));
}

TEST(ArtifactFormat, MissingFeaturesComparesEnabledOnes) {
  EXPECT_EQ(missing_cpu_features({"+avx2", "+fma"}, "+avx,+avx2,-avx512f,+fma"), std::vector<std::string>{});
  EXPECT_EQ(missing_cpu_features({"+avx512f", "+avx2"}, "+avx2,-avx512f"), std::vector<std::string>{"+avx512f"});
}
#endif

}  // namespace
}  // namespace tessel
