// The compile-time shortcuts of the CPU path give the same results as the
// plain way: re-plan rounds that keep earlier groups plan and lower like a
// fresh lowering; kernels with identical bodies share one function and run
// bitwise like separate ones, also from an artifact; the whole-model cache
// (driver/model_cache.h) keys on everything it must and a hit runs like a
// miss.
#include <gtest/gtest.h>

#include <chrono>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "cli_test_util.h"
#include "pass_test_util.h"
#include "runtime_test_util.h"
#include "tessel/driver/artifact.h"
#include "tessel/driver/compiler.h"
#include "tessel/driver/model_cache.h"
#include "tessel/ir/builder.h"
#include "tessel/ir/printer.h"
#include "tessel/loop/printer.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

// Three blocks of one shape with different weights (so their kernels differ
// only in name), each with an integer Pow that has no compiled form: lowering
// gives up on it and the plan is redone once per block.
std::unique_ptr<Model> repeated_blocks_model() {
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::F32, {Dim::sym("batch"), 16});
  Tensor two(DType::I32, {});
  two.set_i64(0, 2);
  for (uint32_t i = 0; i < 3; ++i) {
    Value* h = b.op("MatMul", {x, b.constant(testing::seeded_weights({16, 16}, 10 + i), str_cat("w", i))});
    h = b.op("Relu", {b.op("Add", {h, b.constant(testing::seeded_weights({16}, 20 + i), str_cat("b", i))})});
    Value* p = b.op("Pow", {b.op("Cast", {h}, {{"to", Attribute::of_int(6)}}), b.constant(two, str_cat("two", i))});
    Value* f = b.op("Cast", {p}, {{"to", Attribute::of_int(1)}});
    x = b.op("Softmax", {b.op("Add", {h, f})}, {{"axis", Attribute::of_int(-1)}});
  }
  b.output(x);
  run_pipeline(*m, PassOptions{});
  return m;
}

std::vector<std::string> kernel_texts(const CompiledModel& c) {
  std::vector<std::string> out;
  for (const LoweredGroup& lg : c.lowered) out.push_back(loop::print(lg.kernel));
  return out;
}

TEST(CompileTime, IncrementalReplanLowersLikeFromScratch) {
  const auto m = repeated_blocks_model();
  LowerOptions fresh;
  fresh.reuse_lowered_groups = false;
  const CompiledModel a = lower_for_cpu(*m), b = lower_for_cpu(*m, fresh);
  ASSERT_GE(a.fallback_reasons.size(), 3u);  // several rounds, or the test shows nothing
  EXPECT_EQ(a.fallback_reasons, b.fallback_reasons);
  EXPECT_EQ(print_fusion(a.plan), print_fusion(b.plan));
  EXPECT_EQ(kernel_texts(a), kernel_texts(b));
}

TEST(CompileTime, IdenticalKernelsShareOneFunction) {
  const auto m = repeated_blocks_model();
  const CompiledModel c = lower_for_cpu(*m);
  ASSERT_LT(c.unique_kernels.size(), c.lowered.size());
  std::map<std::string, std::string> body;  // unique kernel name -> text without the name
  for (const loop::Kernel& k : c.unique_kernels) {
    loop::Kernel anon = k;
    anon.name = "k";
    EXPECT_TRUE(body.emplace(k.name, loop::print(anon)).second) << k.name;
  }
  for (const LoweredGroup& lg : c.lowered) {
    loop::Kernel anon = lg.kernel;
    anon.name = "k";
    ASSERT_TRUE(body.count(c.entry.at(lg.kernel.name))) << lg.kernel.name;
    EXPECT_EQ(body.at(c.entry.at(lg.kernel.name)), loop::print(anon)) << lg.kernel.name;
  }
  LowerOptions separate;
  separate.share_kernels = false;
  EXPECT_EQ(lower_for_cpu(*m, separate).unique_kernels.size(), c.lowered.size());
}

