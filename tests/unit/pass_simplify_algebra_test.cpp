// simplify_algebra: each rule as IR in / IR out, its negative cases, and the
// simplified model against the original on the interpreter (bit for bit
// where the rule is exact).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "pass_test_util.h"
#include "tessel/ir/verifier.h"
#include "tessel/passes/pass_manager.h"

namespace tessel {
namespace {

using testing::clone;
using testing::count_ops;

std::string wrap(const std::string& graph) { return "tessel.model opset(ai.onnx=17) {\n" + graph + "}\n"; }

// Parses `before`, simplifies it, checks that it verifies, computes exactly
// what the original computes and prints as `after` does.
void expect_simplified(const std::string& before, const std::string& after,
                       const std::map<std::string, int64_t>& dims = {}) {
  auto m = parse_model(wrap(before));
  auto ref = clone(*m);
  EXPECT_TRUE(simplify_algebra(*m));
  EXPECT_NO_THROW(verify_model(*m, {.require_types = true}));
  EXPECT_EQ(print_model(*m), print_model(*parse_model(wrap(after))));
  testing::expect_same_results(*ref, *m, dims, 0);
  EXPECT_FALSE(simplify_algebra(*m)) << "not at a fixed point";
}

// What the first tests simplify to.
const char* const kReluOfX = R"(graph @main(%x: f32[2,3]) -> (%y: f32[2,3]) {
  %y = Relu(%x) : f32[2,3]
  return %y
}
)";

void expect_unchanged(const std::string& graph) {
  auto m = parse_model(wrap(graph));
  const std::string before = print_model(*m);
  EXPECT_FALSE(simplify_algebra(*m));
  EXPECT_EQ(print_model(*m), before);
}

// ---- arithmetic ---------------------------------------------------------------

TEST(PassSimplifyAlgebra, MulDivByOneAndAddSubZero) {
  TS_REQUIRE_OPS("Mul", "Div", "Add", "Sub", "Relu");
  expect_simplified(R"(graph @main(%x: f32[2,3]) -> (%y: f32[2,3]) {
  %ones = const f32[3] dense<[1, 1, 1]>
  %one = const f32[] dense<[1]>
  %zero = const f32[1] dense<[0]>
  %nzero = const f32[] dense<[-0]>
  %a = Mul(%x, %ones) : f32[2,3]
  %b = Mul(%one, %a) : f32[2,3]
  %c = Div(%b, %one) : f32[2,3]
  %d = Add(%c, %nzero) : f32[2,3]
  %e = Add(%zero, %d) : f32[2,3]
  %f = Sub(%e, %zero) : f32[2,3]
  %y = Relu(%f) : f32[2,3]
  return %y
}
)",
                    kReluOfX);
}

TEST(PassSimplifyAlgebra, IntegerIdentitiesToo) {
  TS_REQUIRE_OPS("Mul", "Add", "Neg");
  expect_simplified(R"(graph @main(%x: i64[4]) -> (%y: i64[4]) {
  %one = const i64[] dense<[1]>
  %zero = const i64[] dense<[0]>
  %a = Mul(%x, %one) : i64[4]
  %b = Add(%a, %zero) : i64[4]
  %y = Neg(%b) : i64[4]
  return %y
}
)",
                    R"(graph @main(%x: i64[4]) -> (%y: i64[4]) {
  %y = Neg(%x) : i64[4]
  return %y
}
)");
}

TEST(PassSimplifyAlgebra, KeepsIdentitiesThatBroadcastOrAreNotIdentities) {
  TS_REQUIRE_OPS("Mul", "Div", "Add", "Sub");
  // x * ones[2,3] is x repeated; 1 / x, 0 - x, x * 2 and x + 1 are not x; a
  // constant with one element that is not 1 is not one.
  expect_unchanged(R"(graph @main(%x: f32[3]) -> (%a: f32[2,3], %b: f32[3], %c: f32[3], %d: f32[3], %e: f32[3]) {
  %ones = const f32[2,3] dense<[1, 1, 1, 1, 1, 1]>
  %mixed = const f32[3] dense<[1, 1, 2]>
  %one = const f32[] dense<[1]>
  %zero = const f32[] dense<[0]>
  %a = Mul(%x, %ones) : f32[2,3]
  %b = Div(%one, %x) : f32[3]
  %c = Sub(%zero, %x) : f32[3]
  %d = Mul(%x, %mixed) : f32[3]
  %e = Add(%x, %one) : f32[3]
  return %a, %b, %c, %d, %e
}
)");
}

