// The schedule language: text form, checks, the GEMM template's knobs, and
// (ScheduleModels, on the materialized models of $TESSEL_MODELS_DIR) that
// every kernel's schedule round-trips and rebuilds the same kernel.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

#include "tessel/driver/compiler.h"
#include "tessel/driver/cuda_compiler.h"
#include "tessel/driver/model_loader.h"
#include "tessel/driver/session.h"
#include "tessel/loop/printer.h"
#include "tessel/ops/registry.h"
#include "tessel/schedule/gemm.h"
#include "tessel/schedule/schedule.h"

namespace tessel {
namespace {

const char* kEveryPrimitive = R"(schedule nest {
  nest.vector width=16
  nest.parallel on=1
  split i factor=4 outer=i_o inner=i_i tail=guard
  reorder i_o j
  fuse i_o j into=f
  tile a b f1=8 f2=4
  vectorize i_i
  unroll a_i
  parallel f
  bind f axis=gpu.block.x
}
)";

TEST(ScheduleText, PrintsWhatItParses) {
  const Schedule s = parse_schedule(kEveryPrimitive);
  EXPECT_EQ(s.kind, "nest");
  ASSERT_EQ(s.prims.size(), 10u);
  EXPECT_EQ(s.prims[2].name, "split");
  EXPECT_EQ(s.prims[2].args, std::vector<std::string>{"i"});
  EXPECT_EQ(s.prims[2].int_attr("factor", 0), 4);
  EXPECT_EQ(s.prims[2].attr("tail"), "guard");
  EXPECT_EQ(print_schedule(s), kEveryPrimitive);
  EXPECT_EQ(parse_schedule(print_schedule(s)), s);
}

TEST(ScheduleText, CommentsAndBlankLinesAreIgnored) {
  const Schedule s = parse_schedule("# tuned\n\nschedule gemm {   # the kind\n  gemm.pack a=0  # no A panels\n\n}\n");
  ASSERT_EQ(s.prims.size(), 1u);
  EXPECT_EQ(s.prims[0].int_attr("a", 1), 0);
}

TEST(ScheduleText, EveryKnownPrimitiveHasAWrittenForm) {
  // The knobs of the GPU and GEMM kinds are checked by their own tests;
  // the loop primitives all appear in kEveryPrimitive.
  const Schedule s = parse_schedule(kEveryPrimitive);
  for (const std::string& name : known_primitives()) {
    if (name.find('.') != std::string::npos) continue;
    EXPECT_NE(s.find(name), nullptr) << name;
  }
}

