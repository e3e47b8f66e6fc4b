// The loop primitives of schedule/loop_primitives.h: each applied to small
// kernels and run by the evaluator against the untransformed kernel on random
// inputs (the same bytes out), plus the shape of the result; and every
// rejection, which must name the primitive.
#include "tessel/schedule/loop_primitives.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>
#include <sstream>

#include "loop_test_util.h"
#include "tessel/loop/eval.h"
#include "tessel/loop/printer.h"
#include "tessel/support/error.h"
#ifdef TESSEL_HAVE_CODEGEN_CPU
#include "tessel/codegen/cpu/cpu_codegen.h"
#endif

namespace tessel {
namespace {

using loop::Kernel;
using loop::testing::random_buffers;
using loop::testing::run;

Kernel kernel(const std::string& text) { return loop::parse_kernel(text); }

// A schedule from primitive lines in the text form ("split i factor=4 tail=guard").
Schedule sched(const std::vector<std::string>& lines) {
  Schedule s{"nest", {}};
  for (const std::string& line : lines) {
    std::istringstream in(line);
    Primitive p;
    in >> p.name;
    for (std::string w; in >> w;) {
      const size_t eq = w.find('=');
      if (eq == std::string::npos) {
        p.args.push_back(w);
      } else {
        p.attrs.emplace_back(w.substr(0, eq), w.substr(eq + 1));
      }
    }
    s.prims.push_back(p);
  }
  return s;
}

ScheduleLimits gpu() {
  ScheduleLimits l;
  l.gpu = true;
  return l;
}

// The scheduled kernel computes exactly what the original does.
void expect_same(const Kernel& before, const Kernel& after, const std::map<std::string, int64_t>& syms) {
  for (uint32_t seed = 1; seed <= 3; ++seed)
    EXPECT_EQ(run(before, syms, seed), run(after, syms, seed)) << loop::print(after) << " with seed " << seed;
}

Kernel scheduled(const Kernel& k, const std::vector<std::string>& lines, const ScheduleLimits& l = {}) {
  return apply_loop_primitives(k, sched(lines), l);
}

void expect_rejected(const Kernel& k, const std::vector<std::string>& lines, const std::string& message,
                     const ScheduleLimits& l = {}) {
  try {
    const Kernel out = scheduled(k, lines, l);
    ADD_FAILURE() << "accepted, expected \"" << message << "\":\n" << loop::print(out);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
  }
}

bool has(const Kernel& k, const std::string& text) { return loop::print(k).find(text) != std::string::npos; }

// o[i] over a loop with a non-zero minimum and a read of an earlier element.
const char* kShifted =
    "kernel shifted(in %x: f32[n], out %o: f32[n]) syms(n) {\n"
    "  for i in [3, n) {\n"
    "    o[i] = x[i] * 2.0f32 + x[i - 3]\n"
    "  }\n"
    "}\n";

// A 2-D nest with a constant inner extent.
const char* kRows =
    "kernel rows(in %x: f32[n, 8], in %y: f32[8], out %o: f32[n, 8]) syms(n) {\n"
    "  for i in [0, n) {\n"
    "    for j in [0, 8) {\n"
    "      o[i, j] = x[i, j] * y[j]\n"
    "    }\n"
    "  }\n"
    "}\n";

// An integer matrix product (integer sums are exact in any order).
const char* kMatmul =
    "kernel mm(in %a: i32[n, k], in %b: i32[k, m], out %c: i32[n, m]) syms(n, m, k) {\n"
    "  for i in [0, n) {\n"
    "    for j in [0, m) {\n"
    "      for r in [0, k) {\n"
    "        c[i, j] = c[i, j] + a[i, r] * b[r, j]\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

// j's bounds depend on i.
const char* kTriangle =
    "kernel tri(in %x: f32[4, 4], out %o: f32[4, 4]) {\n"
    "  for i in [0, 4) {\n    for j in [0, i) {\n      o[i, j] = x[i, j]\n    }\n  }\n}\n";

// ---- split ----

TEST(LoopPrimitives, SplitWithAGuardKeepsEveryIteration) {
  const Kernel k = kernel(kShifted);
  const Kernel s = scheduled(k, {"split i factor=4 outer=i_o inner=i_i tail=guard"});
  EXPECT_TRUE(has(s, "for i_o in [0, ")) << loop::print(s);
  EXPECT_TRUE(has(s, "for i_i in [0, 4)")) << loop::print(s);
  EXPECT_TRUE(has(s, "if ")) << loop::print(s);
  for (int64_t n : {0, 3, 4, 7, 8, 13, 16}) expect_same(k, s, {{"n", n}});
}

TEST(LoopPrimitives, SplitOfADividingExtentNeedsNoGuard) {
  const Kernel k = kernel(kRows);
  for (const char* tail : {"guard", "none", "peel"}) {
    const Kernel s = scheduled(k, {std::string("split j factor=4 tail=") + tail});
    EXPECT_FALSE(has(s, "if ")) << loop::print(s);
    EXPECT_FALSE(has(s, "_tail")) << loop::print(s);
    EXPECT_TRUE(has(s, "for j_o in [0, 2)")) << loop::print(s);
    expect_same(k, s, {{"n", 3}});
  }
}

TEST(LoopPrimitives, SplitWithoutATailOfASymbolicMultiple) {
  const Kernel k = kernel(
      "kernel m(in %x: i32[n * 4], out %o: i32[n * 4]) syms(n) {\n"
      "  for i in [0, n * 4) {\n    o[i] = x[i] + 1i32\n  }\n}\n");
  const Kernel s = scheduled(k, {"split i factor=4 tail=none"});
  EXPECT_FALSE(has(s, "if ")) << loop::print(s);
  for (int64_t n : {0, 1, 5}) expect_same(k, s, {{"n", n}});
}

TEST(LoopPrimitives, SplitWithAPeeledRemainderRenamesItsCopy) {
  const Kernel k = kernel(
      "kernel p(in %x: f32[n, 3], out %o: f32[n, 3]) syms(n) {\n"
      "  for i in [1, n) {\n"
      "    for j in [0, 3) {\n"
      "      let v = x[i, j] + x[i - 1, j]\n"
      "      o[i, j] = v * v\n"
      "    }\n"
      "  }\n"
      "}\n");
  const Kernel s = scheduled(k, {"split i factor=4 tail=peel"});
  EXPECT_TRUE(has(s, "for i_tail in [0, ")) << loop::print(s);
  EXPECT_TRUE(has(s, "for j_tail in [0, 3)")) << loop::print(s);
  EXPECT_TRUE(has(s, "let v_tail = ")) << loop::print(s);
  EXPECT_FALSE(has(s, "if ")) << loop::print(s);
  for (int64_t n : {0, 1, 2, 5, 8, 9, 12}) expect_same(k, s, {{"n", n}});
}

TEST(LoopPrimitives, SplitRejections) {
  const Kernel k = kernel(
      "kernel t(in %x: f32[10], out %o: f32[10]) {\n  for i in [0, 10) {\n    for j in [0, 1) {\n"
      "      o[i] = x[i]\n    }\n  }\n}\n");
  expect_rejected(k, {"split i factor=4 tail=none"},
                  "split i by 4: extent 10 is not a multiple of 4; use tail=guard or tail=peel");
  expect_rejected(kernel(kShifted), {"split i factor=2 tail=none"}, "split i by 2: extent n - 3 is not a multiple");
  expect_rejected(k, {"split i factor=2 outer=j"}, "split i by 2: the name 'j' is already used");
  expect_rejected(k, {"split i factor=2 outer=a inner=a"}, "split i by 2: the name 'a' is already used");
  expect_rejected(k, {"split q factor=2"}, "split q by 2: kernel t has no loop named 'q'");
  expect_rejected(k, {"split i factor=0"}, "split i by 0: the factor must be at least 1");
  expect_rejected(k, {"split i factor=four"}, "split i: factor=four is not an integer");
  expect_rejected(k, {"split i factor=4 tail=maybe"}, "split i by 4: tail=maybe is not guard, none or peel");
}

// ---- reorder ----

TEST(LoopPrimitives, ReorderPermutesAPerfectNest) {
  const Kernel k = kernel(kMatmul);
  const Kernel s = scheduled(k, {"reorder r i j"});
  const std::string text = loop::print(s);
  EXPECT_LT(text.find("for r in"), text.find("for i in")) << text;
  EXPECT_LT(text.find("for i in"), text.find("for j in")) << text;
  expect_same(k, s, {{"n", 3}, {"m", 5}, {"k", 4}});
  const Kernel t = kernel(
      "kernel tr(in %x: f32[m, n], out %o: f32[n, m]) syms(n, m) {\n"
      "  for i in [0, n) {\n    for j in [0, m) {\n      o[i, j] = x[j, i]\n    }\n  }\n}\n");
  const Kernel u = scheduled(t, {"reorder j i"});
  EXPECT_LT(loop::print(u).find("for j in"), loop::print(u).find("for i in"));
  expect_same(t, u, {{"n", 3}, {"m", 7}});
}

TEST(LoopPrimitives, ReorderRejections) {
  const Kernel mm = kernel(kMatmul);
  expect_rejected(mm, {"reorder i r"}, "reorder i r: the loops are not a perfect nest");
  expect_rejected(mm, {"reorder i z"}, "reorder i z: kernel mm has no loop named 'z'");
  const Kernel between = kernel(
      "kernel b(in %x: f32[4, 4], out %o: f32[4, 4], out %p: f32[4]) {\n"
      "  for i in [0, 4) {\n    p[i] = 0.0f32\n    for j in [0, 4) {\n      o[i, j] = x[i, j]\n    }\n  }\n}\n");
  expect_rejected(between, {"reorder j i"}, "reorder j i: the loops are not a perfect nest");
  const Kernel triangle = kernel(kTriangle);
  expect_rejected(triangle, {"reorder j i"}, "reorder j i: the bounds of loop j depend on i");
  // Which iteration writes last decides the value: a different order keeps another one.
  const Kernel last = kernel(
      "kernel l(in %x: f32[4, 4], out %o: f32[4]) {\n"
      "  for i in [0, 4) {\n    for j in [0, 4) {\n      o[i] = x[i, j]\n    }\n  }\n}\n");
  expect_rejected(last, {"reorder j i"}, "reorder j i: the nest stores to %o at an index that does not depend");
  const Kernel carried = kernel(
      "kernel c(out %o: f32[5, 5]) {\n"
      "  for i in [1, 5) {\n    for j in [0, 4) {\n      o[i, j] = o[i - 1, j + 1] + 1.0f32\n    }\n  }\n}\n");
  expect_rejected(carried, {"reorder j i"}, "reorder j i: the nest reads %o at an element other than");
}

// ---- fuse ----

TEST(LoopPrimitives, FuseMakesOneLoopOfTwo) {
  const Kernel k = kernel(
      "kernel f(in %x: f32[n, m], out %o: f32[n, m]) syms(n, m) {\n"
      "  for i in [1, n) {\n    for j in [2, m) {\n      o[i, j] = x[i, j] + x[i - 1, j - 2]\n    }\n  }\n}\n");
  const Kernel s = scheduled(k, {"fuse i j into=ij"});
  EXPECT_TRUE(has(s, "for ij in [0, ")) << loop::print(s);
  EXPECT_FALSE(has(s, "for i in")) << loop::print(s);
  for (auto [n, m] : {std::pair<int64_t, int64_t>{4, 6}, {1, 5}, {3, 2}, {0, 0}, {2, 3}})
    expect_same(k, s, {{"n", n}, {"m", m}});
  const Kernel c = kernel(kRows);
  const Kernel t = scheduled(c, {"fuse i j into=f"});
  expect_same(c, t, {{"n", 5}});
}

TEST(LoopPrimitives, FuseRejections) {
  const Kernel mm = kernel(kMatmul);
  expect_rejected(mm, {"fuse i j into=r"}, "fuse i j: the name 'r' is already used");
  expect_rejected(mm, {"fuse i r into=ir"}, "fuse i r: loop r is not directly inside loop i");
  const Kernel triangle = kernel(kTriangle);
  expect_rejected(triangle, {"fuse i j into=ij"}, "fuse i j: the bounds of loop j depend on i");
}

// ---- tile ----

TEST(LoopPrimitives, TileSplitsBothAndReorders) {
  const Kernel k = kernel(kMatmul);
  const Kernel s = scheduled(k, {"tile i j f1=2 f2=4"});
  const std::string text = loop::print(s);
  size_t at = 0;
  for (const char* l : {"for i_o in", "for j_o in", "for i_i in [0, 2)", "for j_i in [0, 4)", "for r in"}) {
    const size_t next = text.find(l);
    ASSERT_NE(next, std::string::npos) << l << "\n" << text;
    EXPECT_GE(next, at) << l << "\n" << text;
    at = next;
  }
  for (auto [n, m] : {std::pair<int64_t, int64_t>{3, 5}, {4, 8}, {1, 1}, {5, 9}})
    expect_same(k, s, {{"n", n}, {"m", m}, {"k", 3}});
  expect_rejected(k, {"tile i r f1=2 f2=2"}, "tile i r: loop r is not directly inside loop i");
}

// ---- vectorize, unroll ----

TEST(LoopPrimitives, VectorizeAndUnroll) {
  const Kernel k = kernel(kRows);
  const Kernel v = scheduled(k, {"vectorize j"});
  EXPECT_TRUE(has(v, "vectorized for j in [0, 8)")) << loop::print(v);
  expect_same(k, v, {{"n", 3}});
  const Kernel u = scheduled(k, {"split j factor=2 tail=none", "unroll j_i", "vectorize j_o"});
  EXPECT_TRUE(has(u, "vectorized for j_o in [0, 4)")) << loop::print(u);
  EXPECT_TRUE(has(u, "unrolled for j_i in [0, 2)")) << loop::print(u);
  expect_same(k, u, {{"n", 3}});
  // Split with a peeled remainder, the shape a vectoriser wants: full vectors, then the rest.
  const Kernel s = kernel(kShifted);
  const Kernel p = scheduled(s, {"split i factor=4 tail=peel", "vectorize i_i"});
  EXPECT_TRUE(has(p, "vectorized for i_i in [0, 4)")) << loop::print(p);
  for (int64_t n : {3, 9, 12}) expect_same(s, p, {{"n", n}});
}

TEST(LoopPrimitives, VectorizeAndUnrollRejections) {
  const Kernel k = kernel(kRows);
  expect_rejected(k, {"vectorize i"}, "vectorize i: loop i has extent n, not a constant");
  expect_rejected(k, {"unroll i"}, "unroll i: loop i has extent n, not a constant");
  ScheduleLimits small;
  small.max_vector_lanes = 4;
  small.max_unroll = 4;
  expect_rejected(k, {"vectorize j"}, "vectorize j: extent 8 is outside [1, 4]", small);
  expect_rejected(k, {"unroll j"}, "unroll j: extent 8 is more than max_unroll 4", small);
  expect_rejected(k, {"vectorize j", "unroll j"}, "unroll j: loop j is already vectorized");
  expect_rejected(k, {"split j factor=2", "vectorize j_i", "vectorize j_o"},
                  "vectorize j_o: vectorized loop j_o holds vectorized loop j_i");
  const Kernel sum = kernel(
      "kernel s(in %x: f32[4, 8], out %o: f32[4]) {\n"
      "  for i in [0, 4) {\n    for j in [0, 8) {\n      o[i] = o[i] + x[i, j]\n    }\n  }\n}\n");
  expect_rejected(sum, {"vectorize j"}, "vectorize j: every lane of vectorized loop j would store to the same");
  const Kernel scan = kernel(
      "kernel c(out %o: f32[9]) {\n  for j in [0, 8) {\n    o[j + 1] = o[j] + 1.0f32\n  }\n}\n");
  expect_rejected(scan, {"vectorize j"}, "vectorize j: vectorized loop j reads %o at an element other than");
}

// ---- parallel ----

TEST(LoopPrimitives, ParallelTasksComputeTheirRows) {
  const Kernel k = kernel(kRows);
  const Kernel p = scheduled(k, {"split i factor=2", "parallel i_o", "vectorize j"});
  EXPECT_TRUE(has(p, "parallel for i_o in")) << loop::print(p);
  expect_same(k, p, {{"n", 5}});
  // Two tasks, [0, 1) and [1, 3) of the three chunks, together do the whole kernel.
  const std::map<std::string, int64_t> syms = {{"n", 5}};
  std::vector<std::vector<uint8_t>> bufs = random_buffers(p, syms, 7);
  std::vector<void*> ptrs;
  for (auto& b : bufs) ptrs.push_back(b.data());
  ASSERT_EQ(loop::run_kernel_range(p, ptrs, {5}, 0, 1), 0);
  ASSERT_EQ(loop::run_kernel_range(p, ptrs, {5}, 1, 3), 0);
  EXPECT_EQ(bufs, run(k, syms, 7));
}

TEST(LoopPrimitives, ParallelRejections) {
  const Kernel k = kernel(kRows);
  expect_rejected(k, {"parallel i"}, "parallel i: parallel loops are for CPUs", gpu());
  expect_rejected(k, {"parallel j"}, "parallel j: loop j is not at the top level (it is inside loop i)");
  expect_rejected(k, {"split i factor=2", "parallel i_o", "parallel i_i"},
                  "parallel i_i: loop i_i is not at the top level");
  const Kernel two = kernel(
      "kernel two(in %x: f32[n], out %o: f32[n], out %p: f32[n]) syms(n) {\n"
      "  for i in [0, n) {\n    o[i] = x[i]\n  }\n  for j in [0, n) {\n    p[j] = x[j]\n  }\n}\n");
  expect_rejected(two, {"parallel i"}, "parallel i: %p is stored outside loop i, which every task would repeat");
  const Kernel sum = kernel(
      "kernel s(in %x: f32[n], out %o: f32[]) syms(n) {\n  for i in [0, n) {\n    o[] = o[] + x[i]\n  }\n}\n");
  expect_rejected(sum, {"parallel i"}, "parallel i: loop i stores to %o at an index that does not depend on i");
  const Kernel twice = kernel(
      "kernel t(in %x: f32[n], out %o: f32[n]) syms(n) {\n  for i in [0, n) {\n    o[i] = x[i]\n  }\n"
      "  for j in [0, 0) {\n  }\n}\n");
  expect_rejected(twice, {"parallel i", "parallel j"}, "parallel j: kernel t already has parallel loop i");
}

// ---- bind ----

const char* kGrid =
    "kernel g(in %x: f32[n, 32], out %o: f32[n, 32]) syms(n) {\n"
    "  for b in [0, n) {\n    for t in [0, 32) {\n      o[b, t] = x[b, t] + 1.0f32\n    }\n  }\n}\n";

TEST(LoopPrimitives, BindMapsLoopsOntoGpuAxes) {
  const Kernel k = kernel(kGrid);
  const Kernel g = scheduled(k, {"bind b axis=gpu.block.x", "bind t axis=gpu.thread.x"}, gpu());
  EXPECT_TRUE(has(g, "gpu.block.x for b in [0, n)")) << loop::print(g);
  EXPECT_TRUE(has(g, "gpu.thread.x for t in [0, 32)")) << loop::print(g);
  loop::verify(g, loop::Target::Cuda);
  expect_same(k, g, {{"n", 3}});
  // A split for a block of 256 threads over a flattened index.
  const Kernel f = scheduled(k, {"fuse b t into=e", "split e factor=256 outer=blk inner=thr",
                             "bind blk axis=gpu.block.x", "bind thr axis=gpu.thread.x"}, gpu());
  EXPECT_TRUE(has(f, "gpu.thread.x for thr in [0, 256)")) << loop::print(f);
  for (int64_t n : {1, 8, 9}) expect_same(k, f, {{"n", n}});
}

TEST(LoopPrimitives, BindRejections) {
  const Kernel k = kernel(kGrid);
  expect_rejected(k, {"bind b axis=gpu.block.x"}, "bind b: GPU axes need a GPU target");
  expect_rejected(k, {"bind b axis=gpu.warp"}, "bind b: axis 'gpu.warp' is not one of", gpu());
  expect_rejected(k, {"bind b axis=gpu.thread.x"}, "bind b: gpu.thread.x loop b needs a constant extent", gpu());
  expect_rejected(k, {"bind t axis=gpu.thread.x"}, "bind t: gpu.thread.x loop t would be inside serial loop b",
                  gpu());
  expect_rejected(k, {"bind b axis=gpu.block.x", "bind t axis=gpu.block.x"}, "bind t: two gpu.block.x loops", gpu());
  const Kernel big = kernel(
      "kernel big(in %x: f32[128, 64], out %o: f32[128, 64]) {\n"
      "  for a in [0, 128) {\n    for b in [0, 64) {\n      o[a, b] = x[a, b]\n    }\n  }\n}\n");
  expect_rejected(big, {"bind a axis=gpu.thread.x", "bind b axis=gpu.thread.y"},
                  "bind b: a block of 8192 threads", gpu());
  ScheduleLimits few = gpu();
  few.max_threads_per_block = 64;
  expect_rejected(big, {"bind a axis=gpu.thread.x"}, "bind a: gpu.thread.x loop a has 128 threads, more than", few);
  expect_rejected(big, {"bind a axis=gpu.thread.z"}, "bind a: gpu.thread.z loop a has 128 threads", gpu());
  const Kernel wide = kernel(
      "kernel wide(in %x: f32[70000], out %o: f32[70000]) {\n  for c in [0, 70000) {\n    o[c] = x[c]\n  }\n}\n");
  expect_rejected(wide, {"bind c axis=gpu.block.y"}, "bind c: gpu.block.y loop c has 70000 blocks", gpu());
  EXPECT_NO_THROW(scheduled(wide, {"bind c axis=gpu.block.x"}, gpu()));
  const Kernel sum = kernel(
      "kernel s(in %x: f32[32], out %o: f32[]) {\n  for t in [0, 32) {\n    o[] = o[] + x[t]\n  }\n}\n");
  expect_rejected(sum, {"bind t axis=gpu.thread.x"}, "bind t: loop t stores to %o at an index that does not depend",
                  gpu());
}

TEST(LoopPrimitives, SharedMemoryWithinTheLimit) {
  const auto shared = [](int64_t elems) {
    return kernel(str_cat("kernel sh(in %x: f32[", elems, "], out %o: f32[", elems, "]) {\n"
                          "  for t in [0, 32) {\n    allocate %s: f32[", elems, "] shared\n"
                          "    s[t] = x[t]\n    o[t] = s[t]\n  }\n}\n"));
  };
  EXPECT_NO_THROW(scheduled(shared(1024), {"bind t axis=gpu.thread.x"}, gpu()));
  expect_rejected(shared(65536), {"bind t axis=gpu.thread.x"},
                  "bind t: the kernel's shared buffers take 262144 bytes, more than the limit of 232448", gpu());
  expect_rejected(shared(65536), {}, "shared buffers take 262144 bytes", gpu());
}

TEST(LoopPrimitives, TemplateKnobsAreSkippedAndUnknownNamesRejected) {
  const Kernel k = kernel(kRows);
  const Kernel s = scheduled(k, {"nest.vector width=16", "unroll j"});
  EXPECT_TRUE(has(s, "unrolled for j")) << loop::print(s);
  expect_rejected(k, {"spilt i factor=2"}, "spilt i: not a loop primitive");
  EXPECT_TRUE(is_loop_primitive("split"));
  EXPECT_TRUE(is_loop_primitive("bind"));
  EXPECT_FALSE(is_loop_primitive("gemm.tile"));
}

#ifdef TESSEL_HAVE_CODEGEN_CPU
// The CPU code generator takes what the primitives make (vectorized loops
// over peeled and guarded splits, a parallel loop run as two tasks, unrolled
// tiles) and computes what the evaluator does.
TEST(LoopPrimitives, CompiledScheduledKernelsMatchTheEvaluator) {
  struct Case {
    const char* text;
    std::vector<std::string> prims;
    std::map<std::string, int64_t> syms;
  };
  const Case cases[] = {
      {kShifted, {"split i factor=8 tail=peel", "vectorize i_i"}, {{"n", 29}}},
      {kRows, {"split i factor=2", "parallel i_o", "vectorize j"}, {{"n", 7}}},
      {kMatmul, {"tile i j f1=2 f2=4", "unroll i_i", "vectorize j_i"}, {{"n", 5}, {"m", 7}, {"k", 3}}},
  };
  for (const Case& c : cases) {
    const Kernel k = scheduled(kernel(c.text), c.prims);
    std::unique_ptr<cpu::KernelLibrary> lib = cpu::compile_kernels({k}, {});
    std::vector<std::vector<uint8_t>> bufs = random_buffers(k, c.syms, 5);
    std::vector<void*> ptrs;
    for (auto& b : bufs) ptrs.push_back(b.data());
    std::vector<int64_t> syms;
    for (const std::string& s : k.syms) syms.push_back(c.syms.at(s));
    // Two calls, as two tasks of the parallel loop (ignored without one).
    ASSERT_EQ(lib->lookup(k.name)(ptrs.data(), syms.data(), 0, 2), 0);
    ASSERT_EQ(lib->lookup(k.name)(ptrs.data(), syms.data(), 2, INT64_MAX), 0);
    if (!has(k, "parallel for")) {
      bufs = random_buffers(k, c.syms, 5);  // a kernel without one ran twice: run it once
      for (size_t i = 0; i < bufs.size(); ++i) ptrs[i] = bufs[i].data();
      ASSERT_EQ(lib->lookup(k.name)(ptrs.data(), syms.data(), 0, INT64_MAX), 0);
    }
    EXPECT_EQ(bufs, run(kernel(c.text), c.syms, 5)) << loop::print(k);
  }
}
#endif

}  // namespace
}  // namespace tessel
