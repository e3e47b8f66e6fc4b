// gpu.lanes loops (loop/ir.h) and the row-per-block GPU schedule, without a
// GPU: the text form, the verifier's rules, the evaluator on scheduled
// kernels (exactly the unscheduled results: it runs lanes loops serially),
// the schedule's choices on BERT-like shapes, the emitted CUDA (NVRTC for
// sm_90a where NVRTC loads), and the emitted CUDA run on the host (one
// std::thread per CUDA thread, real barriers and warp exchanges) against
// the evaluator within the GPU tests' tolerance.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../gpu/cuda_test_kernels.h"
#include "tessel/codegen/cuda/cuda_source.h"
#include "tessel/codegen/cuda/nvrtc.h"
#include "tessel/loop/printer.h"
#include "tessel/loop/verifier.h"
#include "tessel/loop/visit.h"
#include "tessel/schedule/gpu_schedule.h"

namespace tessel {
namespace {

using namespace tessel::cuda_testing;  // NOLINT

// ---- the loop IR ----------------------------------------------------------------------------

const char* kRowSoftmax = R"(kernel lanes(in %x: f32[n, 300], out %o: f32[n, 300]) syms(n) {
  gpu.block.x for b in [0, n) {
    gpu.thread.x for t in [0, 96) {
      allocate %acc: f32[1] local
      acc[0] = 0.0f32
      gpu.lanes for k in [0, 300) {
        let e = x[b, k] * 0.5f32
        acc[0] = acc[0] + e * e
      }
      gpu.lanes for j in [0, 300) {
        o[b, j] = x[b, j] / acc[0]
      }
    }
  }
}
)";

// Every reduction operator over the register types, 64 threads, inside a
// serial loop (the combine's array is written again: a second barrier).
const char* kTypes = R"(kernel lanes_types(in %a: i8[n, 200], in %b: u64[n, 200], in %c: bool[n, 200], in %d: f64[n, 200], in %e: i32[n, 200], in %h: f16[n, 200], in %s: i16[n, 200], out %o8: i8[n], out %o64: u64[n], out %ob: bool[n], out %od: f64[n], out %oe: i32[n], out %oh: f16[n], out %os: i16[n]) syms(n) {
  gpu.block.x for r in [0, n) {
    gpu.thread.x for t in [0, 64) {
      allocate %m8: i8[1] local
      allocate %m64: u64[1] local
      allocate %all: bool[1] local
      allocate %prod: f64[1] local
      allocate %x: i32[1] local
      allocate %hs: f16[1] local
      allocate %sm: i16[1] local
      m8[0] = -100i8
      m64[0] = 7u64
      all[0] = true
      prod[0] = 1.0f64
      x[0] = 0i32
      hs[0] = -inff16
      sm[0] = 3i16
      for it in [0, 2) {
        gpu.lanes for k1 in [0, 200) {
          m8[0] = max(m8[0], a[r, k1])
        }
        gpu.lanes for k2 in [0, 200) {
          m64[0] = min(m64[0], b[r, k2])
        }
        gpu.lanes for k3 in [0, 200) {
          all[0] = all[0] & (c[r, k3] | k3 < 190)
        }
        gpu.lanes for k4 in [0, 200) {
          prod[0] = prod[0] * (1.0f64 + d[r, k4] * 0.001f64)
        }
        gpu.lanes for k5 in [0, 200) {
          x[0] = e[r, k5] ^ x[0]
        }
        gpu.lanes for k6 in [0, 200) {
          hs[0] = max(hs[0], h[r, k6])
        }
        gpu.lanes for k7 in [0, 200) {
          sm[0] = sm[0] * s[r, k7]
        }
        gpu.lanes for k8 in [0, 200) {
          sm[0] = sm[0] + s[r, k8]
        }
      }
      o8[r] = m8[0]
      o64[r] = m64[0]
      ob[r] = all[0]
      od[r] = prod[0]
      oe[r] = x[0]
      oh[r] = hs[0]
      os[r] = sm[0]
    }
  }
}
)";

TEST(GpuLanes, TextRoundTrips) {
  const loop::Kernel k = loop::parse_kernel(kRowSoftmax);
  const std::string text = loop::print(k);
  EXPECT_NE(text.find("gpu.lanes for k in [0, 300) {"), std::string::npos) << text;
  EXPECT_EQ(loop::print(loop::parse_kernel(text)), text);
  EXPECT_STREQ(loop::for_kind_name(loop::ForKind::GpuLanes), "gpu.lanes");
}

