// The CUDA code-generation switches that were environment variables
// (TESSEL_CUDA_WGMMA, _TMA, _TMA_MIN_K, _WGMMA_OVERLAP, _FLASH, _FLASH_WGMMA,
// _ROW_CACHE) are knobs of the compile options: each, set on a model that
// exercises it, changes the generated CUDA source (and so the NVRTC cubin
// cache key, a digest of the source) and the whole-model cache key's mode.
// The same knobs come per kernel from a tuned schedule (lower_for_cuda with
// LowerOptions::schedules, as --tuning-db gives them): the kernel's source
// changes as with --knob and still compiles; a schedule of another kind, an
// invalid value or an unparsable record is a warning and the default stays.
// The tile knobs (gpu.gemm bk, stages, tma_bn) each change their GEMM where
// they apply, never past the shared memory, and refuse values outside their
// sets. No GPU needed: this is code generation only.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <functional>
#include <sstream>

#include "cuda_test_util.h"
#include "tessel/codegen/cuda/mma_gemm.h"
#include "tessel/codegen/cuda/nvrtc.h"
#include "tessel/driver/cuda_compiler.h"
#include "tessel/driver/tuning.h"
#include "tessel/driver/model_cache.h"
#include "tessel/ir/builder.h"
#include "tessel/passes/pass_manager.h"
#include "tessel/support/strings.h"
#include "tessel/tune/database.h"
#include "tessel/tune/gpu_space.h"