// x + (-0.0) is exact; x + 0 differs only where x is -0.0 (documented).
TEST(PassSimplifyAlgebra, AddOfZeroAndTheSignOfZero) {
  TS_REQUIRE_OPS("Add", "Identity");
  const std::string text = wrap(R"(graph @main(%x: f32[3]) -> (%p: f32[3], %n: f32[3]) {
  %pz = const f32[] dense<[0]>
  %nz = const f32[] dense<[-0]>
  %p = Add(%x, %pz) : f32[3]
  %n = Add(%x, %nz) : f32[3]
  return %p, %n
}
)");
  auto ref = parse_model(text);
  auto m = parse_model(text);
  ASSERT_TRUE(simplify_algebra(*m));
  EXPECT_EQ(count_ops(*m->graph, "Add"), 0u);  // two Identity(x): both are outputs
  Interpreter interp;
  const Tensor x = Tensor::from_f32({3}, {-0.0f, 0.0f, 1.5f});
  auto a = interp.run(*ref->graph, {x});
  auto b = interp.run(*m->graph, {x});
  // x + (-0.0): bit for bit, -0.0 included.
  EXPECT_TRUE(a[1].tensor.bitwise_equal(b[1].tensor));
  EXPECT_TRUE(std::signbit(b[1].tensor.get_f64(0)));
  // x + 0: -0.0 + 0 is +0.0, the simplified graph keeps -0.0; equal values.
  EXPECT_FALSE(a[0].tensor.bitwise_equal(b[0].tensor));
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(a[0].tensor.get_f64(i), b[0].tensor.get_f64(i));
}

TEST(PassSimplifyAlgebra, NegNegToAFixedPoint) {
  TS_REQUIRE_OPS("Neg", "Relu");
  expect_simplified(R"(graph @main(%x: f32[5]) -> (%y: f32[5]) {
  %a = Neg(%x) : f32[5]
  %b = Neg(%a) : f32[5]
  %c = Neg(%b) : f32[5]
  %d = Neg(%c) : f32[5]
  %e = Neg(%d) : f32[5]
  %y = Relu(%e) : f32[5]
  return %y
}
)",
                    R"(graph @main(%x: f32[5]) -> (%y: f32[5]) {
  %e = Neg(%x) : f32[5]
  %y = Relu(%e) : f32[5]
  return %y
}
)");
}

TEST(PassSimplifyAlgebra, DistributesOnlyIntegersUnlessInexactIsAllowed) {
  TS_REQUIRE_OPS("Mul", "Add");
  const std::string floats = R"(graph @main(%a: f32[4], %b: f32[4], %c: f32[4]) -> (%y: f32[4]) {
  %ab = Mul(%a, %b) : f32[4]
  %ca = Mul(%c, %a) : f32[4]
  %y = Add(%ab, %ca) : f32[4]
  return %y
}
)";
  expect_unchanged(floats);
  // With the option: a*(b+c), equal up to rounding.
  auto m = parse_model(wrap(floats));
  auto ref = clone(*m);
  ASSERT_TRUE(simplify_algebra(*m, /*allow_inexact=*/true));
  EXPECT_NO_THROW(verify_model(*m, {.require_types = true}));
  EXPECT_EQ(count_ops(*m->graph, "Mul"), 1u);
  EXPECT_EQ(count_ops(*m->graph, "Add"), 1u);
  const Node& y = *m->graph->nodes().back();
  EXPECT_EQ(y.op, "Mul");
  EXPECT_EQ(y.inputs[0], m->graph->find_value("a"));
  testing::expect_same_results(*ref, *m, {}, 1e-6);

  // Integers: exact, so by default; a product with another use stays.
  auto ints = parse_model(wrap(R"(graph @main(%a: i32[4], %b: i32[4], %c: i32[4]) -> (%y: i32[4], %z: i32[4]) {
  %ab = Mul(%a, %b) : i32[4]
  %ac = Mul(%a, %c) : i32[4]
  %y = Add(%ab, %ac) : i32[4]
  %ba = Mul(%b, %a) : i32[4]
  %bc = Mul(%b, %c) : i32[4]
  %s = Add(%ba, %bc) : i32[4]
  %z = Add(%s, %ba) : i32[4]
  return %y, %z
}
)"));
  auto iref = clone(*ints);
  ASSERT_TRUE(simplify_algebra(*ints));
  EXPECT_EQ(count_ops(*ints->graph, "Mul"), 3u);  // a*(b+c), and b*a, b*c kept
  testing::expect_same_results(*iref, *ints, {}, 0);
}