void expect_verify_error(const std::string& text, const std::string& what,
                         loop::Target target = loop::Target::Cuda) {
  const loop::Kernel k = loop::parse_kernel(text);
  try {
    loop::verify(k, target);
    ADD_FAILURE() << "accepted:\n" << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

// A kernel with `inner` inside a 96-thread block per row of x[n, 300].
std::string in_block(const std::string& inner, int64_t threads = 96, const std::string& outer_extra = "") {
  return str_cat("kernel k(in %x: f32[n, 300], out %o: f32[n, 300]) syms(n) {\n  gpu.block.x for b in [0, n) {\n",
                 outer_extra, "    gpu.thread.x for t in [0, ", threads, ") {\n      allocate %acc: f32[1] local\n",
                 inner, "    }\n  }\n}\n");
}

const char* kReduce = "      gpu.lanes for k in [0, 300) {\n        acc[0] = max(acc[0], x[b, k])\n      }\n";

TEST(GpuLanes, VerifierAcceptsRowsAndWarps) {
  loop::verify(loop::parse_kernel(kRowSoftmax), loop::Target::Cuda);
  loop::verify(loop::parse_kernel(kTypes), loop::Target::Cuda);
  loop::verify(loop::parse_kernel(in_block(kReduce)), loop::Target::Cuda);
  // A warp per row, four rows per block: conditions on the row are uniform in a warp.
  loop::verify(loop::parse_kernel(
                   "kernel k(in %x: f32[n, 300], out %o: f32[n]) syms(n) {\n  gpu.block.x for b in [0, n) {\n"
                   "    gpu.thread.y for y in [0, 4) {\n      gpu.thread.x for t in [0, 32) {\n"
                   "        let r = b * 4 + y\n        if r < n {\n          allocate %acc: f32[1] local\n"
                   "          assert x[r, 0] < 1000.0f32, \"big\"\n"
                   "          gpu.lanes for k in [0, 300) {\n            acc[0] = acc[0] + x[r, k]\n          }\n"
                   "          o[r] = acc[0]\n        }\n      }\n    }\n  }\n}\n"),
               loop::Target::Cuda);
  // In a serial loop with uniform bounds; an independent loop may be anywhere.
  loop::verify(loop::parse_kernel(in_block("      for r in [0, 3) {\n" + std::string(kReduce) + "      }\n"
                                           "      if t < 5 {\n        gpu.lanes for j in [0, 300) {\n"
                                           "          o[b, j] = acc[0]\n        }\n      }\n")),
               loop::Target::Cuda);
}

TEST(GpuLanes, VerifierRejects) {
  expect_verify_error("kernel k(in %x: f32[300], out %o: f32[300]) {\n  gpu.lanes for k in [0, 300) {\n"
                      "    o[k] = x[k]\n  }\n}\n",
                      "gpu.lanes loop k on the CPU", loop::Target::Cpu);
  expect_verify_error("kernel k(in %x: f32[300], out %o: f32[300]) {\n  gpu.block.x for b in [0, 2) {\n"
                      "    gpu.lanes for k in [0, 300) {\n      o[k] = x[k]\n    }\n  }\n}\n",
                      "is not inside a gpu.thread.x loop");
  expect_verify_error("kernel k(in %x: f32[n], out %o: f32[n]) syms(n) {\n  gpu.thread.x for t in [0, n) {\n"
                      "    gpu.lanes for k in [0, n) {\n      o[k] = x[k]\n    }\n  }\n}\n",
                      "extent is not a positive constant");
  expect_verify_error(in_block("      gpu.lanes for k in [0, 10) {\n        gpu.lanes for j in [0, 30) {\n"
                               "          o[b, k * 30 + j] = 1.0f32\n        }\n      }\n"),
                      "nested in another gpu.lanes loop");
  expect_verify_error(in_block(kReduce, 48), "multiple of 32");
  expect_verify_error(in_block("      if t < 50 {\n" + std::string(kReduce) + "      }\n"), "all of them must reach");
  expect_verify_error(in_block("      for r in [0, t) {\n" + std::string(kReduce) + "      }\n"),
                      "all of them must reach");
  expect_verify_error(in_block("      let u = t * 2\n      if u < 50 {\n" + std::string(kReduce) + "      }\n"),
                      "all of them must reach");
  expect_verify_error(in_block("      gpu.lanes for k in [0, t) {\n        acc[0] = acc[0] + x[b, k]\n      }\n"),
                      "has bounds that may differ");
  expect_verify_error(in_block("      assert x[b, t] < 1000.0f32, \"big\"\n" + std::string(kReduce)), "assert");
  expect_verify_error(in_block(std::string(kReduce) + "      gpu.lanes for j in [0, 300) {\n"
                               "        assert x[b, j] < 1000.0f32, \"big\"\n        o[b, j] = acc[0]\n      }\n"),
                      "assert");
  expect_verify_error(in_block(std::string(kReduce) + "      if acc[0] > 0.0f32 {\n" + "        assert x[b, 0] < 1.0f32, \"big\"\n      }\n"),
                      "assert");
  expect_verify_error(in_block("      gpu.lanes for k in [0, 300) {\n        acc[0] = x[b, k]\n      }\n"),
                      "allocated outside it");
  expect_verify_error(in_block("      gpu.lanes for k in [0, 300) {\n        o[b, 0] = x[b, k]\n      }\n"),
                      "at an index without k");
  expect_verify_error(in_block("      gpu.lanes for k in [0, 300) {\n        o[b, k] = x[b, k]\n      }\n"
                               "      acc[0] = o[b, 3]\n"),
                      "stored by a gpu.lanes loop");
  expect_verify_error(
      "kernel k(in %x: f32[n, 300], out %o: f32[n, 300]) syms(n) {\n  gpu.block.x for b in [0, n) {\n"
      "    gpu.thread.y for y in [0, 2) {\n    gpu.thread.x for t in [0, 64) {\n      allocate %acc: f32[1] local\n" +
          std::string(kReduce) + "    }\n    }\n  }\n}\n",
      "gpu.thread.y/z");
}

const loop::StmtNode& first_lanes(const loop::Kernel& k) {
  const loop::StmtNode* found = nullptr;
  loop::visit_stmt(k.body, [&](const loop::Stmt& s) {
    if (!found && s->kind == loop::StmtKind::For && s->for_kind == loop::ForKind::GpuLanes) found = s.node.get();
  }, [](const loop::Expr&) {});
  TS_CHECK(found, "no gpu.lanes loop in ", k.name);
  return *found;
}

bool is_reduction(const std::string& update) {
  const loop::Kernel k = loop::parse_kernel(in_block("      gpu.lanes for k in [0, 300) {\n" + update + "      }\n"));
  return loop::lanes_reduction_update(first_lanes(k)) != nullptr;
}

TEST(GpuLanes, ReductionShape) {
  EXPECT_TRUE(is_reduction("        acc[0] = acc[0] + x[b, k]\n"));
  EXPECT_TRUE(is_reduction("        acc[0] = x[b, k] * acc[0]\n"));
  EXPECT_TRUE(is_reduction("        let e = x[b, k]\n        for i in [0, 2) {\n"
                           "          acc[0] = min(acc[0], e + cast<f32>(i))\n        }\n"));
  EXPECT_FALSE(is_reduction("        acc[0] = acc[0] - x[b, k]\n"));             // not associative
  EXPECT_FALSE(is_reduction("        acc[0] = acc[0] + x[b, k] * acc[0]\n"));    // the operand reads acc
  EXPECT_FALSE(is_reduction("        let e = acc[0]\n        acc[0] = acc[0] + e\n"));
  EXPECT_FALSE(is_reduction("        acc[0] = x[b, k]\n"));
  EXPECT_FALSE(is_reduction("        acc[0] = acc[0] + x[b, k]\n        o[b, k] = 1.0f32\n"));
  loop::Expr operand;
  const loop::Kernel k = loop::parse_kernel(in_block(kReduce));
  ASSERT_NE(loop::lanes_reduction_update(first_lanes(k), &operand), nullptr);
  EXPECT_EQ(loop::print(operand), "x[b, k]");
}

// ---- the schedule on fused groups, through the evaluator -------------------------------------

struct Scheduled {
  std::string name;
  loop::Kernel nest, kernel;
};

// Every compiled group of the model built by `build`: its GPU nest and its schedule.
std::vector<Scheduled> schedule_model(const std::string& name, const std::function<void(GraphBuilder&)>& build,
                                      std::vector<std::unique_ptr<Model>>* keep) {
  keep->push_back(std::make_unique<Model>());
  Model& m = *keep->back();
  GraphBuilder b(m);
  build(b);
  std::vector<Scheduled> out;
  for (LoweredGroup& nest : gpu_nest_groups(m)) {
    nest.kernel.name = name + "." + nest.kernel.name;
    out.push_back({name, nest.kernel, schedule_for_gpu(nest.kernel)});
  }
  return out;
}

bool has_lanes(const loop::Kernel& k) { return loop::print(k).find("gpu.lanes for") != std::string::npos; }

// Row reductions the lowering produces (and a gather's rows), at sizes the
// evaluator runs quickly.
std::vector<GroupModel> reduction_models() {
  return {
      {"softmax", [](GraphBuilder& b) {
         b.output(b.op("Softmax", {b.input("x", DType::F32, {5, 300})}, {{"axis", Attribute::of_int(-1)}}));
       }},
      {"log_softmax", [](GraphBuilder& b) {
         b.output(b.op("LogSoftmax", {b.input("x", DType::F32, {9, 128})}, {{"axis", Attribute::of_int(-1)}}));
       }},
      {"layernorm", [](GraphBuilder& b) {
         b.output(b.op("LayerNormalization",
                       {b.input("x", DType::F32, {3, 768}), b.input("scale", DType::F32, {768}),
                        b.input("bias", DType::F32, {768})},
                       {{"axis", Attribute::of_int(-1)}, {"epsilon", Attribute::of_float(1e-5f)}}));
       }},
      {"reduce_sum_last", [](GraphBuilder& b) {
         b.output(b.op("ReduceSum", {b.input("x", DType::F32, {7, 1000}), b.const_i64({1})},
                       {{"keepdims", Attribute::of_int(0)}}));
       }},
      {"reduce_mean_middle", [](GraphBuilder& b) {
         b.output(b.op("ReduceMean", {b.input("x", DType::F32, {4, 200, 3}), b.const_i64({1})},
                       {{"keepdims", Attribute::of_int(1)}}));
       }},
      {"reduce_max_f64", [](GraphBuilder& b) {
         b.output(b.op("ReduceMax", {b.input("x", DType::F64, {3, 130}), b.const_i64({-1})},
                       {{"keepdims", Attribute::of_int(0)}}));
       }},
      {"reduce_l2_logsumexp", [](GraphBuilder& b) {
         Value* x = b.input("x", DType::F32, {4, 100});
         b.output(b.op("ReduceL2", {x, b.const_i64({1})}));
         b.output(b.op("ReduceLogSumExp", {x, b.const_i64({1})}));
       }},
      {"reduce_int", [](GraphBuilder& b) {
         Value* x = b.input("x", DType::I32, {3, 99});
         b.output(b.op("ReduceSum", {x, b.const_i64({1})}));
         b.output(b.op("ReduceMin", {x, b.const_i64({1})}));
       }},
      {"gather_rows", [](GraphBuilder& b) {
         // No reduction, but an assert per row (the index check): rows
         // cannot be flattened into threads, so a block per row with a lanes loop.
         Value* ids = b.op("Cast", {b.op("Abs", {b.input("i", DType::F32, {7})})},
                           {{"to", Attribute::of_int(static_cast<int64_t>(DType::I64))}});
         Value* rows = b.op("Gather", {b.input("table", DType::F32, {5, 300}), ids});
         b.output(b.op("Add", {rows, b.input("y", DType::F32, {7, 300})}));
       }},
      {"rms_norm_pattern", [](GraphBuilder& b) {
         // x / sqrt(mean(x^2) + eps) * w, as exported Llama graphs spell it.
         Value* x = b.input("x", DType::F32, {2, 4097});
         Value* w = b.input("w", DType::F32, {4097});
         Value* ms = b.op("ReduceMean", {b.op("Mul", {x, x}), b.const_i64({-1})}, {{"keepdims", Attribute::of_int(1)}});
         Value* r = b.op("Sqrt", {b.op("Add", {ms, b.const_f32({1}, {1e-6f})})});
         b.output(b.op("Mul", {b.op("Div", {x, r}), w}));
       }},
  };
}

void expect_same_results(const loop::Kernel& original, const loop::Kernel& scheduled, bool special) {
  HostBuffers want = random_buffers(original, {}, 21, special);
  HostBuffers got = want;
  const int32_t rc_want = loop::run_kernel(original, want.ptrs(), {});
  const int32_t rc_got = loop::run_kernel(scheduled, got.ptrs(), {});
  EXPECT_EQ(rc_got, rc_want) << original.name;
  EXPECT_EQ(compare_outputs(original, got, want), "") << loop::print(scheduled);
}

TEST(GpuLanes, ScheduledReductionsMatchTheNestExactly) {
  std::vector<std::unique_ptr<Model>> keep;
  for (const GroupModel& gm : reduction_models()) {
    size_t lanes = 0;
    for (const Scheduled& s : schedule_model(gm.name, gm.build, &keep)) {
      loop::verify(s.kernel, loop::Target::Cuda);
      lanes += has_lanes(s.kernel);
      for (bool special : {false, true}) expect_same_results(s.nest, s.kernel, special);
    }
    EXPECT_GE(lanes, 1u) << gm.name << ": no kernel got the row-per-block schedule";
  }
}

// The hand-written kernels and the shared group models keep their results
// whatever mapping they get.
TEST(GpuLanes, SharedKernelsKeepTheirResults) {
  std::vector<std::unique_ptr<Model>> keep;
  for (const GroupModel& gm : group_models())
    for (const Scheduled& s : schedule_model(gm.name, gm.build, &keep)) expect_same_results(s.nest, s.kernel, true);
}

// The launch of a scheduled kernel, evaluated.
std::array<int64_t, 6> launch_of(const loop::Kernel& k) {
  const cuda::CudaSource src = cuda::emit_cuda_source({k});
  const cuda::LaunchGeometry& g = src.kernels[0].launch;
  std::array<int64_t, 6> out{};
  for (size_t d = 0; d < 3; ++d) {
    out[d] = loop::eval_index(g.grid[d], {});
    out[3 + d] = loop::eval_index(g.block[d], {});
  }
  return out;
}

Scheduled only_lanes_kernel(const std::vector<Scheduled>& ss) {
  const Scheduled* found = nullptr;
  for (const Scheduled& s : ss)
    if (has_lanes(s.kernel)) {
      EXPECT_EQ(found, nullptr) << "two kernels with lanes loops";
      found = &s;
    }
  TS_CHECK(found, "no kernel with lanes loops");
  return *found;
}

TEST(GpuLanes, BertShapesGetARowPerBlockOrWarp) {
  std::vector<std::unique_ptr<Model>> keep;
  // LayerNorm over [128, 768]: a block of 192 threads per row, 128 blocks.
  const Scheduled ln = only_lanes_kernel(schedule_model("ln", [](GraphBuilder& b) {
    Value* x = b.op("Add", {b.input("x", DType::F32, {1, 128, 768}), b.input("r", DType::F32, {1, 128, 768})});
    b.output(b.op("LayerNormalization", {x, b.input("scale", DType::F32, {768}), b.input("bias", DType::F32, {768})},
                  {{"axis", Attribute::of_int(-1)}, {"epsilon", Attribute::of_float(1e-12f)}}));
  }, &keep));
  EXPECT_EQ(launch_of(ln.kernel), (std::array<int64_t, 6>{128, 1, 1, 192, 1, 1})) << loop::print(ln.kernel);
  const std::string text = loop::print(ln.kernel);
  size_t loops = 0;
  for (size_t at = text.find("gpu.lanes for"); at != std::string::npos; at = text.find("gpu.lanes for", at + 1)) ++loops;
  // The row (x + r) read once into the row cache, then mean, variance, output.
  EXPECT_EQ(loops, 4u) << text;
  EXPECT_NE(text.find("allocate %rowc: f32[768] local"), std::string::npos) << text;
  EXPECT_NE(text.find("rowc[rowc_i] = in0[0, gpu_block, rowc_i] + in1[0, gpu_block, rowc_i]"), std::string::npos)
      << text;
  EXPECT_EQ(text.find("in1["), text.rfind("in1[")) << text;  // read in one place only
  EXPECT_EQ(text.find("  for "), std::string::npos) << text;  // no serial loop left
  // In registers: 4 of the row's elements a thread, indexed by unrolled counts.
  const std::string code = cuda::emit_cuda_source({ln.kernel}).code;
  EXPECT_NE(code.find("float b_rowc[4];"), std::string::npos) << code;
  EXPECT_NE(code.find("b_rowc[ts_it0] = "), std::string::npos) << code;
  // Softmax over [1, 12, 128, 128] (with the mask add): a warp per row, 4 rows per block.
  const Scheduled sm = only_lanes_kernel(schedule_model("sm", [](GraphBuilder& b) {
    Value* s = b.op("Add", {b.input("s", DType::F32, {1, 12, 128, 128}), b.input("mask", DType::F32, {1, 1, 128, 128})});
    b.output(b.op("Softmax", {s}, {{"axis", Attribute::of_int(-1)}}));
  }, &keep));
  EXPECT_EQ(launch_of(sm.kernel), (std::array<int64_t, 6>{384, 1, 1, 32, 4, 1})) << loop::print(sm.kernel);
  // Symbolic rows and row length: 128 threads per row, one block per row.
  const Scheduled dyn = only_lanes_kernel(schedule_model("dyn", [](GraphBuilder& b) {
    b.output(b.op("Softmax", {b.input("x", DType::F32, {Dim::sym("n"), Dim::sym("m")})},
                  {{"axis", Attribute::of_int(-1)}}));
  }, &keep));
  const cuda::LaunchGeometry g = cuda::emit_cuda_source({dyn.kernel}).kernels[0].launch;
  EXPECT_EQ(loop::eval_index(g.grid[0], {{"n", 17}, {"m", 5}}), 17);
  EXPECT_EQ(loop::eval_index(g.block[0], {{"n", 17}, {"m", 5}}), 128);
}

// The row cache takes values every iteration of their first loop computes:
// y[b, k] (both loops) is cached; x[b, k + 100], read only where k < 200
// (beyond, the load would be out of bounds), stays where it is; the
// accumulator's value (a local) is never cached.
TEST(GpuLanes, RowCacheTakesOnlyUnconditionalInputValues) {
  const loop::Kernel k = loop::parse_kernel(R"(kernel guarded(in %x: f32[n, 300], in %y: f32[n, 300], out %o: f32[n, 300]) syms(n) {
  gpu.block.x for b in [0, n) {
    gpu.thread.x for t in [0, 96) {
      allocate %acc: f32[1] local
      acc[0] = 0.0f32
      gpu.lanes for k in [0, 300) {
        acc[0] = acc[0] + (select(k < 200, x[b, k + 100], 0.0f32) + y[b, k] * 2.0f32)
      }
      gpu.lanes for j in [0, 300) {
        o[b, j] = select(j < 200, x[b, j + 100], 1.0f32) * (y[b, j] * 2.0f32) / acc[0]
      }
    }
  }
}
)");
  const loop::Stmt row = k.body->body[0]->body[0];  // inside gpu.thread.x
  std::set<std::string> taken = loop::names_in(k.body);
  const std::set<const loop::Buffer*> inputs = {k.params[0].get(), k.params[1].get()};
  const std::string text = loop::print(cache_row_values(row, 96, inputs, &taken));
  EXPECT_NE(text.find("rowc[rowc_i] = y[b, rowc_i] * 2.0f32"), std::string::npos) << text;
  EXPECT_EQ(text.find("rowc0"), std::string::npos) << text;  // one cached value
  EXPECT_NE(text.find("select(j < 200, x[b, j + 100], 1.0f32) * rowc[j]"), std::string::npos) << text;
  // Without y among the inputs (say the kernel wrote it), nothing is cached.
  const std::set<const loop::Buffer*> only_x = {k.params[0].get()};
  EXPECT_EQ(loop::print(cache_row_values(row, 96, only_x, &taken)), loop::print(row));
}

TEST(GpuLanes, ShortRowsAndStridedRowsKeepAThreadPerRow) {
  std::vector<std::unique_ptr<Model>> keep;
  // Rows of 37: too short to share.
  for (const Scheduled& s : schedule_model("short", [](GraphBuilder& b) {
         b.output(b.op("Softmax", {b.input("x", DType::F32, {1000, 37})}, {{"axis", Attribute::of_int(-1)}}));
       }, &keep))
    EXPECT_FALSE(has_lanes(s.kernel)) << loop::print(s.kernel);
  // A reduction over a middle axis with many outputs: a thread per output
  // reads coalesced along the last axis, a block per output would not.
  for (const Scheduled& s : schedule_model("middle", [](GraphBuilder& b) {
         b.output(b.op("ReduceSum", {b.input("x", DType::F32, {64, 100, 128}), b.const_i64({1})}));
       }, &keep))
    EXPECT_FALSE(has_lanes(s.kernel)) << loop::print(s.kernel);
  // ... but with few outputs the block mapping wins.
  for (const Scheduled& s : schedule_model("middle_few", [](GraphBuilder& b) {
         b.output(b.op("ReduceSum", {b.input("x", DType::F32, {2, 1000, 3}), b.const_i64({1})}));
       }, &keep))
    EXPECT_TRUE(has_lanes(s.kernel)) << loop::print(s.kernel);
  // The option turns it off.
  for (const Scheduled& s : schedule_model("off", [](GraphBuilder& b) {
         b.output(b.op("Softmax", {b.input("x", DType::F32, {4, 1000})}, {{"axis", Attribute::of_int(-1)}}));
       }, &keep)) {
    GpuScheduleOptions o;
    o.lanes = false;
    EXPECT_FALSE(has_lanes(schedule_for_gpu(s.nest, o)));
    EXPECT_TRUE(has_lanes(s.kernel));
  }
}

// A rank-1 output in chunks (the CPU nest's parallel loop over chunks of
// a row loop whose extent varies by chunk): each chunk slot is a row,
// guarded by the chunk's extent.
const char* kChunked = R"(kernel chunked(in %x: f32[n, 100], out %o: f32[n]) syms(n) {
  parallel for p in [0, floordiv(n + 7, 8)) {
    for i in [p * 8, p * 8 + min(8, n - p * 8)) {
      allocate %acc: f32[1] local
      acc[0] = 0.0f32
      for k in [0, 100) {
        acc[0] = acc[0] + x[i, k]
      }
      o[i] = acc[0] * 0.5f32
    }
  }
}
)";

