// The pass pipeline: runs all passes with verification, prints after a pass,
// skips passes by name, binds dims.
#include <gtest/gtest.h>

#include <sstream>

#include "pass_test_util.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

using testing::clone;
using testing::count_ops;

// Exporter-style code: the shape of %x recomputed twice, a constant computed
// from constants, a dead branch.
const char* kModel = R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[batch,8]) -> (%y: f32[unk__0,2,4]) {
  %i0 = const i64[1] dense<[0]>
  %tail = const i64[2] dense<[2, 4]>
  %two = const f32[] dense<[2]>
  %three = const f32[] dense<[3]>
  %s1 = Shape(%x) : ?
  %s2 = Shape(%x) : ?
  %b1 = Gather(%s1, %i0) {axis = 0} : ?
  %b2 = Gather(%s2, %i0) {axis = 0} : ?
  %shp = Concat(%b1, %tail) {axis = 0} : ?
  %unused = Concat(%b2, %tail) {axis = 0} : ?
  %six = Mul(%two, %three) : ?
  %r = Reshape(%x, %shp) : ?
  %y = Mul(%r, %six) : f32[unk__0,2,4]
  return %y
}
}
)";

TEST(PassPipeline, RunsEveryPassAndKeepsResults) {
  TS_REQUIRE_OPS("Shape", "Gather", "Concat", "Mul", "Reshape");
  auto m = parse_model(kModel);
  auto ref = clone(*m);
  PassOptions o;
  std::ostringstream log;
  o.print_after = "all";
  o.print_stream = &log;
  EXPECT_TRUE(run_pipeline(*m, o));
  EXPECT_EQ(print_type(m->graph->outputs[0]->type), "f32[batch,2,4]");
  EXPECT_EQ(count_ops(*m->graph, "Shape"), 1u);   // cse merged the two
  EXPECT_EQ(count_ops(*m->graph, "Concat"), 1u);  // dce removed %unused
  EXPECT_EQ(count_ops(*m->graph, "Mul"), 1u);     // 2*3 folded
  for (const char* p : {"infer_shapes", "fold_constants", "dce", "cse"})
    EXPECT_NE(log.str().find(std::string("// ----- IR after ") + p + " -----"), std::string::npos) << p;
  testing::expect_same_results(*ref, *m, {{"batch", 3}}, 0);
}

TEST(PassPipeline, DisabledPassesDoNotRun) {
  TS_REQUIRE_OPS("Shape", "Gather", "Concat", "Mul", "Reshape");
  auto m = parse_model(kModel);
  PassOptions o;
  o.disabled = {"cse", "dce"};
  run_pipeline(*m, o);
  EXPECT_EQ(count_ops(*m->graph, "Shape"), 2u);
  EXPECT_EQ(count_ops(*m->graph, "Concat"), 2u);
  o.disabled = {"no_such_pass"};
  EXPECT_THROW(run_pipeline(*m, o), Error);
}

TEST(PassPipeline, PrintAfterOnePass) {
  TS_REQUIRE_OPS("Shape", "Gather", "Concat", "Mul", "Reshape");
  auto m = parse_model(kModel);
  PassOptions o;
  std::ostringstream log;
  o.print_after = "dce";
  o.print_stream = &log;
  run_pipeline(*m, o);
  EXPECT_EQ(log.str().find("IR after cse"), std::string::npos);
  EXPECT_NE(log.str().find("IR after dce"), std::string::npos);
  // What was printed parses back (small constants are printed in full).
  const std::string text = log.str().substr(log.str().find('\n') + 1);
  EXPECT_NO_THROW(parse_model(text));
}

TEST(PassPipeline, DimsMakeEveryShapeStatic) {
  TS_REQUIRE_OPS("Shape", "Gather", "Concat", "Mul", "Reshape");
  auto m = parse_model(kModel);
  auto ref = clone(*m);
  PassOptions o;
  o.dims = {{"batch", 5}};
  run_pipeline(*m, o);
  EXPECT_EQ(count_ops(*m->graph, "Shape"), 0u);
  for (const auto& v : m->graph->values())
    if (v->type.shape) EXPECT_TRUE(is_static(*v->type.shape)) << v->name << ": " << print_type(v->type);
  testing::expect_same_results(*ref, *m, {{"batch", 5}}, 0);
}

}  // namespace
}  // namespace tessel

namespace tessel {
namespace {

// Each Pad's pads come from the previous Pad's output shape (Swin pads every
// block to a multiple of its window this way): folding the first pads
// sharpens the next shape, which lets the next pads fold, and so on. The
// pipeline repeats folding and inference until all three shapes are static.
// (The pads pass through Reshape/Transpose, as torch's F.pad exports them,
// which shape inference does not track as symbolic values: only folding
// makes them constants.)
const char* kChainedPads = R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[batch,6]) -> (%y: f32[unk__0,unk__1]) {
  %one = const i64[] dense<[1]>
  %four = const i64[] dense<[4]>
  %zeros = const i64[3] dense<[0, 0, 0]>
  %ax = const i64[1] dense<[0]>
  %sq = const i64[2] dense<[2, 2]>
  %flat = const i64[1] dense<[4]>
  %s1 = Shape(%x) : ?
  %w1 = Gather(%s1, %one) {axis = 0} : ?
  %m1 = Mod(%w1, %four) : ?
  %u1 = Unsqueeze(%m1, %ax) : ?
  %c1 = Concat(%zeros, %u1) {axis = 0} : ?
  %q1 = Reshape(%c1, %sq) : ?
  %t1 = Transpose(%q1) {perm = [1, 0]} : ?
  %p1 = Reshape(%t1, %flat) : ?
  %a = Pad(%x, %p1) : ?
  %s2 = Shape(%a) : ?
  %w2 = Gather(%s2, %one) {axis = 0} : ?
  %m2 = Mod(%w2, %four) : ?
  %u2 = Unsqueeze(%m2, %ax) : ?
  %c2 = Concat(%zeros, %u2) {axis = 0} : ?
  %q2 = Reshape(%c2, %sq) : ?
  %t2 = Transpose(%q2) {perm = [1, 0]} : ?
  %p2 = Reshape(%t2, %flat) : ?
  %b = Pad(%a, %p2) : ?
  %s3 = Shape(%b) : ?
  %w3 = Gather(%s3, %one) {axis = 0} : ?
  %m3 = Mod(%w3, %four) : ?
  %u3 = Unsqueeze(%m3, %ax) : ?
  %c3 = Concat(%zeros, %u3) {axis = 0} : ?
  %q3 = Reshape(%c3, %sq) : ?
  %t3 = Transpose(%q3) {perm = [1, 0]} : ?
  %p3 = Reshape(%t3, %flat) : ?
  %y = Pad(%b, %p3) : ?
  return %y
}
}
)";

TEST(PassPipeline, FoldingAndInferenceRepeatUntilShapesAreStatic) {
  TS_REQUIRE_OPS("Shape", "Gather", "Mod", "Unsqueeze", "Concat", "Reshape", "Transpose", "Pad");
  auto m = parse_model(kChainedPads);
  run_pipeline(*m, PassOptions{});
  // 6 -> 6 + 6 mod 4 = 8 -> 8 + 0 = 8 -> 8.
  const Value* y = m->graph->outputs.at(0);
  ASSERT_TRUE(y->type.has_shape());
  EXPECT_EQ(print_type(y->type), "f32[batch,8]");
  EXPECT_EQ(count_ops(*m->graph, "Pad"), 3u);
  EXPECT_EQ(count_ops(*m->graph, "Shape"), 0u);
}

}  // namespace
}  // namespace tessel
