// conv_im2col (the CUDA target's Conv -> tessel::Im2Col + MatMul rewrite) and
// the Im2Col op itself: the rewritten model against the original through the
// interpreter, Im2Col's lowering against its interpreter kernel, and the
// convolutions the pass leaves alone.
#include <gtest/gtest.h>

#include <random>

#include "lower_test_util.h"
#include "pass_test_util.h"
#include "tessel/ir/builder.h"
#include "tessel/ir/verifier.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

using testing::clone;
using testing::count_ops;

Tensor random_weights(std::vector<int64_t> shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = u(rng);
  return Tensor::from_f32(std::move(shape), v);
}

// x [2, C, H, W] -> Conv(x, W[, b]) -> Relu, shapes inferred.
std::unique_ptr<Model> conv_model(int64_t c, int64_t h, int64_t w, std::vector<int64_t> wshape, Attrs attrs,
                                  bool bias) {
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* x = b.input("x", DType::F32, {Dim(2), Dim(c), Dim(h), Dim(w)});
  std::vector<Value*> in{x, b.constant(random_weights(wshape, 3), "w")};
  if (bias) in.push_back(b.constant(random_weights({wshape[0]}, 4), "bias"));
  b.output(b.op("Relu", {b.op("Conv", in, std::move(attrs))}));
  PassOptions o;
  run_pipeline(*m, o);
  return m;
}

// A padded, strided 3x3 convolution with bias (K = 3 * 9 = 27, padded to 32)
// and a 1x1 convolution over a 5x5 image (H * W = 25: the implicit GEMM
// cannot vectorize it) both become Im2Col + MatMul with the same results;
// where the output has a multiple of 8 positions (8 x 8, and 4 x 8 from a
// stride-2 16-wide image) the patches are stored k-major and the MatMul
// reads them without a Transpose.
TEST(PassConvIm2col, ConvolutionsBecomeIm2colAndMatMul) {
  TS_REQUIRE_OPS("Conv", "MatMul", "Transpose", "Reshape", "Relu");
  const std::vector<std::unique_ptr<Model>> models = [] {
    std::vector<std::unique_ptr<Model>> v;
    v.push_back(conv_model(3, 9, 7, {4, 3, 3, 3}, {{"pads", Attribute::of_ints({1, 0, 2, 1})},
                                                   {"strides", Attribute::of_ints({2, 1})}}, true));
    v.push_back(conv_model(16, 5, 5, {8, 16, 1, 1}, {}, false));
    v.push_back(conv_model(8, 6, 6, {8, 8, 3, 3}, {{"dilations", Attribute::of_ints({2, 2})}}, true));
    v.push_back(conv_model(8, 8, 8, {8, 8, 3, 3}, {{"pads", Attribute::of_ints({1, 1, 1, 1})}}, true));
    v.push_back(conv_model(4, 8, 16, {6, 4, 3, 3}, {{"pads", Attribute::of_ints({1, 1, 1, 1})},
                                                    {"strides", Attribute::of_ints({2, 2})}}, false));
    return v;
  }();
  for (size_t i = 0; i < models.size(); ++i) {
    const auto& m = models[i];
    auto ref = clone(*m);
    ASSERT_TRUE(convs_to_im2col(*m));
    EXPECT_NO_THROW(verify_model(*m));
    EXPECT_EQ(count_ops(*m->graph, "Conv"), 0u);
    EXPECT_EQ(count_ops(*m->graph, "Im2Col"), 1u);
    EXPECT_EQ(count_ops(*m->graph, "MatMul"), 1u);
    const bool k_major = i >= 3;
    EXPECT_EQ(count_ops(*m->graph, "Transpose"), k_major ? 0u : 1u) << i;
    for (const auto& n : m->graph->nodes())
      if (n->op == "Im2Col") EXPECT_EQ(n->attr_int("k_major", 0), k_major ? 1 : 0) << i;
    testing::expect_same_results(*ref, *m, {}, 1e-5);
    // Compiled: Im2Col is a kernel of its own (not inlined into the GEMM),
    // and every group matches the interpreter.
    const testing::EvalRun r = testing::expect_lowered_matches(*m);
    EXPECT_EQ(r.interpreted, 0u);
    // Two kernels: Im2Col, and the GEMM with the bias, the Reshape back to
    // [N, OC, OH, OW] and the Relu as its epilogue (columns = OH x OW).
    EXPECT_EQ(r.kernels, 2u);
    EXPECT_EQ(r.gemm_kernels, 1u);
  }
}

// What stays a Conv: the implicit GEMM already reads it in vectors (1x1 over
// an 8 x 4 image), grouped convolutions, a convolution whose output is the
// model's output.
TEST(PassConvIm2col, LeavesVectorizableGroupedAndOutputConvolutions) {
  TS_REQUIRE_OPS("Conv", "Relu");
  EXPECT_FALSE(convs_to_im2col(*conv_model(16, 8, 4, {8, 16, 1, 1}, {}, false)));
  EXPECT_FALSE(convs_to_im2col(*conv_model(4, 6, 5, {6, 2, 3, 3}, {{"group", Attribute::of_int(2)}}, false)));
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {Dim(1), Dim(3), Dim(5), Dim(5)});
  b.output(b.op("Conv", {x, b.constant(random_weights({2, 3, 3, 3}, 5), "w")}));
  PassOptions o;
  run_pipeline(m, o);
  EXPECT_FALSE(convs_to_im2col(m));
}

// A bad k_padded is one clear error from shape inference.
TEST(PassConvIm2col, Im2colRejectsATooSmallKPadded) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {Dim(1), Dim(3), Dim(5), Dim(5)});
  b.output(b.op("Im2Col", {x},
                {{"kernel_shape", Attribute::of_ints({3, 3})}, {"strides", Attribute::of_ints({1, 1})},
                 {"pads", Attribute::of_ints({0, 0, 0, 0})}, {"dilations", Attribute::of_ints({1, 1})},
                 {"k_padded", Attribute::of_int(20)}},
                "tessel"));
  PassOptions o;
  EXPECT_THROW(run_pipeline(m, o), Error);
}

}  // namespace
}  // namespace tessel
