// The CUDA backend without a GPU: source emission, the GPU schedule (checked
// with the loop IR evaluator), NVRTC compilation for sm_90a, the kernel
// cache, and the clear error of --target cuda where there is no GPU.
// NVRTC tests skip (GTEST_SKIP) where libnvrtc cannot be loaded.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "../gpu/cuda_test_kernels.h"
#include "cli_test_util.h"
#include "cuda_test_util.h"
#include "tessel/codegen/cuda/cuda_source.h"
#include "tessel/codegen/cuda/nvrtc.h"
#include "tessel/loop/math_expand.h"
#include "tessel/loop/printer.h"
#include "tessel/support/cache_file.h"
#include "tessel/support/sha256.h"

namespace tessel::cuda {
namespace {

using namespace tessel::cuda_testing;  // NOLINT
using tessel::testing::run_tessel;
using tessel::cuda::testing::expect_rejected;

std::filesystem::path temp_dir(const std::string& name) {
  auto d = std::filesystem::temp_directory_path() / ("tessel_cuda_test_" + name + "_" + std::to_string(::getpid()));
  std::filesystem::remove_all(d);
  std::filesystem::create_directories(d);
  return d;
}

std::vector<loop::Kernel> all_hand_written() {
  std::vector<loop::Kernel> ks;
  for (const TextKernel& t : hand_written_kernels()) ks.push_back(gpu_kernel(t));
  return ks;
}

// ---- support: SHA-256 and cache files ---------------------------------------------------

TEST(Sha256, KnownVectors) {
  EXPECT_EQ(to_hex(sha256("")), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(to_hex(sha256("abc")), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(to_hex(sha256(std::string(1000000, 'a'))),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // 55/56/64 bytes: the padding edge cases, against the one-shot hash of the same bytes fed in pieces.
  for (size_t n : {55u, 56u, 63u, 64u, 65u, 119u, 120u}) {
    const std::string s(n, 'x');
    Sha256 h;
    h.update(s.substr(0, n / 3));
    h.update(s.substr(n / 3));
    EXPECT_EQ(to_hex(h.digest()), to_hex(sha256(s))) << n;
  }
}

TEST(CacheFile, RoundTripsAndRejectsDamage) {
  const auto dir = temp_dir("cachefile");
  const std::string path = (dir / "sub" / "k.bin").string();
  EXPECT_FALSE(read_cache_file(path, "TSLTEST1"));
  write_cache_file(path, "TSLTEST1", std::string("pay\0load", 8));
  EXPECT_EQ(read_cache_file(path, "TSLTEST1"), std::string("pay\0load", 8));
  EXPECT_FALSE(read_cache_file(path, "TSLOTHER"));  // another format
  {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('X');
  }
  EXPECT_FALSE(read_cache_file(path, "TSLTEST1"));  // checksum mismatch
  std::filesystem::resize_file(path, 20);
  EXPECT_FALSE(read_cache_file(path, "TSLTEST1"));  // truncated
  std::filesystem::remove_all(dir);
}

// ---- emission -------------------------------------------------------------------------

TEST(CudaSource, EmitsSelfContainedKernels) {
  const std::vector<loop::Kernel> ks = all_hand_written();
  const CudaSource src = emit_cuda_source(ks);
  ASSERT_EQ(src.kernels.size(), ks.size());
  EXPECT_EQ(src.code.find("#include"), std::string::npos);
  for (size_t i = 0; i < ks.size(); ++i) {
    EXPECT_EQ(src.kernels[i].kernel_name, ks[i].name);
    EXPECT_NE(src.code.find("extern \"C\" __global__ void " + src.kernels[i].symbol + "("), std::string::npos);
  }
  // Inputs are const, syms are long long, the error word comes last.
  EXPECT_NE(src.code.find("tessel_rows(const float* b_x, float* b_o, double* b_s, const long long v_n, "
                          "const long long v_m, int* ts_error)"),
            std::string::npos)
      << src.code;
  EXPECT_NE(src.code.find("ts_fail(ts_error, 2)"), std::string::npos);  // the second assert in pre-order
}

TEST(CudaSource, LaunchGeometryComesFromGpuLoops) {
  const std::vector<TextKernel> ts = hand_written_kernels();
  const loop::Kernel native = gpu_kernel(ts.back());
  const CudaSource src = emit_cuda_source({native});
  const LaunchGeometry& g = src.kernels[0].launch;
  const std::map<std::string, int64_t> n5 = {{"n", 5}};
  EXPECT_EQ(loop::eval_index(g.grid[0], n5), 2);
  EXPECT_EQ(loop::eval_index(g.grid[1], n5), 3);
  EXPECT_EQ(loop::eval_index(g.grid[2], n5), 1);
  EXPECT_EQ(loop::eval_index(g.block[0], n5), 16);
  EXPECT_EQ(loop::eval_index(g.block[1], n5), 2);
  EXPECT_EQ(loop::eval_index(g.block[2], n5), 1);
  EXPECT_NE(src.code.find("__shared__ float b_sh[32];"), std::string::npos) << src.code;
}

TEST(CudaSource, RejectsWhatItCannotRun) {
  expect_rejected("kernel k(out %o: f32[4]) {\n  parallel for i in [0, 4) {\n    o[i] = 1.0f32\n  }\n}\n",
                  "parallel loop");
  expect_rejected("kernel k(in %x: f32[4], out %o: f32[4]) {\n  gpu.thread.x for i in [0, 4) {\n"
                  "    o[i] = pow(x[i], x[i])\n  }\n}\n",
                  "run math expansion first");
  expect_rejected("kernel k(out %o: f32[4, 4]) {\n  for j in [0, 4) {\n  gpu.thread.x for i in [0, 4) {\n"
                  "    o[j, i] = 1.0f32\n  }\n  }\n}\n",
                  "nested in a serial loop");
  expect_rejected("kernel k(out %o: f32[8]) {\n  gpu.thread.x for i in [0, 4) {\n    o[i] = 1.0f32\n  }\n"
                  "  gpu.thread.x for j in [0, 4) {\n    o[j + 4] = 1.0f32\n  }\n}\n",
                  "more than one gpu.thread.x");
  expect_rejected("kernel k(out %o: f32[4, 4]) {\n  gpu.block.x for j in [0, 4) {\n  gpu.thread.x for i in [0, j + 1) {\n"
                  "    o[j, i] = 1.0f32\n  }\n  }\n}\n",
                  "launch extents may use only the kernel's syms");
}

// Transcendentals CUDA's math library has stay calls through the GPU
// lowering and become its functions (f32 and f64 by name, bf16 through f32
// between roundings); pow keeps its expansion (correctly rounded, powf is 4 ulp).
TEST(CudaSource, TranscendentalsUseCudasMathLibrary) {
  const loop::Kernel k = loop::expand_math(
      loop::parse_kernel("kernel k(in %x: f32[4], in %d: f64[4], in %h: bf16[4], out %o: f32[4], out %p: f64[4], "
                         "out %q: bf16[4], out %r: f32[4]) {\n"
                         "  gpu.thread.x for i in [0, 4) {\n    o[i] = erf(x[i])\n    p[i] = sigmoid(d[i])\n"
                         "    q[i] = tanh(h[i])\n    r[i] = pow(x[i], x[i])\n  }\n}\n"),
      loop::cuda_native_intrinsics());
  const std::string code = emit_cuda_source({k}).code;
  EXPECT_NE(code.find("= erff(b_x["), std::string::npos) << code;
  EXPECT_NE(code.find("= ts_sigmoid(b_d["), std::string::npos) << code;
  EXPECT_NE(code.find("ts_bf(tanhf("), std::string::npos) << code;
  EXPECT_EQ(code.find("powf"), std::string::npos) << code;
  EXPECT_EQ(code.find("erf(b"), std::string::npos) << code;
}

// Found on the H200: the evaluator rounds an immediate to its type before use.
TEST(CudaSource, ImmediatesAreRoundedToTheirType) {
  const loop::Kernel k = loop::parse_kernel(
      "kernel imm(out %o: bf16[1], out %h: f16[1]) {\n  gpu.thread.x for i in [0, 1) {\n"
      "    o[i] = 1e+19bf16\n    h[i] = 0.1f16\n  }\n}\n");
  const std::string code = emit_cuda_source({k}).code;
  EXPECT_NE(code.find("ts_f2bf(0x1.16p+63f)"), std::string::npos) << code;   // bf16(1e19) = 0x5f0b
  EXPECT_NE(code.find("ts_f2h(0x1.998p-4f)"), std::string::npos) << code;    // f16(0.1) = 0x2e66
}

// Index arithmetic is written in 32 bits where the bounds of the variables
// prove every step fits (64-bit division is a long software routine on the
// GPU), in 64 bits where they do not: an extent beyond 2^31, a symbolic one.
TEST(CudaSource, IndexArithmeticIs32BitWhereItProvablyFits) {
  // `extent` elements; `syms` declares it when it is a symbol.
  const auto kernel_of = [](const std::string& extent, const std::string& syms = "") {
    return loop::parse_kernel(
                                "kernel idx(in %x: f32[" + extent + "], out %o: f32[" + extent + "]) " + syms + " {\n"
                                "  gpu.block.x for b in [0, floordiv(" + extent + " + 255, 256)) {\n"
                                "    gpu.thread.x for t in [0, 256) {\n"
                                "      let i = b * 256 + t {\n"
                                "        let h = floordiv(i, 7) {\n"
                                "          if i < " + extent + " {\n"
                                "            o[i] = x[floormod(h, 5) + floordiv(i - 9, 4) * 0]\n"
                                "          }\n"
                                "        }\n"
                                "      }\n"
                                "    }\n"
                                "  }\n"
                                "}\n");
  };
  const auto code_of = [&](const std::string& extent) { return emit_cuda_source({kernel_of(extent)}).code; };
  const std::string small = code_of("1000000");
  EXPECT_NE(small.find("v_i = ((long long)(((int)v_b * 256) + (int)v_t));"), std::string::npos) << small;
  // A non-negative dividend divides as unsigned; a possibly negative one floors.
  EXPECT_NE(small.find("((int)((unsigned)(int)v_i / (unsigned)7))"), std::string::npos) << small;
  EXPECT_NE(small.find("ts_floordiv<int>(((int)v_i - 9), 4)"), std::string::npos) << small;
  EXPECT_NE(small.find("b_o[((int)v_i)] ="), std::string::npos) << small;  // the flat offset too
  // 3e9 elements: the index no longer fits, its division stays 64-bit; its
  // quotient by 7 fits again.
  const std::string large = code_of("3000000000");
  EXPECT_NE(large.find("v_h = ts_floordiv(v_i, 7ll);"), std::string::npos) << large;
  EXPECT_NE(large.find("b_o[v_i] = b_x[ts_add(((long long)((int)((unsigned)(int)v_h % (unsigned)5))), "),
            std::string::npos)
      << large;
  // A symbolic extent: no bound on the block index times 256 in int in the
  // kernel itself; its narrow variant assumes n <= 2^31 - 1 (x's and o's
  // sizes), which bounds the index, and is launched only where n is.
  const CudaSource narrow = emit_cuda_source({kernel_of("n", "syms(n)")});
  const KernelSource& ks = narrow.kernels[0];
  EXPECT_EQ(ks.narrow_symbol, "tessel_idx_i32");
  EXPECT_EQ(ks.narrow_limit, 2147483647);
  const size_t split = narrow.code.find(ks.narrow_symbol + "(");
  const std::string wide_fn = narrow.code.substr(0, split), narrow_fn = narrow.code.substr(split);
  EXPECT_NE(wide_fn.find("v_h = ts_floordiv(v_i, 7ll);"), std::string::npos) << wide_fn;
  EXPECT_NE(narrow_fn.find("v_h = ((long long)((int)((unsigned)(int)v_i / (unsigned)7)));"), std::string::npos)
      << narrow_fn;
  EXPECT_NE(narrow_fn.find("b_o[((int)v_i)] = b_x["), std::string::npos) << narrow_fn;
  EXPECT_EQ(launch_symbol(ks, {1000}), "tessel_idx_i32");
  EXPECT_EQ(launch_symbol(ks, {3000000000}), "tessel_idx");
  // A kernel the assumption does not change has no variant.
  const CudaSource plain = emit_cuda_source({loop::parse_kernel(
      "kernel one(in %x: f32[n], out %o: f32[n]) syms(n) {\n  gpu.thread.x for t in [0, 1) {\n"
      "    o[t] = x[t]\n  }\n}\n")});
  EXPECT_EQ(plain.kernels[0].narrow_symbol, "");
}

// A vectorized loop's store becomes one wide store where every iteration
// runs it once and its offsets are V consecutive elements from a multiple of
// V; otherwise the loop keeps its per-element stores.
TEST(CudaSource, VectorizedLoopsGatherTheirStores) {
  const auto code_of = [](const std::string& type, const std::string& store) {
    return emit_cuda_source({loop::parse_kernel(
                                "kernel vs(in %x: " + type + "[64], out %o: " + type + "[64]) {\n"
                                "  gpu.thread.x for t in [0, 8) {\n"
                                "    vectorized for v in [0, 8) {\n"
                                "      let j = t * 8 + v {\n" + store + "      }\n"
                                "    }\n"
                                "  }\n"
                                "}\n")})
        .code;
  };
  const std::string bf16 = code_of("bf16", "        o[j] = x[63 - j]\n");
  EXPECT_NE(bf16.find("__align__(16) unsigned short ts_vs0[8];"), std::string::npos) << bf16;
  EXPECT_NE(bf16.find("ts_vs0[v_v] = "), std::string::npos) << bf16;
  EXPECT_NE(bf16.find("*reinterpret_cast<ts_v16*>(&b_o[((long long)((int)v_t * 8))]) = "
                      "*reinterpret_cast<const ts_v16*>(ts_vs0);"),
            std::string::npos)
      << bf16;
  // f32: eight floats are 32 bytes, wider than a store.
  EXPECT_EQ(code_of("f32", "        o[j] = x[63 - j]\n").find("ts_vs0"), std::string::npos);
  // Offsets that start off a multiple of 8, run backwards, or store twice.
  EXPECT_EQ(code_of("bf16", "        o[floormod(j + 1, 64)] = x[j]\n").find("ts_vs0"), std::string::npos);
  EXPECT_EQ(code_of("bf16", "        o[63 - j] = x[j]\n").find("ts_vs0"), std::string::npos);
  EXPECT_EQ(code_of("bf16", "        o[j] = x[j]\n        o[j] = x[63 - j]\n").find("ts_vs0"), std::string::npos);
  // A store under an if does not run every iteration.
  EXPECT_EQ(code_of("bf16", "        if j < 60 {\n          o[j] = x[j]\n        }\n").find("ts_vs0"), std::string::npos);
}

TEST(CudaSource, SymbolsKeepDistinctNamesDistinct) {
  EXPECT_EQ(kernel_symbol("fused.add_1"), "tessel_fused_x2eadd__1");
  EXPECT_NE(kernel_symbol("a.b"), kernel_symbol("a_b"));
  EXPECT_NE(kernel_symbol("a_x2eb"), kernel_symbol("a.b"));
}

// ---- the GPU schedule, checked with the evaluator -----------------------------------------

// Runs the original and the scheduled kernel through the evaluator on the same inputs.
void expect_same_under_evaluator(const loop::Kernel& original, const loop::Kernel& scheduled,
                                 const std::map<std::string, int64_t>& syms, bool special) {
  HostBuffers want = random_buffers(original, syms, 11, special);
  HostBuffers got = want;
  const int32_t rc_want = loop::run_kernel(original, want.ptrs(), sym_values(original, syms));
  const int32_t rc_got = loop::run_kernel(scheduled, got.ptrs(), sym_values(scheduled, syms));
  EXPECT_EQ(rc_got, rc_want) << original.name;
  EXPECT_EQ(compare_outputs(original, got, want), "") << loop::print(scheduled);
}

TEST(GpuSchedule, HandWrittenKernelsKeepTheirResults) {
  for (const TextKernel& t : hand_written_kernels()) {
    if (t.gpu_native) continue;
    const loop::Kernel k = loop::parse_kernel(t.text);
    expect_same_under_evaluator(k, schedule_for_gpu(k), t.syms, t.special_values);
  }
}

TEST(GpuSchedule, FlattensRowsIntoThreads) {
  const std::vector<TextKernel> ts = hand_written_kernels();
  // floats: [n, 37] elementwise -> one thread per element, no loop left.
  const std::string floats = loop::print(gpu_kernel(ts[0]));
  EXPECT_NE(floats.find("gpu.block.x for"), std::string::npos) << floats;
  EXPECT_NE(floats.find("gpu.thread.x for"), std::string::npos) << floats;
  EXPECT_EQ(floats.find("  for j"), std::string::npos) << floats;
  // ints: chunked rank-1 nest -> 64 threads per chunk, guarded by the chunk's extent.
  const std::string ints = loop::print(gpu_kernel(ts[1]));
  EXPECT_EQ(ints.find("  for i"), std::string::npos) << ints;
  EXPECT_NE(ints.find("if "), std::string::npos) << ints;
  // rows: row reductions stay serial inside one thread per row.
  const std::string rows = loop::print(gpu_kernel(ts[3]));
  EXPECT_NE(rows.find("for k in"), std::string::npos) << rows;
  EXPECT_NE(rows.find("gpu.thread.x for"), std::string::npos) << rows;
  // total: no parallel loop, a reduction over everything -> one block of 256
  // threads sharing it (gpu.lanes); without lanes, one thread (the extent-1
  // GPU loops simplify away).
  const CudaSource total = emit_cuda_source({gpu_kernel(ts[4])});
  GpuScheduleOptions no_lanes;
  no_lanes.lanes = false;
  const CudaSource one = emit_cuda_source({schedule_for_gpu(loop::parse_kernel(ts[4].text), no_lanes)});
  for (size_t d = 0; d < 3; ++d) {
    EXPECT_TRUE(loop::is_const(total.kernels[0].launch.grid[d], 1));
    EXPECT_TRUE(loop::is_const(total.kernels[0].launch.block[d], d == 0 ? 256 : 1));
    EXPECT_TRUE(loop::is_const(one.kernels[0].launch.grid[d], 1));
    EXPECT_TRUE(loop::is_const(one.kernels[0].launch.block[d], 1));
  }
}

TEST(GpuSchedule, DoesNotFlattenDependentIterations) {
  // A scan: iteration j reads what j - 1 wrote, so threads take whole rows.
  const loop::Kernel k = loop::parse_kernel(
      "kernel scan(in %x: f32[n, 16], out %o: f32[n, 16]) syms(n) {\n  parallel for p in [0, n) {\n"
      "    o[p, 0] = x[p, 0]\n    for j in [1, 16) {\n      o[p, j] = o[p, j - 1] + x[p, j]\n    }\n  }\n}\n");
  const loop::Kernel s = schedule_for_gpu(k);
  EXPECT_NE(loop::print(s).find("for j in"), std::string::npos) << loop::print(s);
  expect_same_under_evaluator(k, s, {{"n", 300}}, true);
  const loop::Kernel k2 = loop::parse_kernel(
      "kernel scan2(in %x: f32[n, 16], out %o: f32[n, 16]) syms(n) {\n  parallel for p in [0, n) {\n"
      "    for j in [1, 16) {\n      o[p, j] = o[p, j - 1] + x[p, j]\n    }\n  }\n}\n");
  const loop::Kernel s2 = schedule_for_gpu(k2);
  EXPECT_NE(loop::print(s2).find("for j in"), std::string::npos) << loop::print(s2);
  expect_same_under_evaluator(k2, s2, {{"n", 300}}, true);
}

TEST(GpuSchedule, FusedGroupsKeepTheirResults) {
  for (const GroupModel& gm : group_models()) {
    Model m;
    GraphBuilder b(m);
    gm.build(b);
    PassOptions po;
    run_pipeline(m, po);
    const FusionPlan plan = plan_fusion(*m.graph, OpRegistry::global());
    size_t lowered = 0;
    for (const FusionGroup& g : plan.groups) {
      if (!g.compiled) continue;
      const LoweredGroup nest = lower_group_gpu_nest(g, OpRegistry::global());
      const loop::Kernel s = schedule_for_gpu(nest.kernel);
      expect_same_under_evaluator(nest.kernel, s, {}, true);
      ++lowered;
    }
    EXPECT_GE(lowered, 1u) << gm.name;
  }
}

// ---- NVRTC ----------------------------------------------------------------------------------

NvrtcOptions hopper() {
  NvrtcOptions o;
  o.arch = "sm_90a";
  return o;
}

TEST(Nvrtc, CompilesHandWrittenKernelsForHopper) {
  SKIP_WITHOUT_NVRTC();
  const Cubin c = compile_to_cubin(emit_cuda_source(all_hand_written()).code, hopper());
  ASSERT_GE(c.image.size(), 4u);
  EXPECT_EQ(c.image.substr(0, 4), "\x7f" "ELF");
  EXPECT_FALSE(c.from_cache);
}

TEST(Nvrtc, CompilesFusedGroups) {
  SKIP_WITHOUT_NVRTC();
  std::vector<loop::Kernel> ks;
  std::vector<std::unique_ptr<Model>> models;  // the kernels' graphs stay alive
  for (const GroupModel& gm : group_models()) {
    models.push_back(std::make_unique<Model>());
    GraphBuilder b(*models.back());
    gm.build(b);
    for (LoweredGroup& lg : lowered_gpu_groups(*models.back())) {
      lg.kernel.name = gm.name + "." + lg.kernel.name;
      ks.push_back(lg.kernel);
    }
  }
  const CudaSource src = emit_cuda_source(ks);
  EXPECT_EQ(compile_to_cubin(src.code, hopper()).image.substr(0, 4), "\x7f" "ELF");
}

TEST(Nvrtc, PtxIsForTheVirtualArchitecture) {
  SKIP_WITHOUT_NVRTC();
  const std::string ptx = compile_to_ptx(emit_cuda_source({gpu_kernel(hand_written_kernels()[0])}).code, hopper());
  EXPECT_NE(ptx.find(".target sm_90a"), std::string::npos) << ptx.substr(0, 400);
  EXPECT_NE(ptx.find(".entry tessel_floats"), std::string::npos);
  // --fmad=false: products and sums stay separate instructions.
  EXPECT_NE(ptx.find("mul.rn.f32"), std::string::npos);
}

// bf16 rounding is one cvt.rn.bf16.f32 where the architecture has it.
TEST(Nvrtc, Bf16RoundsWithOneInstructionFromAmpere) {
  SKIP_WITHOUT_NVRTC();
  NvrtcOptions turing;
  turing.arch = "sm_75";
  const std::string bf16 = "cvt.rn.bf16.f32";
  Model m;
  GraphBuilder b(m);
  for (const GroupModel& gm : group_models())
    if (gm.name == "bf16_math") gm.build(b);
  std::vector<loop::Kernel> ks;
  for (const LoweredGroup& lg : lowered_gpu_groups(m)) ks.push_back(lg.kernel);
  ASSERT_FALSE(ks.empty());
  const std::string code = emit_cuda_source(ks).code;
  EXPECT_NE(compile_to_ptx(code, hopper()).find(bf16), std::string::npos);
  EXPECT_EQ(compile_to_ptx(code, turing).find(bf16), std::string::npos);
}

TEST(Nvrtc, ErrorsCarryTheLog) {
  SKIP_WITHOUT_NVRTC();
  try {
    compile_to_cubin("extern \"C\" __global__ void k() { undeclared_thing(); }\n", hopper());
    ADD_FAILURE() << "compiled";
  } catch (const Error& e) {
    const std::string w = e.what();
    EXPECT_NE(w.find("NVRTC could not compile"), std::string::npos) << w;
    EXPECT_NE(w.find("undeclared_thing"), std::string::npos) << w;
  }
}

TEST(Nvrtc, FindsTheCudaHeaders) {
  SKIP_WITHOUT_NVRTC();
  if (cuda_include_dir().empty()) GTEST_SKIP() << "no CUDA include folder (cuda_fp16.h) found";
  const std::string src =
      "#include <cuda_fp16.h>\n#include <cuda_bf16.h>\n"
      "extern \"C\" __global__ void k(__half* h, __nv_bfloat16* b) { h[0] = __hadd(h[0], h[1]); b[0] = b[1]; }\n";
  EXPECT_FALSE(compile_to_cubin(src, hopper()).image.empty());
}

TEST(Nvrtc, DiskCacheIsKeyedBySourceAndArch) {
  SKIP_WITHOUT_NVRTC();
  const auto dir = temp_dir("nvrtc_cache");
  NvrtcOptions o = hopper();
  o.cache_dir = dir.string();
  const std::string src = emit_cuda_source({gpu_kernel(hand_written_kernels()[4])}).code;
  const Cubin first = compile_to_cubin(src, o);
  EXPECT_FALSE(first.from_cache);
  const Cubin second = compile_to_cubin(src, o);
  EXPECT_TRUE(second.from_cache);
  EXPECT_EQ(second.image, first.image);
  EXPECT_FALSE(compile_to_cubin(src + "\n", o).from_cache);  // another source
  o.arch = "sm_80";
  EXPECT_FALSE(compile_to_cubin(src, o).from_cache);  // another architecture
  // A damaged file is compiled again and replaced.
  for (const auto& e : std::filesystem::directory_iterator(dir / "cuda")) std::filesystem::resize_file(e.path(), 10);
  o.arch = "sm_90a";
  EXPECT_FALSE(compile_to_cubin(src, o).from_cache);
  EXPECT_TRUE(compile_to_cubin(src, o).from_cache);
  std::filesystem::remove_all(dir);
}

TEST(Nvrtc, ArchitectureFromComputeCapability) {
  EXPECT_EQ(arch_for_compute_capability(9, 0), "sm_90a");
  EXPECT_EQ(arch_for_compute_capability(8, 6), "sm_86");
}

// ---- the CLI ----------------------------------------------------------------------------------

std::string write_add_model(const std::filesystem::path& dir) {
  const std::string path = (dir / "add.tir").string();
  std::ofstream(path) << "tessel.model opset(ai.onnx=17) {\ngraph @add(%x: f32[n,16], %y: f32[16]) -> (%z: f32[n,16]) {\n"
                         "  %s = Add(%x, %y)\n  %z = Relu(%s)\n  return %z\n}\n}\n";
  return path;
}

TEST(CudaCli, TargetCudaWithoutADriverIsOneClearError) {
  const auto dir = temp_dir("cli_target");
  std::string out;
  const int code = run_tessel("TESSEL_LIBCUDA=/nonexistent/libcuda.so.1", "run " + write_add_model(dir) + " --target cuda", &out);
  EXPECT_EQ(code, 1) << out;
  EXPECT_NE(out.find("error: "), std::string::npos) << out;
  EXPECT_NE(out.find("no NVIDIA driver found"), std::string::npos) << out;
  std::filesystem::remove_all(dir);
}

TEST(CudaCli, InspectEmitsCudaAndPtx) {
  const auto dir = temp_dir("cli_inspect");
  const std::string model = write_add_model(dir);
  std::string cuda;
  ASSERT_EQ(run_tessel("", "inspect " + model + " --emit cuda", &cuda), 0) << cuda;
  EXPECT_NE(cuda.find("extern \"C\" __global__ void tessel_"), std::string::npos) << cuda;
  std::string why;
  if (!nvrtc_available(&why)) GTEST_SKIP() << "NVRTC not available: " << why;
  std::string ptx;
  ASSERT_EQ(run_tessel("", "inspect " + model + " --emit ptx", &ptx), 0) << ptx;
  EXPECT_NE(ptx.find(".entry tessel_"), std::string::npos) << ptx;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace tessel::cuda
