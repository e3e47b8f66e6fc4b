// The Contract statement of the loop IR (loop/ir.h): its text form, the
// verifier's rules, the evaluator's meaning (checked against the same sum
// written as plain loops), and what simplify / substitute / math expansion
// do with it.
#include <gtest/gtest.h>

#include <random>

#include "loop_test_util.h"
#include "tessel/loop/eval.h"
#include "tessel/loop/math_expand.h"
#include "tessel/loop/parser.h"
#include "tessel/loop/printer.h"
#include "tessel/loop/simplify.h"
#include "tessel/loop/visit.h"
#include "tessel/support/error.h"

namespace tessel::loop {
namespace {

// A batch of products with a bias and a relu: out[b, i, j] = max(Σ_k x[b, i, k] w[b, k, j] + bias[j], 0).
const char* kBatched =
    "kernel bmm(in %x: f32[3, m, 5], in %w: f32[3, 5, 4], in %bias: f32[4], out %o: f32[3, m, 4]) syms(m) {\n"
    "  contract b in [0, 3), i in [0, m), j in [0, 4), k in [0, 5): acc = dot(x[b, i, k], w[b, k, j]) {\n"
    "    o[b, i, j] = max(acc + bias[j], 0.0f32)\n"
    "  }\n"
    "}\n";

// The same computation as loops, as the generic nest would write it.
const char* kBatchedLoops =
    "kernel bmm_loops(in %x: f32[3, m, 5], in %w: f32[3, 5, 4], in %bias: f32[4], out %o: f32[3, m, 4]) syms(m) {\n"
    "  for b in [0, 3) {\n"
    "    for i in [0, m) {\n"
    "      for j in [0, 4) {\n"
    "        allocate %s: f32[1] local\n"
    "        s[0] = 0.0f32\n"
    "        for k in [0, 5) {\n"
    "          s[0] = s[0] + x[b, i, k] * w[b, k, j]\n"
    "        }\n"
    "        o[b, i, j] = max(s[0] + bias[j], 0.0f32)\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

std::vector<float> random_floats(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

TEST(LoopContract, RoundTripsAndVerifies) {
  const Kernel k = parse_kernel(kBatched);
  EXPECT_EQ(print(k), kBatched);
  verify(k);
  verify(k, Target::Cuda);
  // A contract with lets and an assert in its epilogue, bf16 operands and a
  // symbolic batch, nested in a let.
  const std::string text =
      "kernel c(in %a: bf16[n, 7], in %b: bf16[7, 9], out %o: bf16[n, 9]) syms(n) {\n"
      "  let z = n * 2\n"
      "  contract bb in [0, 1), i in [0, n), j in [0, 9), k in [0, 7): acc = dot(cast<f32>(a[i, k]), "
      "cast<f32>(b[k, j])) {\n"
      "    let t = acc * 0.5f32\n"
      "    assert t < 1000.0f32, \"too large\"\n"
      "    o[i, j] = cast<bf16>(t + cast<f32>(z))\n"
      "  }\n"
      "}\n";
  const Kernel c = parse_kernel(text);
  EXPECT_EQ(print(c), text);
  verify(c);
  EXPECT_EQ(c.assert_messages(), std::vector<std::string>{"too large"});
}

TEST(LoopContract, ConstructorBuiltStatementPrintsAsParsed) {
  using testing::make_buffer;
  const BufferRef x = make_buffer("x", DType::F32, {4, 6});
  const BufferRef w = make_buffer("w", DType::F32, {6, 5});
  const BufferRef o = make_buffer("o", DType::F32, {4, 5});
  const Expr i = var("i"), j = var("j"), k = var("k");
  Kernel kern;
  kern.name = "mm";
  kern.params = {x, w, o};
  kern.num_inputs = 2;
  kern.body = contract({"b", "i", "j", "k", "acc"}, 1, 4, 5, 6, load(x, {i, k}), load(w, {k, j}),
                       store(o, {i, j}, var("acc", DType::F32)));
  verify(kern);
  const std::string text = print(kern);
  EXPECT_NE(text.find("contract b in [0, 1), i in [0, 4), j in [0, 5), k in [0, 6): acc = dot(x[i, k], w[k, j]) {"),
            std::string::npos)
      << text;
  EXPECT_EQ(print(parse_kernel(text)), text);
  const ContractView v = contract_parts(*kern.body);
  EXPECT_EQ(v.acc, "acc");
  EXPECT_TRUE(is_const(v.k_extent, 6));
}

void expect_rejected(const std::string& text, const std::string& what) {
  try {
    verify(parse_kernel(text));
    ADD_FAILURE() << "accepted:\n" << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

const char* kHead = "kernel c(in %x: f32[4, 4], in %w: f32[4, 4], out %o: f32[4, 4]) {\n";

TEST(LoopContract, VerifierRules) {
  // a may not depend on the column, b not on the row.
  expect_rejected(str_cat(kHead, "  contract b in [0, 1), i in [0, 4), j in [0, 4), k in [0, 4): acc = dot(x[i, j], "
                                 "w[k, j]) {\n    o[i, j] = acc\n  }\n}\n"),
                  "mentions the column variable j");
  expect_rejected(str_cat(kHead, "  contract b in [0, 1), i in [0, 4), j in [0, 4), k in [0, 4): acc = dot(x[i, k], "
                                 "w[k, i]) {\n    o[i, j] = acc\n  }\n}\n"),
                  "mentions the row variable i");
  // The operands are f32.
  expect_rejected(str_cat(kHead, "  contract b in [0, 1), i in [0, 4), j in [0, 4), k in [0, 4): acc = dot(x[i, k], "
                                 "cast<f64>(w[k, j])) {\n    o[i, j] = acc\n  }\n}\n"),
                  "operands must be f32");
  // The contract's variables are loop variables: unique, no shadowing.
  expect_rejected(str_cat(kHead, "  for i in [0, 1) {\n    o[0, 0] = 0.0f32\n  }\n"
                                 "  contract b in [0, 1), i in [0, 4), j in [0, 4), k in [0, 4): acc = dot(x[i, k], "
                                 "w[k, j]) {\n    o[i, j] = acc\n  }\n}\n"),
                  "used by two loops");
  // The operands never read what the epilogue writes.
  expect_rejected("kernel c(in %x: f32[4, 4], out %w: f32[4, 4], out %o: f32[4, 4]) {\n"
                  "  contract b in [0, 1), i in [0, 4), j in [0, 4), k in [0, 4): acc = dot(x[i, k], w[k, j]) {\n"
                  "    w[i, j] = acc\n  }\n}\n",
                  "which its epilogue stores to");
}

void expect_parse_error(const std::string& text, const std::string& what) {
  try {
    parse_kernel(text);
    ADD_FAILURE() << "parsed:\n" << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(LoopContract, ParserErrors) {
  expect_parse_error(str_cat(kHead, "  contract b in [1, 2), i in [0, 4), j in [0, 4), k in [0, 4): acc = dot(x[i, k], "
                                    "w[k, j]) {\n    o[i, j] = acc\n  }\n}\n"),
                     "contract ranges start at 0");
  // k is not visible in the epilogue.
  expect_parse_error(str_cat(kHead, "  contract b in [0, 1), i in [0, 4), j in [0, 4), k in [0, 4): acc = dot(x[i, k], "
                                    "w[k, j]) {\n    o[i, k] = acc\n  }\n}\n"),
                     "unknown variable 'k'");
  // A buffer named contract is still stored to.
  const Kernel k = parse_kernel("kernel c(out %contract: f32[1]) {\n  contract[0] = 1.0f32\n}\n");
  EXPECT_EQ(k.body->kind, StmtKind::Store);
}

// The evaluator's contract equals the same sum as loops, bit for bit (both
// sum over k in ascending order in f32).
TEST(LoopContract, EvaluatesLikeTheLoopNest) {
  const Kernel c = parse_kernel(kBatched), loops = parse_kernel(kBatchedLoops);
  verify(loops);
  for (int64_t m : {0, 1, 7}) {
    std::vector<float> x = random_floats(static_cast<size_t>(3 * m * 5), 1), w = random_floats(3 * 5 * 4, 2),
                       bias = random_floats(4, 3);
    std::vector<float> got(static_cast<size_t>(3 * m * 4), -1.0f), want(got.size(), -2.0f);
    ASSERT_EQ(run_kernel(c, {x.data(), w.data(), bias.data(), got.data()}, {m}), 0);
    ASSERT_EQ(run_kernel(loops, {x.data(), w.data(), bias.data(), want.data()}, {m}), 0);
    EXPECT_EQ(got, want) << "m = " << m;
  }
}

TEST(LoopContract, EmptyKRunsTheEpilogueOnZero) {
  const Kernel c = parse_kernel(
      "kernel e(in %x: f32[2, 0], in %w: f32[0, 3], out %o: f32[2, 3]) {\n"
      "  contract b in [0, 1), i in [0, 2), j in [0, 3), k in [0, 0): acc = dot(x[i, k], w[k, j]) {\n"
      "    o[i, j] = acc + 1.0f32\n  }\n}\n");
  std::vector<float> o(6, 7.0f);
  ASSERT_EQ(run_kernel(c, {nullptr, nullptr, o.data()}, {}), 0);
  EXPECT_EQ(o, std::vector<float>(6, 1.0f));
}

TEST(LoopContract, EpilogueAssertsReturnTheirNumber) {
  const Kernel c = parse_kernel(
      "kernel a(in %x: f32[2, 2], in %w: f32[2, 2], out %o: f32[2, 2]) {\n"
      "  assert true, \"first\"\n"
      "  contract b in [0, 1), i in [0, 2), j in [0, 2), k in [0, 2): acc = dot(x[i, k], w[k, j]) {\n"
      "    assert acc < 10.0f32, \"big\"\n    o[i, j] = acc\n  }\n}\n");
  std::vector<float> x = {1, 2, 3, 4}, w = {1, 1, 1, 1}, o(4);
  EXPECT_EQ(run_kernel(c, {x.data(), w.data(), o.data()}, {}), 0);
  x[3] = 40.0f;
  EXPECT_EQ(run_kernel(c, {x.data(), w.data(), o.data()}, {}), 2);
}

TEST(LoopContract, SimplifySubstituteAndNames) {
  // Constant extents bound the variables: i floormod 4 => i inside.
  const Kernel k = parse_kernel(
      "kernel s(in %x: f32[4, 4], in %w: f32[4, 4], out %o: f32[4, 4]) {\n"
      "  contract b in [0, 1), i in [0, 4), j in [0, 4), k in [0, 2 + 2): acc = dot(x[floormod(i, 4), k], w[k, j]) {\n"
      "    o[i, floormod(j, 4)] = acc * 1.0f32\n  }\n}\n");
  const std::string s = print(simplify(k));
  EXPECT_NE(s.find("k in [0, 4): acc = dot(x[i, k], w[k, j])"), std::string::npos) << s;
  EXPECT_NE(s.find("o[i, j] = acc\n"), std::string::npos) << s;
  // No output elements: nothing.
  const Kernel empty = parse_kernel(
      "kernel z(in %x: f32[0, 4], in %w: f32[4, 4], out %o: f32[0, 4]) {\n"
      "  contract b in [0, 1), i in [0, 0), j in [0, 4), k in [0, 4): acc = dot(x[i, k], w[k, j]) {\n"
      "    o[i, j] = acc\n  }\n}\n");
  EXPECT_TRUE(is_no_op(simplify(empty).body));
  // substitute: the statement's bindings hide mapped names inside it, not in the extents.
  const Stmt st = parse_kernel(
                      "kernel t(in %x: f32[8, 8], in %w: f32[8, 8], out %o: f32[8, 8]) syms(n) {\n"
                      "  contract b in [0, 1), i in [0, n), j in [0, 8), k in [0, 8): acc = dot(x[i, k], w[k, j]) {\n"
                      "    o[i, j] = acc\n  }\n}\n")
                      .body;
  const Stmt sub = substitute(st, {{"n", Expr(5)}, {"i", Expr(0)}});
  const ContractView v = contract_parts(*sub);
  EXPECT_TRUE(is_const(v.m, 5));
  EXPECT_TRUE(mentions_var(v.a, "i"));
  const std::set<std::string> names = names_in(st);
  for (const char* n : {"b", "i", "j", "k", "acc", "n"}) EXPECT_TRUE(names.count(n)) << n;
}

// Math expansion cannot put lets before the statement for what its operands
// compute (they use the statement's variables): it writes them out.
TEST(LoopContract, MathExpansionInlinesOperandLets) {
  const Kernel k = parse_kernel(
      "kernel m(in %x: f32[3, 4], in %w: f32[4, 2], out %o: f32[3, 2]) {\n"
      "  contract b in [0, 1), i in [0, 3), j in [0, 2), k in [0, 4): acc = dot(exp(x[i, k]), w[k, j]) {\n"
      "    o[i, j] = exp(acc)\n  }\n}\n");
  const Kernel e = expand_math(k);
  verify(e);
  const std::string s = print(e);
  EXPECT_EQ(s.find("exp("), std::string::npos) << s;
  // The expanded operand is the same function as the evaluator's reference exp.
  std::vector<float> x = random_floats(12, 4), w = random_floats(8, 5), got(6), want(6);
  ASSERT_EQ(run_kernel(e, {x.data(), w.data(), got.data()}, {}), 0);
  ASSERT_EQ(run_kernel(k, {x.data(), w.data(), want.data()}, {}), 0);
  for (size_t i = 0; i < 6; ++i) EXPECT_NEAR(got[i], want[i], 1e-5 * std::max(1.0f, std::fabs(want[i]))) << i;
}

}  // namespace
}  // namespace tessel::loop