// ---- data movement ----------------------------------------------------------

TEST(PassSimplifyAlgebra, IdentityConcatOfOneAndWholeSlice) {
  TS_REQUIRE_OPS("Identity", "Concat", "Slice", "Relu");
  expect_simplified(R"(graph @main(%x: f32[2,3]) -> (%y: f32[2,3]) {
  %st = const i64[2] dense<[0, 0]>
  %en = const i64[2] dense<[9223372036854775807, 3]>
  %ax = const i64[2] dense<[0, 1]>
  %a = Identity(%x) : f32[2,3]
  %b = Concat(%a) {axis = 1} : f32[2,3]
  %c = Slice(%b, %st, %en, %ax) : f32[2,3]
  %y = Relu(%c) : f32[2,3]
  return %y
}
)",
                    kReluOfX);
}

TEST(PassSimplifyAlgebra, KeepsSlicesThatCutOrReverse) {
  TS_REQUIRE_OPS("Slice", "Concat");
  expect_unchanged(R"(graph @main(%x: f32[4]) -> (%a: f32[3], %b: f32[4], %c: f32[8]) {
  %s0 = const i64[1] dense<[0]>
  %s1 = const i64[1] dense<[1]>
  %big = const i64[1] dense<[9223372036854775807]>
  %back = const i64[1] dense<[-9223372036854775807]>
  %minus = const i64[1] dense<[-1]>
  %a = Slice(%x, %s1, %big, %s0) : f32[3]
  %b = Slice(%x, %minus, %back, %s0, %minus) : f32[4]
  %c = Concat(%x, %b) {axis = 0} : f32[8]
  return %a, %b, %c
}
)");
}

TEST(PassSimplifyAlgebra, TransposesComposeOrCancel) {
  TS_REQUIRE_OPS("Transpose", "Relu");
  // [1,2,0] then [2,0,1] is the identity; the reversal twice too; [1,0,2]
  // then [0,2,1] is [1,2,0].
  expect_simplified(R"(graph @main(%x: f32[2,3,4]) -> (%y: f32[2,3,4], %z: f32[2,3,4], %w: f32[3,4,2], %v: f32[2,3,4]) {
  %t1 = Transpose(%x) {perm = [1, 2, 0]} : f32[3,4,2]
  %t2 = Transpose(%t1) {perm = [2, 0, 1]} : f32[2,3,4]
  %y = Relu(%t2) : f32[2,3,4]
  %r1 = Transpose(%x) : f32[4,3,2]
  %r2 = Transpose(%r1) : f32[2,3,4]
  %z = Relu(%r2) : f32[2,3,4]
  %u1 = Transpose(%x) {perm = [1, 0, 2]} : f32[3,2,4]
  %u2 = Transpose(%u1) {perm = [0, 2, 1]} : f32[3,4,2]
  %w = Relu(%u2) : f32[3,4,2]
  %i = Transpose(%x) {perm = [0, 1, 2]} : f32[2,3,4]
  %v = Relu(%i) : f32[2,3,4]
  return %y, %z, %w, %v
}
)",
                    R"(graph @main(%x: f32[2,3,4]) -> (%y: f32[2,3,4], %z: f32[2,3,4], %w: f32[3,4,2], %v: f32[2,3,4]) {
  %y = Relu(%x) : f32[2,3,4]
  %z = Relu(%x) : f32[2,3,4]
  %u2 = Transpose(%x) {perm = [1, 2, 0]} : f32[3,4,2]
  %w = Relu(%u2) : f32[3,4,2]
  %v = Relu(%x) : f32[2,3,4]
  return %y, %z, %w, %v
}
)");
}

TEST(PassSimplifyAlgebra, KeepsATransposeThatPermutes) {
  TS_REQUIRE_OPS("Transpose");
  expect_unchanged(R"(graph @main(%x: f32[2,3]) -> (%y: f32[3,2]) {
  %y = Transpose(%x) {perm = [1, 0]} : f32[3,2]
  return %y
}
)");
}