TEST(GpuLanes, ChunkedRank1RowsAreGuarded) {
  const loop::Kernel k = loop::parse_kernel(kChunked);
  const loop::Kernel s = schedule_for_gpu(k);
  const std::string text = loop::print(s);
  EXPECT_TRUE(has_lanes(s)) << text;
  EXPECT_NE(text.find("if "), std::string::npos) << text;
  for (int64_t n : {1, 13, 16}) {
    HostBuffers want = random_buffers(k, {{"n", n}}, 5, true);
    HostBuffers got = want;
    ASSERT_EQ(loop::run_kernel(k, want.ptrs(), {n}), 0);
    ASSERT_EQ(loop::run_kernel(s, got.ptrs(), {n}), 0);
    EXPECT_EQ(compare_outputs(k, got, want), "") << n;
  }
  // Many rows of such an output: the same, without evaluating it.
  std::vector<std::unique_ptr<Model>> keep;
  for (const Scheduled& r : schedule_model("rank1", [](GraphBuilder& b) {
         b.output(b.op("ReduceSum", {b.input("x", DType::F32, {5000, 100}), b.const_i64({1})},
                       {{"keepdims", Attribute::of_int(0)}}));
       }, &keep))
    EXPECT_TRUE(has_lanes(r.kernel)) << loop::print(r.kernel);
}

