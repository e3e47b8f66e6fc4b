// The GEMM path of the lowering (lower/contraction.cpp) on the shapes real
// models have: B stored [N, K] (Gemm transB, tied embeddings, attention's
// K), A stored [K, M] (transA), batches of products (attention) including
// batches smaller than the core count, odd sizes, K = 0 and symbolic dims.
// Each model's lowered kernels run through the loop-IR evaluator against the
// reference interpreter, and the parallel extent the runtime splits must be
// the kernel's own Parallel loop extent.
#include <gtest/gtest.h>

#include "lower_test_util.h"
#include "tessel/ir/builder.h"
#include "tessel/loop/visit.h"
#include "tessel/schedule/cpu_info.h"

namespace tessel {
namespace {

using testing::expect_lowered_matches;

// The extent of the kernel's top-level Parallel loop (-1: none).
int64_t parallel_loop_extent(const loop::Kernel& k, const std::map<std::string, int64_t>& dims) {
  int64_t extent = -1;
  loop::visit_stmt(
      k.body,
      [&](const loop::Stmt& s) {
        if (s->kind == loop::StmtKind::For && s->for_kind == loop::ForKind::Parallel)
          extent = loop::eval_index(s->extent, dims);
      },
      [](const loop::Expr&) {});
  return extent;
}

// Lowers m (the pipeline has run) and returns, per GEMM kernel, the
// parallel extent reported to the runtime after checking it against the
// kernel's Parallel loop.
std::vector<int64_t> gemm_parallel_extents(const Model& m, const std::map<std::string, int64_t>& dims = {}) {
  std::vector<int64_t> extents;
  for (const LoweredGroup& lg : lower_for_cpu(m).lowered) {
    if (lg.schedule != "gemm") continue;
    if (!lg.parallel_extent) {  // one unit of work: no parallel loop
      EXPECT_EQ(parallel_loop_extent(lg.kernel, dims), -1) << lg.kernel.name;
      extents.push_back(1);
      continue;
    }
    const std::optional<int64_t> reported = lg.parallel_extent->eval(dims);
    EXPECT_TRUE(reported.has_value()) << lg.kernel.name;
    EXPECT_EQ(reported.value_or(-2), parallel_loop_extent(lg.kernel, dims)) << lg.kernel.name;
    extents.push_back(reported.value_or(-2));
  }
  return extents;
}

Value* transpose(GraphBuilder& b, Value* x, std::vector<int64_t> perm) {
  return b.op("Transpose", {x}, {{"perm", Attribute::of_ints(std::move(perm))}});
}

TEST(GemmPath, GemmWithTransposedWeightsAndBias) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {37, 29});
  Value* w = b.input("w", DType::F32, {53, 29});  // [N, K]
  Value* bias = b.input("bias", DType::F32, {53});
  b.output(b.op("Relu", {b.op("Gemm", {x, w, bias}, {{"transB", Attribute::of_int(1)}})}));
  auto r = expect_lowered_matches(m);
  EXPECT_EQ(r.gemm_kernels, 1u);
  EXPECT_EQ(gemm_parallel_extents(m).size(), 1u);
}

TEST(GemmPath, GemmWithTransposedA) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {29, 37});  // [K, M]
  Value* w = b.input("w", DType::F32, {53, 29});  // [N, K]
  b.output(b.op("Gemm", {x, w}, {{"transA", Attribute::of_int(1)}, {"transB", Attribute::of_int(1)},
                                 {"alpha", Attribute::of_float(0.5f)}}));
  auto r = expect_lowered_matches(m);
  EXPECT_EQ(r.gemm_kernels, 1u);
}

// GPT-2's LM head: the hidden states times the transposed token embedding.
TEST(GemmPath, TiedEmbeddingHead) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {1, 7, 24});
  Value* wte = b.input("wte", DType::F32, {101, 24});
  b.output(b.op("MatMul", {x, transpose(b, wte, {1, 0})}));
  auto r = expect_lowered_matches(m);
  EXPECT_EQ(r.gemm_kernels, 1u);
  EXPECT_EQ(r.kernels, 1u);
}

// Scaled dot-product attention on [batch, heads, seq, head_dim]: scores
// Q K^T / sqrt(d) (K read along head_dim), softmax, then P V. Both products
// are packed GEMMs over the batch of heads, whatever the batch size.
TEST(GemmPath, AttentionProductsAreBatchedGemms) {
  for (int64_t heads : {1, 3}) {
    SCOPED_TRACE(std::to_string(heads) + " heads");
    Model m;
    GraphBuilder b(m);
    Value* q = b.input("q", DType::F32, {1, heads, 13, 8});
    Value* k = b.input("k", DType::F32, {1, heads, 13, 8});
    Value* v = b.input("v", DType::F32, {1, heads, 13, 8});
    Value* s = b.op("Div", {b.op("MatMul", {q, transpose(b, k, {0, 1, 3, 2})}), b.scalar_f32(2.828f)});
    Value* p = b.op("Softmax", {s}, {{"axis", Attribute::of_int(-1)}});
    b.output(b.op("MatMul", {p, v}));
    auto r = expect_lowered_matches(m);
    EXPECT_EQ(r.gemm_kernels, 2u);
    for (int64_t units : gemm_parallel_extents(m)) EXPECT_GE(units, heads);
  }
}