TEST(PassSimplifyAlgebra, ReshapeChainsCollapse) {
  TS_REQUIRE_OPS("Reshape", "Unsqueeze", "Flatten", "Relu");
  // The outer shape has no 0: it applies to x directly. A 0 ("copy the
  // input's dim") is replaced by the static inferred shape.
  expect_simplified(R"(graph @main(%x: f32[2,3,4]) -> (%y: f32[4,6], %z: f32[6,2,2], %w: f32[24]) {
  %s6 = const i64[2] dense<[6, 4]>
  %s46 = const i64[2] dense<[4, -1]>
  %s0 = const i64[3] dense<[0, 2, 2]>
  %s24 = const i64[1] dense<[24]>
  %ax = const i64[1] dense<[0]>
  %a = Reshape(%x, %s6) : f32[6,4]
  %y = Reshape(%a, %s46) : f32[4,6]
  %f = Flatten(%x) {axis = 2} : f32[6,4]
  %z = Reshape(%f, %s0) : f32[6,2,2]
  %u = Unsqueeze(%x, %ax) : f32[1,2,3,4]
  %w = Reshape(%u, %s24) : f32[24]
  return %y, %z, %w
}
)",
                    R"(graph @main(%x: f32[2,3,4]) -> (%y: f32[4,6], %z: f32[6,2,2], %w: f32[24]) {
  %s46 = const i64[2] dense<[4, -1]>
  %s24 = const i64[1] dense<[24]>
  %z_shape_0 = const i64[3] dense<[6, 2, 2]>
  %y = Reshape(%x, %s46) : f32[4,6]
  %z = Reshape(%x, %z_shape_0) : f32[6,2,2]
  %w = Reshape(%x, %s24) : f32[24]
  return %y, %z, %w
}
)");
}

TEST(PassSimplifyAlgebra, ReshapesToTheSameShapeAndCancellingSqueezesGo) {
  TS_REQUIRE_OPS("Reshape", "Unsqueeze", "Squeeze", "Expand", "Flatten", "Add");
  expect_simplified(R"(graph @main(%x: f32[n,3], %q: f32[1,5]) -> (%y: f32[n,3], %z: f32[1,5]) {
  %ax0 = const i64[1] dense<[0]>
  %ax2 = const i64[1] dense<[-1]>
  %s = const i64[2] dense<[0, 3]>
  %e = const i64[2] dense<[1, 3]>
  %u = Unsqueeze(%x, %ax2) : f32[n,3,1]
  %sq = Squeeze(%u, %ax2) : f32[n,3]
  %r = Reshape(%sq, %s) : f32[n,3]
  %ex = Expand(%r, %e) : f32[n,3]
  %fl = Flatten(%ex) {axis = 1} : f32[n,3]
  %y = Add(%fl, %fl) : f32[n,3]
  %qs = Squeeze(%q, %ax0) : f32[5]
  %qu = Unsqueeze(%qs, %ax0) : f32[1,5]
  %z = Add(%qu, %q) : f32[1,5]
  return %y, %z
}
)",
                    R"(graph @main(%x: f32[n,3], %q: f32[1,5]) -> (%y: f32[n,3], %z: f32[1,5]) {
  %y = Add(%x, %x) : f32[n,3]
  %z = Add(%q, %q) : f32[1,5]
  return %y, %z
}
)",
                    {{"n", 2}});
}

TEST(PassSimplifyAlgebra, KeepsExpandsAndReshapesThatChangeTheShape) {
  TS_REQUIRE_OPS("Reshape", "Expand", "Unsqueeze", "Squeeze");
  // Squeeze(Unsqueeze(x, 0), 1) moves the unit axis; Reshape of symbolic
  // shape n*3 to [3, n] is not [n, 3].
  expect_unchanged(R"(graph @main(%x: f32[1,3], %v: f32[n,3]) -> (%a: f32[2,3], %b: f32[3,1], %c: f32[3,n]) {
  %e = const i64[2] dense<[2, 3]>
  %ax0 = const i64[1] dense<[0]>
  %ax1 = const i64[1] dense<[1]>
  %s = const i64[2] dense<[3, -1]>
  %a = Expand(%x, %e) : f32[2,3]
  %sq = Squeeze(%x, %ax0) : f32[3]
  %b = Unsqueeze(%sq, %ax1) : f32[3,1]
  %c = Reshape(%v, %s) : f32[3,n]
  return %a, %b, %c
}
)");
}

