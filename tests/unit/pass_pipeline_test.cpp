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
