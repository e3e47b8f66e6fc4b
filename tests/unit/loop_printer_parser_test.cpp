#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "loop_test_util.h"
#include "tessel/loop/parser.h"
#include "tessel/loop/printer.h"
#include "tessel/support/error.h"

namespace tessel::loop {
namespace {

using testing::make_buffer;

Kernel add_relu() {
  Expr n = var("n");
  BufferRef x = make_buffer("x", DType::F32, {n, 128});
  BufferRef y = make_buffer("y", DType::F32, {128});
  BufferRef z = make_buffer("z", DType::F32, {n, 128});
  Expr i0 = var("i0"), i1 = var("i1");
  Stmt st = store(z, {i0, i1}, max(load(x, {i0, i1}) + load(y, {i1}), float_imm(DType::F32, 0)));
  Kernel k;
  k.name = "add_relu";
  k.params = {x, y, z};
  k.num_inputs = 2;
  k.syms = {"n"};
  k.body = for_loop("i0", 0, n, ForKind::Parallel, for_loop("i1", 0, 128, ForKind::Vectorized, st));
  return k;
}

void expect_round_trip(const std::string& text) {
  Kernel k = parse_kernel(text);
  EXPECT_EQ(print(k), text);
  EXPECT_EQ(print(parse_kernel(print(k))), print(k));
}

TEST(LoopPrinter, AddReluReadsAsDocumented) {
  EXPECT_EQ(print(add_relu()),
            "kernel add_relu(in %x: f32[n, 128], in %y: f32[128], out %z: f32[n, 128]) syms(n) {\n"
            "  parallel for i0 in [0, n) {\n"
            "    vectorized for i1 in [0, 128) {\n"
            "      z[i0, i1] = max(x[i0, i1] + y[i1], 0.0f32)\n"
            "    }\n"
            "  }\n"
            "}\n");
}

TEST(LoopPrinter, ImmediatesCarryTheirType) {
  EXPECT_EQ(print(Expr(7)), "7");
  EXPECT_EQ(print(Expr(-7)), "-7");
  EXPECT_EQ(print(int_imm(DType::I32, 3)), "3i32");
  EXPECT_EQ(print(int_imm(DType::U8, 255)), "255u8");
  EXPECT_EQ(print(int_imm(DType::U64, -1)), "18446744073709551615u64");
  EXPECT_EQ(print(bool_imm(true)), "true");
  EXPECT_EQ(print(float_imm(DType::F32, 1.5)), "1.5f32");
  EXPECT_EQ(print(float_imm(DType::F32, 0.1f)), "0.1f32");
  EXPECT_EQ(print(float_imm(DType::F64, 0.1)), "0.1f64");
  EXPECT_EQ(print(float_imm(DType::F32, -0.0)), "-0.0f32");
  EXPECT_EQ(print(float_imm(DType::F32, -std::numeric_limits<double>::infinity())), "-inff32");
  EXPECT_EQ(print(float_imm(DType::F64, std::nan(""))), "nanf64");
  // 0.1 as a double is not a float: an f16 immediate holding it prints exactly.
  EXPECT_EQ(print(float_imm(DType::F16, 0.1)), "0x1.999999999999ap-4f16");
}

TEST(LoopPrinter, OperatorsAndParentheses) {
  Expr a = var("a"), b = var("b"), c = var("c");
  EXPECT_EQ(print((a + b) * c), "(a + b) * c");
  EXPECT_EQ(print(a + b * c), "a + b * c");
  EXPECT_EQ(print(a - (b - c)), "a - (b - c)");
  EXPECT_EQ(print((a - b) - c), "a - b - c");
  EXPECT_EQ(print(-(a + b)), "-(a + b)");
  EXPECT_EQ(print(-Expr(1)), "-(1)");
  EXPECT_EQ(print(a - Expr(-1)), "a - -1");
  EXPECT_EQ(print(floordiv(a, 4) + floormod(b, 4)), "floordiv(a, 4) + floormod(b, 4)");
  EXPECT_EQ(print(binary(BinaryOp::Eq, binary(BinaryOp::Lt, a, b), binary(BinaryOp::Lt, b, c))), "a < b == b < c");
  EXPECT_EQ(print(unary(UnaryOp::Not, binary(BinaryOp::Lt, a, b))), "!(a < b)");
  EXPECT_EQ(print(unary(UnaryOp::Not, var("m", DType::I32))), "~m");
  Expr f = var("f", DType::F32);
  EXPECT_EQ(print(call("exp", DType::F32, {f})), "exp(f)");
  EXPECT_EQ(print(call("isnan", DType::Bool, {f})), "isnan:bool(f)");
  EXPECT_EQ(print(cast(DType::I32, f)), "cast<i32>(f)");
  EXPECT_EQ(print(bitcast(DType::I32, f)), "bitcast<i32>(f)");
  EXPECT_EQ(print(select(binary(BinaryOp::Gt, f, float_imm(DType::F32, 0)), f, -f)),
            "select(f > 0.0f32, f, -f)");
}

TEST(LoopParser, RoundTripsEveryStatementKind) {
  expect_round_trip(
      "kernel all(in %a: f32[n], in %idx: i32[4], out %o: f32[n], out %flag: bool[]) syms(n, m) {\n"
      "  assert n >= 1 & m != 0, \"n must be \\\"positive\\\"\\n\\x01\"\n"
      "  let half = floordiv(n, 2) {\n"
      "    parallel for i in [0, half) {\n"
      "      allocate %acc: f32[4, 16] local\n"
      "      unrolled for j in [1, 1 + 4) {\n"
      "        acc[j - 1, 0] = a[i] * 2.0f32\n"
      "      }\n"
      "      let t = acc[0, 0]\n"
      "      if t > 0.0f32 {\n"
      "        o[i] = t\n"
      "      } else {\n"
      "        o[i] = -t\n"
      "      }\n"
      "    }\n"
      "  }\n"
      "  for k in [m, m + n) {\n"
      "  }\n"
      "  flag[] = cast<i64>(idx[0]) << 3 == floormod(m, 7) | false\n"
      "}\n");
}

TEST(LoopParser, RoundTripsGpuKindsAndSharedBuffers) {
  expect_round_trip(
      "kernel g(out %o: f16[256]) {\n"
      "  gpu.block.x for b in [0, 2) {\n"
      "    gpu.thread.x for t in [0, 128) {\n"
      "      allocate %s: f16[128] shared\n"
      "      s[t] = 0x1.999999999999ap-4f16\n"
      "      o[b * 128 + t] = s[127 - t]\n"
      "    }\n"
      "  }\n"
      "  gpu.block.y for a in [0, 1) {\n  }\n"
      "  gpu.block.z for c in [0, 1) {\n  }\n"
      "  gpu.thread.y for d in [0, 1) {\n  }\n"
      "  gpu.thread.z for e in [0, 1) {\n  }\n"
      "}\n");
}

TEST(LoopParser, RoundTripsEveryOperatorAndType) {
  std::string body;
  const char* types[] = {"i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64"};
  std::string params;
  for (const char* t : types) params += std::string("in %") + t + "_in: " + t + "[], ";
  params += "in %fin: f32[], in %din: f64[], in %hin: f16[], in %bin: bf16[], out %r: bool[]";
  const std::string text =
      "kernel ops(" + params + ") {\n"
      "  r[] = i8_in[] + -128i8 == i8_in[] * 3i8 - i8_in[] / 2i8\n"
      "  r[] = i16_in[] % 5i16 < floordiv(i16_in[], 7i16) & floormod(i16_in[], 3i16) <= min(i16_in[], max(1i16, 2i16))\n"
      "  r[] = (i32_in[] & 1i32 | 2i32 ^ i32_in[]) > i32_in[] >> 1i32\n"
      "  r[] = i64_in[] >= -9223372036854775808\n"
      "  r[] = u8_in[] == 255u8 | u16_in[] != 65535u16 | u32_in[] == ~u32_in[] | u64_in[] == 18446744073709551615u64\n"
      "  r[] = fin[] / 3.0f32 % 2.5f32 == -inff32 | din[] == nanf64 | din[] == -0.1f64 | din[] == 1e+300f64\n"
      "  r[] = hin[] == cast<f16>(fin[]) | bin[] == bitcast<bf16>(cast<i16>(i64_in[])) | isinf:bool(fin[])\n"
      "  r[] = select(!r[], exp(fin[]), fma(fin[], fin[], -(1.0f32))) == pow(fin[], 1e-30f32)\n"
      "  r[] = rint(din[]) == copysign(din[], 5e-324f64) | -0.0f32 == 3.4028235e+38f32 | hin[] != -nanf16 | bin[] == 1.0bf16\n"
      "}\n";
  expect_round_trip(text);
}

TEST(LoopParser, ConstructorBuiltKernelRoundTrips) {
  Kernel k = add_relu();
  std::string once = print(k);
  Kernel back = parse_kernel(once);
  EXPECT_EQ(print(back), once);
  // Loads and stores share the declaration's BufferRef.
  const Stmt& st = back.body->body[0]->body[0];
  ASSERT_EQ(st->kind, StmtKind::Store);
  EXPECT_EQ(st->buffer, back.params[2]);
  EXPECT_EQ(back.num_inputs, 2u);
  EXPECT_EQ(back.syms, std::vector<std::string>{"n"});
}

TEST(LoopParser, LoopWithNonZeroMinKeepsItsExtent) {
  Kernel k = parse_kernel("kernel l(out %o: i64[10]) {\n  for i in [2, 2 + 5) {\n    o[i] = i\n  }\n  for j in [3, 7) {\n    o[j] = j\n  }\n}\n");
  const Stmt& a = k.body->body[0];
  EXPECT_EQ(print(a->extent), "5");
  const Stmt& b = k.body->body[1];
  EXPECT_EQ(print(b->extent), "7 - 3");
  EXPECT_EQ(print(parse_kernel(print(k))), print(k));
}

void expect_parse_error(const std::string& text, const std::string& where, const std::string& what) {
  try {
    parse_kernel(text);
    ADD_FAILURE() << "no error for:\n" << text;
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find(where), std::string::npos) << msg;
    EXPECT_NE(msg.find(what), std::string::npos) << msg;
  }
}

TEST(LoopParser, ErrorsHaveLineAndColumn) {
  expect_parse_error("kernel k(out %o: f32[4]) {\n  o[0] = q\n}\n", "2:10", "unknown variable 'q'");
  expect_parse_error("kernel k(out %o: f32[4]) {\n  p[0] = 1.0f32\n}\n", "2:3", "unknown buffer 'p'");
  expect_parse_error("kernel k(out %o: f32[4]) {\n  o[0] = 1.0f32 + 1\n}\n", "2:", "differ in type");
  expect_parse_error("kernel k(out %o: f32[4]) {\n  o[0] = 1.0f32\n", "3:1", "expected '}'");
  expect_parse_error("kernel k(out %o: q32[4]) {\n}\n", "1:18", "unknown type 'q32'");
  expect_parse_error("kernel k(out %o: f32[4]) {\n  warp for i in [0, 4) {\n  }\n}\n", "2:3", "unknown loop kind");
  expect_parse_error("kernel k(out %o: f32[4]) {\n  assert true, \"open\n}\n", "2:16", "unterminated string");
  expect_parse_error("kernel k(out %o: f32[4]) {\n  o[0] = 1.0q7\n}\n", "2:10", "unknown type suffix");
  expect_parse_error("kernel k(out %o: f32[4], in %i: f32[4]) {\n}\n", "1:", "inputs must come before outputs");
  expect_parse_error("kernel k(out %o: f32[4]) {\n  for i in [0, 4) {\n  }\n  o[i] = 1.0f32\n}\n", "4:5",
                     "unknown variable 'i'");
  expect_parse_error("kernel k(out %o: f32[4]) {\n  allocate %t: f32[4] local {\n  }\n  t[0] = 1.0f32\n}\n", "4:3",
                     "unknown buffer 't'");
  expect_parse_error("kernel k(out %o: f32[4]) {\n} extra", "2:3", "unexpected text");
  expect_parse_error("kernel k(out %o: i8[4]) {\n  o[0] = 300i8 $\n}\n", "2:16", "unexpected character");
}

// Launch geometry in an artifact is stored as expression text over the
// kernel's syms (runtime/cuda/gpu_artifact.h) and must come back the same.
TEST(LoopParser, StandaloneExpressionsRoundTrip) {
  const Expr n = var("n"), s = var("seq");
  for (const Expr& e : {Expr(int_imm(DType::I64, 7)), floordiv(n * s + int_imm(DType::I64, 127), int_imm(DType::I64, 128)),
                        min(max(n - int_imm(DType::I64, 1), int_imm(DType::I64, 0)), floormod(s, int_imm(DType::I64, 3))),
                        select(binary(BinaryOp::Lt, n, s), n, s)}) {
    const std::string text = print(e);
    EXPECT_EQ(print(parse_expr(text, {"n", "seq"})), text);
  }
}

TEST(LoopParser, StandaloneExpressionsRejectUnknownNamesAndTrailingText) {
  EXPECT_THROW(parse_expr("n + 1", {"m"}), Error);
  EXPECT_THROW(parse_expr("n + 1 2", {"n"}), Error);
  EXPECT_THROW(parse_expr("x[0]", {"n"}), Error);
  EXPECT_THROW(parse_expr("", {"n"}), Error);
  // Hostile nesting is an error, not a stack overflow; modest nesting parses.
  EXPECT_THROW(parse_expr(std::string(100000, '(') + "n" + std::string(100000, ')'), {"n"}), Error);
  EXPECT_THROW(parse_expr(std::string(100000, '-') + "n", {"n"}), Error);
  EXPECT_NO_THROW(parse_expr(std::string(50, '(') + "n" + std::string(50, ')'), {"n"}));
}

}  // namespace
}  // namespace tessel::loop