// ---- casts ------------------------------------------------------------------

TEST(PassSimplifyAlgebra, ExactCastChainsGo) {
  TS_REQUIRE_OPS("Cast", "Relu", "Neg", "Add");
  // f32 -> f64 -> f32, i32 -> i64 -> i32 and u8 -> f16 -> u8 give x back; a
  // Cast to x's own dtype is x; f16 -> f32 -> i32 is f16 -> i32.
  expect_simplified(R"(graph @main(%x: f32[4], %i: i32[4], %u: u8[4], %h: f16[4]) -> (%y: f32[4], %j: i32[4], %v: u8[4], %k: i32[4]) {
  %d = Cast(%x) {to = 11} : f64[4]
  %f = Cast(%d) {to = 1} : f32[4]
  %g = Cast(%f) {to = 1} : f32[4]
  %y = Relu(%g) : f32[4]
  %l = Cast(%i) {to = 7} : i64[4]
  %m = Cast(%l) {to = 6} : i32[4]
  %j = Neg(%m) : i32[4]
  %uh = Cast(%u) {to = 10} : f16[4]
  %uu = Cast(%uh) {to = 2} : u8[4]
  %v = Add(%uu, %uu) : u8[4]
  %hf = Cast(%h) {to = 1} : f32[4]
  %k = Cast(%hf) {to = 6} : i32[4]
  return %y, %j, %v, %k
}
)",
                    R"(graph @main(%x: f32[4], %i: i32[4], %u: u8[4], %h: f16[4]) -> (%y: f32[4], %j: i32[4], %v: u8[4], %k: i32[4]) {
  %y = Relu(%x) : f32[4]
  %j = Neg(%i) : i32[4]
  %v = Add(%u, %u) : u8[4]
  %k = Cast(%h) {to = 6} : i32[4]
  return %y, %j, %v, %k
}
)");
}

TEST(PassSimplifyAlgebra, KeepsCastChainsThatRound) {
  TS_REQUIRE_OPS("Cast");
  // f16 and i32 lose f32 values; f64 loses i64 values beyond 2^53; bool
  // keeps only zero or not; bf16 loses f16's precision, f16 bf16's range;
  // u16 -> f16 loses values above 2048.
  expect_unchanged(R"(graph @main(%x: f32[4], %l: i64[4], %h: f16[4], %w: u16[4]) -> (%a: f32[4], %b: f32[4], %c: i64[4], %d: f32[4], %e: f16[4], %f: u16[4]) {
  %x16 = Cast(%x) {to = 10} : f16[4]
  %a = Cast(%x16) {to = 1} : f32[4]
  %xi = Cast(%x) {to = 6} : i32[4]
  %b = Cast(%xi) {to = 1} : f32[4]
  %ld = Cast(%l) {to = 11} : f64[4]
  %c = Cast(%ld) {to = 7} : i64[4]
  %xb = Cast(%x) {to = 9} : bool[4]
  %d = Cast(%xb) {to = 1} : f32[4]
  %hb = Cast(%h) {to = 16} : bf16[4]
  %e = Cast(%hb) {to = 10} : f16[4]
  %wh = Cast(%w) {to = 10} : f16[4]
  %f = Cast(%wh) {to = 4} : u16[4]
  return %a, %b, %c, %d, %e, %f
}
)");
}

// ---- graph outputs, several uses, subgraphs, the pipeline -------------------

TEST(PassSimplifyAlgebra, GraphOutputsKeepTheirNames) {
  TS_REQUIRE_OPS("Mul", "Relu", "Transpose", "Identity");
  // %y's producer is renamed (its Relu defines %y); %z equals the input, so
  // it becomes an Identity; %w equals the output %r, so it stays one.
  expect_simplified(R"(graph @main(%x: f32[2,3]) -> (%y: f32[2,3], %z: f32[2,3], %r: f32[2,3], %w: f32[2,3]) {
  %one = const f32[] dense<[1]>
  %a = Relu(%x) : f32[2,3]
  %y = Mul(%a, %one) : f32[2,3]
  %t1 = Transpose(%x) {perm = [1, 0]} : f32[3,2]
  %z = Transpose(%t1) {perm = [1, 0]} : f32[2,3]
  %r = Neg(%x) : f32[2,3]
  %w = Identity(%r) : f32[2,3]
  return %y, %z, %r, %w
}
)",
                    R"(graph @main(%x: f32[2,3]) -> (%y: f32[2,3], %z: f32[2,3], %r: f32[2,3], %w: f32[2,3]) {
  %y = Relu(%x) : f32[2,3]
  %z = Identity(%x) : f32[2,3]
  %r = Neg(%x) : f32[2,3]
  %w = Identity(%r) : f32[2,3]
  return %y, %z, %r, %w
}
)");
}