namespace tessel {
namespace {

using ModelFn = std::function<std::unique_ptr<Model>()>;

// A bf16 MatMul [m, k] x [k, n] of inputs (the GPU GEMM templates).
ModelFn matmul(int64_t m, int64_t k, int64_t n) {
  return [=] {
    auto model = std::make_unique<Model>();
    GraphBuilder b(*model);
    Value* x = b.input("x", DType::BF16, {Dim(m), Dim(k)});
    Value* w = b.input("w", DType::BF16, {Dim(k), Dim(n)});
    b.output(b.op("MatMul", {x, w}));
    run_pipeline(*model, PassOptions{});
    return model;
  };
}

// One bf16 Attention node (opset 23) over `keys` keys, head size 64.
ModelFn attention(int64_t keys) {
  return [=] {
    auto model = std::make_unique<Model>();
    model->opsets[""] = 23;
    GraphBuilder b(*model);
    Value* q = b.input("q", DType::BF16, {Dim(1), Dim(2), Dim(keys), Dim(64)});
    Value* k = b.input("k", DType::BF16, {Dim(1), Dim(2), Dim(keys), Dim(64)});
    Value* v = b.input("v", DType::BF16, {Dim(1), Dim(2), Dim(keys), Dim(64)});
    b.output(b.op("Attention", {q, k, v}));
    run_pipeline(*model, PassOptions{});
    return model;
  };
}

// Softmax over rows of 4096 (the GPU row schedule).
ModelFn softmax_rows() {
  return [] {
    auto model = std::make_unique<Model>();
    GraphBuilder b(*model);
    Value* x = b.input("x", DType::F32, {Dim(64), Dim(4096)});
    b.output(b.op("Softmax", {x}, {{"axis", Attribute::of_int(-1)}}));
    run_pipeline(*model, PassOptions{});
    return model;
  };
}

std::vector<Primitive> knobs(std::initializer_list<const char*> texts) {
  std::vector<Primitive> out;
  for (const char* t : texts) out.push_back(parse_knob(t));
  return out;
}

// The model's CUDA source for sm_90a with `k` as --knob values.
std::string emit_with(const Model& m, const std::vector<Primitive>& k) {
  LowerOptions lo;
  lo.knobs = k;
  return emit_cuda(m, "sm_90a", lo);
}

struct FormerSwitch {
  const char* env;           // the environment variable it replaces
  ModelFn model;             // a model whose code depends on it
  std::vector<Primitive> base;  // knobs both sides share (e.g. TMA off to reach the cp.async path)
  const char* knob;
};

TEST(CudaKnobs, EachFormerEnvironmentSwitchChangesTheCodeAndTheCacheKey) {
  const std::vector<FormerSwitch> switches = {
      {"TESSEL_CUDA_WGMMA", matmul(2048, 1024, 2048), {}, "gpu.gemm.wgmma=0"},
      {"TESSEL_CUDA_TMA", matmul(2048, 1024, 2048), {}, "gpu.gemm.tma=0"},
      // With a cheap epilogue, tma_min_k_cheap decides; made unreachable, tma_min_k does.
      {"TESSEL_CUDA_TMA_MIN_K", matmul(2048, 1024, 2048), knobs({"gpu.gemm.tma_min_k_cheap=100000"}),
       "gpu.gemm.tma_min_k=100000"},
      {"TESSEL_CUDA_WGMMA_OVERLAP", matmul(2048, 512, 512), knobs({"gpu.gemm.tma=0"}), "gpu.gemm.overlap=0"},
      {"TESSEL_CUDA_FLASH", attention(256), {}, "gpu.flash.on=0"},
      {"TESSEL_CUDA_FLASH_WGMMA", attention(1024), {}, "gpu.flash.wgmma=0"},
      {"TESSEL_CUDA_ROW_CACHE", softmax_rows(), {}, "gpu.rows.row_cache=0"},
  };
  for (const FormerSwitch& s : switches) {
    SCOPED_TRACE(std::string(s.env) + " -> --knob " + s.knob);
    std::vector<Primitive> with = s.base;
    with.push_back(parse_knob(s.knob));
    const std::string before = emit_with(*s.model(), s.base);
    const std::string after = emit_with(*s.model(), with);
    EXPECT_TRUE(before != after) << "the knob did not change the generated CUDA";
    DriverOptions o;
    o.target = Target::Cuda;
    o.knobs = s.base;
    const std::string mode_before = model_cache_mode("compile", o);
    o.knobs = with;
    EXPECT_TRUE(mode_before != model_cache_mode("compile", o)) << "the knob is not in the cache key";
  }
}

// The same knob given twice: the last one wins, as on the command line.
TEST(CudaKnobs, TheLastValueOfAKnobWins) {
  const ModelFn m = matmul(2048, 1024, 2048);
  EXPECT_TRUE(emit_with(*m(), knobs({"gpu.gemm.tma=0", "gpu.gemm.tma=1"})) ==
              emit_with(*m(), {}));
  EXPECT_TRUE(emit_with(*m(), knobs({"gpu.gemm.tma=1", "gpu.gemm.tma=0"})) ==
              emit_with(*m(), knobs({"gpu.gemm.tma=0"})));
}


// ---- per-kernel schedules (tuned) ------------------------------------------------------

// The first lowered group of kind `kind` (its default hash and schedule).
const LoweredGroup& group_of_kind(const CompiledModel& c, const std::string& kind) {
  for (const LoweredGroup& lg : c.lowered)
    if (lg.schedule == kind) return lg;
  throw Error("no " + kind + " kernel");
}

// A lookup giving `s` to the kernel whose default hash is `hash`, whatever
// kind it asks for (lower_for_cuda must check the kind itself).
ScheduleLookup give(const std::string& hash, const Schedule& s) {
  return [hash, s](const std::string& h, const std::string&) -> std::optional<Schedule> {
    return h == hash ? std::optional<Schedule>(s) : std::nullopt;
  };
}

struct TunedCase {
  ModelFn model;
  const char* kind;  // the kernel it tunes
  const char* knob;  // the same change as a model-wide --knob
};

TEST(CudaSchedules, ATunedScheduleChangesItsKernelLikeTheKnobAndCompiles) {
  const std::vector<TunedCase> cases = {
      {matmul(2048, 1024, 2048), "gpu_mma", "gpu.gemm.tma=0"},
      {matmul(2048, 1024, 2048), "gpu_mma", "gpu.gemm.fill_blocks=1000"},
      {attention(1024), "gpu_attention", "gpu.flash.wgmma=0"},
      {softmax_rows(), "gpu", "gpu.rows.row_cache=0"},
      {softmax_rows(), "gpu", "gpu.rows.lanes=0"},
  };
  for (const TunedCase& t : cases) {
    SCOPED_TRACE(std::string(t.kind) + ": " + t.knob);
    const std::unique_ptr<Model> m = t.model();
    const LoweredGroup def = group_of_kind(lower_for_cuda(*m), t.kind);
    ASSERT_FALSE(def.default_hash.empty());
    const Primitive knob = parse_knob(t.knob);
    Schedule tuned = def.sched;
    for (const auto& [k, v] : knob.attrs) tuned.get(knob.name).set(k, v);
    ASSERT_NE(tuned, def.sched);
    LowerOptions lo;
    std::ostringstream log;
    lo.log = &log;
    lo.schedules = give(def.default_hash, tuned);
    // The lowered kernel carries the tuned schedule and keeps its default hash.
    const LoweredGroup got = group_of_kind(lower_for_cuda(*m, lo), t.kind);
    EXPECT_EQ(got.sched, tuned);
    EXPECT_EQ(got.default_hash, def.default_hash);
    const std::string source = emit_cuda(*m, "sm_90a", lo);
    EXPECT_EQ(log.str(), "");
    EXPECT_NE(source, emit_cuda(*m, "sm_90a", LowerOptions{})) << "the tuned schedule did not change the code";
    EXPECT_EQ(source, emit_with(*m, {knob})) << "the tuned knob does not do what --knob does";
    std::string why;
    if (cuda::nvrtc_available(&why)) {
      EXPECT_NO_THROW(cuda::compile_to_ptx(source, cuda::NvrtcOptions{}));
    } else {
      std::cout << "NVRTC not available (" << why << "): the tuned source was not compiled\n";
    }
  }
}

TEST(CudaSchedules, AScheduleThatDoesNotApplyIsAWarningAndTheDefaultStays) {
  const std::unique_ptr<Model> m = softmax_rows()();
  const LoweredGroup def = group_of_kind(lower_for_cuda(*m), "gpu");
  Schedule other_kind{"gpu_mma", {}};
  other_kind.get("gpu.gemm").set("tma", 0);
  Schedule bad_value = def.sched;
  bad_value.get("gpu.rows").set("threads", 48);  // not a power of two
  Schedule bad_key = def.sched;
  bad_key.get("gpu.rows").set("speed", 2);
  const std::string want = emit_cuda(*m, "sm_90a", LowerOptions{});
  for (const Schedule& s : {other_kind, bad_value, bad_key}) {
    SCOPED_TRACE(print_schedule(s));
    LowerOptions lo;
    std::ostringstream log;
    lo.log = &log;
    lo.schedules = give(def.default_hash, s);
    EXPECT_EQ(emit_cuda(*m, "sm_90a", lo), want);
    EXPECT_NE(log.str().find("warning: tuned schedule for"), std::string::npos) << log.str();
    EXPECT_EQ(group_of_kind(lower_for_cuda(*m, lo), "gpu").sched, def.sched);
  }
}

// A scratch tuning database, removed at the end.
struct ScratchDb {
  std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("tessel_cuda_schedules_" + std::to_string(::getpid()));
  std::string path = (dir / "tuning.db").string();
  ScratchDb() { std::filesystem::create_directories(dir); }
  ~ScratchDb() { std::filesystem::remove_all(dir); }
  void add(const std::string& hash, const std::string& fingerprint, const std::string& schedule) {
    TuningRecord r;
    r.kernel_hash = hash;
    r.fingerprint = fingerprint;
    r.schedule = schedule;
    r.time_us = 10;
    r.kernel_name = "k";
    r.trials = 2;
    TuningDatabase::open(path).record(r);
  }
};

TEST(CudaSchedules, RecordsOfTheDatabaseReachTheKernelsOfTheirFingerprint) {
  const std::unique_ptr<Model> m = matmul(2048, 1024, 2048)();
  const LoweredGroup def = group_of_kind(lower_for_cuda(*m), "gpu_mma");
  Schedule tuned = def.sched;
  tuned.get("gpu.gemm").set("tma", 0);
  ScratchDb db;
  const std::string gpu = "cuda|NVIDIA H100|sm_90a|13.0|t132";
  db.add(def.default_hash, gpu, print_schedule(tuned));
  const std::string want = emit_with(*m, {parse_knob("gpu.gemm.tma=0")});
  std::ostringstream log;
  LowerOptions lo;
  lo.log = &log;
  lo.schedules = tuning_db_lookup(db.path, gpu, &log);
  ASSERT_TRUE(lo.schedules);
  EXPECT_EQ(emit_cuda(*m, "sm_90a", lo), want);
  // Another device's records are not this one's; without a device there is
  // nothing to match (a warning).
  lo.schedules = tuning_db_lookup(db.path, "cuda|NVIDIA H200|sm_90a|13.0|t132", &log);
  EXPECT_EQ(emit_cuda(*m, "sm_90a", lo), emit_cuda(*m, "sm_90a", LowerOptions{}));
  EXPECT_EQ(log.str(), "");
  EXPECT_FALSE(tuning_db_lookup(db.path, "", &log));
  EXPECT_NE(log.str().find("no device to match"), std::string::npos) << log.str();
}

TEST(CudaSchedules, AnUnparsableOrOtherKindRecordIsIgnoredWithAWarning) {
  const std::unique_ptr<Model> m = matmul(2048, 1024, 2048)();
  const LoweredGroup def = group_of_kind(lower_for_cuda(*m), "gpu_mma");
  const std::string gpu = "cuda|NVIDIA H100|sm_90a|13.0|t132";
  for (const std::string& record : {std::string("schedule gpu_mma {\n  gpu.gemm tma=7\n}\n"),
                                    std::string("not a schedule"),
                                    std::string("schedule gpu {\n  gpu.rows threads=64\n}\n")}) {
    SCOPED_TRACE(record);
    ScratchDb db;
    db.add(def.default_hash, gpu, record);
    std::ostringstream log;
    LowerOptions lo;
    lo.log = &log;
    lo.schedules = tuning_db_lookup(db.path, gpu, &log);
    EXPECT_EQ(emit_cuda(*m, "sm_90a", lo), emit_cuda(*m, "sm_90a", LowerOptions{}));
    EXPECT_NE(log.str().find("warning: tuning db"), std::string::npos) << log.str();
  }
}

TEST(CudaSchedules, TheCacheDigestFollowsTheRecordsOfOneFingerprint) {
  ScratchDb db;
  const std::string gpu = "cuda|NVIDIA H100|sm_90a|13.0|t132", other = "cpu|znver3|f:1|t2";
  EXPECT_EQ(tuning_db_digest(db.path, gpu), "none");
  db.add("00000000000000000000000000000001", gpu, "schedule gpu_mma {\n  gpu.gemm tma=0\n}\n");
  const std::string one = tuning_db_digest(db.path, gpu);
  db.add("00000000000000000000000000000002", other, "schedule nest {\n}\n");
  EXPECT_EQ(tuning_db_digest(db.path, gpu), one) << "another machine's record changed the digest";
  db.add("00000000000000000000000000000002", gpu, "schedule gpu_mma {\n  gpu.gemm wgmma=0\n}\n");
  EXPECT_NE(tuning_db_digest(db.path, gpu), one);
  // --target cuda keys by the device's fingerprint, the CPU by the host's.
  EXPECT_EQ(host_fingerprint(Target::Cuda, 2), host_cuda_fingerprint());
  EXPECT_EQ(host_fingerprint(Target::Cpu, 2), host_cpu_fingerprint(2));
}

// ---- tile knobs (gpu.gemm bk, stages, tma_bn) ---------------------------------------

// The header comment of the first tensor-core GEMM in `source`.
std::string gemm_header(const std::string& source) {
  const size_t at = source.find("tensor-core GEMM: block tile");
  if (at == std::string::npos) return "";
  return source.substr(at, source.find('\n', at) - at);
}

struct TileKnobCase {
  ModelFn model;
  std::vector<Primitive> base;  // knobs both sides share (the path the knob steers)
  const char* knob;
  const char* before;  // in the default's GEMM header
  const char* after;   // in the knob's
};

// Each tile knob, where it applies, changes the kernel as it says, and the
// source still compiles for sm_90a.
TEST(CudaKnobs, EachTileKnobChangesItsGemmAndTheCodeCompiles) {
  const std::vector<TileKnobCase> cases = {
      // mma.sync (wgmma off): K = 128 keeps BK 32 automatically, K = 1024 widens to 64.
      {matmul(2048, 128, 2048), knobs({"gpu.gemm.wgmma=0"}), "gpu.gemm.bk=64", "128x128x32", "128x128x64"},
      {matmul(2048, 1024, 2048), knobs({"gpu.gemm.wgmma=0"}), "gpu.gemm.bk=32", "128x128x64", "128x128x32"},
      {matmul(2048, 1024, 2048), knobs({"gpu.gemm.wgmma=0"}), "gpu.gemm.stages=2", "3-stage cp.async",
       "2-stage cp.async"},
      // The wgmma pipeline (TMA off): 4 stages with one k-step in flight by default.
      {matmul(2048, 512, 512), knobs({"gpu.gemm.tma=0"}), "gpu.gemm.stages=3", "4-stage cp.async",
       "3-stage cp.async"},
      // The TMA kernel: its stages and its BN.
      {matmul(2048, 1024, 2048), {}, "gpu.gemm.stages=2", "-stage TMA", "2-stage TMA"},
      {matmul(2048, 1024, 2048), {}, "gpu.gemm.tma_bn=128", "128x256x64", "128x128x64"},
      {matmul(2048, 1024, 2048), knobs({"gpu.gemm.tma_bn=128"}), "gpu.gemm.tma_bn=256", "128x128x64",
       "128x256x64"},
  };
  std::string why;
  const bool nvrtc = cuda::nvrtc_available(&why);
  for (const TileKnobCase& c : cases) {
    SCOPED_TRACE(std::string("--knob ") + c.knob);
    std::vector<Primitive> with = c.base;
    with.push_back(parse_knob(c.knob));
    const std::unique_ptr<Model> m = c.model();
    const std::string before = emit_with(*m, c.base), after = emit_with(*m, with);
    EXPECT_NE(gemm_header(before).find(c.before), std::string::npos) << gemm_header(before);
    EXPECT_NE(gemm_header(after).find(c.after), std::string::npos) << gemm_header(after);
    EXPECT_TRUE(before != after) << "the knob did not change the generated CUDA";
    if (nvrtc) EXPECT_NO_THROW(cuda::compile_to_ptx(after, cuda::NvrtcOptions{}));
  }
  if (!nvrtc) std::cout << "NVRTC not available (" << why << "): the sources were not compiled\n";
}

// Every value of every tile knob, on every path, gives a plan within its
// shared memory: a value that does not fit falls back (never an illegal
// kernel), and the stages stay 2 or more.
TEST(CudaKnobs, TileKnobsNeverOverflowTheSharedMemory) {
  for (const ModelFn& model : {matmul(2048, 1024, 2048), matmul(512, 4096, 1024), matmul(16, 1024, 4096),
                               matmul(2048, 64, 2048)}) {
    const std::unique_ptr<Model> m = model();
    const CompiledModel c = lower_for_cuda(*m);
    const LoweredGroup& lg = group_of_kind(c, "gpu_mma");
    const loop::Stmt contract = gpu_kernel_facts(lg.kernel, lg.schedule).gpu_contract;
    ASSERT_TRUE(contract.defined());
    for (const char* path : {"gpu.gemm.wgmma=0", "gpu.gemm.tma=0", "gpu.gemm.tma=1"})
      for (const char* bk : {"0", "32", "64"})
        for (const char* stages : {"0", "2", "3", "4"})
          for (const char* bn : {"0", "128", "256"}) {
            const std::vector<Primitive> k = knobs({path});
            Primitive g{"gpu.gemm", {}, {{"bk", bk}, {"stages", stages}, {"tma_bn", bn}}};
            std::vector<Primitive> all = k;
            all.push_back(g);
            const cuda::MmaPlan p = cuda::plan_mma_gemm(*contract, cuda::gemm_target_for("sm_90a", all));
            SCOPED_TRACE(str_cat(path, " bk=", bk, " stages=", stages, " tma_bn=", bn, ": ", p.tiles.bm, "x",
                                 p.tiles.bn, "x", p.tiles.bk, " ", p.stages, " stages"));
            const int64_t limit = p.tma ? 227 * 1024 : p.async_copy ? 113 * 1024 : 48 * 1024;
            EXPECT_LE(p.shared_bytes(), limit);
            EXPECT_GE(p.stages, 2);
            if (p.tma) EXPECT_TRUE(p.tiles.bn == 128 || p.tiles.bn == 256);
            if (p.async_copy && std::string(stages) != "0") EXPECT_LE(p.stages, std::stoi(stages));
          }
  }
}

// Values outside a tile knob's set are refused with the set named: on the
// command line, in a schedule, and by gemm_target_for itself.
TEST(CudaKnobs, TileKnobValuesOutsideTheirSetsAreRejected) {
  const auto rejected = [](const std::function<void()>& f, const std::string& what) {
    try {
      f();
      ADD_FAILURE() << "accepted; wanted: " << what;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  rejected([] { parse_knob("gpu.gemm.bk=48"); }, "bk=48 is not one of 0|32|64");
  rejected([] { parse_knob("gpu.gemm.stages=1"); }, "stages=1 is not one of 0|2|3|4");
  rejected([] { parse_knob("gpu.gemm.stages=5"); }, "outside [0, 4]");
  rejected([] { parse_knob("gpu.gemm.tma_bn=192"); }, "tma_bn=192 is not one of 0|128|256");
  for (const auto& [key, value] : {std::pair{"bk", 16}, {"stages", 1}, {"tma_bn", 64}}) {
    Schedule s{"gpu_mma", {}};
    s.get("gpu.gemm").set(key, value);
    rejected([&] { check_schedule(s); }, str_cat("gpu.gemm ", key, "=", value, " is"));
    rejected([&] { cuda::gemm_target_for("sm_90a", {*s.find("gpu.gemm")}); },
             str_cat("gpu.gemm ", key, "=", value, " is not one of"));
  }
  EXPECT_NO_THROW(parse_knob("gpu.gemm.bk=0"));
  const std::vector<std::pair<std::string, std::string>> keys = knob_keys();
  for (const auto& [key, values] : {std::pair<std::string, std::string>{"gpu.gemm.bk", "0|32|64"},
                                    {"gpu.gemm.stages", "0|2|3|4"}, {"gpu.gemm.tma_bn", "0|128|256"}})
    EXPECT_NE(std::find(keys.begin(), keys.end(), std::pair{key, values}), keys.end()) << key;
}

}  // namespace
}  // namespace tessel