TEST(GpuLanes, AReductionOverEverythingGetsOneBlock) {
  const loop::Kernel total = loop::parse_kernel(hand_written_kernels()[4].text);
  const loop::Kernel s = schedule_for_gpu(total);
  EXPECT_TRUE(has_lanes(s)) << loop::print(s);
  EXPECT_EQ(launch_of(s)[3], 256);
  HostBuffers want = random_buffers(total, {{"n", 1234}}, 3, true);
  HostBuffers got = want;
  ASSERT_EQ(loop::run_kernel(total, want.ptrs(), {1234}), 0);
  ASSERT_EQ(loop::run_kernel(s, got.ptrs(), {1234}), 0);
  EXPECT_EQ(compare_outputs(total, got, want), "");
}

// ---- the emitted CUDA -------------------------------------------------------------------------

std::vector<loop::Kernel> lanes_kernels(std::vector<std::unique_ptr<Model>>* keep) {
  std::vector<loop::Kernel> ks;
  for (const GroupModel& gm : reduction_models())
    for (const Scheduled& s : schedule_model(gm.name, gm.build, keep)) ks.push_back(s.kernel);
  ks.push_back(loop::parse_kernel(kRowSoftmax));
  ks.push_back(loop::parse_kernel(kTypes));
  return ks;
}