TEST(PassSimplifyAlgebra, ARenamedValueKeepsItsOtherUses) {
  TS_REQUIRE_OPS("Identity", "Relu", "Add");
  // %a feeds %y (an output, simplified away) and two Adds: all read %y now.
  expect_simplified(R"(graph @main(%x: f32[3]) -> (%y: f32[3], %s: f32[3]) {
  %a = Relu(%x) : f32[3]
  %y = Identity(%a) : f32[3]
  %b = Add(%a, %x) : f32[3]
  %s = Add(%b, %a) : f32[3]
  return %y, %s
}
)",
                    R"(graph @main(%x: f32[3]) -> (%y: f32[3], %s: f32[3]) {
  %y = Relu(%x) : f32[3]
  %b = Add(%y, %x) : f32[3]
  %s = Add(%b, %y) : f32[3]
  return %y, %s
}
)");
}

TEST(PassSimplifyAlgebra, SimplifiesInsideSubgraphsAndTheirOuterUses) {
  TS_REQUIRE_OPS("If", "Identity", "Mul");
  // The else branch returns the outer %i, which becomes %x; the then
  // branch's x * 1 becomes its outer x.
  auto m = parse_model(wrap(R"(graph @main(%c: bool[], %x: f32[2]) -> (%y: f32[2]) {
  %one = const f32[] dense<[1]>
  %i = Identity(%x) : f32[2]
  %y = If(%c) {else_branch = graph @e() -> (%i: f32[2]) {
      return %i
    }, then_branch = graph @t() -> (%m: f32[2]) {
      %p = Mul(%i, %one) : f32[2]
      %m = Neg(%p) : f32[2]
      return %m
    }} : f32[2]
  return %y
}
)"));
  auto ref = clone(*m);
  ASSERT_TRUE(simplify_algebra(*m));
  EXPECT_NO_THROW(verify_model(*m, {.require_types = true}));
  EXPECT_EQ(count_ops(*m->graph, "Identity"), 0u);
  const Node& cond = *m->graph->nodes().front();
  const Value* x = m->graph->find_value("x");
  EXPECT_EQ(cond.attr_graph("else_branch").outputs[0], x);
  const Graph& t = cond.attr_graph("then_branch");
  ASSERT_EQ(t.nodes().size(), 1u);
  EXPECT_EQ(t.nodes().front()->inputs[0], x);
  Interpreter interp;
  for (bool c : {false, true}) {
    Tensor ct(DType::Bool, {});
    ct.set_i64(0, c);
    const Tensor xt = Tensor::from_f32({2}, {0.25f, -3.0f});
    EXPECT_TRUE(interp.run(*ref->graph, {ct, xt})[0].tensor.bitwise_equal(interp.run(*m->graph, {ct, xt})[0].tensor));
  }
}

TEST(PassSimplifyAlgebra, RunsInThePipelineAndCanBeDisabled) {
  TS_REQUIRE_OPS("Transpose", "Relu");
  const std::string text = wrap(R"(graph @main(%x: f32[2,3]) -> (%y: f32[2,3]) {
  %t1 = Transpose(%x) {perm = [1, 0]} : ?
  %t2 = Transpose(%t1) {perm = [1, 0]} : ?
  %y = Relu(%t2) : ?
  return %y
}
)");
  const auto names = pipeline_pass_names();
  EXPECT_NE(std::find(names.begin(), names.end(), "simplify_algebra"), names.end());
  auto on = parse_model(text);
  run_pipeline(*on, {});
  EXPECT_EQ(count_ops(*on->graph, "Transpose"), 0u);
  auto off = parse_model(text);
  PassOptions o;
  o.disabled.insert("simplify_algebra");
  run_pipeline(*off, o);
  EXPECT_EQ(count_ops(*off->graph, "Transpose"), 2u);
}

}  // namespace
}  // namespace tessel