#ifdef TESSEL_HAVE_CODEGEN_CPU
std::filesystem::path temp_dir(const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() /
                 ("tessel_compile_time_" + name + "_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

void expect_bitwise(const std::vector<RtValue>& got, const std::vector<RtValue>& want, int64_t batch) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(got[i].tensor.bitwise_equal(want[i].tensor)) << batch;
}

TEST(CompileTime, SharedKernelsRunBitwiseLikeSeparateOnes) {
  const auto m = repeated_blocks_model();
  LowerOptions separate;
  separate.share_kernels = false;
  const auto shared = compile_for_cpu(*m, DriverOptions{}), plain = compile_for_cpu(*m, DriverOptions{}, separate);
  ASSERT_LT(shared->unique_kernels.size(), plain->unique_kernels.size());
  for (int64_t batch : {1, 5}) {
    const std::vector<RtValue> in = testing::random_inputs(*m->graph, {{"batch", batch}}, 3);
    expect_bitwise(shared->exe->run(in), plain->exe->run(in), batch);
  }
}

TEST(CompileTime, ArtifactKeepsSharedEntriesAndRawConstants) {
  const auto m = repeated_blocks_model();
  const auto c = compile_for_cpu(*m, DriverOptions{});
  const ArtifactContents a = make_artifact(*m, *c);
  EXPECT_EQ(a.model_ir.find("hex:"), std::string::npos);
  EXPECT_NE(a.model_ir.find("dense<ext:0>"), std::string::npos);
  size_t weights = 0;
  for (std::string_view s : a.constants) weights += s.size();
  EXPECT_EQ(weights, 3u * 16 * 16 * 4);  // the matrices (16-element biases print as literals)
  const auto dir = temp_dir("artifact");
  const std::string path = (dir / "blocks.tsx").string();
  write_file_atomically(path, encode_artifact(a));
  const std::unique_ptr<Executable> loaded = load_artifact(path, DriverOptions{});
  for (int64_t batch : {1, 4}) {
    const std::vector<RtValue> in = testing::random_inputs(*m->graph, {{"batch", batch}}, 5);
    expect_bitwise(loaded->run(in), c->exe->run(in), batch);
  }
  std::filesystem::remove_all(dir);
}

TEST(CompileTime, ExternalConstantsAreChecked) {
  const auto m = testing::mlp_softmax_model();
  std::vector<const Tensor*> ext;
  PrintOptions po;
  po.external_constants = &ext;
  const std::string text = print_model(*m, po);
  ASSERT_FALSE(ext.empty());
  std::vector<std::string_view> bytes;
  for (const Tensor* t : ext) bytes.emplace_back(reinterpret_cast<const char*>(t->raw()), t->nbytes());
  EXPECT_EQ(print_model(*parse_model(text, &bytes)), print_model(*m));
  EXPECT_THROW(parse_model(text), Error);  // no constants given
  std::vector<std::string_view> short_one = bytes;
  short_one[0] = short_one[0].substr(1);
  EXPECT_THROW(parse_model(text, &short_one), Error);
  short_one.pop_back();
  EXPECT_THROW(parse_model(text, &short_one), Error);
}

TEST(CompileTime, DamagedModelTextOrConstantsGiveOneError) {
  const auto m = repeated_blocks_model();
  const auto c = compile_for_cpu(*m, DriverOptions{});
  const std::string good = encode_artifact(make_artifact(*m, *c));
  const auto dir = temp_dir("damage");
  const std::string path = (dir / "bad.tsx").string();
  std::string text_damage = good;
  const size_t at = text_damage.find("dense<ext:1>");
  ASSERT_NE(at, std::string::npos);
  text_damage[at + 10] = '9';  // ext:9 does not exist
  std::string cut = good.substr(0, good.size() - 100);  // the last constant is short
  for (const std::string& bad : {reseal_artifact(text_damage), reseal_artifact(cut), cut}) {
    write_file_atomically(path, bad);
    try {
      load_artifact(path, DriverOptions{});
      ADD_FAILURE() << "loaded a damaged artifact";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("artifact"), std::string::npos) << e.what();
    }
  }
  std::filesystem::remove_all(dir);
}

TEST(ModelCache, KeyCoversModelBytesDimsModeAndInputs) {
  const auto dir = temp_dir("key");
  testing::ScopedCacheDir env((dir / "cache").string());
  const std::string model = (dir / "m.tir").string(), input = (dir / "x.npy").string();
  std::ofstream(model) << print_model(*testing::mlp_softmax_model());
  std::ofstream(input) << "not really npy";
  const std::string k = model_cache_key(model, "prepare", {}, {});
  ASSERT_EQ(k.size(), 32u);
  EXPECT_EQ(model_cache_key(model, "prepare", {}, {}), k);
  EXPECT_NE(model_cache_key(model, "compile", {}, {}), k);
  EXPECT_NE(model_cache_key(model, "prepare", {{"batch", 2}}, {}), k);
  const std::string with_input = model_cache_key(model, "prepare", {}, {{"x", input}});
  EXPECT_NE(with_input, k);
  std::ofstream(input, std::ios::app) << "!";
  EXPECT_NE(model_cache_key(model, "prepare", {}, {{"x", input}}), with_input);
  // A large .npy input is keyed by its header (shape, dtype): new data hits.
  const std::string big = (dir / "big.npy").string();
  const std::string header = std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
                             "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1024), }" +
                             std::string(55, ' ') + "\n";
  std::ofstream(big, std::ios::binary) << header << std::string(4096, 'a');
  const std::string big_key = model_cache_key(model, "prepare", {}, {{"x", big}});
  std::ofstream(big, std::ios::binary) << header << std::string(4096, 'b');
  EXPECT_EQ(model_cache_key(model, "prepare", {}, {{"x", big}}), big_key);
  std::ofstream(big, std::ios::binary) << header << std::string(8192, 'b');
  EXPECT_NE(model_cache_key(model, "prepare", {}, {{"x", big}}), big_key);
  std::ofstream(model, std::ios::app) << "\n";
  EXPECT_NE(model_cache_key(model, "prepare", {}, {}), k);

  EXPECT_FALSE(model_cache_lookup(k));
  model_cache_store(k, "bytes");
  ASSERT_TRUE(model_cache_lookup(k));
  model_cache_reject(k, "test");
  EXPECT_FALSE(model_cache_lookup(k));
  std::filesystem::remove_all(dir);
}

