// Shape inference: symbolic shapes through shape arithmetic, unification of
// exporter symbols, conflicts, and bind_dims.
#include <gtest/gtest.h>

#include "pass_test_util.h"
#include "tessel/ir/verifier.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

using testing::clone;

const Type& type_of(const Model& m, const std::string& name) {
  const Value* v = nullptr;
  for_each_graph(*m.graph, [&](Graph& g) {
    for (const auto& x : g.values())
      if (x->name == name) v = x.get();
  });
  if (!v) throw Error("no value " + name);
  return v->type;
}

// x: [batch,seq,64] reshaped to [batch,seq,4,16] through Shape/Gather/Concat,
// as exporters write it; the exporter named the result dims unk__1, unk__2.
const char* kReshape = R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[batch,seq,64]) -> (%y: f32[unk__1,unk__2,4,16]) {
  %i0 = const i64[] dense<[0]>
  %i1 = const i64[] dense<[1]>
  %ax = const i64[1] dense<[0]>
  %tail = const i64[2] dense<[4, 16]>
  %s = Shape(%x) : ?
  %b = Gather(%s, %i0) {axis = 0} : ?
  %q = Gather(%s, %i1) {axis = 0} : ?
  %bu = Unsqueeze(%b, %ax) : ?
  %qu = Unsqueeze(%q, %ax) : ?
  %shp = Concat(%bu, %qu, %tail) {axis = 0} : i64[MyConcat_dim_0]
  %y = Reshape(%x, %shp) : f32[unk__1,unk__2,4,16]
  %z = Relu(%y) : f32[unk__1,unk__2,4,16]
  return %y
}
}
)";

TEST(PassShapeInference, ShapeArithmeticGivesSymbolicShapesAndUnifiesExporterSymbols) {
  TS_REQUIRE_OPS("Shape", "Gather", "Unsqueeze", "Concat", "Reshape", "Relu");
  auto m = parse_model(kReshape);
  PassOptions o;
  EXPECT_TRUE(infer_shapes(*m, o));
  EXPECT_EQ(print_type(type_of(*m, "s")), "i64[3]");
  EXPECT_EQ(print_type(type_of(*m, "shp")), "i64[4]");
  EXPECT_EQ(print_type(type_of(*m, "y")), "f32[batch,seq,4,16]");
  EXPECT_EQ(print_type(type_of(*m, "z")), "f32[batch,seq,4,16]");
  VerifyOptions vo;
  vo.require_types = true;
  EXPECT_NO_THROW(verify_model(*m, vo));
  // A second run finds nothing new.
  EXPECT_FALSE(infer_shapes(*m, o));
}

TEST(PassShapeInference, BindDimsMakesShapesStaticAndFoldsShapeCode) {
  TS_REQUIRE_OPS("Shape", "Gather", "Unsqueeze", "Concat", "Reshape", "Relu");
  auto m = parse_model(kReshape);
  auto ref = clone(*m);
  EXPECT_TRUE(bind_dims(*m, {{"batch", 2}, {"seq", 5}}));
  EXPECT_EQ(print_type(m->graph->inputs[0]->type), "f32[2,5,64]");
  EXPECT_EQ(print_type(type_of(*m, "y")), "f32[2,5,4,16]");
  ASSERT_NE(m->graph->find_value("shp"), nullptr);
  EXPECT_TRUE(m->graph->find_value("shp")->is_constant());  // folded from the static shape
  testing::expect_same_results(*ref, *m, {{"batch", 2}, {"seq", 5}});
}

TEST(PassShapeInference, BindDimsIgnoresUnknownSymbolsAndRejectsNegativeValues) {
  auto m = parse_model(kReshape);
  EXPECT_FALSE(bind_dims(*m, {{"sequence", 5}}));
  EXPECT_THROW(bind_dims(*m, {{"seq", -1}}), Error);
  EXPECT_FALSE(bind_dims(*m, {}));
}

TEST(PassShapeInference, ElementTypeConflictIsAnError) {
  TS_REQUIRE_OPS("Relu");
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[2]) -> (%y: f16[2]) {
  %y = Relu(%x) : f16[2]
  return %y
}
}
)");
  try {
    infer_shapes(*m, {});
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Relu: output %y is declared as f16[2] but inference gives element type f32"),
              std::string::npos)
        << e.what();
  }
}

TEST(PassShapeInference, ConstantDimConflictIsAnError) {
  TS_REQUIRE_OPS("Relu");
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[2,3]) -> (%y: f32[2,4]) {
  %y = Relu(%x) : f32[2,4]
  return %y
}
}
)");
  EXPECT_THROW(infer_shapes(*m, {}), Error);
}

TEST(PassShapeInference, KeepsDeclaredTypesWhereInferenceCannotSay) {
  TS_REQUIRE_OPS("Relu");
  // com.example::Mystery has no schema: its declared type stays and flows on.
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17, com.example=1) {
graph @main(%x: f32[n,3]) -> (%z: ?) {
  %y = com.example::Mystery(%x) : f32[n,7]
  %z = Relu(%y) : ?
  return %z
}
}
)");
  infer_shapes(*m, {});
  EXPECT_EQ(print_type(type_of(*m, "y")), "f32[n,7]");
  EXPECT_EQ(print_type(type_of(*m, "z")), "f32[n,7]");
}

TEST(PassShapeInference, DeclaredSymbolBindsToAnInferredExpression) {
  TS_REQUIRE_OPS("Concat", "Relu");
  // Concat along axis 0 gives 2*n; the exporter called it cat_dim_0 and used
  // it again further down: both places must read 2*n.
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[n,3]) -> (%z: f32[cat_dim_0,3]) {
  %y = Concat(%x, %x) {axis = 0} : f32[cat_dim_0,3]
  %z = Relu(%y) : f32[cat_dim_0,3]
  return %z
}
}
)");
  infer_shapes(*m, {});
  EXPECT_EQ(print_type(type_of(*m, "y")), "f32[2*n,3]");
  EXPECT_EQ(print_type(type_of(*m, "z")), "f32[2*n,3]");
}

TEST(PassShapeInference, InfersInsideIfBranches) {
  TS_REQUIRE_OPS("If", "Relu", "Neg");
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%c: bool[], %x: f32[n,4]) -> (%y: ?) {
  %y = If(%c) {else_branch = graph @else() -> (%e: ?) {
      %e = Neg(%x) : ?
      return %e
    }, then_branch = graph @then() -> (%t: ?) {
      %t = Relu(%x) : ?
      return %t
    }} : ?
  return %y
}
}
)");
  infer_shapes(*m, {});
  EXPECT_EQ(print_type(type_of(*m, "e")), "f32[n,4]");
  EXPECT_EQ(print_type(type_of(*m, "t")), "f32[n,4]");
  EXPECT_EQ(print_type(type_of(*m, "y")), "f32[n,4]");
}

}  // namespace
}  // namespace tessel