TEST(GpuLanes, EmitsShufflesAndBarriers) {
  // 96 threads: warp shuffles, then the three warps' partials through shared memory.
  const std::string block = cuda::emit_cuda_source({loop::parse_kernel(kRowSoftmax)}).code;
  EXPECT_NE(block.find("ts_shfl_xor(v__x25lanes0, ts_o)"), std::string::npos) << block;
  EXPECT_NE(block.find("__shared__ float ts_lanes0[3];"), std::string::npos) << block;
  EXPECT_NE(block.find("__syncthreads();"), std::string::npos) << block;
  // 300 iterations over 96 threads: 4 counted iterations a thread, the last guarded.
  EXPECT_NE(block.find("for (int ts_it0 = 0; ts_it0 < 4; ++ts_it0)"), std::string::npos) << block;
  EXPECT_NE(block.find("const long long v_k = m_k + (long long)threadIdx.x + (long long)ts_it0 * 96ll;"),
            std::string::npos) << block;
  EXPECT_NE(block.find("if ((long long)threadIdx.x + (long long)ts_it0 * 96ll < 300ll)"), std::string::npos) << block;
  EXPECT_NE(block.find("float v__x25lanes0 = (-0x0p+0f);"), std::string::npos) << block;  // -0.0: the sum's identity
  // A warp per row: shuffles only.
  std::vector<std::unique_ptr<Model>> keep;
  const Scheduled sm = only_lanes_kernel(schedule_model("sm", [](GraphBuilder& b) {
    b.output(b.op("Softmax", {b.input("x", DType::F32, {64, 128})}, {{"axis", Attribute::of_int(-1)}}));
  }, &keep));
  const std::string warp = cuda::emit_cuda_source({sm.kernel}).code;
  EXPECT_NE(warp.find("ts_shfl_xor"), std::string::npos) << warp;
  EXPECT_EQ(warp.find("__syncthreads"), std::string::npos) << warp;
  // Identities by type (min of u64: all ones, max of i8: -128, and: true,
  // max of f16: -inf) and, inside a loop, two barriers per reduction.
  const cuda::CudaSource types_src = cuda::emit_cuda_source({loop::parse_kernel(kTypes)});
  // The kernel itself, without its 32-bit-index variant (same barriers).
  const std::string& narrow = types_src.kernels[0].narrow_symbol;
  const std::string types = types_src.code.substr(
      0, narrow.empty() ? std::string::npos : types_src.code.find("void " + narrow + "("));
  EXPECT_NE(types.find("signed char v__x25lanes0 = ((signed char)(-128ll));"), std::string::npos) << types;
  EXPECT_NE(types.find("unsigned long long v__x25lanes1 = 18446744073709551615ull;"), std::string::npos) << types;
  EXPECT_NE(types.find("bool v__x25lanes2 = true;"), std::string::npos) << types;
  EXPECT_NE(types.find("float v__x25lanes5 = __uint_as_float(0xff800000u);"), std::string::npos) << types;
  size_t barriers = 0;
  for (size_t at = types.find("__syncthreads();"); at != std::string::npos; at = types.find("__syncthreads();", at + 1))
    ++barriers;
  EXPECT_EQ(barriers, 16u);
  // Kernels without lanes loops do not get the helpers.
  EXPECT_EQ(cuda::emit_cuda_source({gpu_kernel(hand_written_kernels()[0])}).code.find("ts_shfl_xor"),
            std::string::npos);
}

