// fuse_attention: the attention forms of the exported transformers become
// one Attention node with the same results (through the interpreter), and
// look-alikes that are not attention stay as they are.
#include <gtest/gtest.h>

#include "pass_test_util.h"
#include "tessel/ir/builder.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

using testing::clone;
using testing::count_ops;

struct Form {
  bool scale_on_qk = false;  // ViT: Q and K each times a constant, not the scores
  bool mask = true;
  bool cast = false;         // GPT-2: a Cast to the same type after the Softmax
  int64_t axis = -1;
  bool probabilities_out = false;  // the Softmax also a graph output
  bool k_rows = false;       // BERT: K^T straight from K as [B, S, H, D] (perm 0, 2, 3, 1)
};

// Q [2, 3, 5, 4] x K^T -> (scale) -> (+ mask [1, 1, 5, 6]) -> Softmax -> x V [2, 3, 6, 7].
std::unique_ptr<Model> attention_model(const Form& f) {
  auto m = std::make_unique<Model>();
  GraphBuilder b(*m);
  Value* q = b.input("q", DType::F32, {Dim(2), Dim(3), Dim(5), Dim(4)});
  Value* k = f.k_rows ? b.input("k", DType::F32, {Dim(2), Dim(6), Dim(3), Dim(4)})
                      : b.input("k", DType::F32, {Dim(2), Dim(3), Dim(6), Dim(4)});
  Value* v = b.input("v", DType::F32, {Dim(2), Dim(3), Dim(6), Dim(7)});
  if (f.scale_on_qk) {
    Value* c = b.constant(Tensor::scalar_f32(0.7071f), "c");
    q = b.op("Mul", {q, c});
    k = b.op("Mul", {c, k});
  }
  const std::vector<int64_t> perm = f.k_rows ? std::vector<int64_t>{0, 2, 3, 1} : std::vector<int64_t>{0, 1, 3, 2};
  Value* s = b.op("MatMul", {q, b.op("Transpose", {k}, {{"perm", Attribute::of_ints(perm)}})});
  if (!f.scale_on_qk) s = b.op("Mul", {s, b.constant(Tensor::scalar_f32(0.5f), "scale")});
  if (f.mask) s = b.op("Add", {b.input("mask", DType::F32, {Dim(1), Dim(1), Dim(5), Dim(6)}), s});
  Value* p = b.op("Softmax", {s}, {{"axis", Attribute::of_int(f.axis)}});
  if (f.probabilities_out) b.output(p);
  if (f.cast) p = b.op("Cast", {p}, {{"to", Attribute::of_int(1)}});
  b.output(b.op("MatMul", {p, v}));
  PassOptions o;
  run_pipeline(*m, o);
  return m;
}

TEST(PassFuseAttention, ExportedFormsBecomeOneNode) {
  TS_REQUIRE_OPS("Attention", "Softmax", "MatMul", "Transpose");
  for (const Form& f : {Form{}, Form{.scale_on_qk = true}, Form{.mask = false}, Form{.cast = true},
                        Form{.scale_on_qk = true, .mask = false, .cast = true}, Form{.k_rows = true}}) {
    const auto before = attention_model(f);
    auto after = clone(*before);
    ASSERT_TRUE(fuse_attention(*after));
    EXPECT_EQ(count_ops(*after->graph, "Attention"), 1u);
    for (const char* gone : {"Softmax", "MatMul", "Mul", "Add", "Cast"})
      EXPECT_EQ(count_ops(*after->graph, gone), 0u) << gone;
    // K as [B, H, S, D]: no transpose left, or one for K given as rows.
    EXPECT_EQ(count_ops(*after->graph, "Transpose"), f.k_rows ? 1u : 0u);
    testing::expect_same_results(*before, *after, {}, 1e-5);
  }
}

TEST(PassFuseAttention, LeavesOtherShapesAlone) {
  TS_REQUIRE_OPS("Attention", "Softmax", "MatMul", "Transpose");
  // Softmax over another axis; probabilities that are also a model output.
  for (const Form& f : {Form{.axis = 2}, Form{.probabilities_out = true}}) {
    auto m = attention_model(f);
    EXPECT_FALSE(fuse_attention(*m));
    EXPECT_EQ(count_ops(*m->graph, "Attention"), 0u);
  }
}

}  // namespace
}  // namespace tessel