void expect_rejected(const std::string& text, const std::string& fragment) {
  try {
    parse_schedule(text);
    ADD_FAILURE() << "accepted:\n" << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(ScheduleText, MalformedTextIsRejectedWithTheLine) {
  expect_rejected("", "empty");
  expect_rejected("schedule nest\n}\n", "line 1");
  expect_rejected("schedule nest {\n  nest.vector width=16\n", "closing");
  expect_rejected("schedule nest {\n}\nsplit i\n", "after the closing");
  expect_rejected("schedule nest {\n  split i factor=4 outer=a inner=b j\n}\n", "after key=value");
  expect_rejected("schedule nest {\n  split i factor=\n}\n", "malformed argument");
  expect_rejected("schedule nest {\n  9split i\n}\n", "line 2");
}

TEST(ScheduleText, IllegalPrimitivesAreRejectedByName) {
  expect_rejected("schedule nest {\n  swizzle i\n}\n", "unknown primitive 'swizzle'");
  expect_rejected("schedule nest {\n  split i factor=4 outer=a\n}\n", "split needs inner=");
  expect_rejected("schedule nest {\n  split i factor=four outer=a inner=b\n}\n", "not an integer");
  expect_rejected("schedule nest {\n  split i factor=1 outer=a inner=b\n}\n", "outside");
  expect_rejected("schedule nest {\n  split i factor=4 outer=a inner=b tail=wrap\n}\n", "allowed values");
  expect_rejected("schedule nest {\n  split factor=4 outer=a inner=b\n}\n", "split takes 1 loop names, got 0");
  expect_rejected("schedule nest {\n  reorder i\n}\n", "reorder takes 2 to 16");
  expect_rejected("schedule nest {\n  unroll i depth=2\n}\n", "unroll has no key 'depth'");
  expect_rejected("schedule nest {\n  bind i axis=gpu.warp\n}\n", "allowed values");
  expect_rejected("schedule nest {\n  nest.vector width=12\n}\n", "power of two");
  expect_rejected("schedule nest {\n  nest.vector width=8 width=8\n}\n", "twice");
  expect_rejected("schedule nest {\n  nest.vector width=8\n  nest.vector width=16\n}\n", "given twice");
  expect_rejected("schedule nest {\n  gemm.tile mr=6 nr=16 lanes=8\n}\n", "does not apply to a nest kernel");
  expect_rejected("schedule gemm {\n  gemm.tile mr=6 nr=20 lanes=8\n}\n", "not a multiple of lanes");
  expect_rejected("schedule gemm {\n  gemm.tile mr=6 nr=16 lanes=8\n  gemm.block mc=100 kc=256 nc=512\n}\n",
                  "mc=100 is not a multiple of gemm.tile mr=6");
  expect_rejected("schedule gpu {\n  gpu.rows threads=2048\n}\n", "outside");
  expect_rejected("schedule gpu_mma {\n  gpu.rows threads=256\n}\n", "does not apply");
}

TEST(ScheduleGemm, KnobsRoundTripThroughTheTemplate) {
  GemmSchedule g;
  g.mr = 8;
  g.nr = 32;
  g.vector_lanes = 16;
  g.mc = 64;
  g.kc = 384;
  g.nc = 256;
  g.parallel_over_n_blocks = true;
  g.pack_a = false;
  g.pack_b = false;
  Schedule s{"gemm", {}};
  add_gemm_knobs(g, &s);
  const Schedule back = parse_schedule(print_schedule(s));
  GemmSchedule h;  // the defaults, overridden by every knob
  apply_gemm_knobs(back, &h);
  EXPECT_EQ(h.mr, 8);
  EXPECT_EQ(h.nr, 32);
  EXPECT_EQ(h.vector_lanes, 16);
  EXPECT_EQ(h.mc, 64);
  EXPECT_EQ(h.kc, 384);
  EXPECT_EQ(h.nc, 256);
  EXPECT_TRUE(h.parallel_over_m_blocks);
  EXPECT_TRUE(h.parallel_over_n_blocks);
  EXPECT_FALSE(h.pack_a);
  EXPECT_FALSE(h.pack_b);
}

TEST(ScheduleGemm, InconsistentOrOversizedBlocksAreErrors) {
  GemmSchedule h;
  // nc not a multiple of the default nr (16) once only nc is overridden.
  EXPECT_THROW(apply_gemm_knobs(parse_schedule("schedule gemm {\n  gemm.block mc=96 kc=256 nc=100\n}\n"), &h), Error);
  // 4 MiB of packed B: over the code generator's stack cap.
  GemmSchedule big;
  EXPECT_THROW(apply_gemm_knobs(parse_schedule("schedule gemm {\n  gemm.block mc=96 kc=2048 nc=512\n}\n"), &big),
               Error);
}

// ---- --knob: template knobs for a whole model ---------------------------------------------

TEST(ScheduleKnobs, ParseAndPrint) {
  const Primitive k = parse_knob("gpu.gemm.tma=0");
  EXPECT_EQ(k.name, "gpu.gemm");
  EXPECT_EQ(k.int_attr("tma", 1), 0);
  EXPECT_EQ(print_knob(k), "gpu.gemm.tma=0");
  EXPECT_EQ(parse_knob(print_knob(parse_knob("gemm.pack.a=0"))), parse_knob("gemm.pack.a=0"));
  const auto rejected = [](const char* text, const char* fragment) {
    try {
      parse_knob(text);
      ADD_FAILURE() << "accepted " << text;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
    }
  };
  rejected("gpu.gemm.tma", "PRIMITIVE.KEY=VALUE");
  rejected("tma=0", "PRIMITIVE.KEY=VALUE");
  rejected("gpu.gemm.speed=2", "has no key 'speed'");
  rejected("split.factor=4", "not a template knob");  // a loop primitive needs loop names
  rejected("gpu.warp.x=1", "not a template knob");
  rejected("gpu.rows.threads=48", "power of two");
  rejected("gpu.flash.on=2", "outside");
  rejected("gpu.flash.on=", "malformed value");
}

TEST(ScheduleKnobs, ApplyToTheKindsThatTakeThem) {
  const std::vector<Primitive> knobs{parse_knob("gemm.pack.a=0"), parse_knob("nest.parallel.on=0"),
                                     parse_knob("gpu.gemm.tma=0")};
  Schedule gemm = parse_schedule("schedule gemm {\n  gemm.pack a=1\n}\n");
  EXPECT_TRUE(apply_knobs(knobs, &gemm));
  EXPECT_EQ(gemm.find("gemm.pack")->int_attr("a", 1), 0);
  EXPECT_EQ(gemm.find("nest.parallel")->int_attr("on", 1), 0);  // nest.parallel takes gemm kernels too
  EXPECT_EQ(gemm.find("gpu.gemm"), nullptr);                     // a GPU knob: not for a CPU kind
  EXPECT_FALSE(apply_knobs(knobs, &gemm));                        // already so
  Schedule gpu_mma{"gpu_mma", {}};
  EXPECT_TRUE(apply_knobs(knobs, &gpu_mma));
  EXPECT_EQ(gpu_mma.find("gpu.gemm")->int_attr("tma", 1), 0);
  EXPECT_EQ(gpu_mma.find("gemm.pack"), nullptr);
  // The last value given wins.
  const std::vector<Primitive> twice{parse_knob("gpu.gemm.tma=0"), parse_knob("gpu.gemm.tma=1")};
  EXPECT_EQ(knob_int(twice, "gpu.gemm", "tma", 7), 1);
  EXPECT_EQ(knob_int(twice, "gpu.gemm", "overlap", 7), 7);
}

// ---- every kernel of the shared models -----------------------------------------------------

const char* kModels[] = {"resnet18.ts17", "resnet50.ts17", "resnet50.dynamo", "mobilenet_v2.ts17",
                         "vit_b_16.ts17", "bert_base.ts17", "gpt2.ts17",     "llama_tiny.dynamo"};

std::unique_ptr<Model> prepared(const std::string& path) {
  std::unique_ptr<Model> m = load_model(path);
  DriverOptions o;
  compile_model(*m, {}, o);
  return m;
}

// Print -> parse -> equal, print again -> the same text.
void expect_round_trip(const std::string& model, const LoweredGroup& lg) {
  const std::string text = print_schedule(lg.sched);
  Schedule back;
  try {
    back = parse_schedule(text);
  } catch (const Error& e) {
    ADD_FAILURE() << model << " " << lg.kernel.name << ": " << e.what() << "\n" << text;
    return;
  }
  EXPECT_EQ(back, lg.sched) << model << " " << lg.kernel.name;
  EXPECT_EQ(print_schedule(back), text) << model << " " << lg.kernel.name;
}

TEST(ScheduleModels, EveryCpuKernelsScheduleRoundTripsAndRebuildsIt) {
  const char* dir = std::getenv("TESSEL_MODELS_DIR");
  if (!dir) GTEST_SKIP() << "set TESSEL_MODELS_DIR to a folder of materialized models";
  size_t kernels = 0;
  for (const char* name : kModels) {
    const std::string path = std::string(dir) + "/" + name + ".onnx";
    ASSERT_TRUE(std::filesystem::exists(path)) << path;
    const std::unique_ptr<Model> m = prepared(path);
    const CompiledModel c = lower_for_cpu(*m);
    size_t next = 0;
    for (const FusionGroup& g : c.plan.groups) {
      if (!g.compiled) continue;
      const LoweredGroup& lg = c.lowered.at(next++);
      expect_round_trip(name, lg);
      // The schedule as a tuned one builds the kernel it describes.
      const LoweredGroup again = lower_cpu_group(g, OpRegistry::global(), parse_schedule(print_schedule(lg.sched)));
      loop::Kernel a = again.kernel, b = lg.kernel;
      a.name = b.name = "k";
      EXPECT_EQ(loop::print(a), loop::print(b)) << name << " " << lg.kernel.name;
      EXPECT_EQ(again.default_hash, lg.default_hash);
      ++kernels;
    }
  }
  EXPECT_GT(kernels, 100u);
}

TEST(ScheduleModels, EveryCudaKernelsScheduleRoundTripsAndRebuildsIt) {
  const char* dir = std::getenv("TESSEL_MODELS_DIR");
  if (!dir) GTEST_SKIP() << "set TESSEL_MODELS_DIR to a folder of materialized models";
  size_t kernels = 0, with_knobs = 0;
  for (const char* name : kModels) {
    const std::unique_ptr<Model> m = prepared(std::string(dir) + "/" + name + ".onnx");
    const CompiledModel c = lower_for_cuda(*m);
    size_t next = 0;
    for (const FusionGroup& g : c.plan.groups) {
      if (!g.compiled) continue;
      const LoweredGroup& lg = c.lowered.at(next++);
      EXPECT_EQ(lg.sched.kind, lg.schedule);
      expect_round_trip(name, lg);
      with_knobs += !lg.sched.prims.empty();
      // The schedule as a tuned one builds the kernel it describes.
      const LoweredGroup again = lower_cuda_group(g, OpRegistry::global(), default_cuda_arch(),
                                                  parse_schedule(print_schedule(lg.sched)), {});
      loop::Kernel a = again.kernel, b = lg.kernel;
      a.name = b.name = "k";
      EXPECT_EQ(loop::print(a), loop::print(b)) << name << " " << lg.kernel.name;
      EXPECT_EQ(again.sched, lg.sched) << name << " " << lg.kernel.name;
      EXPECT_EQ(again.default_hash, lg.default_hash);
      ++kernels;
    }
  }
  EXPECT_GT(kernels, 100u);
  EXPECT_EQ(with_knobs, kernels);  // every GPU kind records its template's knobs
}

}  // namespace
}  // namespace tessel