TEST(GpuLanes, NvrtcCompilesTheKernelsForHopper) {
  std::string why;
  if (!cuda::nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  std::vector<std::unique_ptr<Model>> keep;
  cuda::NvrtcOptions o;
  o.arch = "sm_90a";
  const cuda::CudaSource src = cuda::emit_cuda_source(lanes_kernels(&keep));
  const cuda::Cubin c = cuda::compile_to_cubin(src.code, o);
  EXPECT_EQ(c.image.substr(0, 4), "\x7f" "ELF");
  EXPECT_EQ(c.log.find("warning"), std::string::npos) << c.log;
}

// ---- the emitted CUDA on the host ----------------------------------------------------------

// CUDA C++ on the host: each CUDA thread of a block is a std::thread (blocks
// one after another, so `__shared__` can be `static`); __syncthreads is a
// std::barrier over the block, __shfl_xor_sync two barriers over the warp
// around an exchange of slots. A thread that ends drops out of the barriers;
// each thread counts the barriers it met, and a block whose threads (or a
// warp whose lanes) met different numbers fails the run: on a GPU that
// would hang or be undefined.
const char* kHostCuda = R"(#include <barrier>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>
#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))
struct ts_dim3 { unsigned x, y, z; };
thread_local ts_dim3 threadIdx, blockIdx;
ts_dim3 blockDim;
std::barrier<>* ts_block_barrier;
std::vector<std::unique_ptr<std::barrier<>>> ts_warp_barrier;
unsigned long long ts_slot[1024];
thread_local unsigned ts_syncs, ts_shuffles;
inline unsigned ts_linear() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
inline void __syncthreads() { ++ts_syncs; ts_block_barrier->arrive_and_wait(); }
template <class T> T __shfl_xor_sync(unsigned, T v, int o) {
  const unsigned me = ts_linear(), w = me / 32;
  ++ts_shuffles;
  std::memcpy(&ts_slot[me], &v, sizeof v);
  ts_warp_barrier[w]->arrive_and_wait();
  T r;
  std::memcpy(&r, &ts_slot[w * 32 + ((me % 32) ^ (unsigned)o)], sizeof r);
  ts_warp_barrier[w]->arrive_and_wait();
  return r;
}
std::mutex ts_atomic;
inline int atomicCAS(int* p, int expected, int desired) {
  std::lock_guard<std::mutex> l(ts_atomic);
  const int old = *p;
  if (old == expected) *p = desired;
  return old;
}
// Converts to the pointer type of the kernel's parameter.
struct ts_ptr {
  unsigned char* p;
  template <class T> operator T*() const { return (T*)p; }
};
inline unsigned __float_as_uint(float f) { return std::bit_cast<unsigned>(f); }
inline float __uint_as_float(unsigned u) { return std::bit_cast<float>(u); }
inline float __int_as_float(int i) { return std::bit_cast<float>(i); }
inline long long __double_as_longlong(double d) { return std::bit_cast<long long>(d); }
inline double __longlong_as_double(long long l) { return std::bit_cast<double>(l); }
template <class F> bool ts_launch(ts_dim3 grid, ts_dim3 block, F kernel) {
  blockDim = block;
  const unsigned n = block.x * block.y * block.z;
  for (unsigned bz = 0; bz < grid.z; ++bz)
    for (unsigned by = 0; by < grid.y; ++by)
      for (unsigned bx = 0; bx < grid.x; ++bx) {
        std::barrier<> all(n);
        ts_block_barrier = &all;
        ts_warp_barrier.clear();
        for (unsigned w = 0; w * 32 < n; ++w) ts_warp_barrier.emplace_back(new std::barrier<>(std::min(32u, n - w * 32)));
        std::vector<unsigned> syncs(n), shuffles(n);
        std::vector<std::thread> threads;
        for (unsigned t = 0; t < n; ++t)
          threads.emplace_back([&, t] {
            threadIdx = {t % block.x, t / block.x % block.y, t / (block.x * block.y)};
            blockIdx = {bx, by, bz};
            ts_syncs = ts_shuffles = 0;
            kernel();
            syncs[t] = ts_syncs;
            shuffles[t] = ts_shuffles;
            all.arrive_and_drop();
            ts_warp_barrier[t / 32]->arrive_and_drop();
          });
        for (std::thread& th : threads) th.join();
        for (unsigned t = 0; t < n; ++t)
          if (syncs[t] != syncs[0] || shuffles[t] != shuffles[t & ~31u]) {
            std::fprintf(stderr, "block (%u, %u, %u): thread %u met %u barriers and %u shuffles, thread 0 %u and %u\n",
                         bx, by, bz, t, syncs[t], shuffles[t], syncs[0], shuffles[t & ~31u]);
            return false;
          }
      }
  return true;
}
)";

