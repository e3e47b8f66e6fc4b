// The Attention statement of the loop IR (loop/ir.h): its text form, the
// verifier's rules, the evaluator's meaning (checked bit for bit against the
// same softmax written as plain loops), and what simplify / substitute /
// math expansion do with it. The CPU code generator refuses it; the CUDA
// one's kernel is tested with the tensor-core kernels.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

#include "tessel/codegen/cuda/cuda_source.h"
#include "tessel/loop/eval.h"
#include "tessel/loop/math_expand.h"
#include "tessel/loop/parser.h"
#include "tessel/loop/printer.h"
#include "tessel/loop/simplify.h"
#include "tessel/loop/verifier.h"
#include "tessel/loop/visit.h"
#include "tessel/support/error.h"

namespace tessel::loop {
namespace {

// Two heads of a batch of 2 joined into one batch variable (bh), queries of
// head dim 3 against 5 keys, values of width 4, bf16 operands, a causal
// bias that lets query i see keys j <= i + 1, the probabilities rounded to
// bf16, and an epilogue casting to bf16.
const char* kCausal =
    "kernel att(in %q: bf16[2, 2, m, 3], in %k: bf16[2, 2, 5, 3], in %v: bf16[2, 2, 5, 4], "
    "out %o: bf16[2, 2, m, 4]) syms(m) {\n"
    "  attention bh in [0, 4), i in [0, m), j in [0, 5), d in [0, 3), e in [0, 4): acc = softmax_dot("
    "cast<f32>(q[floordiv(bh, 2), floormod(bh, 2), i, d]), cast<f32>(k[floordiv(bh, 2), floormod(bh, 2), j, d]), "
    "cast<f32>(v[floordiv(bh, 2), floormod(bh, 2), j, e]), 0.5f32, select(j > i + 1, -inff32, 0.0f32), bf16) {\n"
    "    o[floordiv(bh, 2), floormod(bh, 2), i, e] = cast<bf16>(acc)\n"
    "  }\n"
    "}\n";

// The same computation as plain loops: scores into a local buffer, their
// max, exp and sum in ascending j, p rounded to bf16, then p v per e.
const char* kCausalLoops =
    "kernel att_loops(in %q: bf16[2, 2, m, 3], in %k: bf16[2, 2, 5, 3], in %v: bf16[2, 2, 5, 4], "
    "out %o: bf16[2, 2, m, 4]) syms(m) {\n"
    "  for bh in [0, 4) {\n"
    "    for i in [0, m) {\n"
    "      allocate %s: f32[5] local\n"
    "      allocate %r: f32[3] local\n"
    "      r[0] = -inff32\n"
    "      for j in [0, 5) {\n"
    "        r[1] = 0.0f32\n"
    "        for d in [0, 3) {\n"
    "          r[1] = r[1] + cast<f32>(q[floordiv(bh, 2), floormod(bh, 2), i, d]) * "
    "cast<f32>(k[floordiv(bh, 2), floormod(bh, 2), j, d])\n"
    "        }\n"
    "        s[j] = 0.5f32 * r[1] + select(j > i + 1, -inff32, 0.0f32)\n"
    "        r[0] = max(r[0], s[j])\n"
    "      }\n"
    "      r[2] = 0.0f32\n"
    "      for j2 in [0, 5) {\n"
    "        s[j2] = exp(s[j2] - r[0])\n"
    "        r[2] = r[2] + s[j2]\n"
    "      }\n"
    "      for j3 in [0, 5) {\n"
    "        s[j3] = cast<f32>(cast<bf16>(s[j3] / r[2]))\n"
    "      }\n"
    "      for e in [0, 4) {\n"
    "        r[1] = 0.0f32\n"
    "        for j4 in [0, 5) {\n"
    "          r[1] = r[1] + s[j4] * cast<f32>(v[floordiv(bh, 2), floormod(bh, 2), j4, e])\n"
    "        }\n"
    "        o[floordiv(bh, 2), floormod(bh, 2), i, e] = cast<bf16>(r[1])\n"
    "      }\n"
    "    }\n"
    "  }\n"
    "}\n";

std::vector<uint16_t> random_bf16(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> d(-2.0f, 2.0f);
  std::vector<uint16_t> v(n);
  for (uint16_t& x : v) x = f32_to_bf16_bits(d(rng));
  return v;
}

const char* kHead = "kernel a(in %q: f32[4, 3], in %k: f32[5, 3], in %v: f32[5, 2], out %o: f32[4, 2]) {\n";

std::string statement(const std::string& q, const std::string& k, const std::string& v, const std::string& scale,
                      const std::string& bias, const std::string& epilogue) {
  return str_cat(kHead, "  attention b in [0, 1), i in [0, 4), j in [0, 5), d in [0, 3), e in [0, 2): acc = ",
                 "softmax_dot(", q, ", ", k, ", ", v, ", ", scale, ", ", bias, ", f32) {\n    ", epilogue, "\n  }\n}\n");
}

void expect_rejected(const std::string& text, const std::string& what) {
  try {
    verify(parse_kernel(text));
    ADD_FAILURE() << "accepted:\n" << text;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
  }
}

TEST(LoopAttention, RoundTripsAndVerifies) {
  const Kernel k = parse_kernel(kCausal);
  EXPECT_EQ(print(k), kCausal);
  verify(k);
  verify(k, Target::Cuda);
  const AttentionView a = attention_parts(*k.body);
  EXPECT_EQ(a.p_type, DType::BF16);
  EXPECT_EQ(a.acc, "acc");
  EXPECT_TRUE(is_const(a.n, 5));
  // Built by the constructor, it prints as parsed.
  const Stmt built = attention({a.batch, a.i, a.j, a.d, a.e, a.acc}, a.batch_extent, a.m, a.n, a.d_extent,
                               a.e_extent, a.q, a.k, a.v, a.scale, a.bias, a.p_type, a.epilogue);
  Kernel copy = k;
  copy.body = built;
  EXPECT_EQ(print(copy), kCausal);
}

// The evaluator's attention is the softmax written as loops, bit for bit,
// including rows whose first keys are masked and an empty M.
TEST(LoopAttention, EvaluatesLikeTheLoopNest) {
  const Kernel att = parse_kernel(kCausal), loops = parse_kernel(kCausalLoops);
  verify(loops);
  for (int64_t m : {0, 1, 6}) {
    std::vector<uint16_t> q = random_bf16(static_cast<size_t>(4 * m * 3), 1), k = random_bf16(4 * 5 * 3, 2),
                          v = random_bf16(4 * 5 * 4, 3);
    std::vector<uint16_t> got(static_cast<size_t>(4 * m * 4), 1), want(got.size(), 2);
    ASSERT_EQ(run_kernel(att, {q.data(), k.data(), v.data(), got.data()}, {m}), 0);
    ASSERT_EQ(run_kernel(loops, {q.data(), k.data(), v.data(), want.data()}, {m}), 0);
    EXPECT_EQ(got, want) << "m = " << m;
  }
}

// A row whose every score is -inf has no softmax: 0, as the ONNX Attention
// operator defines it; with no keys likewise.
TEST(LoopAttention, FullyMaskedRowsAndNoKeys) {
  const Kernel masked = parse_kernel(statement("q[i, d]", "k[j, d]", "v[j, e]", "1.0f32",
                                               "select(i == 2, -inff32, 0.0f32)", "o[i, e] = acc"));
  std::vector<float> q(12, 0.5f), k(15, 0.25f), v(10, 1.0f), o(8, -1.0f);
  ASSERT_EQ(run_kernel(masked, {q.data(), k.data(), v.data(), o.data()}, {}), 0);
  for (int i = 0; i < 4; ++i)
    for (int e = 0; e < 2; ++e) {
      // Equal scores elsewhere: the mean of the v's.
      EXPECT_FLOAT_EQ(o[static_cast<size_t>(i * 2 + e)], i == 2 ? 0.0f : 1.0f) << i;
    }
  const Kernel empty = parse_kernel(
      "kernel a(in %q: f32[4, 3], in %k: f32[0, 3], in %v: f32[0, 2], out %o: f32[4, 2]) {\n"
      "  attention b in [0, 1), i in [0, 4), j in [0, 0), d in [0, 3), e in [0, 2): acc = softmax_dot(q[i, d], "
      "k[j, d], v[j, e], 1.0f32, 0.0f32, f32) {\n    o[i, e] = acc + 3.0f32\n  }\n}\n");
  ASSERT_EQ(run_kernel(empty, {q.data(), nullptr, nullptr, o.data()}, {}), 0);
  EXPECT_EQ(o, std::vector<float>(8, 3.0f));
}

TEST(LoopAttention, VerifierRules) {
  const std::string ok = "o[i, e] = acc";
  verify(parse_kernel(statement("q[i, d]", "k[j, d]", "v[j, e]", "0.5f32", "0.0f32", ok)));
  // Each operand sees its own variables only.
  expect_rejected(statement("q[j, d]", "k[j, d]", "v[j, e]", "0.5f32", "0.0f32", ok), "mentions j");
  expect_rejected(statement("q[i, d]", "k[i, d]", "v[j, e]", "0.5f32", "0.0f32", ok), "mentions i");
  expect_rejected(statement("q[i, d]", "k[j, d]", "v[j, d]", "0.5f32", "0.0f32", ok), "mentions d");
  expect_rejected(statement("q[i, d]", "k[j, d]", "v[j, e]", "0.5f32", "q[i, e]", ok), "mentions e");
  // f32 operands; the probabilities' type is a float type.
  expect_rejected(statement("q[i, d]", "cast<f64>(k[j, d])", "v[j, e]", "0.5f32", "0.0f32", ok),
                  "operands must be f32");
  expect_rejected(str_cat(kHead, "  attention b in [0, 1), i in [0, 4), j in [0, 5), d in [0, 3), e in [0, 2): acc = "
                                 "softmax_dot(q[i, d], k[j, d], v[j, e], 1.0f32, 0.0f32, i32) {\n    o[i, e] = acc\n"
                                 "  }\n}\n"),
                  "(f32, f16 or bf16)");
  // The operands never read what the epilogue writes.
  expect_rejected("kernel a(in %q: f32[4, 3], in %k: f32[5, 3], out %v: f32[5, 2], out %o: f32[4, 2]) {\n"
                  "  attention b in [0, 1), i in [0, 4), j in [0, 5), d in [0, 3), e in [0, 2): acc = softmax_dot("
                  "q[i, d], k[j, d], v[j, e], 1.0f32, 0.0f32, f32) {\n    v[i, e] = acc\n  }\n}\n",
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

TEST(LoopAttention, ParserErrors) {
  // The scale may use none of the statement's variables; j and d are not
  // visible in the epilogue.
  expect_parse_error(statement("q[i, d]", "k[j, d]", "v[j, e]", "0.5f32", "0.0f32", "o[i, j] = acc"),
                     "unknown variable 'j'");
  expect_parse_error(str_cat(kHead, "  attention b in [0, 1), i in [1, 4), j in [0, 5), d in [0, 3), e in [0, 2): "
                                    "acc = softmax_dot(q[i, d], k[j, d], v[j, e], 1.0f32, 0.0f32, f32) {\n"
                                    "    o[i, e] = acc\n  }\n}\n"),
                     "attention ranges start at 0");
  // A buffer named attention is still stored to.
  const Kernel k = parse_kernel("kernel c(out %attention: f32[1]) {\n  attention[0] = 1.0f32\n}\n");
  EXPECT_EQ(k.body->kind, StmtKind::Store);
}

TEST(LoopAttention, SimplifySubstituteNamesAndMath) {
  // Constant extents bound the variables: floormod(i, 4) => i inside.
  const Kernel k = parse_kernel(statement("q[floormod(i, 4), d]", "k[j, d]", "v[j, e]", "0.5f32 * 2.0f32",
                                          "0.0f32", "o[i, floormod(e, 2)] = acc"));
  const std::string s = print(simplify(k));
  EXPECT_NE(s.find("softmax_dot(q[i, d], k[j, d], v[j, e], 1.0f32, 0.0f32, f32)"), std::string::npos) << s;
  EXPECT_NE(s.find("o[i, e] = acc\n"), std::string::npos) << s;
  // No output rows: nothing.
  const Kernel empty = parse_kernel(
      "kernel z(in %q: f32[0, 3], in %k: f32[5, 3], in %v: f32[5, 2], out %o: f32[0, 2]) {\n"
      "  attention b in [0, 1), i in [0, 0), j in [0, 5), d in [0, 3), e in [0, 2): acc = softmax_dot(q[i, d], "
      "k[j, d], v[j, e], 1.0f32, 0.0f32, f32) {\n    o[i, e] = acc\n  }\n}\n");
  EXPECT_TRUE(is_no_op(simplify(empty).body));
  // substitute: the statement's bindings hide mapped names inside it, not in the extents.
  const Stmt st = parse_kernel(
                      "kernel t(in %q: f32[8, 3], in %k: f32[5, 3], in %v: f32[5, 2], out %o: f32[8, 2]) syms(n) {\n"
                      "  attention b in [0, 1), i in [0, n), j in [0, 5), d in [0, 3), e in [0, 2): acc = "
                      "softmax_dot(q[i, d], k[j, d], v[j, e], 1.0f32, 0.0f32, f32) {\n    o[i, e] = acc\n  }\n}\n")
                      .body;
  const Stmt sub = substitute(st, {{"n", Expr(5)}, {"i", Expr(0)}});
  const AttentionView v = attention_parts(*sub);
  EXPECT_TRUE(is_const(v.m, 5));
  EXPECT_TRUE(mentions_var(v.q, "i"));
  const std::set<std::string> names = names_in(st);
  for (const char* n : {"b", "i", "j", "d", "e", "acc", "n"}) EXPECT_TRUE(names.count(n)) << n;
  // Math expansion writes an operand's exp out in place (no let can go before the statement).
  const Kernel m = parse_kernel(statement("exp(q[i, d])", "k[j, d]", "v[j, e]", "1.0f32", "0.0f32", "o[i, e] = acc"));
  const Kernel e = expand_math(m);
  verify(e);
  EXPECT_EQ(print(e).find("exp("), std::string::npos) << print(e);
  std::vector<float> q(12), kk(15), vv(10), got(8), want(8);
  for (size_t i = 0; i < q.size(); ++i) q[i] = 0.1f * static_cast<float>(i) - 0.5f;
  for (size_t i = 0; i < kk.size(); ++i) kk[i] = 0.05f * static_cast<float>(i);
  for (size_t i = 0; i < vv.size(); ++i) vv[i] = static_cast<float>(i);
  ASSERT_EQ(run_kernel(e, {q.data(), kk.data(), vv.data(), got.data()}, {}), 0);
  ASSERT_EQ(run_kernel(m, {q.data(), kk.data(), vv.data(), want.data()}, {}), 0);
  for (size_t i = 0; i < 8; ++i) EXPECT_NEAR(got[i], want[i], 1e-5 * std::max(1.0f, std::fabs(want[i]))) << i;
}

// The CUDA emitter takes bf16/f16 operands (codegen/cuda/flash_attention.cpp,
// tested with the tensor-core kernels); f32 ones it refuses with one error.
TEST(LoopAttention, CudaCodegenTakesHalfOperandsOnly) {
  const Kernel half = parse_kernel(
      "kernel h(in %q: bf16[4, 16], in %k: bf16[5, 16], in %v: bf16[5, 16], out %o: f32[4, 16]) {\n"
      "  attention b in [0, 1), i in [0, 4), j in [0, 5), d in [0, 16), e in [0, 16): acc = softmax_dot("
      "cast<f32>(q[i, d]), cast<f32>(k[j, d]), cast<f32>(v[j, e]), 1.0f32, 0.0f32, bf16) {\n    o[i, e] = acc\n"
      "  }\n}\n");
  EXPECT_NE(cuda::emit_cuda_source({half}).code.find("flash attention"), std::string::npos);
  try {
    cuda::emit_cuda_source({parse_kernel(
        "kernel f(in %q: f32[4, 16], in %k: f32[5, 16], in %v: f32[5, 16], out %o: f32[4, 16]) {\n"
        "  attention b in [0, 1), i in [0, 4), j in [0, 5), d in [0, 16), e in [0, 16): acc = softmax_dot("
        "q[i, d], k[j, d], v[j, e], 1.0f32, 0.0f32, f32) {\n    o[i, e] = acc\n  }\n}\n")});
    ADD_FAILURE() << "emitted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bf16 or f16 values"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace tessel::loop
