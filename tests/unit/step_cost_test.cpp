// step_cost (runtime/step_cost.h): the bytes and contraction flops that
// `tessel bench --profile` divides each step's time by.
#include "tessel/runtime/step_cost.h"

#include <gtest/gtest.h>

#include "tessel/ir/builder.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

Step node_step(const Value* out) { return Step{nullptr, out->producer}; }

TEST(StepCost, ContractionFlopsAndBytes) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {Dim::sym("batch"), 4, 8});
  Value* w = b.input("w", DType::F32, {8, 16});
  Value* mm = b.op("MatMul", {x, w});
  Value* a = b.input("a", DType::BF16, {8, 4});
  Value* bb = b.input("b", DType::BF16, {8, 5});
  Value* g = b.op("Gemm", {a, bb}, {{"transA", Attribute::of_int(1)}});
  Value* img = b.input("img", DType::F32, {1, 3, 10, 10});
  Value* k = b.input("k", DType::F32, {6, 3, 3, 3});
  Value* conv = b.op("Conv", {img, k});
  Value* sum = b.op("Add", {conv, conv});
  for (Value* v : {mm, g, sum}) b.output(v);
  infer_shapes(m, PassOptions{});

  const std::map<std::string, int64_t> batch3 = {{"batch", 3}};
  const StepCost c = step_cost(node_step(mm), batch3);
  EXPECT_EQ(c.flops, 2.0 * 3 * 4 * 16 * 8);
  EXPECT_EQ(c.bytes, (3 * 4 * 8 + 8 * 16 + 3 * 4 * 16) * 4);
  // A size the bindings leave open counts nothing (the weights still do).
  EXPECT_EQ(step_cost(node_step(mm), {}).flops, 0);
  EXPECT_EQ(step_cost(node_step(mm), {}).bytes, 8 * 16 * 4);

  // Gemm with A transposed: K is A's first dimension.
  EXPECT_EQ(step_cost(node_step(g), {}).flops, 2.0 * 4 * 5 * 8);
  EXPECT_EQ(step_cost(node_step(g), {}).bytes, (32 + 40) * 2 + 20 * 2);

  // Conv: every output sums Cin/group x kernel products.
  EXPECT_EQ(step_cost(node_step(conv), {}).flops, 2.0 * 6 * 8 * 8 * 27);

  // Attention: Q K^T and P V over every key, 3-d (heads in the last
  // dimension) and 4-d, with K and V of other head sizes than Q's output.
  Model am;
  GraphBuilder ab(am);
  Value* q3 = ab.input("q", DType::F32, {2, 5, 3 * 8});
  Value* k3 = ab.input("k", DType::F32, {2, 7, 3 * 8});
  Value* v3 = ab.input("v", DType::F32, {2, 7, 3 * 4});
  Value* att3 = ab.op("Attention", {q3, k3, v3}, {{"q_num_heads", Attribute::of_int(3)},
                                                  {"kv_num_heads", Attribute::of_int(3)}});
  Value* q4 = ab.input("q4", DType::F32, {2, 3, 5, 8});
  Value* k4 = ab.input("k4", DType::F32, {2, 3, 7, 8});
  Value* v4 = ab.input("v4", DType::F32, {2, 3, 7, 4});
  Value* att4 = ab.op("Attention", {q4, k4, v4});
  for (Value* v : {att3, att4}) ab.output(v);
  infer_shapes(am, PassOptions{});
  const double qk = 2.0 * 2 * 3 * 5 * 7 * 8, pv = 2.0 * 2 * 3 * 5 * 7 * 4;
  EXPECT_EQ(step_cost(node_step(att3), {}).flops, qk + pv);
  EXPECT_EQ(step_cost(node_step(att4), {}).flops, qk + pv);

  // Elementwise ops are bound by bytes: no flops counted.
  EXPECT_EQ(step_cost(node_step(sum), {}).flops, 0);
  EXPECT_EQ(step_cost(node_step(sum), {}).bytes, 2 * 384 * 4);  // a value read twice moves once, plus the write
}

TEST(StepCost, AGatherReadsOnlyTheRowsItPicks) {
  Model m;
  GraphBuilder b(m);
  Value* table = b.input("table", DType::F32, {1000, 16});
  Value* ids = b.input("ids", DType::I64, {Dim::sym("n")});
  Value* rows = b.op("Gather", {table, ids});
  Value* twice = b.op("Gather", {table, ids});
  Value* both = b.op("Add", {table, table});
  for (Value* v : {rows, twice, both}) b.output(v);
  infer_shapes(m, PassOptions{});
  const std::map<std::string, int64_t> n3 = {{"n", 3}};
  // 3 rows of 16 floats read, 3 indices, 3 rows written: not the 64 kB table.
  EXPECT_EQ(step_cost(node_step(rows), n3).bytes, 3 * 16 * 4 + 3 * 8 + 3 * 16 * 4);
  // A fused step gathering twice reads both gathers' rows, never more than the table.
  Step fused{std::make_shared<KernelStep>(), nullptr};
  fused.kernel->nodes = {rows->producer, twice->producer};
  fused.kernel->params = {table, ids, twice};
  fused.kernel->num_inputs = 2;
  EXPECT_EQ(step_cost(fused, n3).bytes, 2 * 3 * 16 * 4 + 3 * 8 + 3 * 16 * 4);
  EXPECT_EQ(step_cost(fused, {{"n", 5000}}).bytes, 1000 * 16 * 4 + 5000 * 8 + 5000 * 16 * 4);
  // Any other use reads the whole table.
  fused.kernel->nodes.push_back(both->producer);
  EXPECT_EQ(step_cost(fused, n3).bytes, 1000 * 16 * 4 + 3 * 8 + 3 * 16 * 4);
}

}  // namespace
}  // namespace tessel