std::string replaced(std::string s, const std::string& from, const std::string& to) {
  const size_t at = s.find(from);
  TS_CHECK(at != std::string::npos, "host CUDA: '", from, "' not found in the generated code");
  return s.replace(at, from.size(), to);
}

std::string host_compiler() {
  const char* cxx = std::getenv("CXX");
  const std::string c = cxx && *cxx ? cxx : "c++";
  return std::system((c + " --version > /dev/null 2>&1").c_str()) == 0 ? c : "";
}

// One kernel run on the host: its buffers in and out, its error word.
struct HostRun {
  loop::Kernel kernel;
  HostBuffers io;
  std::map<std::string, int64_t> syms;
  int error = -1;
};

// Compiles the runs' kernels into one host program and runs each once on
// its buffers; false (with a test failure) when it does not compile or a
// run fails.
bool run_on_host(std::vector<HostRun>* runs, const std::string& cxx) {
  std::vector<loop::Kernel> ks;
  for (const HostRun& r : *runs) ks.push_back(r.kernel);
  const cuda::CudaSource src = cuda::emit_cuda_source(ks);
  std::string code = src.code;
  code = replaced(code, "asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f));",
                  "h = std::bit_cast<unsigned short>((_Float16)f);");
  code = replaced(code, "asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h));",
                  "f = (float)std::bit_cast<_Float16>(h);");
  std::string main = std::string(kHostCuda) + code +
                     "\nint main(int, char** argv) {\n  FILE* in = std::fopen(argv[1], \"rb\");\n"
                     "  FILE* out = std::fopen(argv[2], \"wb\");\n";
  for (size_t r = 0; r < runs->size(); ++r) {
    const HostRun& run = (*runs)[r];
    const cuda::LaunchGeometry& g = src.kernels[r].launch;
    const auto dim = [&](const loop::Expr& e) { return loop::eval_index(e, run.syms); };
    main += "  {\n";
    for (size_t i = 0; i < run.io.data.size(); ++i)
      main += str_cat("    std::vector<unsigned char> p", i, "(", run.io.data[i].size(), " + 1);\n    if (std::fread(p", i,
                      ".data(), 1, ", run.io.data[i].size(), ", in) != ", run.io.data[i].size(), ") return 2;\n");
    main += str_cat("    int err = 0;\n    if (!ts_launch({", dim(g.grid[0]), ", ", dim(g.grid[1]), ", ", dim(g.grid[2]),
                    "}, {", dim(g.block[0]), ", ", dim(g.block[1]), ", ", dim(g.block[2]), "}, [&] { ",
                    src.kernels[r].symbol, "(");
    for (size_t i = 0; i < run.io.data.size(); ++i) main += str_cat("ts_ptr{p", i, ".data()}, ");
    for (const int64_t v : sym_values(run.kernel, run.syms)) main += str_cat(v, "ll, ");
    main += "&err); })) return 3;\n";
    for (size_t i = 0; i < run.io.data.size(); ++i)
      main += str_cat("    std::fwrite(p", i, ".data(), 1, ", run.io.data[i].size(), ", out);\n");
    main += "    std::fwrite(&err, sizeof err, 1, out);\n  }\n";
  }
  main += "  std::fclose(in);\n  std::fclose(out);\n  return 0;\n}\n";
  const auto dir = std::filesystem::temp_directory_path() / ("tessel_lanes_host_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "main.cpp") << main;
  {
    std::ofstream in(dir / "in.bin", std::ios::binary);
    for (const HostRun& r : *runs)
      for (const auto& d : r.io.data) in.write(reinterpret_cast<const char*>(d.data()), static_cast<std::streamsize>(d.size()));
  }
  const std::string log = (dir / "log.txt").string();
  const std::string compile = str_cat(cxx, " -std=c++20 -O1 -w -pthread -ffp-contract=off -o ", (dir / "run").string(),
                                      " ", (dir / "main.cpp").string(), " > ", log, " 2>&1");
  if (std::system(compile.c_str()) != 0) {
    std::ifstream l(log);
    ADD_FAILURE() << "host compile failed: " << std::string(std::istreambuf_iterator<char>(l), {}).substr(0, 3000);
    return false;
  }
  const std::string run = str_cat((dir / "run").string(), " ", (dir / "in.bin").string(), " ", (dir / "out.bin").string(),
                                  " 2> ", log);
  if (std::system(run.c_str()) != 0) {
    std::ifstream l(log);
    ADD_FAILURE() << "host run failed: " << std::string(std::istreambuf_iterator<char>(l), {});
    return false;
  }
  std::ifstream out(dir / "out.bin", std::ios::binary);
  for (HostRun& r : *runs) {
    for (auto& d : r.io.data) out.read(reinterpret_cast<char*>(d.data()), static_cast<std::streamsize>(d.size()));
    out.read(reinterpret_cast<char*>(&r.error), sizeof r.error);
  }
  std::filesystem::remove_all(dir);
  return true;
}

TEST(GpuLanes, EmittedCudaRunOnTheHostMatchesTheEvaluator) {
  const std::string cxx = host_compiler();
  if (cxx.empty()) GTEST_SKIP() << "no host C++ compiler (c++ or $CXX)";
  std::vector<std::unique_ptr<Model>> keep;
  std::vector<Scheduled> cases;
  for (const GroupModel& gm : reduction_models())
    for (const Scheduled& s : schedule_model(gm.name, gm.build, &keep)) cases.push_back(s);
  // Odd row counts and lengths (a row per warp with a partial last block, 1..16 warps).
  for (int64_t rows : {1, 3}) {
    for (int64_t len : {65, 257, 4097}) {
      for (const Scheduled& s : schedule_model(str_cat("ln", rows, "x", len), [&](GraphBuilder& b) {
             b.output(b.op("LayerNormalization",
                           {b.input("x", DType::F32, {rows, len}), b.input("s", DType::F32, {len}),
                            b.input("c", DType::F32, {len})},
                           {{"axis", Attribute::of_int(-1)}}));
           }, &keep))
        cases.push_back(s);
    }
  }
  for (const Scheduled& s : schedule_model("f16_softmax", [](GraphBuilder& b) {
         Value* h = b.op("Cast", {b.input("x", DType::F32, {6, 100})},
                         {{"to", Attribute::of_int(static_cast<int64_t>(DType::F16))}});
         b.output(b.op("Softmax", {h}, {{"axis", Attribute::of_int(-1)}}));
       }, &keep))
    cases.push_back(s);
  // A reduction over everything in one block; the hand-written row kernel.
  const loop::Kernel total = loop::parse_kernel(hand_written_kernels()[4].text);
  cases.push_back({"total", total, schedule_for_gpu(total)});
  cases.push_back({"rows", loop::parse_kernel(kRowSoftmax), loop::parse_kernel(kRowSoftmax)});
  cases.push_back({"types", loop::parse_kernel(kTypes), loop::parse_kernel(kTypes)});
  cases.push_back({"chunked", loop::parse_kernel(kChunked), schedule_for_gpu(loop::parse_kernel(kChunked))});
  std::vector<HostRun> runs;
  std::vector<HostBuffers> want;
  std::vector<int32_t> rc;
  for (const Scheduled& s : cases) {
    if (!has_lanes(s.kernel)) continue;
    for (bool special : {false, true}) {
      const std::map<std::string, int64_t> syms = s.name == "total" ? std::map<std::string, int64_t>{{"n", 1234}}
                                                  : s.name == "rows" || s.name == "types"
                                                      ? std::map<std::string, int64_t>{{"n", 3}}
                                                  : s.name == "chunked" ? std::map<std::string, int64_t>{{"n", 13}}
                                                                      : std::map<std::string, int64_t>{};
      HostBuffers w = random_buffers(s.nest, syms, 31, special);
      loop::Kernel k = s.kernel;
      k.name += special ? ".special" : ".plain";
      runs.push_back({k, w, syms});
      rc.push_back(loop::run_kernel(s.nest, w.ptrs(), sym_values(s.nest, syms)));
      want.push_back(w);
    }
  }
  ASSERT_GE(runs.size(), 30u);
  if (!run_on_host(&runs, cxx)) return;
  for (size_t i = 0; i < runs.size(); ++i) {
    EXPECT_EQ(runs[i].error, rc[i]) << runs[i].kernel.name;
    EXPECT_EQ(compare_outputs(runs[i].kernel, runs[i].io, want[i], lanes_tolerance(runs[i].kernel)), "")
        << loop::print(runs[i].kernel);
  }
}

}  // namespace
}  // namespace tessel