// One product (batch 1) of a size that gives several tiles: the parallel
// loop runs over them, not over the single batch element.
TEST(GemmPath, BatchOfOneStillSpreads) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {1, 20, 16});
  Value* y = b.input("y", DType::F32, {1, 16, 1100});
  b.output(b.op("MatMul", {x, y}));
  auto r = expect_lowered_matches(m);
  EXPECT_EQ(r.gemm_kernels, 1u);
  const std::vector<int64_t> units = gemm_parallel_extents(m);
  ASSERT_EQ(units.size(), 1u);
  EXPECT_GE(units[0], 2);  // N = 1100 is more than one N block
}

// GPT-2's fused QKV projection, N = 2304: five N blocks of at most 512
// would leave one of two threads a block short; the tiles are balanced for
// at least two threads even when the lowering's CpuInfo says one core.
TEST(GemmPath, TilesAreBalancedForTwoThreads) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {4, 8});
  Value* w = b.input("w", DType::F32, {8, 2304});
  b.output(b.op("MatMul", {x, w}));
  PassOptions o;
  run_pipeline(m, o);
  const std::vector<int64_t> units = gemm_parallel_extents(m);
  ASSERT_EQ(units.size(), 1u);
  EXPECT_EQ(units[0] % 2, 0) << units[0];
}

TEST(GemmPath, OddSizesAndEmptyK) {
  struct Shape {
    int64_t M, N, K;
  };
  for (const Shape& s : {Shape{1, 1, 1}, Shape{7, 3, 300}, Shape{13, 17, 0}, Shape{61, 45, 5}}) {
    SCOPED_TRACE(std::to_string(s.M) + "x" + std::to_string(s.N) + "x" + std::to_string(s.K));
    Model m;
    GraphBuilder b(m);
    Value* x = b.input("x", DType::F32, {2, s.M, s.K});
    Value* w = b.input("w", DType::F32, {2, s.N, s.K});
    b.output(b.op("MatMul", {x, transpose(b, w, {0, 2, 1})}));
    auto r = expect_lowered_matches(m);
    EXPECT_EQ(r.gemm_kernels, 1u);
    gemm_parallel_extents(m);
  }
}

// Symbolic batch and sequence: the kernel's syms size the tiles, and the
// reported extent stays equal to the kernel's loop for each binding.
TEST(GemmPath, SymbolicDims) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {Dim::sym("batch"), Dim::sym("seq"), 24});
  Value* w = b.input("w", DType::F32, {40, 24});
  Value* h = b.op("MatMul", {x, transpose(b, w, {1, 0})});  // folded: M = batch * seq
  Value* scores = b.op("MatMul", {h, transpose(b, h, {0, 2, 1})});  // batched over `batch`
  b.output(scores);
  for (int64_t batch : {1, 3}) {
    SCOPED_TRACE("batch " + std::to_string(batch));
    auto c = testing::clone(m);
    const std::map<std::string, int64_t> dims{{"batch", batch}, {"seq", 11}};
    auto r = expect_lowered_matches(*c, dims);
    EXPECT_EQ(r.gemm_kernels, 2u);
    EXPECT_EQ(gemm_parallel_extents(*c, dims).size(), 2u);
  }
}

// Convolutions for an AVX-512 CPU (lower_for_cpu with LowerOptions::cpu):
// a group-1 conv over 128 or more output positions an image takes the
// 16-lane blocking, one over 7 x 7 positions keeps 8 lanes; a depthwise
// conv takes the target's 16 for 14- and 28-wide rows (its kernel fits
// each row in the smallest vector that holds it, a 14-wide row in one
// masked 16-lane vector). The kernels still match the interpreter.
TEST(GemmPath, ConvolutionsTakeWideVectorsWhereTheyAreWide) {
  TS_REQUIRE_OPS("Conv");
  struct Case {
    int64_t channels, hw, group, lanes;
  };
  const std::vector<Case> cases{{8, 16, 1, 16}, {8, 7, 1, 8}, {8, 14, 8, 16}, {8, 28, 8, 16}};
  LowerOptions lo;
  lo.cpu = cpu_info_from_features("+avx,+avx2,+avx512f,+fma");
  for (const Case& c : cases) {
    SCOPED_TRACE(str_cat("hw ", c.hw, " group ", c.group));
    auto m = std::make_unique<Model>();
    GraphBuilder b(*m);
    Value* x = b.input("x", DType::F32, {Dim(1), Dim(c.channels), Dim(c.hw), Dim(c.hw)});
    Value* w = b.input("w", DType::F32, {Dim(c.channels), Dim(c.channels / c.group), Dim(3), Dim(3)});
    b.output(b.op("Conv", {x, w}, {{"pads", Attribute::of_ints({1, 1, 1, 1})}, {"group", Attribute::of_int(c.group)}}));
    PassOptions o;
    run_pipeline(*m, o);
    const CompiledModel cm = lower_for_cpu(*m, lo);
    ASSERT_EQ(cm.lowered.size(), 1u);
    // A GEMM conv's vector width is its tile's (its packing loops run over
    // whole tiles); a depthwise kernel's is its widest vectorized loop.
    if (const Primitive* tile = cm.lowered[0].sched.find("gemm.tile")) {
      EXPECT_EQ(c.group, 1);
      EXPECT_EQ(tile->int_attr("lanes", 0), c.lanes);
      continue;
    }
    EXPECT_NE(c.group, 1);
    int64_t widest = 0;
    loop::visit_stmt(
        cm.lowered[0].kernel.body,
        [&](const loop::Stmt& s) {
          int64_t n = 0;
          if (s->kind == loop::StmtKind::For && s->for_kind == loop::ForKind::Vectorized &&
              loop::as_const_int(s->extent, &n))
            widest = std::max(widest, n);
        },
        [](const loop::Expr&) {});
    EXPECT_EQ(widest, c.lanes);
  }
}

}  // namespace
}  // namespace tessel
