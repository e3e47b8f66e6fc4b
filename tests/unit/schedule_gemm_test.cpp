// The packed GEMM schedule (schedule/gemm.h): loop IR that verifies, and
// results within K·2^-24·Σ|a||b| of a double reference, through the
// evaluator (small sizes, forced small blocks so that every edge and K split
// shows up) and through the LLVM code generator.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <sstream>

#include "tessel/loop/eval.h"
#include "tessel/loop/printer.h"
#include "tessel/loop/verifier.h"
#include "tessel/loop/visit.h"
#include "tessel/schedule/cpu_info.h"
#include "tessel/schedule/gemm.h"
#include "tessel/support/error.h"
#include "loop_test_util.h"

#ifdef TESSEL_HAVE_CODEGEN_CPU
#include "tessel/codegen/cpu/cpu_codegen.h"
#endif

namespace tessel {
namespace {

using namespace tessel::loop;  // NOLINT

struct Case {
  int64_t M, N, K;
  bool trans_a = false, trans_b = false;  // A stored [K, M], B stored [N, K]
  bool bias_relu = false;                 // out = max(acc + bias[j], 0)
  bool symbolic_m = false;                // M is the kernel sym "m"
};

std::string case_name(const Case& c) {
  return "gemm_" + std::to_string(c.M) + "x" + std::to_string(c.N) + "x" + std::to_string(c.K) + (c.trans_a ? "_ta" : "") +
         (c.trans_b ? "_tb" : "") + (c.bias_relu ? "_bias_relu" : "") + (c.symbolic_m ? "_symm" : "");
}

// Params: a, b, bias (always present, unused without bias_relu), out.
Kernel gemm_kernel(const Case& c, const GemmSchedule& s) {
  Expr M = c.symbolic_m ? var("m") : Expr(c.M), N(c.N), K(c.K);
  auto a = testing::make_buffer("a", DType::F32, c.trans_a ? std::vector<Expr>{K, M} : std::vector<Expr>{M, K});
  auto b = testing::make_buffer("b", DType::F32, c.trans_b ? std::vector<Expr>{N, K} : std::vector<Expr>{K, N});
  auto bias = testing::make_buffer("bias", DType::F32, {N});
  auto out = testing::make_buffer("out", DType::F32, {M, N});
  GemmOperands ops;
  ops.M = M, ops.N = N, ops.K = K;
  ops.a = [&](Expr i, Expr k) { return c.trans_a ? load(a, {k, i}) : load(a, {i, k}); };
  ops.b = [&](Expr k, Expr j) { return c.trans_b ? load(b, {j, k}) : load(b, {k, j}); };
  ops.epilogue = [&](Expr i, Expr j, Expr acc) {
    if (!c.bias_relu) return store(out, {i, j}, acc);
    return store(out, {i, j}, max(acc + load(bias, {j}), float_imm(DType::F32, 0.0)));
  };
  Kernel k;
  k.name = case_name(c);
  k.params = {a, b, bias, out};
  k.num_inputs = 3;
  if (c.symbolic_m) k.syms = {"m"};
  k.body = gemm_nest(ops, s, "g");
  return k;
}

struct Data {
  std::vector<float> a, b, bias, out;
  std::vector<double> ref, tol;
};

// Random operands, the double reference and the per-element tolerance.
Data make_data(const Case& c, uint32_t seed) {
  Data d;
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  d.a.resize(c.M * c.K), d.b.resize(c.K * c.N), d.bias.resize(c.N);
  for (float& x : d.a) x = u(rng);
  for (float& x : d.b) x = u(rng);
  for (float& x : d.bias) x = u(rng);
  d.out.assign(c.M * c.N, std::numeric_limits<float>::quiet_NaN());
  d.ref.resize(c.M * c.N), d.tol.resize(c.M * c.N);
  auto A = [&](int64_t i, int64_t k) { return double(c.trans_a ? d.a[k * c.M + i] : d.a[i * c.K + k]); };
  auto B = [&](int64_t k, int64_t j) { return double(c.trans_b ? d.b[j * c.K + k] : d.b[k * c.N + j]); };
  for (int64_t i = 0; i < c.M; ++i)
    for (int64_t j = 0; j < c.N; ++j) {
      double sum = 0, abs_sum = 0;
      for (int64_t k = 0; k < c.K; ++k) sum += A(i, k) * B(k, j), abs_sum += std::fabs(A(i, k) * B(k, j));
      double tol = double(c.K) * std::ldexp(abs_sum, -24);
      if (c.bias_relu) {
        sum = std::max(sum + d.bias[j], 0.0);
        tol += std::ldexp(std::fabs(sum), -24);  // the rounding of the bias addition
      }
      d.ref[i * c.N + j] = sum, d.tol[i * c.N + j] = tol;
    }
  return d;
}

void expect_close(const Case& c, const Data& d) {
  int64_t bad = 0;
  for (size_t e = 0; e < d.ref.size() && bad < 5; ++e)
    if (!(std::fabs(d.out[e] - d.ref[e]) <= d.tol[e])) {
      ++bad;
      ADD_FAILURE() << case_name(c) << " element (" << e / c.N << ", " << e % c.N << "): got " << d.out[e]
                    << ", want " << d.ref[e] << " +- " << d.tol[e];
    }
}

std::vector<void*> buffers(Data& d) { return {d.a.data(), d.b.data(), d.bias.data(), d.out.data()}; }
std::vector<int64_t> syms(const Case& c) { return c.symbolic_m ? std::vector<int64_t>{c.M} : std::vector<int64_t>{}; }

// How the blocks are run: serially, or split across tasks by M blocks or by
// (M block, N block) tiles.
enum class Par { Serial, MBlocks, Tiles };
const Par kPars[] = {Par::Serial, Par::MBlocks, Par::Tiles};
const char* par_name(Par p) {
  switch (p) {
    case Par::Serial: return " serial";
    case Par::MBlocks: return " parallel over M blocks";
    case Par::Tiles: return " parallel over tiles";
  }
  return "";
}

// Blocks far smaller than any real cache, so that small problems cross
// every M, N and K block edge (and keep a partial C block across K blocks).
GemmSchedule tiny_schedule(Par par) {
  GemmSchedule s;
  s.mr = 3, s.nr = 8, s.vector_lanes = 4, s.mc = 6, s.kc = 5, s.nc = 16;
  s.parallel_over_m_blocks = par != Par::Serial;
  s.parallel_over_n_blocks = par == Par::Tiles;
  return s;
}

CpuInfo host_info() {
#ifdef TESSEL_HAVE_CODEGEN_CPU
  return host_cpu_info(cpu::host_cpu_features());
#else
  return host_cpu_info("");
#endif
}

// ---- CpuInfo and the default schedule --------------------------------------------------

TEST(ScheduleGemm, CpuInfoFromFeatures) {
  CpuInfo avx2 = cpu_info_from_features("+avx,+avx2,-avx512f,+fma,+sse4.2");
  EXPECT_EQ(avx2.vector_lanes_f32, 8);
  EXPECT_EQ(avx2.vector_registers, 16);
  EXPECT_TRUE(avx2.has_fma);
  CpuInfo avx512 = cpu_info_from_features("+avx,+avx2,+avx512f,+fma");
  EXPECT_EQ(avx512.vector_lanes_f32, 16);
  EXPECT_EQ(avx512.vector_registers, 32);
  CpuInfo sse = cpu_info_from_features("+sse2,-avx,-avx512f");
  EXPECT_EQ(sse.vector_lanes_f32, 4);
  EXPECT_FALSE(sse.has_fma);
  EXPECT_FALSE(cpu_info_from_features("+avx512fp16").vector_lanes_f32 == 16);  // a prefix is not the feature
}

TEST(ScheduleGemm, DefaultScheduleFitsRegistersAndCaches) {
  for (const char* features : {"+avx,+avx2,+fma", "+avx,+avx2,+avx512f,+fma", "+sse2"}) {
    CpuInfo cpu = cpu_info_from_features(features);
    for (int64_t n : {-1, 1, 5, 100, 1024, 5000})
      for (bool tiles : {false, true}) {
        GemmSchedule s = default_gemm_schedule(cpu, n, n, n, tiles);
        SCOPED_TRACE(std::string(features) + " n=" + std::to_string(n) + (tiles ? " tiles" : ""));
        EXPECT_EQ(s.parallel_over_n_blocks, tiles);
        EXPECT_NO_THROW(check_gemm_schedule(s));
        EXPECT_EQ(s.vector_lanes, cpu.vector_lanes_f32);
        // accumulators + B vectors + one broadcast fit the register file
        const int vectors = s.nr / s.vector_lanes;
        EXPECT_LE(s.mr * vectors + vectors + 1, cpu.vector_registers);
        EXPECT_LE(int64_t{s.kc} * s.nc * 4, int64_t{1} << 20);
        EXPECT_LE(int64_t{s.mc} * s.nc * 4, int64_t{1} << 20);
      }
  }
}

// A product of fewer rows than the tallest tile gets a tile of exactly its
// rows, and the freed registers go to B vectors (4 for a wide N, fewer for a
// narrow one), still within the register file.
TEST(ScheduleGemm, FewRowsGetATileOfTheirHeight) {
  const CpuInfo cpu = cpu_info_from_features("+avx,+avx2,+avx512f,+fma");
  for (int64_t m = 1; m < 8; ++m) {
    SCOPED_TRACE("M = " + std::to_string(m));
    const GemmSchedule wide = default_gemm_schedule(cpu, m, 4096, 4096, true);
    EXPECT_EQ(wide.mr, m);
    const int vectors = wide.nr / wide.vector_lanes;
    EXPECT_TRUE(vectors == 2 || vectors == 4) << wide.nr;
    EXPECT_LE(wide.mr * vectors + vectors + 1, cpu.vector_registers);
  }
  EXPECT_EQ(default_gemm_schedule(cpu, 1, 4096, 4096, true).nr, 64);
  EXPECT_EQ(default_gemm_schedule(cpu, 1, 16, 4096, true).nr, 16);  // no wider than N needs
  EXPECT_EQ(default_gemm_schedule(cpu, 1, 20, 4096, true).nr, 32);
  EXPECT_EQ(default_gemm_schedule(cpu, 8, 4096, 4096, true).mr, 8);  // a whole tile: as before
  EXPECT_EQ(default_gemm_schedule(cpu, -1, 4096, 4096, true).mr, 8);  // M unknown: as before
}

// Over prepacked weights on AVX-512 the tile is 4 rows of 4 vectors and A
// is read in place (the tuner's pick for M = 128); with B packed per call,
// on AVX2 (16 registers) and for an N narrower than 4 vectors the tile is
// the 8 x 32 / 6 x 16 one. Blocks stay multiples of the tile either way.
TEST(ScheduleGemm, PrepackedWeightsGetWideRowsOnAvx512) {
  const CpuInfo avx512 = cpu_info_from_features("+avx,+avx2,+avx512f,+fma");
  const CpuInfo avx2 = cpu_info_from_features("+avx,+avx2,+fma");
  const GemmSchedule w = default_gemm_schedule(avx512, 128, 768, 768, true, 1, true);
  EXPECT_EQ(w.mr, 4);
  EXPECT_EQ(w.nr, 64);
  EXPECT_FALSE(w.pack_a);
  EXPECT_NO_THROW(check_gemm_schedule(w));
  EXPECT_EQ(w.nc % w.nr, 0);
  const GemmSchedule packed = default_gemm_schedule(avx512, 128, 768, 768, true, 1, false);
  EXPECT_EQ(packed.mr, 8);
  EXPECT_EQ(packed.nr, 32);
  EXPECT_EQ(default_gemm_schedule(avx512, 128, 48, 768, true, 1, true).nr, 32) << "N under 4 vectors";
  const GemmSchedule a2 = default_gemm_schedule(avx2, 128, 768, 768, true, 1, true);
  EXPECT_EQ(a2.mr, 6);
  EXPECT_EQ(a2.nr, 16);
}

TEST(ScheduleGemm, RejectsInconsistentSchedules) {
  GemmSchedule s = tiny_schedule(Par::MBlocks);
  s.mc = 7;
  EXPECT_THROW(check_gemm_schedule(s), Error);
  s = tiny_schedule(Par::MBlocks);
  s.nr = 6;
  EXPECT_THROW(check_gemm_schedule(s), Error);
}

// ---- through the evaluator ------------------------------------------------------------------

TEST(ScheduleGemm, EvaluatorMatchesReference) {
  const std::vector<Case> cases = {
      {1, 1, 1}, {0, 5, 3}, {4, 0, 3}, {4, 5, 0}, {6, 8, 5}, {7, 9, 11}, {17, 33, 29},
      {13, 21, 12, true, false}, {13, 21, 12, false, true}, {13, 21, 12, true, true, true},
      {19, 17, 7, false, false, false, true},
  };
  for (Par par : kPars)
    for (bool pack_a : {true, false})
      for (const Case& c : cases) {
        SCOPED_TRACE(case_name(c) + par_name(par) + (pack_a ? "" : " unpacked A"));
        GemmSchedule s = tiny_schedule(par);
        s.pack_a = pack_a;
        Kernel k = gemm_kernel(c, s);
        ASSERT_NO_THROW(verify(k));
        Data d = make_data(c, 1);  // the evaluator throws on any out-of-bounds read
        ASSERT_EQ(run_kernel(k, buffers(d), syms(c)), 0);
        expect_close(c, d);
      }
}

TEST(ScheduleGemm, DefaultScheduleThroughEvaluator) {
  const Case c{9, 40, 300};  // K over one default K block
  Kernel k = gemm_kernel(c, default_gemm_schedule(host_info(), -1, -1, -1));
  ASSERT_NO_THROW(verify(k));
  Data d = make_data(c, 2);
  ASSERT_EQ(run_kernel(k, buffers(d), syms(c)), 0);
  expect_close(c, d);
}

TEST(ScheduleGemm, OneParallelLoopAtTheTop) {
  for (Par par : {Par::MBlocks, Par::Tiles}) {
    SCOPED_TRACE(par_name(par));
    const Case c{17, 33, 29};
    const GemmSchedule s = tiny_schedule(par);
    Kernel k = gemm_kernel(c, s);
    ASSERT_EQ(k.body->kind, StmtKind::For);
    EXPECT_EQ(k.body->for_kind, ForKind::Parallel);
    GemmOperands ops;
    ops.M = c.M, ops.N = c.N, ops.K = c.K;
    EXPECT_TRUE(equal(k.body->extent, gemm_parallel_extent(ops, s)));
    EXPECT_EQ(eval_index(k.body->extent, {}), par == Par::Tiles ? 3 * 3 : 3);
    // the scratch buffers are allocated per block, inside the parallel loop
    Stmt inner = k.body->body[0];
    while (inner->kind == StmtKind::Let) inner = inner->body[0];
    EXPECT_EQ(inner->kind, StmtKind::Allocate);
  }
}

// A batch of products in one nest: each product's bits are those of the
// same product computed alone, whatever the schedule and the split.
Kernel batched_kernel(int64_t batch, const Case& c, const GemmSchedule& s) {
  auto a = testing::make_buffer("a", DType::F32, {Expr(batch), Expr(c.M), Expr(c.K)});
  auto b = testing::make_buffer("b", DType::F32, {Expr(batch), Expr(c.N), Expr(c.K)});  // stored [N, K]
  auto out = testing::make_buffer("out", DType::F32, {Expr(batch), Expr(c.M), Expr(c.N)});
  GemmOperands ops;
  ops.M = c.M, ops.N = c.N, ops.K = c.K, ops.batch = batch, ops.batch_var = "bb";
  Expr bb = var("bb");
  ops.a = [&](Expr i, Expr k) { return load(a, {bb, i, k}); };
  ops.b = [&](Expr k, Expr j) { return load(b, {bb, j, k}); };
  ops.epilogue = [&](Expr i, Expr j, Expr acc) { return store(out, {bb, i, j}, acc); };
  Kernel k;
  k.name = "batched";
  k.params = {a, b, out};
  k.num_inputs = 2;
  k.body = gemm_nest(ops, s, "g");
  return k;
}

TEST(ScheduleGemm, BatchedProductsMatchSingleOnes) {
  const int64_t batch = 3;
  const Case c{13, 21, 12, false, true};
  std::vector<Data> single;
  for (int64_t p = 0; p < batch; ++p) {
    single.push_back(make_data(c, 10 + static_cast<uint32_t>(p)));
    ASSERT_EQ(run_kernel(gemm_kernel(c, tiny_schedule(Par::Serial)), buffers(single.back()), {}), 0);
  }
  std::vector<float> a, b, want;
  for (const Data& d : single) {
    a.insert(a.end(), d.a.begin(), d.a.end());
    b.insert(b.end(), d.b.begin(), d.b.end());
    want.insert(want.end(), d.out.begin(), d.out.end());
  }
  for (Par par : kPars) {
    SCOPED_TRACE(par_name(par));
    Kernel k = batched_kernel(batch, c, tiny_schedule(par));
    ASSERT_NO_THROW(verify(k));
    GemmOperands ops;
    ops.M = c.M, ops.N = c.N, ops.K = c.K, ops.batch = batch;
    const int64_t units = par == Par::Serial ? 1 : eval_index(gemm_parallel_extent(ops, tiny_schedule(par)), {});
    EXPECT_EQ(units, par == Par::Serial ? 1 : par == Par::MBlocks ? batch * 3 : batch * 3 * 2);
    std::vector<float> out(want.size(), std::numeric_limits<float>::quiet_NaN());
    // in uneven chunks, as runtime tasks would run them
    for (int64_t begin = 0; begin < units; begin += 4)
      ASSERT_EQ(run_kernel_range(k, {a.data(), b.data(), out.data()}, {}, begin, std::min(units, begin + 4)), 0);
    EXPECT_EQ(std::memcmp(out.data(), want.data(), want.size() * sizeof(float)), 0);
  }
  GemmOperands unnamed;
  unnamed.M = c.M, unnamed.N = c.N, unnamed.K = c.K, unnamed.batch = batch;
  EXPECT_THROW(gemm_nest(unnamed, tiny_schedule(Par::Serial), "g"), Error);
}

// With tiles, the units of work (batch x M blocks x N blocks) spread evenly
// over the cores for the shapes of transformer models.
TEST(ScheduleGemm, TilesSpreadOverTheCores) {
  CpuInfo cpu = cpu_info_from_features("+avx,+avx2,+fma");
  cpu.cores = 2;
  struct Shape { int64_t batch, M, N, K; };
  for (const Shape& sh : {Shape{1, 128, 768, 768}, Shape{1, 128, 32000, 512}, Shape{1, 128, 50257, 768}, Shape{1, 128, 2304, 768},
                          Shape{12, 128, 128, 64}, Shape{1, 128, 128, 64}, Shape{1, 1024, 1024, 1024},
                          Shape{3, 128, 64, 128}}) {
    SCOPED_TRACE(std::to_string(sh.batch) + " x " + std::to_string(sh.M) + "x" + std::to_string(sh.N) + "x" +
                 std::to_string(sh.K));
    const GemmSchedule s = default_gemm_schedule(cpu, sh.M, sh.N, sh.K, true, sh.batch);
    const int64_t units = sh.batch * ((sh.M + s.mc - 1) / s.mc) * ((sh.N + s.nc - 1) / s.nc);
    EXPECT_TRUE(units % cpu.cores == 0 || units >= 8 * cpu.cores) << units << " units";
    if (sh.M <= 128) {
      EXPECT_GE(s.mc, sh.M) << "a small M is one M block";
    }
  }
}

// Where N is one tile wide (a convolution with 64 output channels as its
// columns, positions as rows: 4 x 64 tiles over prepacked weights), the
// cores' share comes from M blocks only, and their count is a multiple of
// the cores (3 blocks over 2 cores ran at two thirds of the speed).
TEST(ScheduleGemm, OneTileWideColumnsSpreadTheRowsOverTheCores) {
  CpuInfo cpu = cpu_info_from_features("+avx,+avx2,+avx512f,+fma");
  cpu.cores = 2;
  for (int64_t M : {3136, 784, 12544, 50}) {
    SCOPED_TRACE(M);
    const GemmSchedule s = default_gemm_schedule(cpu, M, 64, 576, true, 1, true);
    EXPECT_EQ(s.nr, 64);
    const int64_t units = ((M + s.mc - 1) / s.mc) * ((64 + s.nc - 1) / s.nc);
    EXPECT_TRUE(units % cpu.cores == 0 || units >= 8 * cpu.cores) << units << " units, mc " << s.mc;
    EXPECT_NO_THROW(check_gemm_schedule(s));
  }
}

// A convolution over a small image streams large weights (A: M x K) past a
// few positions (N): the cores share M blocks, so that the weights are read
// once (one N block), not once per N block.
TEST(ScheduleGemm, LargeWeightsOverFewColumnsSplitM) {
  CpuInfo cpu = cpu_info_from_features("+avx,+avx2,+fma");
  cpu.cores = 2;
  for (int64_t positions : {49, 61, 100}) {
    const GemmSchedule s = default_gemm_schedule(cpu, 512, positions, 4608, true, 1);
    EXPECT_GE(s.nc, positions) << "one N block for " << positions << " positions";
    EXPECT_EQ((512 + s.mc - 1) / s.mc % cpu.cores, 0) << "M blocks " << s.mc;
  }
  // The transformers' projections (A: activations, B: weights) keep N blocks.
  const GemmSchedule t = default_gemm_schedule(cpu, 128, 3072, 768, true, 1);
  EXPECT_GE(t.mc, 128);
  EXPECT_LT(t.nc, 3072);
}

// ---- through the code generator ----------------------------------------------------------

#ifdef TESSEL_HAVE_CODEGEN_CPU

int32_t call(const cpu::KernelLibrary& lib, const Case& c, Data& d, int64_t begin, int64_t end) {
  std::vector<void*> bufs = buffers(d);
  std::vector<int64_t> s = syms(c);
  return lib.lookup(case_name(c))(bufs.data(), s.data(), begin, end);
}

std::vector<Case> compiled_cases() {
  return {{1, 1, 1},          {0, 7, 5},       {5, 0, 7},        {5, 7, 0},
          {17, 33, 29},       {64, 64, 64},    {100, 300, 70},   {257, 129, 513},
          {37, 45, 300, true, false},          {37, 45, 300, false, true},
          {61, 70, 90, true, true, true},      {100, 300, 70, false, false, true},
          {123, 50, 600, false, false, false, true},
          // fewer rows than a tile (GEMV-like: the default tile takes exactly M rows)
          {1, 1000, 300},     {3, 37, 64, false, true},            {5, 16, 33, false, false, true}};
}

TEST(ScheduleGemm, CompiledMatchesReference) {
  const CpuInfo cpu = host_info();
  for (int variant = 0; variant < 4; ++variant) {
    const bool tiny = variant == 1, tiles = variant == 2, unpacked_a = variant == 3;
    std::vector<Kernel> kernels;
    for (const Case& c : compiled_cases()) {
      GemmSchedule s = tiny ? tiny_schedule(Par::Tiles)
                            : default_gemm_schedule(cpu, c.symbolic_m ? -1 : c.M, c.N, c.K, tiles);
      if (unpacked_a) s.pack_a = false;
      kernels.push_back(gemm_kernel(c, s));
      ASSERT_NO_THROW(verify(kernels.back())) << kernels.back().name;
    }
    auto lib = cpu::compile_kernels(kernels, {});
    for (const Case& c : compiled_cases()) {
      SCOPED_TRACE(case_name(c) + (tiny ? " tiny blocks" : tiles ? " default tiles" : unpacked_a ? " unpacked A" : " default"));
      Data d = make_data(c, 3);
      ASSERT_EQ(call(*lib, c, d, 0, std::numeric_limits<int64_t>::max()), 0);
      expect_close(c, d);
    }
  }
}

TEST(ScheduleGemm, ParallelChunksGiveIdenticalBits) {
  const Case c{257, 129, 513, false, false, true};
  for (bool tiles : {false, true}) {
    SCOPED_TRACE(tiles ? "tiles" : "M blocks");
    GemmSchedule s = default_gemm_schedule(host_info(), c.M, c.N, c.K, tiles);
    s.mc = 2 * s.mr;  // many blocks
    s.nc = 2 * s.nr;
    Kernel k = gemm_kernel(c, s);
    auto lib = cpu::compile_kernels({k}, {});
    Data whole = make_data(c, 4), chunked = make_data(c, 4);
    ASSERT_EQ(call(*lib, c, whole, 0, std::numeric_limits<int64_t>::max()), 0);
    const int64_t blocks = eval_index(k.body->extent, {});
    ASSERT_GT(blocks, 8);
    const int64_t cuts[] = {0, 1, 3, blocks / 2, blocks};
    for (size_t i = 0; i + 1 < std::size(cuts); ++i) ASSERT_EQ(call(*lib, c, chunked, cuts[i], cuts[i + 1]), 0);
    EXPECT_EQ(std::memcmp(whole.out.data(), chunked.out.data(), whole.out.size() * sizeof(float)), 0);
    expect_close(c, whole);
  }
}

// One fma chain over k ascending per element, whatever the blocking.
TEST(ScheduleGemm, BlockSizesDoNotChangeTheBits) {
  const Case c{100, 300, 70, false, true, true};
  GemmSchedule tiny = tiny_schedule(Par::Tiles);
  tiny.pack_a = false;
  const GemmSchedule full = default_gemm_schedule(host_info(), c.M, c.N, c.K);
  Kernel a = gemm_kernel(c, tiny), b = gemm_kernel(c, full);
  b.name += "_default";
  auto lib = cpu::compile_kernels({a, b}, {});
  Data x = make_data(c, 5), y = make_data(c, 5);
  ASSERT_EQ(call(*lib, c, x, 0, std::numeric_limits<int64_t>::max()), 0);
  std::vector<void*> bufs = buffers(y);
  ASSERT_EQ(lib->lookup(b.name)(bufs.data(), nullptr, 0, std::numeric_limits<int64_t>::max()), 0);
  EXPECT_EQ(std::memcmp(x.out.data(), y.out.data(), x.out.size() * sizeof(float)), 0);
}

// The asm basic block (from a label or jump to the next) with the most FMAs:
// the micro-kernel's K loop.
std::vector<std::string> busiest_fma_block(const std::string& asm_text) {
  std::vector<std::string> block, best;
  int count = 0, best_count = -1;
  std::istringstream in(asm_text);
  for (std::string line; std::getline(in, line);) {
    // Labels start the line ("LBB0_7:   # %loop.body"); instructions are indented.
    if (!line.empty() && line[0] != '\t' && line[0] != ' ' && line.find(':') != std::string::npos) {
      if (count > best_count) best = block, best_count = count;
      block.clear(), count = 0;
      continue;
    }
    block.push_back(line);
    if (line.find("vfmadd") != std::string::npos) ++count;
    if (line.rfind("\tj", 0) == 0) {  // a jump ends the block too
      if (count > best_count) best = block, best_count = count;
      block.clear(), count = 0;
    }
  }
  if (count > best_count) best = block;
  return best;
}

// The micro-kernel's K loop must be vector FMAs on register accumulators:
// at least MR x NR/L of them, and no store (acc never goes to memory).
TEST(ScheduleGemm, MicroKernelKeepsTheTileInRegisters) {
  const CpuInfo cpu = host_info();
  if (!cpu.has_fma) GTEST_SKIP() << "the host has no FMA";
  const Case c{64, 64, 512};  // a K block long enough that LLVM keeps the K loop a loop
  const GemmSchedule s = default_gemm_schedule(cpu, c.M, c.N, c.K);
  const std::vector<std::string> loop = busiest_fma_block(cpu::emit_asm({gemm_kernel(c, s)}, {}));
  int fmas = 0;
  for (const std::string& line : loop) {
    if (line.find("vfmadd231ps") != std::string::npos) ++fmas;
    // AT&T syntax: a store is a move whose last operand is a memory reference.
    const bool is_move = line.find("\tvmov") != std::string::npos || line.find("\tmov") != std::string::npos;
    EXPECT_FALSE(is_move && line.back() == ')') << "store in the K loop: " << line;
  }
  EXPECT_GE(fmas, s.mr * (s.nr / s.vector_lanes));
}

#endif  // TESSEL_HAVE_CODEGEN_CPU

}  // namespace
}  // namespace tessel
