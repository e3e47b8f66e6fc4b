// The verifier: a valid model passes; each kind of violation is reported,
// naming the node or value.
#include <gtest/gtest.h>

#include "pass_test_util.h"
#include "tessel/ir/builder.h"
#include "tessel/ir/verifier.h"

namespace tessel {
namespace {

std::string verify_error(const Model& m, VerifyOptions o = {}) {
  try {
    verify_model(m, o);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

std::string structure_error(const Model& m) {
  try {
    verify_structure(m);
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

#define EXPECT_CONTAINS(hay, needle) EXPECT_NE((hay).find(needle), std::string::npos) << (hay)

TEST(Verifier, AcceptsAValidModelWithSubgraphs) {
  TS_REQUIRE_OPS("If", "Relu", "Neg", "Add");
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%c: bool[], %x: f32[n,4]) -> (%y: f32[n,4]) {
  %k = const f32[4] dense<[1, 2, 3, 4]>
  %a = Add(%x, %k) : f32[n,4]
  %y = If(%c) {else_branch = graph @else() -> (%e: f32[n,4]) {
      %e = Neg(%a) : f32[n,4]
      return %e
    }, then_branch = graph @then() -> (%t: f32[n,4]) {
      %t = Relu(%a) : f32[n,4]
      return %t
    }} : f32[n,4]
  return %y
}
}
)");
  VerifyOptions o;
  o.require_types = true;
  EXPECT_EQ(verify_error(*m, o), "(no error)");
}

TEST(Verifier, UseBeforeDefinition) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {2});
  Value* first = b.op("Relu", {x});
  Node* n1 = b.last_node();
  Value* second = b.op("Neg", {x});
  n1->inputs[0] = second;  // the first node now reads the second's output
  b.output(first);
  const std::string e = structure_error(m);
  EXPECT_CONTAINS(e, "Relu uses %" + second->name + " before its definition by Neg");
  EXPECT_EQ(e.find("cycle"), std::string::npos);
}

TEST(Verifier, Cycle) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {2});
  Value* a = b.op("Add", {x, x});
  Node* na = b.last_node();
  Value* c = b.op("Neg", {a});
  na->inputs[1] = c;
  b.output(c);
  EXPECT_CONTAINS(structure_error(m), "(cycle: Neg -> Add -> Neg)");
}

TEST(Verifier, NodeUsingItsOwnOutput) {
  Model m;
  GraphBuilder b(m);
  b.input("x", DType::F32, {2});
  Value* a = b.op("Relu", {nullptr});
  b.last_node()->inputs[0] = a;
  b.output(a);
  EXPECT_CONTAINS(structure_error(m), "cycle");
}

TEST(Verifier, DuplicateDefinition) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {2});
  b.op("Relu", {x});
  Node* n = b.last_node();
  // Make the node claim the graph input as its output too.
  n->outputs.push_back(x);
  x->producer = n;
  x->producer_output = 1;
  b.output(n->outputs[0]);
  EXPECT_CONTAINS(structure_error(m), "also has a producer");
}

TEST(Verifier, ValueDefinedTwiceByTwoNodes) {
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {2});
  Value* y = b.op("Relu", {x});
  b.op("Neg", {x});
  Node* n2 = b.last_node();
  n2->outputs[0] = y;  // y is now an output of Relu and of Neg
  b.output(y);
  EXPECT_CONTAINS(structure_error(m), "does not point back to its producer");
}

TEST(Verifier, SiblingScopeUse) {
  Model m;
  GraphBuilder b(m);
  Value* c = b.input("c", DType::Bool, {});
  Value* x = b.input("x", DType::F32, {2});
  auto then_g = b.subgraph("then");
  GraphBuilder tb(*then_g);
  Value* t = tb.op("Relu", {x});
  tb.output(t);
  auto else_g = b.subgraph("else");
  GraphBuilder eb(*else_g);
  eb.output(eb.op("Neg", {t}));  // reads a value of the sibling branch
  Value* y = b.op("If", {c}, {{"then_branch", Attribute::of_graph(then_g)}, {"else_branch", Attribute::of_graph(else_g)}});
  b.output(y);
  EXPECT_CONTAINS(structure_error(m), "graph @else: Neg uses %" + t->name +
                                          " of graph @then, which is not an enclosing graph (sibling or nested scope)");
}

TEST(Verifier, OuterValueUsedBeforeItsDefinition) {
  Model m;
  GraphBuilder b(m);
  Value* c = b.input("c", DType::Bool, {});
  Value* x = b.input("x", DType::F32, {2});
  auto then_g = b.subgraph("then");
  auto else_g = b.subgraph("else");
  Value* y = b.op("If", {c}, {{"then_branch", Attribute::of_graph(then_g)}, {"else_branch", Attribute::of_graph(else_g)}});
  Value* later = b.op("Relu", {x});
  GraphBuilder(*then_g).output(later);
  GraphBuilder(*else_g).output(x);
  b.output(y);
  EXPECT_CONTAINS(structure_error(m), "graph @then: graph output 0 uses %" + later->name +
                                          " of an enclosing graph before its definition by Relu");
}

TEST(Verifier, BadArityAndUnknownOperator) {
  TS_REQUIRE_OPS("Relu");
  Model m;
  GraphBuilder b(m);
  Value* x = b.input("x", DType::F32, {2});
  b.output(b.op("Relu", {x, x}));
  EXPECT_CONTAINS(verify_error(m), "Relu: expected 1 inputs, got 2");

  Model m2;
  GraphBuilder b2(m2);
  Value* x2 = b2.input("x", DType::F32, {2});
  b2.output(b2.op("NoSuchOp", {x2}));
  EXPECT_CONTAINS(verify_error(m2), "operator 'NoSuchOp' is not registered");
}

TEST(Verifier, GraphWithoutOutputs) {
  Model m;
  GraphBuilder b(m);
  b.input("x", DType::F32, {2});
  EXPECT_CONTAINS(structure_error(m), "graph @main: graph has no outputs");
}

TEST(Verifier, TypeDisagreesWithInference) {
  TS_REQUIRE_OPS("Relu");
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[2,3]) -> (%y: f32[2,4]) {
  %y = Relu(%x) : f32[2,4]
  return %y
}
}
)");
  EXPECT_CONTAINS(verify_error(*m), "output %y of Relu has type f32[2,4] but inference gives f32[2,3]");
  // A symbolic declared dim is not a contradiction.
  auto ok = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[2,3]) -> (%y: f32[2,k]) {
  %y = Relu(%x) : f32[2,k]
  return %y
}
}
)");
  EXPECT_EQ(verify_error(*ok), "(no error)");
}

TEST(Verifier, MissingTypesOnlyWithRequireTypes) {
  TS_REQUIRE_OPS("Relu");
  auto m = parse_model(R"(tessel.model opset(ai.onnx=17) {
graph @main(%x: f32[2,3]) -> (%y: ?) {
  %y = Relu(%x) : ?
  return %y
}
}
)");
  EXPECT_EQ(verify_error(*m), "(no error)");
  VerifyOptions o;
  o.require_types = true;
  EXPECT_CONTAINS(verify_error(*m, o), "output %y of Relu has no type but inference gives f32[2,3]");
}

TEST(Verifier, ConstantTypeMustMatchItsValue) {
  Model m;
  GraphBuilder b(m);
  Value* c = b.const_i64({1, 2, 3}, "c");
  c->type = Type::tensor(DType::I64, {4});
  b.output(c);
  EXPECT_CONTAINS(structure_error(m), "constant %c has type i64[4] but its value is i64[3]");
}

}  // namespace
}  // namespace tessel