// The model cache stays under its byte budget, dropping the least recently
// used entries first (a lookup counts as a use).
TEST(ModelCache, EvictsLeastRecentlyUsedEntriesBeyondTheBudget) {
  const auto dir = temp_dir("evict");
  testing::ScopedCacheDir env((dir / "cache").string());
  ::setenv("TESSEL_MODEL_CACHE_MAX_BYTES", "250", 1);
  const std::string entry(100, 'x');
  model_cache_store("aaaa", entry);
  model_cache_store("bbbb", entry);
  // Make the order of use unambiguous whatever the file-time resolution.
  const auto t0 = std::filesystem::file_time_type::clock::now();
  std::filesystem::last_write_time(*model_cache_lookup("aaaa"), t0 - std::chrono::hours(2));
  std::filesystem::last_write_time(*model_cache_lookup("bbbb"), t0 - std::chrono::hours(3));
  ASSERT_TRUE(model_cache_lookup("aaaa"));  // used now: bbbb is the least recent
  model_cache_store("cccc", entry);
  EXPECT_TRUE(model_cache_lookup("aaaa"));
  EXPECT_FALSE(model_cache_lookup("bbbb"));
  EXPECT_TRUE(model_cache_lookup("cccc"));
  model_cache_store("dddd", std::string(300, 'y'));  // larger than the budget: not stored
  EXPECT_FALSE(model_cache_lookup("dddd"));
  EXPECT_TRUE(model_cache_lookup("cccc"));
  ::unsetenv("TESSEL_MODEL_CACHE_MAX_BYTES");
  EXPECT_EQ(model_cache_budget_bytes(), uint64_t{8} << 30);
  std::filesystem::remove_all(dir);
}

std::string file_bytes(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

TEST(ModelCache, WarmRunLoadsTheCachedModelAndMatchesTheColdOne) {
  if (!std::filesystem::exists(std::string(TESSEL_BINARY_DIR) + "/bin/tessel")) GTEST_SKIP() << "no tessel binary";
  const auto dir = temp_dir("cli");
  const std::string model = (dir / "blocks.tir").string();
  std::ofstream(model) << print_model(*repeated_blocks_model());
  const std::string env = "TESSEL_TIMINGS=1 TESSEL_CACHE_DIR=" + (dir / "cache").string();
  auto run = [&](const std::string& outdir, std::string* log) {
    return testing::run_tessel(env, "run " + model + " --dim batch=3 --save-outputs " + (dir / outdir).string(), log);
  };
  std::string cold, warm, damaged;
  ASSERT_EQ(run("cold", &cold), 0) << cold;
  EXPECT_NE(cold.find("plan and lower"), std::string::npos) << cold;
  ASSERT_EQ(run("warm", &warm), 0) << warm;
  EXPECT_EQ(warm.find("plan and lower"), std::string::npos) << warm;  // nothing was compiled
  EXPECT_EQ(file_bytes(dir / "warm" / "output_0.npy"), file_bytes(dir / "cold" / "output_0.npy"));
  for (const auto& e : std::filesystem::directory_iterator(dir / "cache" / "model"))
    std::filesystem::resize_file(e.path(), 100);
  ASSERT_EQ(run("damaged", &damaged), 0) << damaged;
  EXPECT_NE(damaged.find("warning: model cache"), std::string::npos) << damaged;
  EXPECT_EQ(file_bytes(dir / "damaged" / "output_0.npy"), file_bytes(dir / "cold" / "output_0.npy"));
  std::filesystem::remove_all(dir);
}
#endif

}  // namespace
}  // namespace tessel
